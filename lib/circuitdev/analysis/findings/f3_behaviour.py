"""F3 beside behaviour (issue 23 item 4): the first revision at which a behavioural measure of the records crosses a
stated bar -- top-1 accuracy at the query, the in-context-learning score, the top-1 lost when the final circuit is
ablated -- with the rules, censoring columns and windows of `f3_milestones.milestones`, and the order of the
behavioural and attention milestones per model in words (`milestone_order`). Pure functions over the revision table
(`sources.revision_table.load_revision_table`) and the behaviour replicates (`RecordSet.behaviour_boot`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, Sequence

import numpy as np
import pandas as pd

from circuitdev.analysis import uncertainty
from circuitdev.analysis.devtable import require
from circuitdev.analysis.findings.basics import EPS
from circuitdev.analysis.findings.f3_milestones import (MILESTONE_COLUMNS, first_hit_row, milestone_windows, milestone,
                                                        milestone_text)
from circuitdev.errors import ConfigError

__all__ = ["BehaviourMilestone", "BEHAVIOUR_MILESTONES", "behaviour_milestones", "behaviour_specs", "milestone_order"]

BehaviourMeasure = Literal["top1", "icl_score", "top1_drop", "excess_drop_lo"]
_MEASURES: dict[str, tuple[str, Callable[[float], str]]] = {
    "top1": ("top-1 accuracy at the query (second A → B)", lambda v: f"{100 * v:g}%"),
    "icl_score": ("repeat (copy) score (loss on a random span's first occurrence minus on its repeat)",
                  lambda v: f"{v:g} nat" + ("s" if v != 1 else "")),
    "top1_drop": ("top-1 lost when the final induction circuit is zero-ablated", lambda v: f"{100 * v:g} pp"),
    # "necessary": the circuit's drop beyond random groups of as many heads (sources.ablate's excess_drop) -- the
    # lower end of its 95% interval above the level (0: the interval lies above zero)
    "excess_drop_lo": ("lower end of the 95% interval of the top-1 lost to the final circuit's ablation beyond the "
                       "random groups' loss", lambda v: f"{100 * v:g} pp"),
}
_STRICT = {"excess_drop_lo"}  # reached when the measure exceeds the level (an interval above 0), not when it equals


_LABELS = {"top1": "top-1", "icl_score": "repeat (copy) score", "top1_drop": "circuit ablation costs",
           "excess_drop_lo": "circuit necessary: its excess drop's interval"}


@dataclass(frozen=True)
class BehaviourMilestone:
    name: str  # column-safe id, e.g. "top1_25pct"
    measure: BehaviourMeasure  # a column of the revision table (sources.revision_table.load_revision_table)
    level: float  # reached when measure >= level (> for excess_drop_lo; fractions: 0.25 = 25%, 25 pp)

    def __post_init__(self) -> None:
        if self.measure not in _MEASURES:
            raise ConfigError(f"behaviour milestone {self.name!r}: measure must be one of {', '.join(_MEASURES)}, "
                              f"got {self.measure!r}")

    def describe(self) -> str:
        """In words: "top-1 accuracy at the query (second A → B) ≥ 25%"."""
        words, write = _MEASURES[self.measure]
        return f"{words} {'>' if self.measure in _STRICT else '≥'} {write(self.level)}"

    def label(self) -> str:
        """In a few words: "top-1 ≥ 25%", "repeat (copy) score ≥ 1 nat", "circuit ablation costs ≥ 10 pp"."""
        return f"{_LABELS[self.measure]} {'>' if self.measure in _STRICT else '≥'} " \
            f"{_MEASURES[self.measure][1](self.level)}"


# Default behavioural milestones: top-1 crossing a quarter and a half, the repeat (copy) score 1 and 3 nats, ablating the
# circuit costing 10 / 25 points of top-1 (against no ablation), and the circuit becoming necessary (its drop beyond
# random groups' lies above 0: issue 29 item 5).
BEHAVIOUR_MILESTONES: tuple[BehaviourMilestone, ...] = (
    BehaviourMilestone("top1_25pct", "top1", 0.25), BehaviourMilestone("top1_50pct", "top1", 0.50),
    BehaviourMilestone("icl_1nat", "icl_score", 1.0), BehaviourMilestone("icl_3nats", "icl_score", 3.0),
    BehaviourMilestone("drop_10pp", "top1_drop", 0.10), BehaviourMilestone("drop_25pp", "top1_drop", 0.25),
    BehaviourMilestone("necessary", "excess_drop_lo", 0.0),
)


def _hits(values: np.ndarray, level: float, sustained: bool, strict: bool = False) -> np.ndarray:
    filled = np.nan_to_num(values, nan=-np.inf)
    ok = filled > level + EPS if strict else filled >= level - EPS
    return np.logical_and.accumulate(ok[..., ::-1], axis=-1)[..., ::-1] if sustained else ok


def behaviour_milestones(revisions: pd.DataFrame, *, specs: Sequence[BehaviourMilestone] = BEHAVIOUR_MILESTONES,
                         sustained: bool = False, boot: pd.DataFrame | None = None) -> pd.DataFrame:
    """F3 beside behaviour: the first revision at which each behavioural measure reaches its level, with the same
    rules as `milestones` (first hit, or `sustained`; censoring columns; windows).

    `revisions`: one row per revision (`sources.revision_table.load_revision_table`, any panels): panel, revision, tokens_b
    and the measures (top1, icl_score, top1_drop). A (panel, milestone) whose measure was never measured there
    (all NaN: an old record, no ablation over training) gives no row; revisions where it is NaN are left out of its
    milestone (its first and last revision, for the censoring, are the first and last it was measured at).
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
            measured = ~np.isnan(values) if values is not None else np.zeros(len(idx), bool)
            if not measured.any():
                continue
            values, here = values[measured], idx[measured]  # the revisions where it was measured
            strict = spec.measure in _STRICT
            ok = _hits(values, spec.level, sustained, strict)
            rows.append({**first_hit_row(panel, spec.name, here, ok, cols), "measure": spec.measure,
                         "level": spec.level})
            rep = reps.get(spec.measure)
            firsts = None if rep is None else uncertainty.first_reached(
                _hits(np.where(np.isnan(rep[:, measured]), values, rep[:, measured]), spec.level, sustained, strict))
            windows.append((here, ok, firsts))
    columns = ["panel", "milestone", "measure", "level", *MILESTONE_COLUMNS[2:]]
    out = pd.DataFrame(rows, columns=columns)
    return out if boot is None else pd.concat([out, milestone_windows(windows, cols)], axis=1)


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


