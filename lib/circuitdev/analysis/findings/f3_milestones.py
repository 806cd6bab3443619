"""F3, the milestones: the first revision at which each count milestone holds (the paper's table and Fig. 1B
rules), with its bootstrap window, and the token gap between two milestones."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from circuitdev.analysis import uncertainty
from circuitdev.analysis.devtable import head_mask, index
from circuitdev.analysis.findings.basics import BOS, EPS
from circuitdev.errors import ConfigError
from circuitdev.measure.classify import CountingRule
from circuitdev.schema import (BOS_THRESHOLD, CLASS_THRESHOLD, INDUCTION_THRESHOLD, PREV_TOKEN_THRESHOLD, HeadClass,
                               check_head_class)


@dataclass(frozen=True)
class Milestone:
    name: str  # column-safe id, e.g. "bos_50pct"
    head_class: HeadClass
    threshold: float  # selectivity ratio tau of the per-class count n_c(tau)
    min_heads: int | None = None  # reached when n_c(tau) >= min_heads ...
    min_fraction: float | None = None  # ... or when n_c(tau) / n_heads >= min_fraction

    def __post_init__(self) -> None:
        check_head_class(self.head_class)
        if (self.min_heads is None) == (self.min_fraction is None):
            raise ConfigError(f"milestone {self.name!r}: give exactly one of min_heads, min_fraction")

    def describe(self) -> str:
        """In words: "≥ 3 heads with induction selectivity ≥ 50×"."""
        who = f"≥ {self.min_heads} heads" if self.min_heads is not None else f"≥ {100 * self.min_fraction:g}% of heads"
        return f"{who} with {self.head_class} selectivity ≥ {self.threshold:g}×"


# The paper's F3 table (method reference §6): induction >= k heads at 50x; BOS >= x% at 30x; >= 30 prev-token / self heads at 30x.
PAPER_MILESTONES: tuple[Milestone, ...] = (
    Milestone("induction_3_heads", "induction", INDUCTION_THRESHOLD, min_heads=3),
    Milestone("induction_5_heads", "induction", INDUCTION_THRESHOLD, min_heads=5),
    Milestone("bos_10pct", BOS, BOS_THRESHOLD, min_fraction=0.10),
    Milestone("bos_30pct", BOS, BOS_THRESHOLD, min_fraction=0.30),
    Milestone("bos_50pct", BOS, BOS_THRESHOLD, min_fraction=0.50),
    Milestone("bos_70pct", BOS, BOS_THRESHOLD, min_fraction=0.70),
    Milestone("previous_token_30_heads", "previous-token", CLASS_THRESHOLD, min_heads=30),
    Milestone("self_30_heads", "self", CLASS_THRESHOLD, min_heads=30),
)
# Headline Fig. 1B formation rules (method reference §6): prev-token >= 10 heads at 100x without a best-class filter.
FIG1B_MILESTONES: tuple[Milestone, ...] = (
    Milestone("induction_3_heads", "induction", INDUCTION_THRESHOLD, min_heads=3),
    Milestone("previous_token_10_heads_100x", "previous-token", PREV_TOKEN_THRESHOLD, min_heads=10),
    Milestone("bos_10pct", BOS, BOS_THRESHOLD, min_fraction=0.10),
)


def milestone(name: str, *, threshold: float | None = None) -> Milestone:
    """A milestone of PAPER_MILESTONES / FIG1B_MILESTONES by name, optionally at another threshold."""
    known = {m.name: m for m in (*PAPER_MILESTONES, *FIG1B_MILESTONES)}
    if name not in known:
        raise ConfigError(f"unknown milestone {name!r}; known: {', '.join(sorted(known))}")
    m = known[name]
    return m if threshold is None else Milestone(m.name, m.head_class, float(threshold), m.min_heads, m.min_fraction)


def _milestone_hits(dev: pd.DataFrame, specs: Sequence[Milestone], rule: CountingRule, sustained: bool):
    """Per panel and milestone, whether it holds at each of the panel's revisions (token order)."""
    ix = index(dev)
    hits = []
    for spec in specs:
        n = ix.count(head_mask(dev, spec.head_class, threshold=spec.threshold, rule=rule))
        hits.append(n >= spec.min_heads if spec.min_heads is not None else
                    n / ix.cols["n_heads"] >= spec.min_fraction - EPS)
    for panel, idx in ix.panels():
        for spec, hit in zip(specs, hits):
            ok = hit[idx]
            yield panel, idx, spec, (np.logical_and.accumulate(ok[::-1])[::-1] if sustained else ok)


