"""The authors' spectral top-K, as each per-revision file lists it: `classifications` (the K = `top_k` heads of highest
PR integral, ranked by `ranking`, with their class at that revision -> `PublishedData.features`) and its class counts
(`class_breakdown_topK` -> `PublishedData.topk`, checked to count exactly the listed heads). `sources.published`
reads them with the rest of each file; `analysis.findings.spectral_topk` compares them with ours.
"""

from __future__ import annotations

from pathlib import Path

from circuitdev.schema import HEAD_CLASSES
from circuitdev.sources.published_checks import as_list, fail, number

TOPK_LABELS: tuple[str, ...] = (*HEAD_CLASSES, "unclassified")  # what class_breakdown_topK counts
TOPK_COLUMNS = ["panel", "revision", "tokens_b", "class", "count", "top_k", "ranking"]
# the top-K `classifications` rows (PublishedData.features)
FEATURE_COLUMNS = ["panel", "revision", "layer", "head", "rank", "integral", "spread", "best_class", "classification"]


def topk_features(path: Path, data: dict, panel: str, revision: str) -> list[dict]:
    """The rows of a file's `classifications` (absent: none), one per listed head: FEATURE_COLUMNS."""
    feats = []
    listed = as_list(path, "classifications", data.get("classifications", []))
    for i, c in enumerate(listed):
        if not isinstance(c, dict) or not {"layer", "head", "integral", "spread"} <= set(c):
            raise fail(path, f"classifications[{i}]", "expected an object with layer, head, integral, spread")
        feats.append({"panel": panel, "revision": revision, "layer": c["layer"], "head": c["head"],
                      "rank": c.get("rank"), "integral": c["integral"], "spread": c["spread"],
                      "best_class": c.get("best_class"), "classification": c.get("classification")})
    return feats


def class_breakdown(path: Path, data: dict, panel: str, revision: str, tokens_b: float, listed: int) -> list[dict]:
    """The rows of a file's `class_breakdown_topK` (absent or empty: none). Each count a whole number >= 0 of a
    known class, and together exactly the heads the file's `classifications` lists."""
    breakdown = data.get("class_breakdown_topK")
    if not breakdown:
        return []
    if not isinstance(breakdown, dict):
        raise fail(path, "class_breakdown_topK",
                   f"expected an object of class -> count, got {type(breakdown).__name__}")
    rows = []
    for cls, value in breakdown.items():
        field_name = f"class_breakdown_topK.{cls}"
        if cls not in TOPK_LABELS:
            raise fail(path, field_name, f"unknown class {cls!r}; known: {', '.join(TOPK_LABELS)}")
        count = number(path, field_name, value)
        if count < 0 or count != int(count):
            raise fail(path, field_name, f"expected a whole number of heads >= 0, got {value!r}")
        rows.append({"panel": panel, "revision": revision, "tokens_b": tokens_b, "class": cls, "count": int(count),
                     "top_k": data.get("top_k"), "ranking": data.get("ranking")})
    total = sum(r["count"] for r in rows)
    if total != listed:
        raise fail(path, "class_breakdown_topK", f"counts {total} heads, but `classifications` lists {listed}")
    return rows
