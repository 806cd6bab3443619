"""How robust is each finding: every threshold-dependent claim of data/claims.yaml re-evaluated over one grid of
bars and over the rule variants the library has, as one tidy table (issue 21).

    table = robustness_table(dev)                    # every claim x panel x bar x rule; ROBUSTNESS_COLUMNS
    holds_ranges(table, "F3.gap", panel="olmo-1b-0724", varied="induction")   # [(5.0, 50.0)]: a SET of ranges
                                                      # (findings.robustness_reading: reading the table)
    hangs_on(dev, "F3.gap")                           # the deciding head, its value and its margin to the bar

The grid is ROBUSTNESS_THRESHOLDS (every 5x from 5x to 100x, then 150, 200, 300, 500, 1000x): the one place it is
defined. The claims (ROBUSTNESS_CLAIMS, each evaluated by the findings functions themselves, so that at the
paper's bar and rule a value is exactly the findings' value):

    F1.floor       no first-token head >= the bar in layers 0/1 at any revision   value: most such heads
    F2.shapes      each published family has the paper's shape (ramp / transition / ramp)  value: largest-jump share
    F3.gap         the induction milestone comes before the sink milestone       value: the gap's token ratio
    F3.milestones  each milestone is first reached where the paper says          value: its tokens (B)
    F4.recall      recall of the final circuit reaches 1/3, 2/3, 1 where the paper says   value: its tokens (B)
    F5.lead        the median PR lead over formation has the paper's sign (> 0; = 0 for prev-token)  value: median

Columns: claim, panel (a model, or "all" for the claims about every model), item (the milestone, recall level,
class or shape a row is about), varied (which bar moves: first_token, induction, previous_token, self), threshold,
rule (the counting rule, and for milestones first-hit / sustained), value, holds (the paper's statement at that bar
and rule), censored / bound (the value is a bound: an event already holds at the first probed revision or is never
reached; see findings.f3_milestones), paper_threshold, paper_rule (the row's bar / rule are the paper's).

Which claims apply where: F1, F2 (by family: pythia / olmo / olmoe in the panel name), F3.gap and F5 to any panel;
F3.milestones and F4.recall only to panels whose numbers data/claims.yaml states (the published models, and a
measured tier's probes of them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Literal, Sequence

import numpy as np
import pandas as pd

from circuitdev.analysis.devtable import reuse_indexes
from circuitdev.analysis.findings.basics import BOS
from circuitdev.analysis.findings.f1_floor import floor_check
from circuitdev.analysis.findings.f2_shapes import bos_fraction, trajectory_shape
from circuitdev.analysis.findings.f3_milestones import PAPER_MILESTONES, Milestone, gap_row, milestones
from circuitdev.analysis.findings.f4_convergence import circuit_recall, recall_milestones
from circuitdev.analysis.findings.f5_pr_lead import FORMATION_THRESHOLDS, pr_lead
from circuitdev.errors import ConfigError
from circuitdev.schema import BOS_THRESHOLD, INDUCTION_THRESHOLD

# The default grid of bars (x): every 5x from 5x to 100x, then 150, 200, 300, 500, 1000x. It holds the paper's
# 30x, 50x and 100x exactly.
ROBUSTNESS_THRESHOLDS: tuple[float, ...] = (*(float(t) for t in range(5, 101, 5)), 150.0, 200.0, 300.0, 500.0,
                                            1000.0)
Varied = Literal["first_token", "induction", "previous_token", "self"]
VARIED_CLASS: dict[str, str] = {"first_token": BOS, "induction": "induction", "previous_token": "previous-token",
                                "self": "self"}
CLASS_VARIED: dict[str, str] = {c: v for v, c in VARIED_CLASS.items()}
ROBUSTNESS_COLUMNS = ["claim", "panel", "item", "varied", "threshold", "rule", "value", "holds", "censored", "bound",
                      "paper_threshold", "paper_rule"]
COUNTING_RULES = ("per-class", "best-class")  # the paper's first
MILESTONE_RULES = tuple(f"{c} / {m}" for c in COUNTING_RULES for m in ("first-hit", "sustained"))
# F2's three shapes (the paper's words: a steady ramp in Pythia, a sudden transition in dense OLMo, an early gradual
# rise in OLMoE) as findings.trajectory_shape labels; a panel's family is read from its name.
PAPER_SHAPES: dict[str, str] = {"pythia": "ramp", "olmo": "transition", "olmoe": "ramp"}
ALL = "all"  # the panel of a row about every model at once


def family_of(panel: str) -> str | None:
    """pythia / olmo / olmoe from a panel name (olmoe before olmo), None when it names none."""
    name = panel.lower()
    return next((f for f in ("olmoe", "olmo", "pythia") if f in name), None)


def _censoring(first_index, n: int, first_tokens: float) -> str:
    """A first-hit index among n revisions as a bound: "upper" at the first probed revision after initialisation,
    "lower" never reached (None), else "exact"."""
    if first_index is None or pd.isna(first_index):
        return "lower"
    return "upper" if int(first_index) == 0 and first_tokens > 0 else "exact"


def _row(panel, item, varied, tau, rule, value, holds, bound, paper_tau, paper_rule) -> dict:
    return {"panel": panel, "item": item, "varied": varied, "threshold": float(tau), "rule": rule,
            "value": float(value) if value is not None else np.nan, "holds": bool(holds),
            "censored": bound != "exact", "bound": bound, "paper_threshold": float(paper_tau),
            "paper_rule": rule == paper_rule}


# --------------------------------------------------------------------------------------------- the evaluators
def _f1_floor(dev, taus, rule):
    rows = []
    for tau in taus:
        most = floor_check(dev, threshold=tau, rule=rule).groupby("panel", sort=False)["n_floor"].max()
        for panel, n in [*most.items(), (ALL, most.max())]:
            rows.append(_row(panel, "L0+L1", "first_token", tau, rule, n, n == 0, "exact", BOS_THRESHOLD,
                             "per-class"))
    return rows


def _f2_shapes(dev, taus, rule):
    rows = []
    for tau in taus:
        shape = trajectory_shape(bos_fraction(dev, threshold=tau, rule=rule))
        fams = {p: family_of(p) for p in shape["panel"]}
        got = []
        for r in shape.itertuples():
            if fams[r.panel] in PAPER_SHAPES:
                ok = r.shape == PAPER_SHAPES[fams[r.panel]]
                got.append((fams[r.panel], ok))
                rows.append(_row(r.panel, PAPER_SHAPES[fams[r.panel]], "first_token", tau, rule, r.jump_share, ok,
                                 "exact", BOS_THRESHOLD, "per-class"))
        if sorted(f for f, _ in got) == sorted(PAPER_SHAPES):  # one model of each family: the contrast itself
            rows.append(_row(ALL, "three shapes", "first_token", tau, rule, sum(ok for _, ok in got),
                             all(ok for _, ok in got), "exact", BOS_THRESHOLD, "per-class"))
    return rows


def _split(rule: str) -> tuple[str, bool]:
    counting, _, hit = rule.partition(" / ")
    return counting, hit == "sustained"


def _gap_value(gap) -> tuple[float, str]:
    """The gap's value (its bound where a milestone is never reached) and bound."""
    value = gap["token_ratio"] if np.isfinite(gap["token_ratio"]) else gap["bound_ratio"]
    return value, gap["bound"]


