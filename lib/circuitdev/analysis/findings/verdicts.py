"""A verdict per claim, computed in one place with one vocabulary (issue 29): what the data support.

`claim_verdicts(robustness, tests)` reads the robustness table (`robustness_table`: every claim x panel x item x
bar x rule) and the claims' null tests where they have one (TEST_COLUMNS: F5's permutation test of the lead,
`f5_control.lead_null_tests`), and decides each (claim, panel, item) by these rules, in this order:

    untestable     no value at the paper's bar and rule (no tier holds the data for it: e.g. no lead is defined);
                   or the statistic agrees with the claim's direction but the claim's null test cannot reject at
                   ALPHA whatever the data (its smallest attainable p, `min_p`, >= ALPHA)
    not supported  it fails at the paper's bar under the paper's rule; or its null test could reject (min_p < ALPHA)
                   and does not (p >= ALPHA)
    fragile        it holds at the paper's bar under the paper's rule but fails, uncensored, at a neighbouring bar
                   of the grid (the paper's bar +-5x) or under another rule variant the table reports
    supported      otherwise

`verdict_table` folds them into one row per claim and one column per model (and tier): what a summary may say.

`bound`: the value at the paper's bar is censored (a bound, not a value). `reason`: one sentence naming what decided
it -- the bar or rule at which it fails, the p-value and the smallest attainable p. Toy, measured and published tiers
get their verdicts from this same function (one call per tier).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from circuitdev.analysis.findings.claim import ALL
from circuitdev.analysis.findings.f3_milestones import BOUND_SIGNS
from circuitdev.analysis.findings.f5_control import ALPHA  # the level of the one null test (F5's)
from circuitdev.analysis.findings.robustness import robust_claim

__all__ = ["VERDICTS", "VERDICT_COLUMNS", "TEST_COLUMNS", "claim_verdicts", "table_verdicts", "verdict_table"]

VERDICTS = ("untestable", "not supported", "fragile", "supported")  # the vocabulary, in the rules' order
VERDICT_COLUMNS = ["claim", "panel", "item", "verdict", "bound", "reason"]
NEIGHBOUR_STEP = 5.0  # the neighbouring bars of the paper's: +-5x (the grid's step below 100x)
TEST_COLUMNS = ["claim", "panel", "item", "p_value", "min_p"]  # a claim cell's null test: its p and smallest p


def claim_verdicts(robustness: pd.DataFrame, tests: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (claim, panel, item) of `robustness` (ROBUSTNESS_COLUMNS): VERDICT_COLUMNS, by the rules of the
    module docstring. `tests`: the null tests of claim cells that have one (TEST_COLUMNS), read where given."""
    if robustness.empty:
        return pd.DataFrame(columns=VERDICT_COLUMNS)
    known = {(r["claim"], r["panel"], r["item"]): r for r in tests.to_dict("records")} if tests is not None else {}
    rows = []
    for (claim, panel, item), g in robustness.groupby(["claim", "panel", "item"], sort=False):
        verdict, reason, bound = _decide(claim, g, known.get((claim, panel, item)))
        rows.append({"claim": claim, "panel": panel, "item": item, "verdict": verdict, "bound": bound,
                     "reason": reason})
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def table_verdicts(dev: pd.DataFrame, claims: list[str], *, robustness: pd.DataFrame | None = None) -> pd.DataFrame:
    """`claim_verdicts` of `claims` on one developmental table: their robustness table (`robustness`, where the
    caller has it already: `robustness_table(dev, claims=claims)`), and the null test of each claim that declares one
    (`RobustClaim.null_tests`: F5.lead's permutation test). `reanalyse`, which has the null tables already, calls
    claim_verdicts with them instead."""
    from circuitdev.analysis.findings.robustness import robustness_table

    tests = [t for t in (robust_claim(c).null_tests(dev) for c in claims if robust_claim(c).null_tests) if len(t)]
    robust = robustness_table(dev, claims=claims) if robustness is None else robustness
    return claim_verdicts(robust, pd.concat(tests, ignore_index=True) if tests else None)


def _bar(tau: float) -> str:
    return f"{tau:g}×"


