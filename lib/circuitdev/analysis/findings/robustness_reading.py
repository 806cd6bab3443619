"""Reading the robustness table (findings.robustness): over which bars a claim holds, as the set of ranges it really
is; per-claim summaries and rule verdicts for the robustness page; the sentences the findings pages glue.

    holds_ranges(table, "F3.gap", panel="olmo-1b-0724", varied="induction")   # [(5.0, 50.0)]: a SET of ranges
    ranges_text(...)                  # "5–50×" / "5–25× and 35–100×" / "at no bar of the grid"
    ranges_sentence(table, "F3.gap")  # "moving the induction bar: OLMo 5–50×, ..."
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from circuitdev.analysis.bars import bar_runs, runs_text
from circuitdev.analysis.findings.claim import ROBUSTNESS_THRESHOLDS
from circuitdev.analysis.findings.robustness import ROBUSTNESS_CLAIMS, robust_claim
from circuitdev.errors import ConfigError

__all__ = ["holds_ranges", "ranges_text", "claim_summary", "rule_verdicts", "claims_frame", "ranges_sentence"]


def _series(table: pd.DataFrame, claim: str, *, panel: str, varied: str | None, rule: str | None,
            item: str | None) -> pd.DataFrame:
    g = table[(table["claim"] == claim) & (table["panel"] == panel)]
    g = g[g["rule"] == (rule or robust_claim(claim).rules[0])]
    for col, want in (("varied", varied), ("item", item)):
        if want is not None:
            g = g[g[col] == want]
        elif g[col].nunique() > 1:
            raise ConfigError(f"{claim} for {panel}: several values of {col!r} ({', '.join(map(str, g[col].unique()))})"
                              f"; name one ({col}=...)")
    return g.sort_values("threshold")


def holds_ranges(table: pd.DataFrame, claim: str, *, panel: str, varied: str | None = None, rule: str | None = None,
                 item: str | None = None) -> list[tuple[float, float]]:
    """The bars over which the paper's statement holds, as the SET of ranges it is: runs of consecutive bars of the
    table's grid, each (lowest, highest), e.g. [(5, 25), (35, 100)]; [] when it holds at none. `rule` defaults to
    the paper's; name `varied` / `item` where the claim has several."""
    g = _series(table, claim, panel=panel, varied=varied, rule=rule, item=item)
    return bar_runs(g.loc[g["holds"].astype(bool), "threshold"].astype(float), g["threshold"].astype(float).tolist())


def ranges_text(ranges: Sequence[tuple[float, float]], grid: Sequence[float] = ROBUSTNESS_THRESHOLDS) -> str:
    """"5–25× and 35–100×"; "every bar (5–1000×)"; "at no bar of the grid" (a single bar reads "35×")."""
    if not ranges:
        return "at no bar of the grid"
    if len(ranges) == 1 and ranges[0] == (min(grid), max(grid)):
        return f"every bar ({min(grid):g}–{max(grid):g}×)"
    return runs_text(ranges, last=" and ")


def claim_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per (tier, when the rows carry one, claim, panel, item, varied) under the paper's rule: whether it holds at the
    paper's bar and its value there, the ranges (as text), bars held and swept, and how many values are bounds (the
    claim's keys first, the moving bar and the tier last)."""
    keys = [c for c in ("tier", "claim", "panel", "item", "varied") if c in table.columns]
    paper = table[table["paper_rule"].astype(bool)]
    rows = []
    for key, g in paper.groupby(keys, sort=False):
        where = dict(zip(keys, key))
        at = g[g["threshold"] == g["paper_threshold"]]
        ranges = holds_ranges(g, where["claim"], panel=where["panel"], varied=where["varied"], item=where["item"])
        value = float(at["value"].iloc[0]) if len(at) else np.nan
        rows.append({**where, "bars": len(g), "held": int(g["holds"].sum()), "ranges": ranges_text(ranges),
                     "paper_threshold": g["paper_threshold"].iloc[0],
                     "holds_at_paper": bool(at["holds"].iloc[0]) if len(at) else None,
                     "value_at_paper": value, "value_text": value_text(where["claim"], value),
                     "censored": int(g["censored"].sum())})
    front = [k for k in keys if k not in ("tier", "varied")]  # what a reader scans for first, then the verdict
    return pd.DataFrame(rows, columns=[*front, "holds_at_paper", "ranges", "varied", "value_text", "held", "bars",
                                       "censored", "value_at_paper", "paper_threshold",
                                       *(["tier"] if "tier" in keys else [])])