def _f3_gap(dev, taus, rule, *, start: str = "induction_3_heads", end: str = "bos_50pct"):
    counting, sustained = _split(rule)
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
                rows.append(_row(gap["panel"], f"{start} → {end}", varied, tau, rule, value,
                                 bool(value > 1) if np.isfinite(value) else False, bound, paper_tau,
                                 MILESTONE_RULES[0]))
    return rows


@lru_cache(maxsize=1)
def _claims() -> tuple:
    """data/claims.yaml, read once per process (the paper's numbers do not change while a build runs)."""
    from circuitdev.analysis.claims import load_claims

    return tuple(load_claims())


def _paper_claims(prefix: str) -> dict[tuple[str, str], object]:
    """{(panel, item): Claim} of the claims.yaml series whose id starts with `prefix` (item: the series key)."""
    out = {}
    for c in _claims():
        if c.id.startswith(prefix) and "@" in c.id and "panel" in c.params:
            out[c.params["panel"], str(c.id.split("@", 1)[1])] = c
    return out


def _claimed(dev: pd.DataFrame, prefix: str) -> tuple[pd.DataFrame, dict[tuple[str, str], object]]:
    """(the rows of `dev`'s panels that the claims starting with `prefix` speak of -- empty when none --, those
    claims: `_paper_claims(prefix)`)."""
    claims = _paper_claims(prefix)
    panels = [p for p in pd.unique(dev["panel"]) if any(k[0] == p for k in claims)]
    return dev[dev["panel"].isin(panels)], claims


