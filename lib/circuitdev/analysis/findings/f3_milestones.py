"""F3, the milestones: the first revision at which each count milestone holds (the paper's table and Fig. 1B
rules), with its bootstrap window, and the token gap between two milestones (the same rule for the behaviour measured
per revision is `f3_behaviour`).

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
from decimal import ROUND_HALF_UP, Decimal
from typing import Callable, Literal, Sequence

import numpy as np
import pandas as pd

from circuitdev.analysis import uncertainty
from circuitdev.analysis.devtable import head_mask, index
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

    def short(self) -> str:
        """In a few words: "≥ 3 induction heads at 50×", "≥ 50% first-token heads at 30×"."""
        who = f"≥ {self.min_heads}" if self.min_heads is not None else f"≥ {100 * self.min_fraction:g}%"
        return f"{who} {self.head_class} heads at {self.threshold:g}×"


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


def describe_milestones(specs: Sequence[Milestone] = PAPER_MILESTONES) -> pd.DataFrame:
    """The milestones in words: milestone, reached when ("≥ 3 heads with induction selectivity ≥ 50×")."""
    return pd.DataFrame([(m.name, m.describe()) for m in specs], columns=["milestone", "reached when"])


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
        rows.append(gap_row(a, b))
    return pd.DataFrame(rows)


def gap_row(a: dict, b: dict) -> dict:
    """One row of `milestone_gap` from two rows of `milestones` (as dicts): start `a`, end `b`."""
    ta, tb = float(a["tokens_b"]), float(b["tokens_b"])
    sa, sb = a.get("bound", "exact"), b.get("bound", "exact")
    ba, bb = float(a.get("bound_tokens_b", ta)), float(b.get("bound_tokens_b", tb))
    bound = _gap_bound(sa, sb)
    return {"panel": a["panel"], "start": a["milestone"], "end": b["milestone"], "start_revision": a["revision"],
            "end_revision": b["revision"], "start_tokens_b": ta, "end_tokens_b": tb,
            "token_ratio": tb / ta if ta > 0 else np.nan,
            "checkpoints": (b["revision_index"] - a["revision_index"])
            if pd.notna(a["revision"]) and pd.notna(b["revision"]) else np.nan,
            "start_bound": sa, "end_bound": sb, "bound": bound, "censored": bound != "exact",
            "bound_ratio": bb / ba if ba > 0 and bound != "none" else np.nan}


# --------------------------------------------------------------------------------------------- writing bounds
BOUND_SIGNS = {"exact": "", "upper": "≤ ", "lower": "≥ ", "none": "unbounded "}


def bound_text(value, bound: str = "exact", fmt: str | Callable[[float], str] = "{:.3g}", *,
               absent: str = "n/a") -> str:
    """A value with its bound: "21", "≥ 21", "≤ 20B"; `absent` for NaN / None or no bound ("none")."""
    if value is None or (isinstance(value, float) and not np.isfinite(value)) or bound == "none":
        return absent
    text = fmt(value) if callable(fmt) else fmt.format(value)
    return BOUND_SIGNS.get(str(bound), "") + text


def fmt_ratio(value: float) -> str:
    """A token ratio as the paper writes it: 3 significant digits rounded half up from the decimal value
    (419 / 20 = 20.95 -> "21×", 264 / 23 -> "11.5×"), "n/a" when missing."""
    if value is None or not np.isfinite(value):
        return "n/a"
    d = Decimal(repr(float(value)))
    q = d.quantize(Decimal(1).scaleb(d.adjusted() - 2), rounding=ROUND_HALF_UP) if d else d
    return f"{float(q):g}×"


def milestone_text(row, fmt: str | Callable[[float], str] = "{:g}B", *, never: str = "never reached") -> str:
    """When a milestone row (of `milestones` / `behaviour_milestones`) is reached, with its censoring: "23B",
    "≤ 20B" (at the first probed revision) or "> 3048B (never reached)"."""
    write = fmt if callable(fmt) else fmt.format
    bound = row.get("bound", "exact") if hasattr(row, "get") else "exact"
    if bound == "lower" or pd.isna(row["tokens_b"]):
        last = row.get("bound_tokens_b", np.nan) if hasattr(row, "get") else np.nan
        return (f"> {write(last)}" + (f" ({never})" if never else "")) if pd.notna(last) else never or "never"
    return ("≤ " if bound == "upper" else "") + write(row["tokens_b"])


def with_texts(table: pd.DataFrame, fmt: str | Callable[[float], str] = "{:g}B", *,
               never: str = "never reached") -> pd.DataFrame:
    """A milestone table (`milestones`, `behaviour_milestones`) with its values as prose: `reached`
    (milestone_text: "23B", "≤ 20B", "> 3.05T (never reached)"; never="" for "> 3.05T") and `window` ("10B → 23B";
    None where the table has no window)."""
    write = fmt if callable(fmt) else fmt.format
    if table.empty:  # e.g. Tiers.apply with no tier: the columns a page reads, no rows
        return table.reindex(columns=[*table.columns, *(c for c in MILESTONE_COLUMNS if c not in table.columns),
                                      "reached", "window"]).astype(object)
    out = table.assign(reached=[milestone_text(r, fmt, never=never) for _, r in table.iterrows()], window=None)
    if "window_from_tokens_b" in table.columns:
        out["window"] = [f"{write(a)} → {write(b)}" if pd.notna(a) and pd.notna(b) else None
                         for a, b in zip(table["window_from_tokens_b"], table["tokens_b_hi"])]
    return out


def reached_table(ms: pd.DataFrame, fmt: str | Callable[[float], str] = "{:g}B") -> pd.DataFrame:
    """One row per model (and tier, when the rows carry one), one column per milestone (PAPER_MILESTONES order
    first): when it is reached, as prose with its bound (`with_texts`: "23B", "≤ 20B", "> 3.05T" never reached)."""
    keys = [c for c in ("tier", "panel") if c in ms.columns]
    if ms.empty:
        return pd.DataFrame(columns=keys)
    wide = with_texts(ms, fmt, never="").pivot_table(index=keys, columns="milestone", values="reached",
                                                     aggfunc="first", sort=False)
    names = [m.name for m in PAPER_MILESTONES if m.name in wide.columns]
    return wide[names + [c for c in wide.columns if c not in names]].reset_index().rename_axis(columns=None)


def gap_texts(ms: pd.DataFrame, *, start: str = "induction_3_heads", end: str = "bos_50pct",
              fmt: str | Callable[[float], str] = "{:g}B") -> pd.DataFrame:
    """`milestone_gap` with its values as prose: `gap` ("11.5×", "≥ 21×": fmt_ratio with its bound), `start` and
    `end` (when each milestone is reached: milestone_text)."""
    gaps = milestone_gap(ms, start=start, end=end)
    said = {(r["panel"], r["milestone"]): r["reached"] for _, r in with_texts(ms, fmt).iterrows()}
    return gaps.assign(gap=[bound_text(v, b, fmt_ratio) for v, b in zip(gaps["bound_ratio"], gaps["bound"])],
                       start=[said.get((p, start)) for p in gaps["panel"]],
                       end=[said.get((p, end)) for p in gaps["panel"]])
