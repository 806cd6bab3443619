"""Beyond the paper: how much the counts and the F2 shape rest on the thresholds (30x, 50x), over a log grid of
selectivity thresholds."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from circuitdev.analysis.devtable import head_mask, index
from circuitdev.analysis.findings.basics import BOS
from circuitdev.analysis.findings.f2_shapes import trajectory_shape
from circuitdev.measure.classify import CountingRule
from circuitdev.schema import check_head_class, sel_column

__all__ = ["SENSITIVITY_THRESHOLDS", "threshold_sensitivity", "shape_sensitivity"]

# A log grid over [2, 1000]x that contains the paper's thresholds (30x, 50x, 100x) exactly.
SENSITIVITY_THRESHOLDS: tuple[float, ...] = tuple(sorted(
    set(np.round(np.geomspace(2, 1000, 25), 2).tolist()) | {2.0, 5.0, 10.0, 20.0, 30.0, 50.0, 100.0, 300.0, 1000.0}
))


def threshold_sensitivity(dev: pd.DataFrame, *, head_classes: Sequence[str] = (BOS, "induction"),
                          thresholds: Sequence[float] = SENSITIVITY_THRESHOLDS,
                          rule: CountingRule = "per-class", final_only: bool = False) -> pd.DataFrame:
    """Beyond the paper: n_c(tau) and n_c(tau)/n_heads as functions of tau, for every revision (or only each
    panel's final one). For first-token the fraction is the BOS fraction, for induction `n` is the circuit size; a
    reader sees how much each finding rests on 30x and 50x. Columns: panel, revision, revision_index, tokens_b,
    head_class, threshold, n_heads, n, fraction."""
    ix = index(dev)
    frames = []
    for head_class in head_classes:
        sel = dev[sel_column(check_head_class(head_class))].to_numpy(dtype=float)
        best = head_mask(dev, head_class, threshold=np.finfo(float).tiny, rule=rule)  # best-class filter only
        for tau in thresholds:
            n = ix.count((sel >= tau) & best)
            frames.append(ix.frame(head_class=head_class, threshold=float(tau), n=n, fraction=n / ix.cols["n_heads"]))
    out = pd.concat(frames, ignore_index=True)
    if final_only:
        last = out.groupby("panel", sort=False)["revision_index"].transform("max")
        out = out[out["revision_index"] == last]
    cols = ["panel", "revision", "revision_index", "tokens_b", "head_class", "threshold", "n_heads", "n", "fraction"]
    return out[cols].reset_index(drop=True)


def shape_sensitivity(dev: pd.DataFrame, *, thresholds: Sequence[float] = SENSITIVITY_THRESHOLDS,
                      rule: CountingRule = "per-class", transition_share: float = 0.5) -> pd.DataFrame:
    """Beyond the paper: the F2 shape descriptor (largest jump, its share, ramp/transition) at every BOS threshold,
    to see whether a "transition" survives other thresholds. Columns: threshold + trajectory_shape columns."""
    counts = threshold_sensitivity(dev, head_classes=[BOS], thresholds=thresholds, rule=rule)
    return pd.concat([trajectory_shape(g.rename(columns={"fraction": "bos_fraction"}),
                                       transition_share=transition_share).assign(threshold=tau)
                      for tau, g in counts.groupby("threshold", sort=True)], ignore_index=True)
