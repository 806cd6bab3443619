"""F6, the noise floor: the null-selectivity statistics per revision from the records' null draws
(`null_statistics`), and whether that floor (p99 and max of selectivities on random tokens) stays stable across
training (`noise_floor`)."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from circuitdev.analysis.devtable import require
from circuitdev.errors import DataError

__all__ = ["NULL_COLUMNS", "null_statistics", "noise_floor"]

NULL_COLUMNS = ("revision", "tokens_b", "null_p99", "null_max", "real_max", "k_above")


def null_statistics(dev: pd.DataFrame, *, nulls: pd.DataFrame | None = None) -> pd.DataFrame:
    """F6 per revision, from the records' null draws (`nulls`: one row per (panel, revision, draw, layer, head) with
    sel_null_induction, as `Tier.nulls` / `RecordSet.nulls` hold them; `Tiers.apply(..., nulls=True)` passes them).

    One row per (panel, revision) that has draws: panel, revision, tokens_b, n_nulls (draws per head), null_p99
    (the 99th percentile over every draw of every head, the paper's statistic), null_max, real_max (the largest
    real induction selectivity at that revision, from `dev`), k_above (heads whose real selectivity exceeds
    null_p99). Empty without draws (the published tier has none)."""
    columns = ["panel", "revision", "tokens_b", "n_nulls", "null_p99", "null_max", "real_max", "k_above"]
    if nulls is None or len(nulls) == 0:
        return pd.DataFrame(columns=columns)
    require(nulls, ["panel", "revision", "tokens_b", "draw", "sel_null_induction"], "null_statistics")
    real = dev.groupby(["panel", "revision"], sort=False)["sel_induction"]
    rows = []
    for (panel, revision), g in nulls.groupby(["panel", "revision"], sort=False):
        draws = g["sel_null_induction"].to_numpy(dtype=float)
        p99 = float(np.percentile(draws, 99))
        sel = real.get_group((panel, revision)).to_numpy(dtype=float) if (panel, revision) in real.groups \
            else np.array([np.nan])
        rows.append({"panel": panel, "revision": revision, "tokens_b": float(g["tokens_b"].iloc[0]),
                     "n_nulls": int(g["draw"].nunique()), "null_p99": p99, "null_max": float(draws.max()),
                     "real_max": float(np.nanmax(sel)), "k_above": int((sel > p99).sum())})
    return pd.DataFrame(rows, columns=columns)


def noise_floor(nulls: pd.DataFrame | None, *, panels: Sequence[str] = (), stable_ratio: float = 2.0) -> pd.DataFrame:
    """F6: is the selectivity noise floor stable across training?

    `nulls` is tidy, one row per (panel, revision) of a null-selectivity calibration: revision, tokens_b,
    null_p99 (global 99th percentile of null selectivities), null_max, real_max (largest real induction
    selectivity), k_above (heads with real selectivity > null_p99); `panel` optional. The p99 (or max) counts as
    stable when max/min over revisions <= stable_ratio (2.0 = "within a factor of two").
    Returns one row per panel: status ("ok" / "no data"), n_revisions, p99_min, p99_max, p99_ratio, p99_stable,
    max_min, max_max, max_ratio, max_stable, k_above_min, k_above_max, reason, and what the verdict hangs on:
    p99_hangs_on ("lowest at <revision> (x), highest at <revision> (y): stable for any factor >= y/x"), the same for
    the maximum in max_hangs_on. With no null data (None / empty), each of `panels` gets status "no data" and NaN
    values, never an exception."""
    columns = ["panel", "status", "n_revisions", "p99_min", "p99_max", "p99_ratio", "p99_stable", "max_min",
               "max_max", "max_ratio", "max_stable", "k_above_min", "k_above_max", "reason", "p99_hangs_on",
               "max_hangs_on"]
    if nulls is None or len(nulls) == 0:
        return pd.DataFrame([{"panel": p, "status": "no data", "n_revisions": 0,
                              "reason": "no null-selectivity draws for this panel (run the null calibration)"}
                             for p in panels], columns=columns)
    missing = [c for c in NULL_COLUMNS if c not in nulls.columns]
    if missing:
        raise DataError(f"noise_floor: null table lacks column(s) {missing}; expected {list(NULL_COLUMNS)} "
                        "(+ optional panel)")
    nulls = nulls if "panel" in nulls.columns else nulls.assign(panel="")
    rows = []
    for panel, g in nulls.groupby("panel", sort=False):
        p99, mx = g["null_p99"].to_numpy(dtype=float), g["null_max"].to_numpy(dtype=float)
        p99_ratio, max_ratio = p99.max() / p99.min(), mx.max() / mx.min()
        rows.append({"panel": panel, "status": "ok", "n_revisions": len(g), "p99_min": p99.min(),
                     "p99_max": p99.max(), "p99_ratio": p99_ratio, "p99_stable": p99_ratio <= stable_ratio,
                     "max_min": mx.min(), "max_max": mx.max(), "max_ratio": max_ratio,
                     "max_stable": max_ratio <= stable_ratio, "k_above_min": int(g["k_above"].min()),
                     "k_above_max": int(g["k_above"].max()), "reason": "",
                     "p99_hangs_on": _extremes(g, p99), "max_hangs_on": _extremes(g, mx)})
    for p in panels:
        if p not in set(pd.unique(nulls["panel"])):
            rows.append({"panel": p, "status": "no data", "n_revisions": 0,
                         "reason": "no null-selectivity draws for this panel (run the null calibration)"})
    return pd.DataFrame(rows, columns=columns)


def _extremes(g: pd.DataFrame, values) -> str:
    """The two revisions that decide a stability verdict: its lowest and highest value, and the smallest factor
    under which it is stable."""
    revs = g["revision"].to_numpy() if "revision" in g.columns else np.arange(len(values)).astype(str)
    lo, hi = int(np.argmin(values)), int(np.argmax(values))
    return (f"lowest at {revs[lo]} ({values[lo]:.3g}×), highest at {revs[hi]} ({values[hi]:.3g}×): stable for any "
            f"factor ≥ {values[hi] / values[lo]:.3g}")
