"""What a robustness claim is (issue 21, issue 28): `RobustClaim`, declared by each finding in its own module and
registered once in `findings.robustness`; the grid of bars, the rule variants and the row every claim evaluates to.

A claim carries everything the horizontal features need, so that they hold no per-claim knowledge:

    evaluate(dev, bars, rule)  -> rows (`claim_row`): the claim over the grid (findings.robustness_table)
    hangs_on(dev, rule)        -> rows (HANGS_ON_COLUMNS less `claim`): what it hangs on at the paper's bar
    unit(value)                -> its value in words ("3 heads", "2.1×", "6.29B", "1 checkpoints")
    axis                       -> how its value is drawn: (label, scale, reference line or None); all_label: the
                                  label of the "all" panel's value where it differs; kind: count / share / value

The paper's numbers a claim tests come from `analysis.claims` (`paper_claims`, `compare`): a finding never needs the
audit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, Sequence

import numpy as np
import pandas as pd

from circuitdev.analysis.claims import NEVER, Claim, compare, paper_claims
from circuitdev.analysis.findings.basics import BOS

__all__ = ["ROBUSTNESS_THRESHOLDS", "MILESTONE_RULES", "ALL"]

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
HANGS_ON_COLUMNS = ["claim", "panel", "item", "varied", "bar", "head", "revision", "tokens_b", "head_value", "margin",
                    "stays_from", "stays_to", "text"]
COUNTING_RULES = ("per-class", "best-class")  # the paper's first
MILESTONE_RULES = tuple(f"{c} / {m}" for c in COUNTING_RULES for m in ("first-hit", "sustained"))
ALL = "all"  # the panel of a row about every model at once

Rows = list[dict]


@dataclass(frozen=True)
class RobustClaim:
    id: str  # "F3.gap"
    finding: str  # F1..F5
    statement: str  # the paper's statement the `holds` column tests, in words
    value: str  # what the `value` column is
    rules: tuple[str, ...]  # the rule variants; the first is the paper's
    evaluate: Callable[[pd.DataFrame, Sequence[float], str], Rows]  # (dev, bars, rule) -> claim_row rows
    hangs_on: Callable[[pd.DataFrame, str], Rows]  # (dev, counting rule) -> HANGS_ON_COLUMNS rows (no `claim`)
    unit: Callable[[float], str]  # a finite value in its own unit, in words
    axis: tuple[str, str, float | None]  # (axis label, scale, reference line: the statement's own bar, if any)
    all_label: str | None = None  # the axis label of the "all" panel, where its value is another quantity (a count)
    # what the value is, for drawing it: heads or models (whole numbers from 0), a share (0 to 1; F2's largest-jump
    # share exceeds 1 where a trajectory falls back after its jump: drawn at 1), or any other value
    kind: Literal["count", "share", "value"] = "value"
    # the claim's null test where it has one: dev -> rows of claim, panel, item, p_value, min_p (verdicts.TEST_COLUMNS)
    null_tests: Callable[[pd.DataFrame], pd.DataFrame] | None = None

    def value_text(self, value: float) -> str | None:
        return self.unit(value) if np.isfinite(value) else None


def hangs_on_row(panel, item, varied, bar, head, revision, tokens_b, value, text, *, against: float | None = None,
                 stays_from: float = np.nan, stays_to: float = np.nan) -> dict:
    """One row of HANGS_ON_COLUMNS (less `claim`): the deciding head (or None) and its value, its margin = value /
    `against` (default: the bar), the bars between which the verdict would stay, and the sentence."""
    return {"panel": panel, "item": item, "varied": varied, "bar": bar, "head": head, "revision": revision,
            "tokens_b": tokens_b, "head_value": value, "margin": value / (bar if against is None else against),
            "stays_from": stays_from, "stays_to": stays_to, "text": text}


def claim_row(panel, item, varied, tau, rule, value, holds, bound, paper_tau, paper_rule) -> dict:
    """One row of ROBUSTNESS_COLUMNS (less `claim`, which the driver adds)."""
    return {"panel": panel, "item": item, "varied": varied, "threshold": float(tau), "rule": rule,
            "value": float(value) if value is not None else np.nan, "holds": bool(holds),
            "censored": bound != "exact", "bound": bound, "paper_threshold": float(paper_tau),
            "paper_rule": rule == paper_rule}


def split_rule(rule: str) -> tuple[str, bool]:
    """"per-class / sustained" -> ("per-class", True): the counting rule and whether a milestone must be sustained."""
    counting, _, hit = rule.partition(" / ")
    return counting, hit == "sustained"


def claimed(dev: pd.DataFrame, prefix: str) -> tuple[pd.DataFrame, dict[tuple[str, str], Claim]]:
    """(the rows of `dev`'s panels that the paper's claims starting with `prefix` speak of -- empty when none --,
    those claims: `claims.paper_claims(prefix)`)."""
    claims = paper_claims(prefix)
    panels = [p for p in pd.unique(dev["panel"]) if any(k[0] == p for k in claims)]
    return dev[dev["panel"].isin(panels)], claims


def matches(claim: Claim, value: float, never: bool) -> bool:
    """The paper's number reproduced (claims.compare), a milestone never reached as the paper's "—"."""
    return compare(claim, NEVER if never else float(value))


# ------------------------------------------------------------------------------------- the claims' words for values
def tokens_text(t: float) -> str:
    """Tokens (in billions) as the hangs-on sentences write them: 3.05T, 264B, 6.29B, 536M, 2.05k tokens."""
    for scale, unit in ((1e3, "T"), (1, "B"), (1e-3, "M"), (1e-6, "k")):
        if t >= scale:
            return f"{t / scale:.3g}{unit}"
    return f"{t * 1e9:.3g} tokens"


def ratio_text(v: float) -> str:
    return f"{v:.1f}×" if v < 100 else f"{v:.0f}×"


def ordinal(k: int) -> str:
    return {1: "strongest", 2: "2nd-strongest", 3: "3rd-strongest"}.get(k, f"{k}th-strongest")