def behaviour_specs(top1: Sequence[float] = (0.25, 0.5), icl: Sequence[float] = (1.0, 3.0),
                    drop: Sequence[float] = (0.1, 0.25)) -> tuple[BehaviourMilestone, ...]:
    """Behavioural milestones at the given bars: top-1 shares, ICL scores (nats), top-1 lost to the ablation (shares
    of top-1), named top1_25pct, icl_1nat / icl_3nats (icl_0_5nats for 0.5), drop_10pp."""
    return (*(BehaviourMilestone(f"top1_{100 * v:g}pct".replace(".", "_"), "top1", v) for v in top1),
            *(BehaviourMilestone(f"icl_{v:g}nat{'' if v == 1 else 's'}".replace(".", "_"), "icl_score", v)
              for v in icl),
            *(BehaviourMilestone(f"drop_{100 * v:g}pp".replace(".", "_"), "top1_drop", v) for v in drop))


def _before(a: dict, b: dict) -> str:
    """How milestone row `a` stands to `b` in training: "before", "after", "at the same revision as", or "?"
    where censoring leaves it open (both never reached, or both at the first probe)."""
    if a["bound"] == "lower" and b["bound"] == "lower":
        return "?"
    if a["bound"] == "lower" or b["bound"] == "lower":
        return "after" if a["bound"] == "lower" else "before"
    ta, tb = a["bound_tokens_b"], b["bound_tokens_b"]
    if ta == tb:
        return "?" if "upper" in (a["bound"], b["bound"]) else "at the same revision as"
    return "before" if ta < tb else "after"


