"""What a claim hangs on at the paper's bar (issue 21): the head that decides it, its value, its margin to the bar
(value / bar) and the bars over which that head keeps deciding it the same way.

A driver: each claim of `robustness.ROBUSTNESS_CLAIMS` says what it hangs on itself (`RobustClaim.hangs_on`, in
its finding's module: F1 the strongest floor head; F2 the largest jump's share against the transition share; F3 the
deciding head of each milestone of the gap, `f3_milestones.milestone_margin`; F4 the deciding circuit head of each
recall level; F5 the median lead and how many of its heads are censored). First-hit milestones only: the paper's
rule.
"""

from __future__ import annotations

import pandas as pd

from circuitdev.analysis.findings.claim import HANGS_ON_COLUMNS
from circuitdev.analysis.findings.robustness import robust_claim
from circuitdev.measure.classify import CountingRule

__all__ = ["hangs_on"]



def hangs_on(dev: pd.DataFrame, claim: str, *, rule: CountingRule = "per-class") -> pd.DataFrame:
    """What `claim` (an id of ROBUSTNESS_CLAIMS) hangs on at the paper's bar, per panel (and item): HANGS_ON_COLUMNS,
    `text` a plain sentence ("the milestone ... is first reached at 23B because L2H7, the 3rd-strongest induction
    head there, reads 54.8× (1.10× the bar); it stays there for bars above 36.9× up to 54.8×; ...")."""
    rows = robust_claim(claim).hangs_on(dev, rule)
    out = pd.DataFrame(rows).assign(claim=claim) if rows else pd.DataFrame(columns=HANGS_ON_COLUMNS)
    return out.reindex(columns=HANGS_ON_COLUMNS)
