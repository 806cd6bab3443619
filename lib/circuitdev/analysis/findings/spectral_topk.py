"""The spectral top-K ranking (issue 23 item 6): which classes the heads of highest PR belong to, over training.

The authors rank every head by its PR integral (`f5_pr_lead.pr_features`: the trapezoid of max(PR - 1, 0) over
ln(max(tokens_B, 1)), a whole-trajectory feature identical in all of a model's files) and keep the top K = 45;
each per-revision file lists those heads with their classification at that revision (`class_breakdown_topK`:
best class at >= 30x, else "unclassified"). So the top-K is ONE set of heads per model, classified anew at every
revision -- not the 45 heads of highest PR at each revision. The paper's reason for class-specific screens is that
first-token heads come to dominate that ranking late in training (`topk_dominance` states it computed).

- `topk_heads`: the top-K heads of each panel by PR integral (K per panel: `k`, or `scaled_k` of its family).
- `topk_breakdown`: per panel, revision and class, how many of those heads are of that class there.
- `topk_dominance`: per panel, the class breakdown at the final revision and from when first-token heads lead it.
- `topk_enrichment`: each class's count in the top-K against its base rate among all heads (issue 29: first-token
  heads can be the largest class of the top 45 and still be fewer there than chance would put).

Our tiers: K is scaled to the model's heads as the paper's K = 45 is to its model of the same family (35% of
Pythia's 128 heads, 17.6% of OLMo's and OLMoE's 256: `scaled_k`); a run that never reaches 1B tokens (the toy panels,
whose every revision the authors' 1B clip would put at ln 1 = 0, so that every integral were 0) is integrated from
its first revision with tokens (`clip_b="auto"`).
"""

from __future__ import annotations

from math import comb
from typing import Literal, Mapping

import numpy as np
import pandas as pd

from circuitdev.analysis.devtable import panel_order, require, revisions
from circuitdev.analysis.findings.f5_pr_lead import panel_matrices
from circuitdev.errors import ConfigError
from circuitdev.measure.classify import classify
from circuitdev.measure.pr_integral import pr_integral
from circuitdev.schema import CLASS_THRESHOLD, HEAD_CLASSES, head_name

__all__ = ["PAPER_TOP_K", "TOPK_CLASSES", "scaled_k", "topk_heads", "BREAKDOWN_COLUMNS", "topk_breakdown",
           "topk_dominance", "dominance_texts", "ENRICHMENT_COLUMNS", "topk_enrichment", "enrichment_word"]

PAPER_TOP_K = 45  # the authors' K, the same for all three models
# The share of its model's heads the paper's K is, by architecture family (Pythia-1B 16 x 8, OLMo / OLMoE 16 x 16)
PAPER_K_SHARE: dict[str, float] = {"gpt_neox": 45 / 128, "olmo": 45 / 256, "olmoe": 45 / 256}
TOPK_CLASSES: tuple[str, ...] = (*HEAD_CLASSES, "unclassified")  # the breakdown's classes, zeros included
AUTHORS_CLIP_B = 1.0  # the authors' features take ln(max(tokens_B, 1))


def scaled_k(n_heads: int, family: str | None) -> int:
    """K for a model of `n_heads` heads: the paper's share for its family (PAPER_K_SHARE; the Pythia share when
    the family is unknown), at least 1. A 16-head toy: 6 (gpt_neox), 3 (olmo, olmoe); the paper's models: 45."""
    share = PAPER_K_SHARE.get(family or "", PAPER_K_SHARE["gpt_neox"])
    return max(1, int(round(share * n_heads)))


def _k_of(panel: str, k: int | Mapping[str, int]) -> int:
    value = k.get(panel, PAPER_TOP_K) if isinstance(k, Mapping) else k
    if int(value) < 1:
        raise ConfigError(f"top-K size for {panel} must be >= 1, got {value!r}")
    return int(value)


def _clip(tokens_b: np.ndarray, clip_b: float | Literal["auto"]) -> float:
    if clip_b != "auto":
        return float(clip_b)
    if np.nanmax(tokens_b) >= AUTHORS_CLIP_B:
        return AUTHORS_CLIP_B
    positive = tokens_b[tokens_b > 0]
    return float(positive.min()) if len(positive) else AUTHORS_CLIP_B


