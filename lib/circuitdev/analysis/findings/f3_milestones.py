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

import math
from dataclasses import dataclass, replace
from decimal import ROUND_HALF_UP, Decimal
from typing import Callable, Literal, Sequence

import numpy as np
import pandas as pd

from circuitdev.analysis import uncertainty
from circuitdev.analysis.devtable import head_mask, index
from circuitdev.analysis.findings.basics import BOS, EPS
from circuitdev.analysis.findings.claim import (CLASS_VARIED, MILESTONE_RULES, RobustClaim, claim_row, claimed,
                                                matches, ordinal, ratio_text, split_rule, tokens_text)
from circuitdev.analysis.units import fmt_tokens_b
from circuitdev.errors import ConfigError
from circuitdev.measure.classify import CountingRule
from circuitdev.schema import (BOS_THRESHOLD, CLASS_THRESHOLD, INDUCTION_THRESHOLD, PREV_TOKEN_THRESHOLD, HeadClass,
                               check_head_class, head_name, parse_head, sel_column)

__all__ = ["first_hit_bound", "Milestone", "PAPER_MILESTONES", "describe_milestones", "milestone",
           "MILESTONE_COLUMNS", "milestones",
           "milestone_gap", "bound_text", "fmt_ratio", "milestone_text", "with_texts", "reached_table", "gap_texts",
           "milestone_margin"]

Bound = Literal["exact", "upper", "lower", "none"]  # how a reported value relates to the true one (module docstring)


@dataclass(frozen=True)
class Milestone:
    name: str  # column-safe id, e.g. "bos_50pct"
    head_class: HeadClass
    threshold: float  # selectivity ratio tau of the per-class count n_c(tau)
    min_heads: int | None = None  # reached when n_c(tau) >= min_heads ...
    min_fraction: float | None = None  # ... or when n_c(tau) / n_heads >= min_fraction
    column: str | None = None  # count another score of the class than its selectivity column (the toy's
    # sel_first_token_allq: first-token selectivity over all queries), per head: column >= threshold

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
    return m if threshold is None else replace(m, threshold=float(threshold))


def milestone_mask(dev: pd.DataFrame, spec: Milestone, *, rule: CountingRule = "per-class") -> np.ndarray:
    """Per row of `dev`, whether the head counts toward the milestone: its class at the bar under the counting rule,
    or, for a spec with its own `column`, that column >= the bar (False where the table lacks it)."""
    if spec.column is None:
        return head_mask(dev, spec.head_class, threshold=spec.threshold, rule=rule)
    if spec.column not in dev.columns:
        return np.zeros(len(dev), dtype=bool)
    return np.nan_to_num(dev[spec.column].to_numpy(dtype=float), nan=-np.inf) >= spec.threshold


def _milestone_hits(dev: pd.DataFrame, specs: Sequence[Milestone], rule: CountingRule, sustained: bool):
    """Per panel and milestone, whether it holds at each of the panel's revisions (token order)."""
    ix = index(dev)
    hits = []
    for spec in specs:
        n = ix.count(milestone_mask(dev, spec, rule=rule))
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


def first_hit_bound(first_index, first_tokens: float) -> Bound:
    """The one censoring rule of a first hit (module docstring): the index of the first revision reaching it among
    a panel's revisions in token order (None / NaN: never) and the tokens of the panel's first revision -> "upper"
    at the first probed revision after initialisation, "lower" never reached, else "exact" (reached at
    initialisation, step0, is exact: nothing came before it)."""
    if first_index is None or pd.isna(first_index):
        return "lower"
    return "upper" if int(first_index) == 0 and first_tokens > 0 else "exact"


def first_hit_row(panel: str, name: str, idx: np.ndarray, ok: np.ndarray, cols: dict) -> dict:
    """The first revision of `idx` (token order) where `ok` holds, with its censoring (module docstring)."""
    hit = idx[ok]
    i = int(hit[0]) if len(hit) else None
    tokens = cols["tokens_b"]
    bound = first_hit_bound(None if i is None else i - idx[0], tokens[idx[0]])
    return {"panel": panel, "milestone": name, "revision": cols["revision"][i] if i is not None else None,
            "revision_index": int(cols["revision_index"][i]) if i is not None else None,
            "tokens_b": float(tokens[i]) if i is not None else np.nan,
            "token_fraction": float(cols["token_fraction"][i]) if i is not None else np.nan,
            "bound": bound, "censored": bound != "exact",
            "bound_tokens_b": float(tokens[i if i is not None else idx[-1]])}