def _decide(claim: str, g: pd.DataFrame, test: dict | None) -> tuple[str, str, bool]:
    """(verdict, reason, bound) of one claim cell (all its bars, rules and moving bars)."""
    c = robust_claim(claim)
    paper = g[g["paper_rule"].astype(bool)]
    at = paper[paper["threshold"] == paper["paper_threshold"]]
    if at.empty or not np.isfinite(at["value"].astype(float)).any():
        return "untestable", "no value at the paper's bar under the paper's rule in this tier's data", False
    row = at.iloc[0]
    bound = bool(at["censored"].any())
    value = float(row["value"])
    said = f"{value:g} {c.all_label}" if row["panel"] == ALL and c.all_label else \
        c.value_text(value) + " (censored both ways)" if row["bound"] == "none" else \
        BOUND_SIGNS.get(row["bound"], "") + c.value_text(value)
    where = f"the paper's {_bar(row['paper_threshold'])} under {c.rules[0]}"
    holds = bool(at["holds"].all())
    p, min_p = (float(test[k]) if test is not None and pd.notna(test.get(k)) else np.nan for k in ("p_value", "min_p"))
    if holds and np.isfinite(min_p) and min_p >= ALPHA:
        return "untestable", (f"holds at {where} ({said}), but its permutation test cannot reject at {ALPHA:g} "
                              f"whatever the data: the smallest attainable p is {min_p:.2g}"), bound
    if not holds:
        return "not supported", f"fails at {where}: the data give {said}", bound
    if np.isfinite(min_p) and p >= ALPHA:
        return "not supported", (f"holds at {where} ({said}) but is not above chance: p = {p:.2g} where the test "
                                 f"could reach {min_p:.2g}"), bound
    failing = []
    for varied, gv in paper.groupby("varied", sort=False):
        tau0 = float(gv["paper_threshold"].iloc[0])
        near = gv[np.isclose((gv["threshold"] - tau0).abs(), NEIGHBOUR_STEP)]
        bad = near[~near["holds"].astype(bool) & ~near["censored"].astype(bool)]
        failing += [f"{_bar(t)}" + (f" (moving the {varied.replace('_', '-')} bar)" if paper["varied"].nunique() > 1
                                    else "") for t in bad["threshold"]]
    others = g[~g["paper_rule"].astype(bool) & (g["threshold"] == g["paper_threshold"])]
    rules = list(dict.fromkeys(others.loc[~others["holds"].astype(bool) & ~others["censored"].astype(bool), "rule"]))
    if failing or rules:
        parts = ([f"fails at the neighbouring bar{'s' if len(failing) > 1 else ''} {', '.join(failing)}"]
                 if failing else []) + ([f"fails under {', '.join(rules)}"] if rules else [])
        return "fragile", f"holds at {where} ({said}) but {' and '.join(parts)}", bound
    tested = f"; permutation p = {p:.2g}" if np.isfinite(p) else ""
    return "supported", (f"holds at {where} ({said}), at its neighbouring bars and under every rule variant"
                         f"{tested}"), bound


def _fold(cell: pd.DataFrame) -> str:
    """One model's verdicts over a claim's items in a few words: the verdict when every item has it, else the
    counts, weakest first ("2 not supported, 1 fragile, 5 supported"); "*" where a bound decides one."""
    star = "*" if cell["bound"].astype(bool).any() else ""
    counts = cell["verdict"].value_counts()
    if len(counts) == 1:
        return counts.index[0] + star
    order = ("not supported", "untestable", "fragile", "supported")  # weakest first
    return ", ".join(f"{counts[v]} {v}" for v in order if v in counts) + star


def verdict_table(verdicts: pd.DataFrame) -> pd.DataFrame:
    """One row per claim (finding, claim, the paper's statement as `RobustClaim.statement` words it) and one column
    per model -- "<tier> · <model>" when the rows carry a `tier` -- with its verdicts folded over the claim's items
    (`_fold`); "" where a model has no row. Rows about every model at once ("all") are left out."""
    if verdicts.empty:
        return pd.DataFrame(columns=["finding", "claim", "statement"])
    v = verdicts[verdicts["panel"] != ALL]
    who = (v["tier"].astype(str) + " · " + v["panel"]) if "tier" in v.columns else v["panel"]
    v = v.assign(_who=who)
    columns = list(dict.fromkeys(v["_who"]))
    rows = []
    for claim, g in v.groupby("claim", sort=False):
        c = robust_claim(claim)
        folded = {w: _fold(cell) for w, cell in g.groupby("_who", sort=False)}
        rows.append({"finding": c.finding, "claim": claim, "statement": c.statement,
                     **{w: folded.get(w, "") for w in columns}})
    return pd.DataFrame(rows, columns=["finding", "claim", "statement", *columns])
