"""The authors' final-checkpoint ablation files (ablation/*.json): read into one tidy table (`load_ablation`, ->
`PublishedData.ablation`), reshaped to one row per condition of a model and task (`authors_ablation`), each control
row matched to the head set it was drawn for (`control_target`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from circuitdev.schema import heads_text, parse_head
from circuitdev.sources.published_checks import as_list, fail, number, read_json, require
from circuitdev.sources.published_panels import PUBLISHED_PANELS

_PANEL_BY_HF_ID = {p.hf_id: p.name for p in PUBLISHED_PANELS.values()}


def load_ablation(directory: str | os.PathLike) -> pd.DataFrame:
    """Final-checkpoint ablation files -> one row per (file, condition, metric).

    Columns: model, file, task ("induction" for the synthetic batch, "greater-than"), condition, n_ablated,
    heads ("L4H4 L7H0 ..."), metric (acc_top1, loss, top1_above, ...), value, n_examples (the file's batch size:
    the denominator of its accuracies; NaN when the file does not give it). Empty when `ablation/` is absent.
    """
    columns = ["model", "file", "task", "condition", "n_ablated", "heads", "metric", "value", "n_examples"]
    rows = []
    for path in sorted((Path(directory) / "ablation").glob("*.json")):
        data = read_json(path)
        model = _PANEL_BY_HF_ID.get(require(path, data, "model"))
        if model is None:
            raise fail(path, "model", f"unknown model {data['model']!r}; known: {', '.join(_PANEL_BY_HF_ID)}")
        task, entries, name_key = ("induction", data["results"], "name") if "results" in data else \
            ("greater-than", require(path, data, "conditions"), "condition")
        list_field = "results" if task == "induction" else "conditions"
        n_examples = number(path, "n_examples", data["n_examples"]) if "n_examples" in data else np.nan
        for i, entry in enumerate(as_list(path, list_field, entries)):
            field = f"{list_field}[{i}]"
            if not isinstance(entry, dict) or name_key not in entry:
                raise fail(path, field, f"expected an object with {name_key!r}")
            spec = entry.get("spec", {}) or {}
            heads = heads_text(spec)
            for metric, value in entry.items():
                if metric in (name_key, "spec", "n_ablated", "wall_s") or isinstance(value, (dict, list, str)):
                    continue
                rows.append({"model": model, "file": path.name, "task": task, "condition": entry[name_key],
                             "n_ablated": entry.get("n_ablated"), "heads": heads, "metric": metric,
                             "value": number(path, f"{field}.{metric}", value), "n_examples": n_examples})
    return pd.DataFrame(rows, columns=columns)


def authors_ablation(ablation: pd.DataFrame, model: str, *, task: str = "induction") -> pd.DataFrame:
    """The authors' final-checkpoint ablations of one model and task, one row per condition: condition (baseline /
    screen / matched_random / upper_bound / other), label (the authors' name), seed, n_ablated, heads, drawn_for,
    n_examples, then the task's metrics (induction: acc_top1, loss, acc_top5, mean_logit_B; greater-than:
    top1_above, prob_above, prob_below, logit_diff_above_below). `ablation` is `load_ablation(...)`
    (`PublishedData.ablation`). Empty when absent.

    drawn_for names, on a control row, the condition whose head set the control was drawn for, found from the
    heads themselves (`control_target`): the authors' matched random and upper bound belong to the set they were
    drawn for (e.g. the spectral top-6), which need not be the induction circuit."""
    from circuitdev.schema import MATCHED_RANDOM_SEED

    cols = ["condition", "label", "seed", "n_ablated", "heads", "drawn_for", "n_examples"]
    ab = ablation[(ablation["model"] == model) & (ablation["task"] == task)] if len(ablation) else ablation
    if ab.empty:
        return pd.DataFrame(columns=cols + ["acc_top1", "loss"])
    ab = ab.assign(n_examples=ab["n_examples"] if "n_examples" in ab.columns else np.nan)
    wide = ab.pivot_table(index=["condition", "n_ablated", "heads"], columns="metric", values="value").reset_index()
    sizes = ab.groupby("condition")["n_examples"].first()
    metrics = [m for m in ("acc_top1", "loss", "acc_top5", "mean_logit_B", "top1_above", "prob_above", "prob_below",
                           "logit_diff_above_below") if m in wide.columns]
    metrics += sorted(c for c in wide.columns if c not in metrics and c not in ("condition", "n_ablated", "heads"))

    def kind(label: str) -> str:
        for key, name in (("baseline", "baseline"), ("induction_screen", "screen"),
                          ("matched_random", "matched_random"), ("upper bound", "upper_bound")):
            if (label == key) if key == "baseline" else (key in label):
                return name
        return "other"

    wide = wide.set_index("condition").reindex(pd.unique(ab["condition"])).reset_index()  # the file's order
    wide["label"] = wide["condition"]
    wide["n_examples"] = wide["label"].map(sizes).astype("Int64")
    wide.columns.name = None
    wide["condition"] = wide["label"].map(kind)
    wide["seed"] = np.where(wide["condition"] == "matched_random", MATCHED_RANDOM_SEED, np.nan)  # their one seed
    sets = {label: _spec_of(heads) for label, heads in zip(wide["label"], wide["heads"])}
    wide["drawn_for"] = [control_target(kind_, sets[label], {k: v for k, v in sets.items() if k != label
                                                             and kind(k) not in ("baseline", "matched_random",
                                                                                 "upper_bound")})
                         for kind_, label in zip(wide["condition"], wide["label"])]
    return wide.reindex(columns=cols + metrics)


def _spec_of(heads: str) -> dict[int, set[int]]:
    """"L4H4 L7H0 L7H1" -> {4: {4}, 7: {0, 1}}."""
    spec: dict[int, set[int]] = {}
    for layer, head in map(parse_head, str(heads or "").split()):
        spec.setdefault(layer, set()).add(head)
    return spec


def control_target(condition: str, spec: dict[int, set[int]], candidates: dict[str, dict[int, set[int]]]) -> str:
    """The candidate head set (label -> spec) a control row was drawn for, from the heads alone; "" for a row that
    is not a control or matches no candidate. A matched random set has the candidate's layers and per-layer counts
    and none of its heads; an upper bound holds every head of exactly the candidate's layers (it contains the
    candidate). The first candidate that fits, in the given order."""
    if condition == "matched_random":
        profile = {layer: len(heads) for layer, heads in spec.items()}
        for label, other in candidates.items():
            if other and {l: len(h) for l, h in other.items()} == profile and \
                    not any(spec[l] & other.get(l, set()) for l in spec):
                return label
    elif condition == "upper_bound":
        for label, other in candidates.items():
            if other and set(other) == set(spec) and all(other[l] <= spec[l] for l in other):
                return label
    return ""