def topk_heads(dev: pd.DataFrame, *, k: int | Mapping[str, int] = PAPER_TOP_K,
               clip_b: float | Literal["auto"] = "auto") -> pd.DataFrame:
    """The K heads of highest PR integral per panel (ties: lower layer, then head, first). `k`: one K, or K per
    panel (others: PAPER_TOP_K). clip_b: tokens below it count as it in ln(tokens) ("auto": the authors' 1B where
    the run reaches it, else the run's first positive token count). Columns: panel, layer, head, name, rank
    (1 = highest), integral, k, clip_b."""
    require(dev, ["pr"], "topk_heads")
    frames = []
    for panel, revs, layers, hs, mats in panel_matrices(dev, ["pr"]):
        pr, tokens = mats["pr"], np.asarray(revs["tokens_b"], dtype=float)
        known = ~np.isnan(pr).all(axis=1)
        if not known.any():
            continue
        clip = _clip(tokens, clip_b)
        integral = np.where(known, pr_integral(pr, tokens, clip_b=clip), -np.inf)  # as pr_features
        kk = min(_k_of(panel, k), int(known.sum()))
        order = np.lexsort((hs, layers, -integral))[:kk]
        frames.append(pd.DataFrame({
            "panel": panel, "layer": layers[order], "head": hs[order],
            "name": [head_name(l, h) for l, h in zip(layers[order], hs[order])], "rank": np.arange(1, kk + 1),
            "integral": integral[order], "k": kk, "clip_b": clip}))
    columns = ["panel", "layer", "head", "name", "rank", "integral", "k", "clip_b"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


BREAKDOWN_COLUMNS = ["panel", "revision", "class", "count", "revision_index", "tokens_b", "k", "share"]


def topk_breakdown(dev: pd.DataFrame, *, k: int | Mapping[str, int] = PAPER_TOP_K,
                   clip_b: float | Literal["auto"] = "auto", top: pd.DataFrame | None = None,
                   class_threshold: float = CLASS_THRESHOLD) -> pd.DataFrame:
    """How many of each panel's top-K heads (`topk_heads`, or `top`) are of each class at every revision, by the
    table's `classification` (best class at >= the class threshold, else "unclassified"; the authors' rule).
    A table without `classification` (a replicate table) is classified here at `class_threshold` (30x).
    One row per (panel, revision, class in TOPK_CLASSES), zeros included: BREAKDOWN_COLUMNS (share = count / k)."""
    require(dev, ["pr"], "topk_breakdown")
    if "classification" not in dev.columns:
        dev = dev.join(classify(dev, threshold=class_threshold)[["classification"]])
    top = topk_heads(dev, k=k, clip_b=clip_b) if top is None else top
    if top.empty:
        return pd.DataFrame(columns=BREAKDOWN_COLUMNS)
    revs = revisions(dev)[["panel", "revision", "revision_index", "tokens_b"]]
    rows = dev[["panel", "revision", "layer", "head", "classification"]].merge(
        top[["panel", "layer", "head", "k"]], on=["panel", "layer", "head"])
    counts = rows.groupby(["panel", "revision", "classification"]).size()
    grid = revs[revs["panel"].isin(set(top["panel"]))].merge(pd.DataFrame({"class": TOPK_CLASSES}), how="cross")
    grid["count"] = [int(counts.get((p, r, c), 0)) for p, r, c in zip(grid["panel"], grid["revision"], grid["class"])]
    grid = grid.merge(top.groupby("panel", sort=False)["k"].first().reset_index(), on="panel")
    grid["share"] = grid["count"] / grid["k"]
    order = panel_order(dev)
    grid = grid.assign(_p=grid["panel"].map(order), _c=grid["class"].map({c: i for i, c in enumerate(TOPK_CLASSES)}))
    return grid.sort_values(["_p", "revision_index", "_c"], kind="stable")[BREAKDOWN_COLUMNS].reset_index(drop=True)


def topk_dominance(breakdown: pd.DataFrame, *, head_class: str = "first-token") -> pd.DataFrame:
    """The paper's reason for class-specific screens, computed: per panel (and tier, when the rows carry one) the
    final revision's count and share of `head_class` among the top-K, the class with most heads there (largest, ties
    listed "a / b"), whether `head_class` is (one of) the largest, and leads_from: the first revision from which
    `head_class` has the most heads of any class at every later revision (None when it never does), and its token
    fraction of the run."""
    keys = [c for c in ("tier", "panel") if c in breakdown.columns]
    columns = [*keys, "k", "final_revision", "final_count", "final_share", "largest", "dominates", "leads_from",
               "leads_from_fraction"]
    if breakdown.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for key, g in breakdown.groupby(keys, sort=False):
        wide = g.pivot_table(index=["revision_index", "revision", "tokens_b"], columns="class", values="count",
                             aggfunc="sum").sort_index()
        mine = wide[head_class] if head_class in wide.columns else pd.Series(0, index=wide.index)
        leading = (mine >= wide.max(axis=1)) & (mine > 0)  # (revisions,) head_class has the most heads
        tail = leading[::-1].cummin()[::-1]  # true from some revision to the end
        final = wide.iloc[-1]
        top_classes = [c for c in wide.columns if final[c] == final.max()]
        start = tail.index[tail.to_numpy().argmax()] if tail.any() else None
        tokens = wide.index.get_level_values("tokens_b").to_numpy(dtype=float)
        rows.append({**dict(zip(keys, key if isinstance(key, tuple) else (key,))), "k": int(g["k"].iloc[0]),
                     "final_revision": wide.index[-1][1], "final_count": int(mine.iloc[-1]),
                     "final_share": float(mine.iloc[-1]) / int(g["k"].iloc[0]), "largest": " / ".join(top_classes),
                     "dominates": bool(leading.iloc[-1]), "leads_from": start[1] if start else None,
                     "leads_from_fraction": start[2] / tokens.max() if start and tokens.max() > 0 else np.nan})
    return pd.DataFrame(rows, columns=columns)


def dominance_texts(dominance: pd.DataFrame) -> pd.DataFrame:
    """`topk_dominance` with final_text ("17 (38%)") and from_text ("step285000-tokens597B (20% of its tokens)",
    "never")."""
    if dominance.empty:
        return dominance.assign(final_text=[], from_text=[])
    return dominance.assign(
        final_text=[f"{n} ({s:.0%})" for n, s in zip(dominance["final_count"], dominance["final_share"])],
        from_text=[f"{r} ({f:.0%} of its tokens)" if r else "never" for r, f in
                   zip(dominance["leads_from"], dominance["leads_from_fraction"])])


# ------------------------------------------------------------------------------ against the base rate (issue 29)
ENRICHMENT_COLUMNS = ["panel", "revision", "class", "observed", "k", "base_count", "n_heads", "expected", "p_fewer",
                      "p_more"]


def _hypergeometric(n: int, base: int, k: int) -> np.ndarray:
    """P(X = x), x = 0..k: x heads of a class among k drawn without replacement from n heads, `base` of that class
    (exact integer arithmetic: no scipy)."""
    total = comb(n, k)
    return np.array([comb(base, x) * comb(n - base, k - x) / total for x in range(k + 1)])


def topk_enrichment(breakdown: pd.DataFrame, dev: pd.DataFrame, *,
                    class_threshold: float = CLASS_THRESHOLD) -> pd.DataFrame:
    """Each class's count among the top-K heads (`breakdown`: a `topk_breakdown` table, or the authors' counts in its
    shape: panel, revision, class, count, k) against its base rate: drawing k of the n_heads heads at that revision
    at random, of which base_count are of the class (the same labels: the table's `classification`, best class at
    >= the class threshold, else "unclassified"), the hypergeometric law gives expected = k * base_count / n_heads,
    p_fewer = P(X <= observed) and p_more = P(X >= observed). ENRICHMENT_COLUMNS."""
    if breakdown.empty:
        return pd.DataFrame(columns=ENRICHMENT_COLUMNS)
    if "classification" not in dev.columns:
        dev = dev.join(classify(dev, threshold=class_threshold)[["classification"]])
    base = dev.groupby(["panel", "revision", "classification"]).size()
    n_heads = dev.groupby(["panel", "revision"]).size()
    rows = []
    for r in breakdown.to_dict("records"):
        if (r["panel"], r["revision"]) not in n_heads.index:
            continue
        n, k, x = int(n_heads[r["panel"], r["revision"]]), int(r["k"]), int(r["count"])
        b = int(base.get((r["panel"], r["revision"], r["class"]), 0))
        pmf = _hypergeometric(n, b, min(k, n))
        rows.append({"panel": r["panel"], "revision": r["revision"], "class": r["class"], "observed": x, "k": k,
                     "base_count": b, "n_heads": n, "expected": k * b / n,
                     "p_fewer": float(min(1.0, pmf[:x + 1].sum())), "p_more": float(min(1.0, pmf[x:].sum()))})
    return pd.DataFrame(rows, columns=ENRICHMENT_COLUMNS)


def enrichment_word(row, *, alpha: float = 0.05) -> str:
    """"enriched" (p_more < alpha), "depleted" (p_fewer < alpha) or "as expected" for a `topk_enrichment` row."""
    return "enriched" if row["p_more"] < alpha else "depleted" if row["p_fewer"] < alpha else "as expected"
