"""F3, the milestones: the first revision at which each count milestone holds (the paper's table and Fig. 1B
rules), with its bootstrap window, and the token gap between two milestones; the same first-revision rule for the
behaviour measured per revision (`behaviour_milestones`: top-1, ICL score, the cost of ablating the circuit).

Censoring. A grid of revisions sees an event only between two probes: a milestone that already holds at the first
probed revision was reached at or before it, one never reached lies beyond the last. Every table here says so:
`bound` is how the reported value relates to the true one -- "exact", "upper" (the truth is at most the value: a
milestone reached at the first probed revision after initialisation), "lower" (at least: never reached by the last
revision, whose tokens `bound_tokens_b` then carries) or "none" (no bound: censored both ways) -- and `censored` is
bound != "exact". A gap built from censored milestones is a bound too (OLMoE's induction milestone holds at its first
revision, so its gap is "≥ 21×"). `bound_text` and `milestone_text` write them ("≥ 21×", "≤ 20B", "> 3048B").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, Sequence

import numpy as np
import pandas as pd

from circuitdev.analysis import uncertainty
from circuitdev.analysis.devtable import head_mask, index, require
from circuitdev.analysis.findings.basics import BOS, EPS
from circuitdev.errors import ConfigError
from circuitdev.measure.classify import CountingRule
from circuitdev.schema import (BOS_THRESHOLD, CLASS_THRESHOLD, INDUCTION_THRESHOLD, PREV_TOKEN_THRESHOLD, HeadClass,
                               check_head_class)

Bound = Literal["exact", "upper", "lower", "none"]  # how a reported value relates to the true one (module docstring)


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


MILESTONE_COLUMNS = ["panel", "milestone", "revision", "revision_index", "tokens_b", "token_fraction", "bound",
                     "censored", "bound_tokens_b"]
MILESTONE_WINDOW_COLUMNS = ["revision_lo", "tokens_b_lo", "revision_hi", "tokens_b_hi", "window_from_revision",
                            "window_from_tokens_b", "window_tokens_b", "reached_share", "window_censored"]


def _first_row(panel: str, name: str, idx: np.ndarray, ok: np.ndarray, cols: dict) -> dict:
    """The first revision of `idx` (token order) where `ok` holds, with its censoring (module docstring)."""
    hit = idx[ok]
    i = int(hit[0]) if len(hit) else None
    tokens = cols["tokens_b"]
    bound = "lower" if i is None else "upper" if i == idx[0] and tokens[i] > 0 else "exact"
    return {"panel": panel, "milestone": name, "revision": cols["revision"][i] if i is not None else None,
            "revision_index": int(cols["revision_index"][i]) if i is not None else None,
            "tokens_b": float(tokens[i]) if i is not None else np.nan,
            "token_fraction": float(cols["token_fraction"][i]) if i is not None else np.nan,
            "bound": bound, "censored": bound != "exact",
            "bound_tokens_b": float(tokens[i if i is not None else idx[-1]])}


def _windows(rows: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]], cols: dict) -> pd.DataFrame:
    """MILESTONE_WINDOW_COLUMNS for each (positions of a panel's revisions, point hits, the replicates' first-hit
    indices (B,) or None where there are none) of `rows`."""
    window = []
    for idx, ok, firsts in rows:
        if firsts is None:
            window.append([None, np.nan, None, np.nan, None, np.nan, np.nan, np.nan, False])
            continue
        lo, hi, share = uncertainty.index_interval(firsts, int(uncertainty.first_reached(ok)), never=len(idx))
        at = lambda j: (cols["revision"][idx[j]], float(cols["tokens_b"][idx[j]])) if j < len(idx) \
            else (None, np.nan)  # noqa: E731
        before = at(max(lo - 1, 0)) if lo < len(idx) else (None, np.nan)
        censored = (lo == 0 and cols["tokens_b"][idx[0]] > 0) or hi >= len(idx)  # starts at the first probe / never
        window.append([*at(lo), *at(hi), *before, at(hi)[1] - before[1], share, bool(censored)])
    return pd.DataFrame(window, columns=MILESTONE_WINDOW_COLUMNS)


def milestones(dev: pd.DataFrame, *, specs: Sequence[Milestone] = PAPER_MILESTONES, rule: CountingRule = "per-class",
               sustained: bool = False, boot: pd.DataFrame | None = None) -> pd.DataFrame:
    """F3: the first revision at which each milestone holds (paper: first, even if it later fails again).

    sustained=True asks instead for the first revision from which it holds at every later revision (use it when
    counts are noisy, e.g. OLMo's single 10B BOS head). Columns (MILESTONE_COLUMNS): panel, milestone, revision
    (None if never), revision_index, tokens_b, token_fraction (NaN if never), and the censoring: bound ("upper":
    reached at the first probed revision, so at or before it; "lower": never reached, so after the last, whose
    tokens bound_tokens_b holds; else "exact"), censored (bound != "exact"), bound_tokens_b.

    With `boot` (bootstrap replicates) also its window: revision_lo / tokens_b_lo and revision_hi / tokens_b_hi, the
    earliest and latest first revision across the replicates (95% range; revision_hi None when more than 2.5% of
    them never reach it); window_from_revision / _tokens_b, the revision before revision_lo (the onset lies after
    it: the grid's resolution); window_tokens_b = tokens_b_hi - window_from_tokens_b, the width of the stretch of
    training in which the milestone is first reached; reached_share, the share of replicates reaching it;
    window_censored, the window starts at the first probed revision or never closes (a bound, not a width)."""
    ix = index(dev)
    hits = list(_milestone_hits(dev, specs, rule, sustained))
    out = pd.DataFrame([_first_row(panel, spec.name, idx, ok, ix.cols) for panel, idx, spec, ok in hits],
                       columns=MILESTONE_COLUMNS)
    if boot is None:
        return out
    reps = uncertainty.Replicates.align(dev, boot)
    firsts = np.stack([[uncertainty.first_reached(ok) for *_, ok in _milestone_hits(frame, specs, rule, sustained)]
                       for frame in reps.frames()])  # (B, panels x milestones)
    window = _windows([(idx, ok, firsts[:, k] if panel in reps.panels else None)
                       for k, (panel, idx, _spec, ok) in enumerate(hits)], ix.cols)
    return pd.concat([out, window], axis=1)


# ------------------------------------------------------------------------------------- behaviour per revision
BehaviourMeasure = Literal["top1", "icl_score", "top1_drop"]
_MEASURES: dict[str, tuple[str, Callable[[float], str]]] = {
    "top1": ("top-1 accuracy at the query (second A → B)", lambda v: f"{100 * v:g}%"),
    "icl_score": ("in-context-learning score (loss on a span's first occurrence minus on its repeat)",
                  lambda v: f"{v:g} nat" + ("s" if v != 1 else "")),
    "top1_drop": ("top-1 lost when the final induction circuit is zero-ablated", lambda v: f"{100 * v:g} pp"),
}


@dataclass(frozen=True)
class BehaviourMilestone:
    name: str  # column-safe id, e.g. "top1_25pct"
    measure: BehaviourMeasure  # a column of the revision table (sources.store.load_revision_table)
    level: float  # reached when measure >= level (top1 and top1_drop as fractions: 0.25 = 25%, 25 pp)

    def __post_init__(self) -> None:
        if self.measure not in _MEASURES:
            raise ConfigError(f"behaviour milestone {self.name!r}: measure must be one of {', '.join(_MEASURES)}, "
                              f"got {self.measure!r}")

    def describe(self) -> str:
        """In words: "top-1 accuracy at the query (second A → B) ≥ 25%"."""
        words, write = _MEASURES[self.measure]
        return f"{words} ≥ {write(self.level)}"


# Default behavioural milestones: top-1 crossing a quarter and a half, the ICL score 1 and 3 nats, and the circuit
# becoming necessary (ablating it costs 10 / 25 points of top-1).
BEHAVIOUR_MILESTONES: tuple[BehaviourMilestone, ...] = (
    BehaviourMilestone("top1_25pct", "top1", 0.25), BehaviourMilestone("top1_50pct", "top1", 0.50),
    BehaviourMilestone("icl_1nat", "icl_score", 1.0), BehaviourMilestone("icl_3nats", "icl_score", 3.0),
    BehaviourMilestone("drop_10pp", "top1_drop", 0.10), BehaviourMilestone("drop_25pp", "top1_drop", 0.25),
)


def _hits(values: np.ndarray, level: float, sustained: bool) -> np.ndarray:
    ok = np.nan_to_num(values, nan=-np.inf) >= level - EPS
    return np.logical_and.accumulate(ok[..., ::-1], axis=-1)[..., ::-1] if sustained else ok


def behaviour_milestones(revisions: pd.DataFrame, *, specs: Sequence[BehaviourMilestone] = BEHAVIOUR_MILESTONES,
                         sustained: bool = False, boot: pd.DataFrame | None = None) -> pd.DataFrame:
    """F3 beside behaviour: the first revision at which each behavioural measure reaches its level, with the same
    rules as `milestones` (first hit, or `sustained`; censoring columns; windows).

    `revisions`: one row per revision (`sources.store.load_revision_table`, any panels): panel, revision, tokens_b
    and the measures (top1, icl_score, top1_drop). A (panel, milestone) whose measure was never measured there
    (all NaN: an old record, no ablation over training) gives no row; a NaN revision does not count as reached.
    With `boot` (`RecordSet.behaviour_boot()`: panel, revision, replicate, top1, loss_b, icl_score) also the window
    of MILESTONE_WINDOW_COLUMNS from the replicates (a revision without replicates keeps its point value in every
    replicate; top1_drop has none: no window). Columns: panel, milestone, measure, level, MILESTONE_COLUMNS[2:]
    (+ the window columns)."""
    require(revisions, ["panel", "revision", "tokens_b"], "behaviour_milestones", allow_empty=True)
    table = revisions.assign(_p=pd.factorize(revisions["panel"])[0]).sort_values(
        ["_p", "tokens_b"], kind="stable").reset_index(drop=True)
    panel_of, tokens = table["panel"].to_numpy(), table["tokens_b"].to_numpy(dtype=float)
    starts = np.flatnonzero(np.r_[True, panel_of[1:] != panel_of[:-1]]) if len(table) else np.array([], int)
    position = np.arange(len(table)) - np.repeat(starts, np.diff(np.r_[starts, len(table)]))
    final = pd.Series(tokens).groupby(panel_of).transform("max").to_numpy() if len(table) else tokens
    cols = {"revision": table["revision"].to_numpy(), "revision_index": position, "tokens_b": tokens,
            "token_fraction": np.divide(tokens, final, out=np.full(len(tokens), np.nan), where=final > 0)}
    rows, windows = [], []
    for panel in pd.unique(panel_of):
        idx = np.flatnonzero(panel_of == panel)
        reps = _behaviour_replicates(boot, panel, table["revision"].to_numpy()[idx]) if boot is not None else {}
        for spec in specs:
            values = table[spec.measure].to_numpy(dtype=float)[idx] if spec.measure in table.columns else None
            if values is None or np.isnan(values).all():
                continue
            ok = _hits(values, spec.level, sustained)
            rows.append({**_first_row(panel, spec.name, idx, ok, cols), "measure": spec.measure, "level": spec.level})
            rep = reps.get(spec.measure)
            firsts = None if rep is None else uncertainty.first_reached(
                _hits(np.where(np.isnan(rep), values, rep), spec.level, sustained))
            windows.append((idx, ok, firsts))
    columns = ["panel", "milestone", "measure", "level", *MILESTONE_COLUMNS[2:]]
    out = pd.DataFrame(rows, columns=columns)
    return out if boot is None else pd.concat([out, _windows(windows, cols)], axis=1)


def _behaviour_replicates(boot: pd.DataFrame, panel: str, revisions: np.ndarray) -> dict[str, np.ndarray]:
    """{measure: (B, revisions) matrix} of one panel's behaviour replicates, NaN where a revision has none."""
    mine = boot[boot["panel"] == panel]
    if mine.empty:
        return {}
    pos = pd.Index(revisions).get_indexer(mine["revision"])
    keep = pos >= 0
    reps = mine["replicate"].to_numpy(dtype=np.int64)[keep]
    out = {}
    for measure in ("top1", "loss_b", "icl_score"):
        if measure in mine.columns:
            m = np.full((int(reps.max()) + 1 if len(reps) else 0, len(revisions)), np.nan)
            m[reps, pos[keep]] = mine[measure].to_numpy(dtype=float)[keep]
            out[measure] = m
    return out


def _gap_bound(start: str, end: str) -> str:
    """The bound of end / start from the bounds of its two milestone times: an early-censored start ("upper") or a
    never-reached end ("lower") make the ratio a lower bound, the reverse an upper bound, both ways no bound."""
    ways = {"upper": "lower", "lower": "upper"}
    sides = {ways[start]} if start in ways else set()
    sides |= {end} if end in ways else set()
    return "exact" if not sides else sides.pop() if len(sides) == 1 else "none"


def milestone_gap(table: pd.DataFrame, *, start: str = "induction_3_heads", end: str = "bos_50pct") -> pd.DataFrame:
    """F3 gap between two milestones as a token ratio end/start (the paper's: induction >= 3 heads -> BOS-50%) and
    in checkpoints. NaN where either milestone is never reached.

    Censoring (from `milestones`' bound columns): start_bound, end_bound, bound (of the ratio: "lower" when the
    start milestone holds at the first probed revision or the end one is never reached -- the true gap is at least
    bound_ratio --, "upper" the reverse, "none" both ways), censored, and bound_ratio (the ratio with a never-reached
    milestone put at the last revision: the bound's value; = token_ratio when both are reached)."""
    found: dict[str, dict] = {}
    for r in table.to_dict("records"):
        if r["milestone"] in (start, end):
            found.setdefault(r["panel"], {}).setdefault(r["milestone"], r)
    rows = []
    for panel in pd.unique(table["panel"]):
        a, b = found.get(panel, {}).get(start), found.get(panel, {}).get(end)
        if a is None or b is None:
            raise ConfigError(f"milestone_gap: {start!r} or {end!r} is not in the milestone table of {panel}")
        ta, tb = float(a["tokens_b"]), float(b["tokens_b"])
        sa, sb = a.get("bound", "exact"), b.get("bound", "exact")
        ba, bb = float(a.get("bound_tokens_b", ta)), float(b.get("bound_tokens_b", tb))
        bound = _gap_bound(sa, sb)
        rows.append({"panel": panel, "start": start, "end": end, "start_revision": a["revision"],
                     "end_revision": b["revision"], "start_tokens_b": ta, "end_tokens_b": tb,
                     "token_ratio": tb / ta if ta > 0 else np.nan,
                     "checkpoints": (b["revision_index"] - a["revision_index"])
                     if pd.notna(a["revision"]) and pd.notna(b["revision"]) else np.nan,
                     "start_bound": sa, "end_bound": sb, "bound": bound, "censored": bound != "exact",
                     "bound_ratio": bb / ba if ba > 0 and bound != "none" else np.nan})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------- writing bounds
BOUND_SIGNS = {"exact": "", "upper": "≤ ", "lower": "≥ ", "none": "unbounded "}


def bound_text(value, bound: str = "exact", fmt: str | Callable[[float], str] = "{:.3g}", *,
               absent: str = "n/a") -> str:
    """A value with its bound: "21", "≥ 21", "≤ 20B"; `absent` for NaN / None or no bound ("none")."""
    if value is None or (isinstance(value, float) and not np.isfinite(value)) or bound == "none":
        return absent
    text = fmt(value) if callable(fmt) else fmt.format(value)
    return BOUND_SIGNS.get(str(bound), "") + text


def milestone_text(row, fmt: str | Callable[[float], str] = "{:g}B", *, never: str = "never reached") -> str:
    """When a milestone row (of `milestones` / `behaviour_milestones`) is reached, with its censoring: "23B",
    "≤ 20B" (at the first probed revision) or "> 3048B (never reached)"."""
    write = fmt if callable(fmt) else fmt.format
    bound = row.get("bound", "exact") if hasattr(row, "get") else "exact"
    if bound == "lower" or pd.isna(row["tokens_b"]):
        last = row.get("bound_tokens_b", np.nan) if hasattr(row, "get") else np.nan
        return f"> {write(last)} ({never})" if pd.notna(last) else never
    return ("≤ " if bound == "upper" else "") + write(row["tokens_b"])
