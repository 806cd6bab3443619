"""F1, the layer floor: heads of a class per layer, whether the first layers never hold a BOS head, how close they
come to the bar and the verdict per panel (holds / fails / within noise, from the bootstrap intervals)."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from circuitdev.analysis import uncertainty
from circuitdev.analysis.devtable import head_mask, head_name, index, require
from circuitdev.analysis.findings.basics import BOS
from circuitdev.measure.classify import CountingRule
from circuitdev.schema import BOS_THRESHOLD, check_head_class, sel_column


def layer_counts(dev: pd.DataFrame, *, head_class: str = BOS, threshold: float = BOS_THRESHOLD,
                 rule: CountingRule = "per-class", boot: pd.DataFrame | None = None) -> pd.DataFrame:
    """F1: heads of `head_class` per layer at every revision (the paper's tables 2-3 use first-token >= 30x).

    Columns: panel, revision, revision_index, tokens_b, layer, n (every layer listed, zeros included); with `boot`
    (bootstrap replicates) also n_lo, n_hi."""
    if boot is not None:
        return uncertainty.with_intervals(dev, boot, lambda d: layer_counts(d, head_class=head_class,
                                          threshold=threshold, rule=rule), columns=["n"])
    ix = index(dev)
    n_revs = len(ix.cols["revision"])
    layers = dev["layer"].to_numpy(dtype=int)
    n_layers = int(layers.max()) + 1
    hits = np.bincount(ix.codes * n_layers + layers, weights=head_mask(dev, head_class, threshold=threshold, rule=rule),
                       minlength=n_revs * n_layers).astype(int)
    top_layer = np.full(n_revs, -1)
    np.maximum.at(top_layer, ix.codes, layers)  # a panel with fewer layers lists only its own
    keep = np.tile(np.arange(n_layers), n_revs) <= np.repeat(top_layer, n_layers)
    rows = np.repeat(np.arange(n_revs), n_layers)[keep]
    return pd.DataFrame({**{c: ix.cols[c][rows] for c in ("panel", "revision", "revision_index", "tokens_b")},
                         "layer": np.tile(np.arange(n_layers), n_revs)[keep], "n": hits[keep]})


def floor_check(dev: pd.DataFrame, *, layers: Sequence[int] = (0, 1), head_class: str = BOS,
                threshold: float = BOS_THRESHOLD, rule: CountingRule = "per-class",
                boot: pd.DataFrame | None = None) -> pd.DataFrame:
    """F1 floor: does every run have zero `head_class` heads in `layers` (the paper: no BOS head in L0/L1 ever)?

    One row per (panel, revision): panel, revision, tokens_b, n_floor (heads counted in `layers`), holds; with
    `boot` also n_floor_lo, n_floor_hi. The runs that break the floor are `out[~out.holds]`."""
    if boot is not None:
        return uncertainty.with_intervals(dev, boot, lambda d: floor_check(d, layers=layers, head_class=head_class,
                                          threshold=threshold, rule=rule), columns=["n_floor"])
    ix = index(dev)
    n_floor = ix.count(head_mask(dev, head_class, threshold=threshold, rule=rule)
                       & np.isin(dev["layer"].to_numpy(), list(layers)))
    return pd.DataFrame({**{c: ix.cols[c] for c in ("panel", "revision", "revision_index", "tokens_b")},
                         "n_floor": n_floor, "holds": n_floor == 0})


def floor_summary(floor: pd.DataFrame, *, by: Sequence[str] = ("panel",)) -> pd.DataFrame:
    """F1 per group of `floor_check` rows (e.g. by panel, or by tier with a `tier` column): runs, held (runs whose
    floor layers hold no head of the class), most (the most such heads at any run), broken ("never broken" or
    "broken at <panel> <revision>, ...")."""
    require(floor, [*by, "panel", "revision", "n_floor", "holds"], "floor_summary", allow_empty=True)
    rows = []
    for key, g in floor.groupby(list(by), sort=False):
        bad = g[~g["holds"]]
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))), "runs": len(g),
                     "held": int(g["holds"].sum()), "most": int(g["n_floor"].max()),
                     "broken": "broken at " + ", ".join(f"{p} {r}" for p, r in zip(bad["panel"], bad["revision"]))
                     if len(bad) else "never broken"})
    return pd.DataFrame(rows, columns=[*by, "runs", "held", "most", "broken"])


VERDICTS = ("holds", "within noise", "fails")


def floor_margin(dev: pd.DataFrame, *, layers: Sequence[int] = (0, 1), head_class: str = BOS,
                 boot: pd.DataFrame | None = None) -> pd.DataFrame:
    """F1, how close the floor comes to the bar: per (panel, revision) the head of `layers` with the largest
    `head_class` selectivity. Columns: panel, revision, revision_index, tokens_b, name, value, value_lo, value_hi
    (its 95% bootstrap interval; NaN without `boot`)."""
    col = sel_column(check_head_class(head_class))
    ix = index(dev)
    lo = hi = np.full(len(dev), np.nan)
    if boot is not None:
        lo, hi = uncertainty.Replicates.align(dev, boot).head_interval(col)
    floor = np.flatnonzero(np.isin(dev["layer"].to_numpy(), list(layers)))
    order = floor[np.lexsort((-dev[col].to_numpy(dtype=float)[floor], ix.codes[floor]))]
    top = order[np.r_[True, np.diff(ix.codes[order]) != 0]] if len(order) else order  # best floor head per revision
    at = np.full(len(ix.cols["revision"]), -1)
    at[ix.codes[top]] = top
    ok = at >= 0
    pick = lambda a: np.where(ok, np.asarray(a, dtype=float)[np.maximum(at, 0)], np.nan)  # noqa: E731
    names = [head_name(dev["layer"].iloc[i], dev["head"].iloc[i]) if i >= 0 else None for i in at]
    return ix.frame(name=names, value=pick(dev[col]), value_lo=pick(lo), value_hi=pick(hi)).drop(
        columns=[c for c in ("step", "token_fraction", "n_heads") if c in ix.cols])


def floor_verdict(dev: pd.DataFrame, *, layers: Sequence[int] = (0, 1), head_class: str = BOS,
                  threshold: float = BOS_THRESHOLD, rule: CountingRule = "per-class",
                  boot: pd.DataFrame | None = None) -> pd.DataFrame:
    """F1 per panel: "holds", "fails" or "within noise", with the head that decides it and its 95% interval.

    With `boot` (the bootstrap replicates), over all revisions of the panel:
    - fails: at some revision at least one floor head reaches the bar in 97.5% of the resamples (n_floor_lo >= 1);
    - within noise: not failing, but some floor head's interval holds the bar (lo < threshold <= hi), or some
      resamples put a floor head at the bar (n_floor_hi >= 1): the data cannot tell holding from failing;
    - holds: every floor head's interval lies below the bar at every revision.
    The deciding head is the floor head with the largest lower end (fails), the largest value among those whose
    interval holds the bar (within noise), or the largest upper end (holds). Without `boot` (no per-sequence data,
    e.g. the published tier) the verdict is the paper's -- holds iff no floor head reaches the bar -- and the
    interval is NaN. Columns: panel, runs, verdict, revision, tokens_b, name, value, value_lo, value_hi, n_floor_max,
    bootstrapped."""
    col = sel_column(check_head_class(head_class))
    floor = floor_check(dev, layers=layers, head_class=head_class, threshold=threshold, rule=rule, boot=boot)
    ix = index(dev)
    in_floor = np.isin(dev["layer"].to_numpy(), list(layers))
    value = dev[col].to_numpy(dtype=float)
    reps = uncertainty.Replicates.align(dev, boot) if boot is not None else None
    lo, hi = reps.head_interval(col) if reps is not None else (np.full(len(dev), np.nan),) * 2
    panel_of = np.asarray(ix.cols["panel"])[ix.codes]
    rows = []
    for panel, g in floor.groupby("panel", sort=False):
        here = np.flatnonzero((panel_of == panel) & in_floor)
        with_ci = reps is not None and panel in reps.panels
        if with_ci:
            straddle = here[(lo[here] < threshold) & (hi[here] >= threshold)]
            if (g["n_floor_lo"] >= 1).any():
                verdict, i = "fails", here[np.nanargmax(lo[here])]
            elif len(straddle) or (g["n_floor_hi"] >= 1).any():
                verdict = "within noise"
                i = straddle[np.argmax(value[straddle])] if len(straddle) else here[np.nanargmax(hi[here])]
            else:
                verdict, i = "holds", here[np.nanargmax(hi[here])]
        else:
            verdict = "holds" if bool(g["holds"].all()) else "fails"
            i = here[np.argmax(value[here])]
        rows.append({"panel": panel, "runs": len(g), "verdict": verdict, "revision": dev["revision"].iloc[i],
                     "tokens_b": float(dev["tokens_b"].iloc[i]),
                     "name": head_name(dev["layer"].iloc[i], dev["head"].iloc[i]), "value": value[i],
                     "value_lo": lo[i], "value_hi": hi[i], "n_floor_max": int(g["n_floor"].max()),
                     "bootstrapped": with_ci})
    return pd.DataFrame(rows, columns=["panel", "runs", "verdict", "revision", "tokens_b", "name", "value", "value_lo",
                                       "value_hi", "n_floor_max", "bootstrapped"])
