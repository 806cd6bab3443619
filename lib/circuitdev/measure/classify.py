"""Head classes from selectivities: best class (the paper's tie rule), 30x classification, counting rules, circuits
(method reference §2).

Pure table operations over any frame with the six `sel_*` columns — a probe record, the published files, the toy
panel — so the probe, the published loader and the findings share one definition of "is a head of class c".
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd

from circuitdev.errors import ConfigError
from circuitdev.schema import (BOS_THRESHOLD, head_name, CLASS_THRESHOLD, HEAD_CLASSES, INDUCTION_THRESHOLD, LayerToHead,
                               PREV_TOKEN_THRESHOLD, UNCLASSIFIED, check_head_class, sel_column)

CountingRule = Literal["per-class", "best-class"]


def classify(sel: pd.DataFrame, *, threshold: float = CLASS_THRESHOLD) -> pd.DataFrame:
    """Best and second class per row of a table with `sel_*` columns, and the 30x classification.

    The paper sorts the six classes descending with a stable sort, so an exact tie goes to the class listed first
    in HEAD_CLASSES. Returns best_class, best_selectivity, second_class, second_selectivity, classification.
    """
    _check_threshold("threshold", threshold)
    values = sel[[sel_column(c) for c in HEAD_CLASSES]].to_numpy(dtype=float)  # (rows, 6)
    order = np.argsort(-values, axis=1, kind="stable")
    rows = np.arange(len(values))
    names = np.array(HEAD_CLASSES, dtype=object)
    best, second = order[:, 0], order[:, 1]
    best_sel = values[rows, best]
    return pd.DataFrame(
        {
            "best_class": names[best],
            "best_selectivity": best_sel,
            "second_class": names[second],
            "second_selectivity": values[rows, second],
            "classification": np.where(best_sel >= threshold, names[best], UNCLASSIFIED),
        },
        index=sel.index,
    )


def with_classification(dev: pd.DataFrame, *, threshold: float = CLASS_THRESHOLD) -> pd.DataFrame:
    """`dev` with the columns of `classify` (re)computed: best_class, best_selectivity, second_class,
    second_selectivity, classification (any existing ones are replaced)."""
    labels = classify(dev, threshold=threshold)
    return dev.drop(columns=[c for c in labels.columns if c in dev.columns]).join(labels)


def is_class(
    table: pd.DataFrame, head_class: str, threshold: float, *, rule: CountingRule = "per-class"
) -> pd.Series:
    """Whether each head counts as `head_class` at `threshold`.

    rule="per-class" (the paper's developmental tables, default): sel_c >= threshold whatever the head's best
    class — a head can count for several classes. rule="best-class": additionally best_class == head_class; use
    it to compare with the paper's final-checkpoint README numbers, which were computed that way.
    """
    check_head_class(head_class)
    _check_threshold("threshold", threshold)
    hit = table[sel_column(head_class)] >= threshold
    if rule == "best-class":
        best = table["best_class"] if "best_class" in table else classify(table)["best_class"]
        hit &= best == head_class
    elif rule != "per-class":
        raise ConfigError(f"unknown counting rule {rule!r}; use 'per-class' (the paper's) or 'best-class'")
    return hit


def circuit_memberships(
    table: pd.DataFrame,
    *,
    induction_threshold: float = INDUCTION_THRESHOLD,
    prev_token_threshold: float = PREV_TOKEN_THRESHOLD,
    bos_threshold: float = BOS_THRESHOLD,
) -> pd.DataFrame:
    """The paper's circuit screens: induction >= 50x (no best-class condition), previous-token >= 100x AND best class,
    BOS (first-token) >= 30x per-class rule."""
    return pd.DataFrame(
        {
            "in_induction_circuit": is_class(table, "induction", induction_threshold),
            "in_prev_token_circuit": is_class(table, "previous-token", prev_token_threshold, rule="best-class"),
            "is_bos": is_class(table, "first-token", bos_threshold),
        },
        index=table.index,
    )


def heads_of(table: pd.DataFrame, mask: pd.Series) -> LayerToHead:
    """{layer: [heads]} for the rows where mask holds — the spec format the ablation takes (schema.LayerToHead)."""
    spec: LayerToHead = {}
    for layer, head in table.loc[mask, ["layer", "head"]].itertuples(index=False):
        spec.setdefault(int(layer), []).append(int(head))
    return spec


def spec_labels(spec: dict[int, list[int]] | None) -> list[str]:
    """["L1H2", ...] of a head set {layer: [heads]}, in (layer, head) order: how tables and sidecars name it."""
    return [head_name(layer, head) for layer in sorted(spec or {}) for head in sorted((spec or {})[layer])]


def _check_threshold(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and np.isfinite(value) and value > 0):
        raise ConfigError(f"{name} must be a positive, finite selectivity ratio (e.g. 30.0), got {value!r}")
