"""How robust is each finding: every threshold-dependent claim of data/claims.yaml re-evaluated over one grid of
bars and over the rule variants the library has, as one tidy table (issue 21).

    table = robustness_table(dev)                    # every claim x panel x bar x rule; ROBUSTNESS_COLUMNS
    holds_ranges(table, "F3.gap", panel="olmo-1b-0724", varied="induction")   # [(5.0, 50.0)]: a SET of ranges
                                                      # (findings.robustness_reading: reading the table)
    hangs_on(dev, "F3.gap")                           # the deciding head, its value and its margin to the bar

The grid is ROBUSTNESS_THRESHOLDS (every 5x from 5x to 100x, then 150, 200, 300, 500, 1000x; findings.claim): the
one place it is defined. Each claim is declared by its finding's own module (a `findings.claim.RobustClaim`: its
evaluation, what it hangs on, its unit and axis label) and registered here once, in ROBUSTNESS_CLAIMS; each is
evaluated by the findings functions themselves, so that at the paper's bar and rule a value is exactly the
findings' value. This module is a driver: it holds no per-claim knowledge.

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

from typing import Literal, Sequence

import pandas as pd

from circuitdev.analysis.devtable import reuse_indexes
from circuitdev.analysis.findings.claim import ROBUSTNESS_COLUMNS, ROBUSTNESS_THRESHOLDS, RobustClaim
from circuitdev.analysis.findings.f1_floor import FLOOR_CLAIM
from circuitdev.analysis.findings.f2_shapes import SHAPES_CLAIM
from circuitdev.analysis.findings.f3_milestones import GAP_CLAIM, MILESTONES_CLAIM
from circuitdev.analysis.findings.f4_convergence import RECALL_CLAIM
from circuitdev.analysis.findings.f5_control import LEAD_CLAIM
from circuitdev.errors import ConfigError

__all__ = ["ROBUSTNESS_CLAIMS", "robustness_table"]


# the one registration of the claims, in the order the book shows them
ROBUSTNESS_CLAIMS: dict[str, RobustClaim] = {c.id: c for c in (
    FLOOR_CLAIM, SHAPES_CLAIM, GAP_CLAIM, MILESTONES_CLAIM, RECALL_CLAIM, LEAD_CLAIM)}


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
