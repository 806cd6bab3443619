"""F4, convergence: how early the final induction circuit is already visible (recall of the final-revision screen
at every revision) and the first revision reaching each recall level."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from circuitdev.analysis import uncertainty
from circuitdev.analysis.devtable import head_mask, head_name, index
from circuitdev.analysis.findings.basics import EPS
from circuitdev.measure.classify import CountingRule
from circuitdev.schema import INDUCTION_THRESHOLD


def circuit_recall(dev: pd.DataFrame, *, head_class: str = "induction", threshold: float = INDUCTION_THRESHOLD,
                   reference_revision: str | None = None, rule: CountingRule = "per-class",
                   boot: pd.DataFrame | None = None) -> pd.DataFrame:
    """F4: recall(r) = |{h in S_ref : sel_c(h, r) >= threshold}| / |S_ref|, S_ref = the screen at the final
    revision (or `reference_revision`). Columns: revisions(dev) + n_circuit, n_found, recall, found (names);
    recall is NaN for a panel whose reference circuit is empty. With `boot` (bootstrap replicates) also
    n_circuit_lo / _hi, n_found_lo / _hi and recall_lo / _hi: the circuit itself is re-screened on every replicate."""
    if boot is not None:
        return uncertainty.with_intervals(dev, boot, lambda d: circuit_recall(
            d, head_class=head_class, threshold=threshold, reference_revision=reference_revision, rule=rule),
            columns=["n_circuit", "n_found", "recall"])
    ix = index(dev)
    mask = head_mask(dev, head_class, threshold=threshold, rule=rule)
    layer, head = dev["layer"].to_numpy(dtype=np.int64), dev["head"].to_numpy(dtype=np.int64)
    panel_of_row = np.searchsorted(ix.starts, ix.codes, side="right") - 1
    keys = panel_of_row * 10**8 + layer * 10**4 + head
    in_circuit = np.isin(ix.codes, ix.reference(reference_revision)) & mask  # S_ref rows
    hit = np.isin(keys, keys[in_circuit]) & mask
    found: dict[int, list[tuple[int, int]]] = {}
    for i in np.flatnonzero(hit):  # few rows: the circuit heads, at the revisions where they pass
        found.setdefault(ix.codes[i], []).append((int(layer[i]), int(head[i])))
    n_revs = len(ix.cols["revision"])
    n_circuit = np.bincount(panel_of_row[in_circuit], minlength=len(ix.starts))[
        np.searchsorted(ix.starts, np.arange(n_revs), side="right") - 1]
    n_found = ix.count(hit)
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = np.where(n_circuit > 0, n_found / np.maximum(n_circuit, 1), np.nan)
    return ix.frame(n_circuit=n_circuit, n_found=n_found, recall=recall,
                    found=[" ".join(head_name(*h) for h in sorted(found.get(i, []))) for i in range(n_revs)])


def recall_milestones(recall: pd.DataFrame, *, levels: Sequence[float] = (1 / 3, 2 / 3, 1.0)) -> pd.DataFrame:
    """F4: first revision whose recall reaches each level (paper: 33/67/100%, i.e. 1/3, 2/3, 3/3 of a 3-head
    circuit; use exact fractions, as 2/3 = 0.667 < 0.67). Columns: panel, level, level_pct, revision,
    revision_index, tokens_b, token_fraction (None / NaN where never reached)."""
    rows = []
    panels, value = recall["panel"].to_numpy(), recall["recall"].to_numpy(dtype=float)
    for panel in pd.unique(panels):
        idx = np.flatnonzero(panels == panel)
        for level in levels:
            hit = idx[value[idx] >= level - EPS][:1]
            first = recall.iloc[hit[0]] if len(hit) else None
            rows.append({"panel": panel, "level": level, "level_pct": round(100 * level),
                         "revision": first["revision"] if first is not None else None,
                         "revision_index": int(first["revision_index"]) if first is not None else None,
                         "tokens_b": float(first["tokens_b"]) if first is not None else np.nan,
                         "token_fraction": float(first["token_fraction"]) if first is not None else np.nan})
    return pd.DataFrame(rows)
