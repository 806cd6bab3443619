"""Refinement: one number per revision by name (REVISION_METRICS, what `circuitdev refine --metric` refines the
revision grid on), where it changes most (`event_window`), and how much a refined grid narrows that window and the
F3 milestone windows (`window_comparison`, `milestone_window_comparison`); `PanelView`, one record panel as the
refinement page reads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from circuitdev.analysis import uncertainty
from circuitdev.analysis.devtable import head_counts, revisions
from circuitdev.analysis.findings.basics import BOS, EPS
from circuitdev.analysis.findings.f2_shapes import bos_fraction
from circuitdev.analysis.findings.f3_milestones import PAPER_MILESTONES, Milestone, milestones
from circuitdev.errors import ConfigError, DataError
from circuitdev.schema import BOS_THRESHOLD, CLASS_THRESHOLD, INDUCTION_THRESHOLD

__all__ = ["REVISION_METRICS", "revision_metric", "event_window", "window_comparison", "milestone_window_comparison",
           "PanelView"]


def _count_metric(head_class: str, threshold: float):
    def metric(dev: pd.DataFrame) -> pd.DataFrame:
        out = head_counts(dev, head_class, threshold=threshold)
        return out.assign(value=out["n"].astype(float))
    return metric


# One number per revision, by name: what `circuitdev refine --metric M` refines the revision grid on.
REVISION_METRICS: dict[str, tuple[str, object]] = {
    "bos_fraction": (f"share of heads with first-token selectivity ≥ {BOS_THRESHOLD:g}× (F2)",
                     lambda dev: bos_fraction(dev).assign(value=lambda d: d["bos_fraction"])),
    "induction_heads": (f"heads with induction selectivity ≥ {INDUCTION_THRESHOLD:g}× (F3, F4)",
                        _count_metric("induction", INDUCTION_THRESHOLD)),
    "prev_token_heads": (f"heads with previous-token selectivity ≥ {CLASS_THRESHOLD:g}× (F3)",
                         _count_metric("previous-token", CLASS_THRESHOLD)),
    "sink_heads": (f"heads with first-token selectivity ≥ {BOS_THRESHOLD:g}× (F1, F2)",
                   _count_metric(BOS, BOS_THRESHOLD)),
}


def _milestone_metric(spec: Milestone):
    def metric(dev: pd.DataFrame) -> pd.DataFrame:
        out = head_counts(dev, spec.head_class, threshold=spec.threshold)
        held = out["n"] >= spec.min_heads if spec.min_heads is not None else \
            out["fraction"] >= spec.min_fraction - EPS
        return out.assign(value=held.astype(float))
    return metric


# ... and each F3 milestone as 0 / 1 (does it hold at the revision?): refining on one zooms onto its first revision
REVISION_METRICS.update({m.name: (f"1 when the F3 milestone holds ({m.describe()}), else 0", _milestone_metric(m))
                         for m in PAPER_MILESTONES})


def revision_metric(dev: pd.DataFrame, name: str, *, boot: pd.DataFrame | None = None) -> pd.DataFrame:
    """A per-revision metric of REVISION_METRICS by name: revisions(dev) columns plus `value` (token order); with
    `boot` (bootstrap replicates) also value_lo / value_hi."""
    if name not in REVISION_METRICS:
        raise ConfigError(f"unknown metric {name!r}; known: {', '.join(REVISION_METRICS)}")
    if boot is not None:
        return uncertainty.with_intervals(dev, boot, lambda d: revision_metric(d, name), columns=["value"])
    return REVISION_METRICS[name][1](dev)


def event_window(values: pd.DataFrame, *, within: tuple[float, float] | None = None) -> dict:
    """Where a per-revision metric changes most, for one panel (`values`: revision, tokens_b, value in token order).

    Without `within`: the adjacent pair with the largest |change| (ties: the earliest) -- the window
    `circuitdev refine` starts from. With `within` = (from, to) tokens_b of such a window on a coarser grid: the
    tightest stretch inside it from the last revision still at the window's starting value to the first revision at
    its end value -- the same event on a finer grid. Returns from_revision, to_revision, from_tokens_b,
    to_tokens_b, change, revisions_inside (revisions strictly between the two ends)."""
    v = values.sort_values("tokens_b", kind="stable")
    t, x, names = v["tokens_b"].to_numpy(dtype=float), v["value"].to_numpy(dtype=float), v["revision"].to_numpy()
    if within is None:
        if len(x) < 2:
            raise DataError("event_window needs at least two revisions")
        d = np.abs(np.diff(x))
        i = int(np.argmax(d))
        j = i + 1
    else:
        idx = np.flatnonzero((t >= within[0] - 1e-15) & (t <= within[1] + 1e-15))
        if len(idx) < 2:
            raise DataError(f"no two revisions lie in the window {within} (tokens_b)")
        start, end = x[idx[0]], x[idx[-1]]
        j = next(k for k in idx[1:] if x[k] == end)
        i = max(k for k in idx if k < j and x[k] == start)
    return {"from_revision": names[i], "to_revision": names[j], "from_tokens_b": t[i], "to_tokens_b": t[j],
            "change": x[j] - x[i], "revisions_inside": j - i - 1}


def window_comparison(dev: pd.DataFrame, grid: Sequence[str], metric: str) -> dict:
    """The event window of a per-revision `metric` on the panel's default revision grid (`grid`: its revision names)
    and on all its probed revisions (refined ones included): grid_* and refined_* ends and widths in tokens_b,
    narrowing = grid width / refined width, added = refined revisions inside the grid window."""
    values = revision_metric(dev, metric)
    coarse = event_window(values[values["revision"].isin(list(grid))])
    fine = event_window(values, within=(coarse["from_tokens_b"], coarse["to_tokens_b"]))
    inside = values["tokens_b"].between(coarse["from_tokens_b"], coarse["to_tokens_b"], inclusive="neither")
    gw, fw = coarse["to_tokens_b"] - coarse["from_tokens_b"], fine["to_tokens_b"] - fine["from_tokens_b"]
    return {"metric": metric, "change": coarse["change"],
            **{f"grid_{k}": coarse[k] for k in ("from_revision", "to_revision", "from_tokens_b", "to_tokens_b")},
            **{f"refined_{k}": fine[k] for k in ("from_revision", "to_revision", "from_tokens_b", "to_tokens_b")},
            "grid_width_tokens_b": gw, "refined_width_tokens_b": fw, "narrowing": gw / fw if fw > 0 else np.nan,
            "added": int((inside & ~values["revision"].isin(list(grid))).sum())}


def milestone_window_comparison(dev: pd.DataFrame, grid: Sequence[str], *, boot: pd.DataFrame | None = None,
                                specs: Sequence[Milestone] = PAPER_MILESTONES) -> pd.DataFrame:
    """F3 windows on a panel's default revision grid (`grid`: its revision names) and on all its probed revisions,
    per milestone reached: milestone, grid_window / refined_window (from -> to revision), grid_width_tokens_b,
    refined_width_tokens_b, narrowing (grid / refined width). Needs `boot` for the noise part of the windows;
    without it the windows are the grid's alone."""
    def windows(table: pd.DataFrame) -> pd.DataFrame:
        sub = boot[boot["revision"].isin(pd.unique(table["revision"]))] if boot is not None else None
        ms = milestones(table, specs=specs, boot=sub)
        if sub is None:  # the grid alone: from the revision before the first one reaching it
            revs = revisions(table)
            before = {r: revs["revision"].iloc[max(i - 1, 0)] for i, r in enumerate(revs["revision"])}
            tok = dict(zip(revs["revision"], revs["tokens_b"]))
            ms = ms.assign(revision_hi=ms["revision"], tokens_b_hi=ms["tokens_b"],
                           window_from_revision=[before.get(r) for r in ms["revision"]],
                           window_from_tokens_b=[tok.get(before.get(r), np.nan) for r in ms["revision"]])
            ms["window_tokens_b"] = ms["tokens_b_hi"] - ms["window_from_tokens_b"]
        return ms.set_index(["panel", "milestone"])

    a, b = windows(dev[dev["revision"].isin(list(grid))]), windows(dev)
    rows = []
    for key in a.index:
        if pd.isna(a.loc[key, "window_tokens_b"]) or pd.isna(b.loc[key, "window_tokens_b"]):
            continue
        gw, fw = a.loc[key, "window_tokens_b"], b.loc[key, "window_tokens_b"]
        rows.append({"panel": key[0], "milestone": key[1],
                     "grid_window": f"{a.loc[key, 'window_from_revision']} → {a.loc[key, 'revision_hi']}",
                     "refined_window": f"{b.loc[key, 'window_from_revision']} → {b.loc[key, 'revision_hi']}",
                     "grid_width_tokens_b": gw, "refined_width_tokens_b": fw,
                     "narrowing": gw / fw if fw > 0 else np.nan})
    return pd.DataFrame(rows, columns=["panel", "milestone", "grid_window", "refined_window", "grid_width_tokens_b",
                                       "refined_width_tokens_b", "narrowing"])


@dataclass
class PanelView:
    """One record panel as the refinement page reads it: its table (refined revisions included), its bootstrap
    replicates, the revisions of its panel file (the default grid) and the log of `circuitdev refine`
    (`Chapter.panel_view` builds it)."""

    name: str
    tier: str
    table: pd.DataFrame
    boot: pd.DataFrame | None
    grid: list[str]
    refined: pd.DataFrame

    def apply_on_grid(self, fn, **kwargs) -> pd.DataFrame:
        """`fn(table, boot=replicates, **kwargs)` on the default grid only (the refined revisions left out), to
        compare a finding with and without refinement."""
        keep = lambda df: None if df is None else df[df["revision"].isin(self.grid)]  # noqa: E731
        return fn(keep(self.table), boot=keep(self.boot), **kwargs)