def _matches(claim, value: float, never: bool) -> bool:
    from circuitdev.analysis.audit import compare
    from circuitdev.analysis.quantities import NEVER

    return compare(claim, NEVER if never else float(value))


def _f3_milestones(dev, taus, rule):
    counting, sustained = _split(rule)
    dev, claims = _claimed(dev, "F3.")
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
            rows.append(_row(m["panel"], base.name, CLASS_VARIED[base.head_class], tau, rule, m["bound_tokens_b"],
                             _matches(claim, m["tokens_b"], never), m["bound"], base.threshold, MILESTONE_RULES[0]))
    return rows


def _f4_recall(dev, taus, rule):
    dev, claims = _claimed(dev, "F4.recall.")
    if dev.empty:
        return []
    rows = []
    for tau in taus:
        recall = circuit_recall(dev, threshold=tau, rule=rule)
        first = recall.groupby("panel", sort=False).agg(n=("revision", "size"), t0=("tokens_b", "first"),
                                                      last=("tokens_b", "last"))
        for m in recall_milestones(recall).to_dict("records"):
            claim = claims.get((m["panel"], str(m["level_pct"])))
            if claim is None:
                continue
            f = first.loc[m["panel"]]
            bound = _censoring(m["revision_index"], int(f["n"]), float(f["t0"]))
            never = pd.isna(m["revision"])
            rows.append(_row(m["panel"], f"{m['level_pct']}%", "induction", tau, rule,
                             f["last"] if never else m["tokens_b"], _matches(claim, m["tokens_b"], never), bound,
                             INDUCTION_THRESHOLD, "per-class"))
    return rows


def _lead_statement(paper) -> Callable[[float], bool]:
    """The paper's F5 value ("1-2", "0", "2-4") as a statement about the median lead: > 0, or = 0 when it says 0."""
    low = float(re.split(r"\s*[-–]\s*", str(paper).strip())[0])
    return (lambda v: v > 0) if low > 0 else (lambda v: v == 0)


def _f5_lead(dev, taus, rule):
    if "pr" not in dev.columns or dev["pr"].isna().all():
        return []
    statements = {c.params["head_class"]: _lead_statement(c.paper) for c in _claims()
                  if c.id.startswith("F5.lead@")}
    first = dev.groupby("panel", sort=False)["tokens_b"].min()
    rows = []
    for head_class, holds in statements.items():
        for tau in taus:
            leads = pr_lead(dev, head_class=head_class, threshold=tau)
            for panel in pd.unique(dev["panel"]):
                g = leads[leads["panel"] == panel] if len(leads) else leads
                lead = pd.to_numeric(g["lead_checkpoints"], errors="coerce").astype(float) if len(g) else \
                    pd.Series(dtype=float)
                median = float(lead.median()) if lead.notna().any() else np.nan
                early = first.loc[panel] > 0
                f0 = bool(early and (g["formation_index"] == 0).fillna(False).any()) if len(g) else False
                e0 = bool(early and (g["elevation_index"] == 0).fillna(False).any()) if len(g) else False
                bound = "none" if f0 and e0 else "upper" if f0 else "lower" if e0 else "exact"
                rows.append(_row(panel, head_class, CLASS_VARIED[head_class], tau, rule, median,
                                 bool(np.isfinite(median) and holds(median)), bound,
                                 FORMATION_THRESHOLDS[head_class], "per-class"))
    return rows