def milestone_windows(rows: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]], cols: dict) -> pd.DataFrame:
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
    out = pd.DataFrame([first_hit_row(panel, spec.name, idx, ok, ix.cols) for panel, idx, spec, ok in hits],
                       columns=MILESTONE_COLUMNS)
    if boot is None:
        return out
    reps = uncertainty.Replicates.align(dev, boot)
    firsts = np.stack([[uncertainty.first_reached(ok) for *_, ok in _milestone_hits(frame, specs, rule, sustained)]
                       for frame in reps.frames()])  # (B, panels x milestones)
    window = milestone_windows([(idx, ok, firsts[:, k] if panel in reps.panels else None)
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


# ------------------------------------------------------------------ what a milestone hangs on (issue 21)
# A count milestone "n_c(tau) >= k" holds at a revision exactly when the k-th strongest head of class c there reads
# at least tau, so the whole milestone is a function of one number per revision, `kth_strongest`: it is first reached
# at revision r for every bar in (max of the k-th values before r, the k-th value at r]. `milestone_margin` gives that
# head and interval for each panel. First-hit milestones only: the paper's rule.
def _k(spec: Milestone, n_heads: int) -> int:
    return spec.min_heads if spec.min_heads is not None else max(1, math.ceil(spec.min_fraction * n_heads - EPS))


def kth_strongest(dev: pd.DataFrame, spec: Milestone, *, rule: CountingRule = "per-class") -> pd.DataFrame:
    """Per (panel, revision): the head whose selectivity is the k-th largest of the milestone's class (k = its
    min_heads, or its min_fraction of the heads rounded up; under best-class only heads whose best class it is):
    columns of findings.revisions + k, head, value (NaN / None when fewer than k heads qualify)."""
    ix = index(dev)
    col = sel_column(spec.head_class)
    eligible = head_mask(dev, spec.head_class, threshold=np.finfo(float).tiny, rule=rule)
    value = np.where(eligible, dev[col].to_numpy(dtype=float), -np.inf)
    order = np.lexsort((-value, ix.codes))  # by revision, strongest first
    starts = np.searchsorted(ix.codes[order], np.arange(len(ix.cols["revision"])))
    ends = np.r_[starts[1:], len(order)]
    ks, heads, values = [], [], []
    for a, b, n in zip(starts, ends, ix.cols["n_heads"]):
        k = _k(spec, int(n))
        i = order[a + k - 1] if b - a >= k and np.isfinite(value[order[a + k - 1]]) else None
        ks.append(k)
        heads.append(head_name(dev["layer"].iloc[i], dev["head"].iloc[i]) if i is not None else None)
        values.append(float(value[i]) if i is not None else np.nan)
    return ix.frame(k=ks, head=heads, value=values)


def milestone_margin(dev: pd.DataFrame, spec: Milestone, *, rule: CountingRule = "per-class",
                     gap: tuple[str, str] | None = None) -> pd.DataFrame:
    """Per panel, what a milestone hangs on at its bar: revision (where it is first reached: findings.milestones),
    head / head_value (the k-th strongest head there), margin = head_value / bar, and the bars for which it is first
    reached at that same revision, (stays_from, stays_to] (stays_from -inf at the first probed revision). Where it is
    never reached: stays_from = NaN and stays_to = the largest k-th value at any revision (it would be reached at
    or below that bar). next_value: the deciding head at the next revision (a head that falls back below the bar
    made the milestone by one look). `hangs_on`: all of it in one sentence, with where the milestone moves above
    stays_to and, given `gap` (the start and end milestone names of a gap, `spec` one of them), what the gap becomes
    there."""
    kth = kth_strongest(dev, spec, rule=rule)
    first = milestones(dev, specs=[spec], rule=rule).set_index("panel")
    rows = []
    for panel, g in kth.groupby("panel", sort=False):
        rev = first.loc[panel, "revision"]
        v = g["value"].to_numpy(dtype=float)
        if pd.isna(rev):
            j = int(np.nanargmax(np.nan_to_num(v, nan=-np.inf))) if np.isfinite(v).any() else None
            rows.append({"panel": panel, "k": int(g["k"].iloc[0]), "revision": None, "tokens_b": np.nan,
                         "bound": "lower", "head": g["head"].iloc[j] if j is not None else None, "head_value": np.nan,
                         "stays_from": np.nan, "stays_to": v[j] if j is not None else np.nan})
            continue
        i = int(np.flatnonzero(g["revision"].to_numpy() == rev)[0])
        before = np.nan_to_num(v[:i], nan=-np.inf)
        after = _head_value(dev, panel, g["revision"].iloc[i + 1], g["head"].iloc[i], spec.head_class) \
            if i + 1 < len(g) else np.nan
        rows.append({"panel": panel, "k": int(g["k"].iloc[i]), "revision": rev,
                     "tokens_b": float(g["tokens_b"].iloc[i]), "bound": first.loc[panel, "bound"],
                     "head": g["head"].iloc[i], "head_value": v[i],
                     "stays_from": float(before.max()) if i > 0 else -np.inf, "stays_to": v[i], "next_value": after})
    out = pd.DataFrame(rows, columns=["panel", "k", "revision", "tokens_b", "bound", "head", "head_value",
                                      "stays_from", "stays_to", "next_value"])
    out = out.assign(bar=spec.threshold, margin=out["head_value"] / spec.threshold)
    return out.assign(hangs_on=[_milestone_text(spec, m, m["k"], dev[dev["panel"] == m["panel"]], rule, gap)
                                for m in out.to_dict("records")])


def _head_value(dev: pd.DataFrame, panel: str, revision: str, head: str, head_class: str) -> float:
    layer, h = parse_head(head)
    hit = dev.loc[(dev["panel"] == panel) & (dev["revision"] == revision) & (dev["layer"] == layer)
                  & (dev["head"] == h), sel_column(head_class)]
    return float(hit.iloc[0]) if len(hit) else np.nan


def _milestone_text(spec: Milestone, m: dict, k: int, dev: pd.DataFrame, rule: str,
                    gap: tuple[str, str] | None) -> str:
    """One milestone's margin in words; with `gap` (start, end milestone names, one of them `spec`), also what the
    gap becomes where the milestone moves."""
    what = f"the milestone {spec.short()}"
    if pd.isna(m["revision"]):
        reach = f" (it would be at bars up to {m['stays_to']:.3g}×)" if np.isfinite(m["stays_to"]) else ""
        return f"{what} is never reached{reach}"
    where = f"≤ {tokens_text(m['tokens_b'])} (the first probed revision)" if m["bound"] == "upper" \
        else tokens_text(m["tokens_b"])
    low = "-∞" if not np.isfinite(m["stays_from"]) else f"{m['stays_from']:.3g}×"
    back = f", falling back to {m['next_value']:.3g}× at the next revision" \
        if m.get("next_value", np.nan) < spec.threshold else ""
    text = (f"{what} is first reached at {where} because {m['head']}, the {ordinal(k)} {spec.head_class} head "
            f"there, reads {m['head_value']:.3g}× ({m['head_value'] / spec.threshold:.2f}× the bar{back}; the same "
            f"revision for bars in ({low}, {m['stays_to']:.3g}×])")
    moved = Milestone(spec.name, spec.head_class, float(np.nextafter(m["stays_to"], np.inf)), spec.min_heads,
                      spec.min_fraction)
    after = milestones(dev, specs=[moved], rule=rule)
    text += f"; above {m['stays_to']:.3g}× it " + (f"moves to {tokens_text(after['tokens_b'].iloc[0])}" if
                                                     pd.notna(after["revision"].iloc[0]) else "is never reached")
    if gap is not None:
        other = milestones(dev, specs=[milestone(next(n for n in gap if n != spec.name))], rule=rule)
        g = milestone_gap(pd.concat([after, other], ignore_index=True), start=gap[0], end=gap[1]).iloc[0]
        if np.isfinite(g["bound_ratio"]):
            text += f" and the gap becomes {BOUND_SIGNS.get(g['bound'], '')}{ratio_text(g['bound_ratio'])}"
    return text


# ------------------------------------------------------------------------------- F3 as two robustness claims
def _gap_value(gap) -> tuple[float, str]:
    """The gap's value (its bound where a milestone is never reached) and bound."""
    value = gap["token_ratio"] if np.isfinite(gap["token_ratio"]) else gap["bound_ratio"]
    return value, gap["bound"]


def _gap_over_bars(dev: pd.DataFrame, taus: Sequence[float], rule: str, *, start: str = "induction_3_heads",
                   end: str = "bos_50pct") -> list[dict]:
    counting, sustained = split_rule(rule)
    a, b = (next(m for m in PAPER_MILESTONES if m.name == n) for n in (start, end))
    specs = [Milestone("start@paper", a.head_class, a.threshold, a.min_heads, a.min_fraction),
             Milestone("end@paper", b.head_class, b.threshold, b.min_heads, b.min_fraction)]
    for tau in taus:
        specs += [Milestone(f"start@{tau:g}", a.head_class, tau, a.min_heads, a.min_fraction),
                  Milestone(f"end@{tau:g}", b.head_class, tau, b.min_heads, b.min_fraction)]
    ms = {(r["panel"], r["milestone"]): r for r in
          milestones(dev, specs=specs, rule=counting, sustained=sustained).to_dict("records")}
    panels = list(dict.fromkeys(p for p, _ in ms))
    rows = []
    for varied, paper_tau, moving in ((CLASS_VARIED[a.head_class], a.threshold, "start"),
                                      (CLASS_VARIED[b.head_class], b.threshold, "end")):
        for tau in taus:
            s, e = (f"start@{tau:g}", "end@paper") if moving == "start" else ("start@paper", f"end@{tau:g}")
            for gap in (gap_row(ms[p, s], ms[p, e]) for p in panels):  # = milestone_gap(ms, start=s, end=e)
                value, bound = _gap_value(gap)
                rows.append(claim_row(gap["panel"], f"{start} → {end}", varied, tau, rule, value,
                                      bool(value > 1) if np.isfinite(value) else False, bound, paper_tau,
                                      MILESTONE_RULES[0]))
    return rows


def _milestones_over_bars(dev: pd.DataFrame, taus: Sequence[float], rule: str) -> list[dict]:
    counting, sustained = split_rule(rule)
    dev, claims = claimed(dev, "F3.")
    if dev.empty:
        return []
    rows = []
    for base in PAPER_MILESTONES:
        specs = [Milestone(f"{base.name}@{tau:g}", base.head_class, tau, base.min_heads, base.min_fraction)
                 for tau in taus]
        for m in milestones(dev, specs=specs, rule=counting, sustained=sustained).to_dict("records"):
            claim = claims.get((m["panel"], base.name))
            if claim is None:
                continue
            tau = float(m["milestone"].split("@")[1])
            never = pd.isna(m["revision"])
            rows.append(claim_row(m["panel"], base.name, CLASS_VARIED[base.head_class], tau, rule,
                                  m["bound_tokens_b"], matches(claim, m["tokens_b"], never), m["bound"],
                                  base.threshold, MILESTONE_RULES[0]))
    return rows


def _gap_rows(dev: pd.DataFrame, rule: CountingRule, start: str = "induction_3_heads",
              end: str = "bos_50pct") -> list[dict]:
    """F3's gap per panel hangs on the more fragile of its two milestones (the smaller margin to its bar); a censored
    milestone makes the gap a bound, said too."""
    rows = []
    both = {n: milestone_margin(dev, milestone(n), rule=rule, gap=(start, end)).set_index("panel")
            for n in (start, end)}
    for panel in both[start].index:
        margins = {n: both[n].loc[panel, "margin"] for n in (start, end)}
        name = min(margins, key=lambda n: margins[n] if np.isfinite(margins[n]) else np.inf)
        m, spec = both[name].loc[panel], milestone(name)
        censored = [milestone(n).short() for n in (start, end) if both[n].loc[panel, "bound"] != "exact"]
        note = f"; {' and '.join(censored)} censored (at the first probed revision or never reached): the gap is a " \
            "bound" if censored else ""
        rows.append({"panel": panel, "item": name, "varied": CLASS_VARIED[spec.head_class], "bar": spec.threshold,
                     **{c: m[c] for c in ("head", "revision", "tokens_b", "head_value", "margin", "stays_from",
                                          "stays_to")}, "text": m["hangs_on"] + note})
    return rows


def _milestones_hangs_on(dev: pd.DataFrame, rule: CountingRule) -> list[dict]:
    """Each paper milestone's deciding head and margin (`milestone_margin`)."""
    rows = []
    for spec in PAPER_MILESTONES:
        for m in milestone_margin(dev, spec, rule=rule).to_dict("records"):
            rows.append({**{c: m[c] for c in ("panel", "head", "revision", "tokens_b", "head_value", "margin",
                                              "stays_from", "stays_to")},
                         "item": spec.name, "varied": CLASS_VARIED[spec.head_class], "bar": spec.threshold,
                         "text": m["hangs_on"]})
    return rows


GAP_CLAIM = RobustClaim(
    "F3.gap", "F3", "the induction milestone (≥ 3 heads) comes before the sink milestone (BOS ≥ 50%)",
    "gap as a token ratio (sink milestone / induction milestone)", MILESTONE_RULES, _gap_over_bars, _gap_rows,
    unit=lambda v: f"{v:.3g}×", axis=("gap: sink milestone / induction milestone (tokens, ×)", "log", 1.0))
MILESTONES_CLAIM = RobustClaim(
    "F3.milestones", "F3", "each milestone is first reached at the revision the paper gives",
    "tokens (B) of the first revision reaching the milestone", MILESTONE_RULES, _milestones_over_bars,
    _milestones_hangs_on, unit=fmt_tokens_b, axis=("first revision reaching it (tokens, B)", "log", None))
