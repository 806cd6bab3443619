"""F2, the shape of the sink trajectory: the whole-model BOS fraction at every revision and a measured shape
descriptor per panel (ramp, transition or flat; largest jump, saturation)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from circuitdev.analysis import uncertainty
from circuitdev.analysis.devtable import head_counts, require
from circuitdev.analysis.findings.basics import BOS, EPS
from circuitdev.measure.classify import CountingRule
from circuitdev.schema import BOS_THRESHOLD


def bos_fraction(dev: pd.DataFrame, *, threshold: float = BOS_THRESHOLD, rule: CountingRule = "per-class",
                 boot: pd.DataFrame | None = None) -> pd.DataFrame:
    """F2: whole-model BOS fraction n_first(tau) / n_heads at every revision.

    Columns: panel, revision, revision_index, [step], tokens_b, token_fraction, n_heads, n_bos, bos_fraction; with
    `boot` (bootstrap replicates) also n_bos_lo / _hi and bos_fraction_lo / _hi."""
    if boot is not None:
        return uncertainty.with_intervals(dev, boot, lambda d: bos_fraction(d, threshold=threshold, rule=rule),
                                          columns=["n_bos", "bos_fraction"])
    out = head_counts(dev, BOS, threshold=threshold, rule=rule)
    return out.rename(columns={"n": "n_bos", "fraction": "bos_fraction"})


def trajectory_shape(fractions: pd.DataFrame, *, value: str = "bos_fraction", transition_share: float = 0.5,
                     saturation_share: float = 0.9) -> pd.DataFrame:
    """F2 shape descriptor per panel, so "ramp" vs "transition" is measured rather than asserted.

    total rise = final - first value; the largest jump is the biggest increase between adjacent revisions, reported
    in percentage points and as a share of the total rise; `shape` is "transition" when one step carries at least
    `transition_share` of the rise, else "ramp" (use a higher share for a stricter notion of a phase transition).
    Saturation: the final level, and the first revision reaching `saturation_share` of it. Adjacent revisions are
    unevenly spaced in tokens, so the jump's token ratio is given too (a big jump over a 10x token gap is slower
    than it looks)."""
    require(fractions, ["panel", "revision", "tokens_b", value], "trajectory_shape")
    rows = []
    panels, labels = fractions["panel"].to_numpy(), fractions["revision"].to_numpy()
    values, tokens = fractions[value].to_numpy(dtype=float), fractions["tokens_b"].to_numpy(dtype=float)
    for panel in pd.unique(panels):
        idx = np.flatnonzero(panels == panel)
        idx = idx[np.argsort(tokens[idx], kind="stable")]
        v, t, revision = values[idx] * 100, tokens[idx], labels[idx]
        steps = np.diff(v) if len(v) > 1 else np.array([0.0])
        j = int(np.argmax(steps))
        rise = v[-1] - v[0]
        share = steps[j] / rise if rise > 0 else np.nan
        reached = np.flatnonzero(v >= saturation_share * v[-1] - EPS) if v[-1] > 0 else np.array([], int)
        rows.append({
            "panel": panel, "n_revisions": len(v), "start_pct": v[0], "final_pct": v[-1], "peak_pct": v.max(),
            "rise_pp": rise, "largest_jump_pp": steps[j] if len(v) > 1 else np.nan, "jump_share": share,
            "jump_from_revision": revision[j], "jump_to_revision": revision[min(j + 1, len(v) - 1)],
            "jump_from_tokens_b": t[j], "jump_to_tokens_b": t[min(j + 1, len(v) - 1)],
            "jump_token_ratio": t[min(j + 1, len(v) - 1)] / t[j] if t[j] > 0 else np.nan,
            "saturation_pct": v[-1],
            "saturation_revision": revision[reached[0]] if len(reached) else None,
            "saturation_tokens_b": t[reached[0]] if len(reached) else np.nan,
            "shape": ("transition" if share >= transition_share else "ramp") if np.isfinite(share) else "flat",
        })
    return pd.DataFrame(rows)