@dataclass(frozen=True)
class RobustClaim:
    id: str  # "F3.gap"
    finding: str  # F1..F5
    statement: str  # the paper's statement the `holds` column tests, in words
    value: str  # what the `value` column is
    rules: tuple[str, ...]  # the rule variants; the first is the paper's
    evaluate: Callable[[pd.DataFrame, Sequence[float], str], list[dict]]  # (dev, bars, rule) -> rows


ROBUSTNESS_CLAIMS: dict[str, RobustClaim] = {c.id: c for c in (
    RobustClaim("F1.floor", "F1", "no head in layers 0/1 reaches the first-token bar at any revision",
                "most first-token heads in layers 0/1 at any revision", COUNTING_RULES, _f1_floor),
    RobustClaim("F2.shapes", "F2", "each model has the paper's shape (Pythia ramp, OLMo transition, OLMoE ramp)",
                "share of the total rise in the largest jump (\"all\": models with their paper shape)",
                COUNTING_RULES, _f2_shapes),
    RobustClaim("F3.gap", "F3", "the induction milestone (≥ 3 heads) comes before the sink milestone (BOS ≥ 50%)",
                "gap as a token ratio (sink milestone / induction milestone)", MILESTONE_RULES, _f3_gap),
    RobustClaim("F3.milestones", "F3", "each milestone is first reached at the revision the paper gives",
                "tokens (B) of the first revision reaching the milestone", MILESTONE_RULES, _f3_milestones),
    RobustClaim("F4.recall", "F4", "recall of the final circuit reaches each level at the revision the paper gives",
                "tokens (B) of the first revision reaching the level", COUNTING_RULES, _f4_recall),
    RobustClaim("F5.lead", "F5", "the median PR lead over formation has the paper's sign (positive; zero for "
                "previous-token heads)", "median lead (checkpoints) over the final circuit", ("per-class",), _f5_lead),
)}


def robust_claim(claim_id: str) -> RobustClaim:
    if claim_id not in ROBUSTNESS_CLAIMS:
        raise ConfigError(f"unknown robustness claim {claim_id!r}; known: {', '.join(ROBUSTNESS_CLAIMS)}")
    return ROBUSTNESS_CLAIMS[claim_id]


def robustness_table(dev: pd.DataFrame, *, claims: Sequence[str] | None = None,
                     thresholds: Sequence[float] = ROBUSTNESS_THRESHOLDS,
                     rules: Literal["all", "paper"] = "all") -> pd.DataFrame:
    """Every claim of `claims` (default: all of ROBUSTNESS_CLAIMS) on `dev` at every bar of `thresholds` and every
    rule variant (rules="paper": the paper's rule only, faster), one row per (claim, panel, item, varied, bar, rule):
    ROBUSTNESS_COLUMNS (module docstring). A claim that applies to no panel of `dev` gives no rows."""
    frames = []
    with reuse_indexes():
        for cid in claims or list(ROBUSTNESS_CLAIMS):
            c = robust_claim(cid)
            for rule in c.rules if rules == "all" else c.rules[:1]:
                rows = c.evaluate(dev, [float(t) for t in thresholds], rule)
                if rows:
                    frames.append(pd.DataFrame(rows).assign(claim=cid))
    if not frames:
        return pd.DataFrame(columns=ROBUSTNESS_COLUMNS)
    return pd.concat(frames, ignore_index=True)[ROBUSTNESS_COLUMNS]


# --------------------------------------------------------------------------------------------- reading it
