"""The paper's findings F1-F4 and F6 and a threshold sensitivity, as pure functions over a developmental table
(F5, the participation-ratio lead, is `analysis.pr_lead`).

Input is the developmental table of schema.py (one row per panel, revision, layer, head) from any source: the
published files (`circuitdev.sources.published`), our probe store, or the toy panel. Outputs are tidy DataFrames, one row per
(panel, revision, ...), with revisions in token order and `token_fraction` = tokens_b / the panel's final tokens_b
(the paper's training-fraction denominators, method reference §6).

Defaults reproduce the paper exactly (method reference §2, §6):
- counting rule "per-class": a head counts for class c at threshold tau iff sel_c >= tau, WHATEVER its best class.
  This is what every developmental table and figure of the paper uses (method reference §2: a head whose best class is
  induction still counts as BOS-class when its first-token selectivity passes 30x). Use "best-class" (sel_c >= tau
  AND c is the head's argmax class) to ask how many heads are *primarily* of class c, as the repository README does.
- thresholds: 30x for BOS (first-token) counts, previous-token / self milestone counts; 50x for the induction
  circuit and induction milestones; 100x for previous-token formation in F5.

Intervals (issue 14): F1-F4 accept `boot=`, the bootstrap replicates of the table's records
(`sources.records.RecordSet.boot`), and then add `<column>_lo` / `<column>_hi` (95%, from the same resamples for
every head: `analysis.uncertainty`); without it (the published tier has no per-sequence data) their output is
exactly the paper's computation. `floor_verdict` states F1 per panel as holds / fails / within noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from circuitdev.analysis import uncertainty
from circuitdev.analysis.devtable import head_counts, head_mask, index, require
# the table basics a page uses beside the findings, importable from here too
from circuitdev.analysis.devtable import final_circuit, head_name, reuse_indexes, revisions  # noqa: F401
from circuitdev.errors import ConfigError, DataError
from circuitdev.measure.classify import CountingRule
from circuitdev.schema import (BOS_THRESHOLD, CLASS_THRESHOLD, INDUCTION_THRESHOLD, PREV_TOKEN_THRESHOLD, HeadClass, check_head_class,
                               sel_column)


BOS: HeadClass = "first-token"
_EPS = 1e-9  # slack for ">=" on fractions such as 2/3


# ----------------------------------------------------------------------------------------------------- F1 per layer


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


# ------------------------------------------------------------------------------------------------- F2 BOS fraction


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
        reached = np.flatnonzero(v >= saturation_share * v[-1] - _EPS) if v[-1] > 0 else np.array([], int)
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


# --------------------------------------------------------------------------------------------------- F3 milestones


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
                    n / ix.cols["n_heads"] >= spec.min_fraction - _EPS)
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


# ------------------------------------------------------------------------------------------------ F4 circuit recall


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
            hit = idx[value[idx] >= level - _EPS][:1]
            first = recall.iloc[hit[0]] if len(hit) else None
            rows.append({"panel": panel, "level": level, "level_pct": round(100 * level),
                         "revision": first["revision"] if first is not None else None,
                         "revision_index": int(first["revision_index"]) if first is not None else None,
                         "tokens_b": float(first["tokens_b"]) if first is not None else np.nan,
                         "token_fraction": float(first["token_fraction"]) if first is not None else np.nan})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------- F6 the noise floor

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
    max_min, max_max, max_ratio, max_stable, k_above_min, k_above_max, reason. With no null data (None / empty),
    each of `panels` gets status "no data" and NaN values, never an exception."""
    columns = ["panel", "status", "n_revisions", "p99_min", "p99_max", "p99_ratio", "p99_stable", "max_min",
               "max_max", "max_ratio", "max_stable", "k_above_min", "k_above_max", "reason"]
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
                     "k_above_max": int(g["k_above"].max()), "reason": ""})
    for p in panels:
        if p not in set(pd.unique(nulls["panel"])):
            rows.append({"panel": p, "status": "no data", "n_revisions": 0,
                         "reason": "no null-selectivity draws for this panel (run the null calibration)"})
    return pd.DataFrame(rows, columns=columns)


# ------------------------------------------------------------------------------------------ threshold sensitivity

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


def transition_range(shapes: pd.DataFrame) -> pd.DataFrame:
    """Per model of a `shape_sensitivity` table (and tier, when the rows carry one): at how many thresholds the F2
    shape is a "transition", and the lowest and highest such threshold (NaN when never)."""
    keys = [c for c in ("tier", "panel") if c in shapes.columns]
    rows = []
    for key, g in shapes.groupby(keys, sort=False):
        hit = g.loc[g["shape"] == "transition", "threshold"]
        rows.append({**dict(zip(keys, key if isinstance(key, tuple) else (key,))), "transitions": len(hit),
                     "lowest": hit.min() if len(hit) else np.nan, "highest": hit.max() if len(hit) else np.nan})
    return pd.DataFrame(rows, columns=[*keys, "transitions", "lowest", "highest"])


# ------------------------------------------------------------------------------------- per-revision metrics, seeds


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
            out["fraction"] >= spec.min_fraction - _EPS
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


SEED_SUFFIX = "-s"  # a toy seed replica's panel: <panel>-s<seed> (`circuitdev toy train --seeds`); seed 0 = <panel>


def seed_of(panel: str) -> tuple[str, int]:
    """(base panel, seed) of a panel name: "toy-pythia-s2" -> ("toy-pythia", 2), "toy-pythia" -> ("toy-pythia", 0)."""
    import re

    m = re.match(rf"^(?P<base>.+){re.escape(SEED_SUFFIX)}(?P<seed>\d+)$", panel)
    return (m["base"], int(m["seed"])) if m else (panel, 0)


def seed_spread(values: pd.DataFrame, column: str, *, fmt: str = "{:g}") -> pd.DataFrame:
    """Across the seed replicas of each panel, the spread of `column` at each panel's final revision (`values`:
    one row per (panel, revision) in token order, e.g. bos_fraction or head_counts). One row per base panel that
    has at least two seeds: panel, seeds, values ("s<seed>: value" list, each value in `fmt`), min, max, spread
    (max - min)."""
    require(values, ["panel", column], "seed_spread", allow_empty=True)
    final = values.groupby("panel", sort=False).tail(1)
    rows = {}
    for panel, value in zip(final["panel"], final[column]):
        base, seed = seed_of(panel)
        rows.setdefault(base, []).append((seed, float(value)))
    out = [{"panel": base, "seeds": len(v), "values": ", ".join(f"s{s}: {fmt.format(x)}" for s, x in sorted(v)),
            "min": min(x for _, x in v), "max": max(x for _, x in v),
            "spread": max(x for _, x in v) - min(x for _, x in v)} for base, v in rows.items() if len(v) > 1]
    return pd.DataFrame(out, columns=["panel", "seeds", "values", "min", "max", "spread"])


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