def milestone_order(attention: pd.DataFrame, behaviour: pd.DataFrame, *, names: Sequence[str],
                    specs: Sequence[BehaviourMilestone] = BEHAVIOUR_MILESTONES,
                    fmt: str | Callable[[float], str] = "{:g}B") -> pd.DataFrame:
    """Per model of `behaviour` (and tier, when the rows carry one): its behavioural milestones and the attention
    milestones `names` (of `attention`, findings.milestones) in token order, as one sentence (`order`: "ICL score ≥ 1
    nat at 563k; then ≥ 3 heads with induction selectivity ≥ 50× at 1.53M; ..."); `summary`, the first top-1 and
    ICL milestones against the first of `names` ("ICL score ≥ 1 nat at 563k and top-1 ≥ 25% at 1.02M, both before
    the induction milestone at 1.53M; the circuit becomes necessary (...) at 666k; zeroing it costs top-1 (...) at
    600k"); and `first_drop`, the smallest ablation bar and when it is first crossed
    ("not measured" without an ablation over training)."""
    keys = [c for c in ("tier", "panel") if c in behaviour.columns]
    words = {**{s.name: s.label() for s in specs}, **{n: milestone(n).describe() for n in names}}
    rows = []
    for key, g in (behaviour.groupby(keys, sort=False) if len(behaviour) else []):
        key = key if isinstance(key, tuple) else (key,)
        mine = attention
        for k, v in zip(keys, key):
            mine = mine[mine[k] == v] if k in mine.columns else mine
        events = pd.concat([mine[mine["milestone"].isin(list(names))], g], ignore_index=True)
        events = events.sort_values("bound_tokens_b", kind="stable")
        drop = g[g["measure"] == "top1_drop"].sort_values("level")
        rows.append({**dict(zip(keys, key)), "order": "; then ".join(
            f"{words.get(r['milestone'], r['milestone'])} at {milestone_text(r, fmt)}" for _, r in events.iterrows()),
            "summary": _summary(mine, g, names[0], words, fmt) if len(names) else None,
            "first_drop": f"{words[drop['milestone'].iloc[0]]} at {milestone_text(drop.iloc[0], fmt)}" if len(drop)
            else "not measured (no ablation over training)"})
    return pd.DataFrame(rows, columns=[*keys, "order", "summary", "first_drop"])


def _summary(attention: pd.DataFrame, behaviour: pd.DataFrame, name: str, words: dict, fmt) -> str | None:
    mark = attention[attention["milestone"] == name]
    if mark.empty:
        return None
    ref = mark.iloc[0]
    firsts = [g.sort_values("level").iloc[0] for m, g in behaviour.groupby("measure", sort=False)
              if m in ("icl_score", "top1")]
    if not firsts:
        return None
    said = [f"{words.get(r['milestone'], r['milestone'])} at {milestone_text(r, fmt)}" for r in firsts]
    ways = {_before(r, ref) for r in firsts}
    how = (("both " if len(firsts) > 1 else "") + ways.pop()) if len(ways) == 1 else \
        " / ".join(_before(r, ref) for r in firsts) + " respectively,"
    drop = behaviour[behaviour["measure"] == "top1_drop"].sort_values("level")
    necessary = behaviour[behaviour["measure"] == "excess_drop_lo"]
    need = (f"; the circuit becomes necessary (its top-1 drop beyond random groups' lies above 0) at "
            f"{milestone_text(necessary.iloc[0], fmt)}" if len(necessary) else "") + \
        (f"; zeroing it costs top-1 ({words.get(drop['milestone'].iloc[0])}) at {milestone_text(drop.iloc[0], fmt)}"
         if len(drop) else "")
    return f"{' and '.join(said)}, {how} the induction milestone at {milestone_text(ref, fmt)}{need}"