def value_text(claim: str, value: float) -> str | None:
    """A claim's value in its own unit (the claim's `unit`: F1 a count of heads, F2 a share, F3's gap a ratio,
    milestones and recall levels training tokens, F5 checkpoints); None when not finite."""
    return robust_claim(claim).value_text(value)


def rule_verdicts(table: pd.DataFrame) -> pd.DataFrame:
    """Per claim cell (tier, claim, panel, item, varied, threshold) evaluated under more than one rule: the verdict
    under the paper's rule (`verdict`: "holds" / "fails", "*" when the value is a bound; `paper_rule`), the verdicts
    under the others in one text column (`other_rules`: "best-class: fails; ...") and `flips`, whether the rules
    disagree. Pass the rows at the paper's bar (threshold == paper_threshold) to ask whether a verdict rests on the
    rule."""
    keys = [c for c in ("tier", "claim", "panel", "item", "varied", "threshold") if c in table.columns]
    if table.empty:
        return pd.DataFrame(columns=[*keys, "flips"])
    said = table.assign(verdict=np.where(table["holds"], "holds", "fails") + np.where(table["censored"], "*", ""))
    rows = []
    for key, g in said.groupby(keys, sort=False):
        if g["rule"].nunique() < 2:
            continue
        paper = g[g["paper_rule"].astype(bool)] if "paper_rule" in g.columns else g.iloc[:1]
        paper = paper if len(paper) else g.iloc[:1]
        others = g.drop(index=paper.index)
        rows.append({**dict(zip(keys, key)), "paper_rule": paper["rule"].iloc[0], "verdict": paper["verdict"].iloc[0],
                     "other_rules": "; ".join(f"{r}: {v}" for r, v in zip(others["rule"], others["verdict"])),
                     "flips": bool(g["holds"].nunique() > 1)})
    front = [k for k in keys if k in ("claim", "panel", "item")]  # the claim, then its verdicts, then the bar
    return pd.DataFrame(rows, columns=[*front, "verdict", "other_rules", "flips", "paper_rule",
                                       *[k for k in keys if k not in front]])


def claims_frame(claims: Sequence[str] | None = None) -> pd.DataFrame:
    """The registry in words: claim, finding, statement (what `holds` tests), value (what `value` is), rules."""
    return pd.DataFrame([(c.id, c.finding, c.statement, c.value, ", ".join(c.rules)) for c in
                         (robust_claim(i) for i in (claims or ROBUSTNESS_CLAIMS))],
                        columns=["claim", "finding", "statement", "value", "rules"])


_VARIED_WORDS = {"first_token": "the first-token bar", "induction": "the induction bar",
                 "previous_token": "the previous-token bar", "self": "the self bar"}


def ranges_sentence(table: pd.DataFrame, claim: str, *, names: dict[str, str] | None = None,
                    rule: str | None = None) -> str | None:
    """One plain sentence: over which bars the paper's statement of `claim` holds, per model (and item), for each
    moving bar, with how many of those bars give a bound rather than a value. "moving the induction bar: OLMo
    5–50×, OLMoE 5–150× (20 of them bounds), Pythia 5–80×; moving the first-token bar: ...".
    `names` renames (a name "" leaves the panel out: a sentence about one model)
    panels (e.g. {"olmo-1b-0724": "OLMo"}); None when the claim has no rows here."""
    g = table[table["claim"] == claim] if len(table) else table
    if g.empty:
        return None
    rule = rule or robust_claim(claim).rules[0]
    g = g[g["rule"] == rule]
    many_items = g["item"].nunique() > 1
    parts = []
    for varied, gv in g.groupby("varied", sort=False):
        bits = []
        for (panel, item), gp in gv.groupby(["panel", "item"], sort=False):
            ranges = holds_ranges(gp, claim, panel=panel, varied=varied, rule=rule, item=item)
            bounds = int((gp["holds"] & gp["censored"]).sum())
            who = " ".join(w for w in ((names or {}).get(panel, panel), item if many_items else "") if w)
            bits.append(f"{who} {ranges_text(ranges)}".strip() + (f" ({bounds} of them bounds)" if bounds else ""))
        parts.append(("moving " + _VARIED_WORDS.get(varied, varied) + ": " if g["varied"].nunique() > 1 else "")
                     + ", ".join(bits))
    return "; ".join(parts)