MILESTONE_WINDOW_COLUMNS = ["revision_lo", "tokens_b_lo", "revision_hi", "tokens_b_hi", "window_from_revision",
                            "window_from_tokens_b", "window_tokens_b", "reached_share"]


def milestones(dev: pd.DataFrame, *, specs: Sequence[Milestone] = PAPER_MILESTONES, rule: CountingRule = "per-class",
               sustained: bool = False, boot: pd.DataFrame | None = None) -> pd.DataFrame:
    """F3: the first revision at which each milestone holds (paper: first, even if it later fails again).

    sustained=True asks instead for the first revision from which it holds at every later revision (use it when
    counts are noisy, e.g. OLMo's single 10B BOS head). Columns: panel, milestone, revision (None if never),
    revision_index, tokens_b, token_fraction (NaN if never).

    With `boot` (bootstrap replicates) also its window: revision_lo / tokens_b_lo and revision_hi / tokens_b_hi, the
    earliest and latest first revision across the replicates (95% range; revision_hi None when more than 2.5% of
    them never reach it); window_from_revision / _tokens_b, the revision before revision_lo (the onset lies after
    it: the grid's resolution); window_tokens_b = tokens_b_hi - window_from_tokens_b, the width of the stretch of
    training in which the milestone is first reached; reached_share, the share of replicates reaching it."""
    ix = index(dev)
    rows = []
    for panel, idx, spec, ok in _milestone_hits(dev, specs, rule, sustained):
        i = idx[ok][0] if ok.any() else None
        rows.append({"panel": panel, "milestone": spec.name,
                     "revision": ix.cols["revision"][i] if i is not None else None,
                     "revision_index": int(ix.cols["revision_index"][i]) if i is not None else None,
                     "tokens_b": float(ix.cols["tokens_b"][i]) if i is not None else np.nan,
                     "token_fraction": float(ix.cols["token_fraction"][i]) if i is not None else np.nan})
    out = pd.DataFrame(rows, columns=["panel", "milestone", "revision", "revision_index", "tokens_b",
                                      "token_fraction"])
    if boot is None:
        return out
    reps = uncertainty.Replicates.align(dev, boot)
    firsts = np.stack([[uncertainty.first_reached(ok) for *_, ok in _milestone_hits(frame, specs, rule, sustained)]
                       for frame in reps.frames()])  # (B, panels x milestones)
    window = []
    for k, (panel, idx, _spec, ok) in enumerate(_milestone_hits(dev, specs, rule, sustained)):
        if panel not in reps.panels:
            window.append([None, np.nan, None, np.nan, None, np.nan, np.nan, np.nan])
            continue
        lo, hi, share = uncertainty.index_interval(firsts[:, k], int(uncertainty.first_reached(ok)), never=len(idx))
        at = lambda j: (ix.cols["revision"][idx[j]], float(ix.cols["tokens_b"][idx[j]])) if j < len(idx) \
            else (None, np.nan)  # noqa: E731
        before = at(max(lo - 1, 0)) if lo < len(idx) else (None, np.nan)
        window.append([*at(lo), *at(hi), *before, at(hi)[1] - before[1], share])
    return pd.concat([out, pd.DataFrame(window, columns=MILESTONE_WINDOW_COLUMNS)], axis=1)


def milestone_gap(table: pd.DataFrame, *, start: str = "induction_3_heads", end: str = "bos_50pct") -> pd.DataFrame:
    """F3 gap between two milestones as a token ratio end/start (the paper's: induction >= 3 heads -> BOS-50%) and
    in checkpoints. NaN where either milestone is never reached."""
    rows = []
    for panel, g in table.groupby("panel", sort=False):
        a, b = (g[g["milestone"] == m] for m in (start, end))
        if a.empty or b.empty:
            raise ConfigError(f"milestone_gap: {start!r} or {end!r} is not in the milestone table of {panel}")
        ta, tb = float(a["tokens_b"].iloc[0]), float(b["tokens_b"].iloc[0])
        rows.append({"panel": panel, "start": start, "end": end, "start_revision": a["revision"].iloc[0],
                     "end_revision": b["revision"].iloc[0], "start_tokens_b": ta, "end_tokens_b": tb,
                     "token_ratio": tb / ta if ta > 0 else np.nan,
                     "checkpoints": (b["revision_index"].iloc[0] - a["revision_index"].iloc[0])
                     if pd.notna(a["revision"].iloc[0]) and pd.notna(b["revision"].iloc[0]) else np.nan})
    return pd.DataFrame(rows)
