"""Small synthetic published directories with known answers (never copies of the authors' files).

`write_published(root)` writes three tiny panels in the authors' schema (method reference §7) under the real file names,
so the loader, the findings and the audit run on them unchanged. The designed values (below) make every finding's
answer computable by hand; the tests state those answers explicitly.

pythia-1b: 3 layers x 4 heads, revisions step1 / step256 / step3000 / step10000 / step143000
           (tokens 0.002 / 0.536 / 6.291 / 20.971 / 299.892); trajectory lists stored as Python-repr strings.
  first-token >= 30: step256 none (L1H0 = 29.99), step3000 L1H0 (exactly 30.0), L2H0; step10000 + L1H1, L2H1;
                     step143000 L1H0-3, L2H0-2 and L2H3 (best class induction, first-token 85.2) -> 8/12.
  induction: L2H3 1.0/0.2/171.8/150.7/181.6; L1H2 1/1/60/45/55; L0H3 1/1/49.99/52/70; L0H2 1/1/80/10/10.
  previous-token: L0H0 1/150/200/200/200.  Ties: L0H1 at step143000 has self = local = 40 (best class: self).
  PR: L2H3 1.96/27.35/48.05/35.62/28.29, L0H3 1/1/5/9/9, every other head 2.0.
olmo-1b-0724: 4 layers x 2 heads, revisions step1000-tokens2B / step56000-tokens117B / step126000-tokens264B /
              step1454000-tokens3048B. first-token >= 30: 117B L2H0; 264B L0H1 (breaks the L0/L1 floor), L2H0, L2H1,
              L3H0, L3H1; 3048B L2H0, L2H1, L3H0, L3H1. induction: L1H0 10/60/40/100.
olmoe-1b-7b-0924: 2 layers x 2 heads, step5000-tokens20B / step100000-tokens419B / step1220000-tokens5117B,
                  first-token >= 30: L1H0 / + L1H1 / + L0H0; no induction head; NO PR trajectory file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from circuitdev.paths import published_dir
from circuitdev.sources.published_panels import PUBLISHED_PANELS, revision_tokens_b
from circuitdev.schema import HEAD_CLASSES

Sel = dict[str, dict[tuple[int, int], dict[str, float]]]  # revision -> (layer, head) -> {class: selectivity}

PYTHIA_REVISIONS = ["step1", "step256", "step3000", "step10000", "step143000"]
OLMO_REVISIONS = ["step1000-tokens2B", "step56000-tokens117B", "step126000-tokens264B", "step1454000-tokens3048B"]
OLMOE_REVISIONS = ["step5000-tokens20B", "step100000-tokens419B", "step1220000-tokens5117B"]


def _series(sel: Sel, revisions: list[str], head: tuple[int, int], head_class: str, values: list[float]) -> None:
    for revision, value in zip(revisions, values):
        sel.setdefault(revision, {}).setdefault(head, {})[head_class] = value


def pythia_sel() -> Sel:
    r = PYTHIA_REVISIONS
    sel: Sel = {}
    first = {(1, 0): [1, 29.99, 30.0, 40, 40], (2, 0): [1, 1, 45, 50, 60], (1, 1): [1, 1, 1, 35, 40],
             (2, 1): [1, 1, 1, 31, 60], (1, 2): [1, 1, 1, 1, 40], (1, 3): [1, 1, 1, 1, 40],
             (2, 2): [1, 1, 1, 1, 60], (2, 3): [1, 1, 1, 1, 85.2]}
    for head, values in first.items():
        _series(sel, r, head, "first-token", values)
    induction = {(2, 3): [1.0, 0.2, 171.8, 150.7, 181.6], (1, 2): [1, 1, 60, 45, 55],
                 (0, 3): [1, 1, 49.99, 52, 70], (0, 2): [1, 1, 80, 10, 10]}
    for head, values in induction.items():
        _series(sel, r, head, "induction", values)
    _series(sel, r, (0, 0), "previous-token", [1, 150, 200, 200, 200])
    _series(sel, r, (0, 1), "self", [1, 1, 1, 1, 40])
    _series(sel, r, (0, 1), "local", [1, 1, 1, 1, 40])
    return sel


def pythia_pr() -> dict[tuple[int, int], list[float]]:
    pr = {(l, h): [2.0] * 5 for l in range(3) for h in range(4)}
    pr[2, 3] = [1.96, 27.35, 48.05, 35.62, 28.29]
    pr[0, 3] = [1.0, 1.0, 5.0, 9.0, 9.0]
    return pr


def olmo_sel() -> Sel:
    r = OLMO_REVISIONS
    sel: Sel = {}
    for head, values in {(2, 0): [1, 40, 40, 40], (0, 1): [1, 1, 35, 1], (2, 1): [1, 1, 40, 40],
                         (3, 0): [1, 1, 40, 40], (3, 1): [1, 1, 40, 40]}.items():
        _series(sel, r, head, "first-token", values)
    _series(sel, r, (1, 0), "induction", [10, 60, 40, 100])
    return sel


def olmoe_sel() -> Sel:
    r = OLMOE_REVISIONS
    sel: Sel = {}
    for head, values in {(1, 0): [40, 40, 40], (1, 1): [1, 40, 40], (0, 0): [1, 1, 40]}.items():
        _series(sel, r, head, "first-token", values)
    _series(sel, r, (0, 1), "induction", [20, 30, 45])
    return sel


def per_revision_json(panel: str, revision: str, n_layers: int, n_heads: int, sel: Sel) -> dict:
    """One file in the per-revision schema (method reference §7); `classifications` holds a token top-K list."""
    heads = {}
    for l in range(n_layers):
        for h in range(n_heads):
            values = {c: 1.0 for c in HEAD_CLASSES}
            values.update(sel.get(revision, {}).get((l, h), {}))
            heads[f"L{l}_H{h}"] = values
    top = []
    for rank, (key, values) in enumerate(list(heads.items())[:3], start=1):
        layer, head = (int(x) for x in key[1:].split("_H"))
        best = max(HEAD_CLASSES, key=lambda c: values[c])
        top.append({"rank": rank, "layer": layer, "head": head, "integral": 10.0 - rank, "spread": 1.0,
                    "classification": best if values[best] >= 30 else "unclassified", "best_class": best,
                    "best_selectivity": values[best], "second_class": "local", "second_selectivity": 1.0,
                    "all_selectivities": values})
    return {"model": PUBLISHED_PANELS[panel].hf_id, "revision": revision, "selectivity_threshold": 30.0,
            "ranking": "integral", "n_examples_valid": 2000, "n_examples": 2000, "top_k": 3,
            "classifications": top, "class_breakdown_topK": {}, "all_head_selectivity": heads}


def trajectory_json(panel: str, revisions: list[str], n_layers: int, n_heads: int,
                    pr: dict[tuple[int, int], list[float]], *, as_strings: bool) -> dict:
    steps = [int(r.split("-")[0].removeprefix("step")) for r in revisions]
    tokens = [revision_tokens_b(panel, r) for r in revisions]
    lists = {"revisions": revisions, "ckpt_step": steps, "ckpt_tokens_B": tokens}
    if as_strings:  # the authors' Pythia file stores these lists as Python-repr strings
        lists = {k: repr(v) for k, v in lists.items()}
    return {"model": PUBLISHED_PANELS[panel].hf_id, **lists, "n_examples": 500, "seq_len": 256, "seed": 42,
            "dtype": "fp16", "n_layer": n_layers, "num_heads": n_heads, "head_dim": 64,
            "pr": {f"L{l}_H{h}": pr[l, h] for l in range(n_layers) for h in range(n_heads)}}


def ablation_json() -> dict:
    def row(name, spec, top1):
        return {"name": name, "spec": spec, "n_ablated": sum(len(v) for v in spec.values()), "loss": 9.0,
                "acc_top1": top1, "acc_top5": 2 * top1, "mean_logit_B": 1.0}
    return {"model": PUBLISHED_PANELS["pythia-1b"].hf_id, "revision": "step143000", "n_examples": 2000,
            "top_k": 6, "induction_threshold": 50.0,
            "results": [row("baseline", {}, 0.0405),
                        row("ablate_induction_screen_>=50x (3h)", {"2": [3], "1": [2], "0": [3]}, 0.0025)]}


def gt_ablation_json() -> dict:
    return {"model": PUBLISHED_PANELS["olmo-1b-0724"].hf_id, "arch": "olmo", "revision": "main", "top_k": 5,
            "n_examples": 500, "gt_heads": [[1, 0]],
            "conditions": [{"top1_above": 0.99, "prob_above": 0.9, "condition": "baseline", "n_ablated": 0,
                            "spec": {}, "wall_s": 1.0}]}


def write_json(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))
    return path


def write_published(root: Path) -> Path:
    """Write the three fixture panels (and two ablation files) under `root`; returns root."""
    panels = [("pythia-1b", PYTHIA_REVISIONS, 3, 4, pythia_sel(), pythia_pr()),
              ("olmo-1b-0724", OLMO_REVISIONS, 4, 2, olmo_sel(), {(l, h): [3.0] * 4 for l in range(4)
                                                                    for h in range(2)}),
              ("olmoe-1b-7b-0924", OLMOE_REVISIONS, 2, 2, olmoe_sel(), None)]
    for panel, revisions, n_layers, n_heads, sel, pr in panels:
        info = PUBLISHED_PANELS[panel]
        for revision in revisions:
            write_json(root / "per_revision" / f"{info.file_prefix}_mechinterp_{revision}.json",
                       per_revision_json(panel, revision, n_layers, n_heads, sel))
        if pr is not None:
            write_json(root / "pr_trajectory" / info.trajectory_file,
                       trajectory_json(panel, revisions, n_layers, n_heads, pr, as_strings=panel == "pythia-1b"))
    write_json(root / "ablation" / "pythia_1b_ablation_k6.json", ablation_json())
    write_json(root / "ablation" / "olmo_gt_ablation.json", gt_ablation_json())
    return root


@pytest.fixture
def published_fixture(tmp_path) -> Path:
    return write_published(tmp_path / "published")


def real_published_dir() -> Path:
    """The authors' files (`$CIRCUITDEV_PUBLISHED` or data/published); skips visibly when absent."""
    path = published_dir()
    if not (path / "per_revision").is_dir():
        pytest.skip(f"published data not found at {path} (set CIRCUITDEV_PUBLISHED to the folder)")
    return path
