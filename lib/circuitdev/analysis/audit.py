"""The paper-vs-data audit: every numeric claim of data/claims.yaml, re-derived from a developmental table.

Each claim names a `quantity` (the registry QUANTITIES below); the audit computes it from the data with the findings
functions and compares it with the paper's value under the match rule of `analysis.claims` (`compare`, MATCH_RULE: the data, rounded to the digits the paper printed,
give the paper's number; lists element by element, head lists as sets; "never" matches a milestone never reached).

A differing claim whose quantity depends on a selectivity threshold gets a diagnostic: the thresholds in
[2, 1000]x at which the data would reproduce the paper's value (so "the paper's 41B is what 30x gives" is found by
computation). Claims the data cannot decide (no such revision, no null draws, no ablation row, no definition of
"elevated", or a paper value from another run than the files: `other_run` in claims.yaml) go to a separate
`unverified` table with the reason; `status` in the main table is match / differs, or, where the data give a
bound (a censored milestone, recall level or gap: the quantity says so), "consistent (bound)" / "differs (bound)"
-- a bound is never a plain match (STATUSES). Claims of the findings
and the ablations are counted apart from bookkeeping claims (BOOKKEEPING: the panels' revision lists, the method's
quoted settings), so that a mismatch of a revision label is not read as a failed finding.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from circuitdev.analysis import findings as F
from circuitdev.analysis.bars import bar_runs, runs_text
from circuitdev.analysis.claims import CLAIMS_PATH, Claim, compare, consistent_with_bound, half_unit, is_number
from circuitdev.analysis.quantities import QUANTITIES, AuditContext, Quantity, Unverifiable, load_claims
from circuitdev.sources.published import PublishedData

AUDIT_COLUMNS = ["claim", "paper_value", "data_value", "status", "reason"]
STATUSES = ("match", "differs", "consistent (bound)", "differs (bound)")
_BOUND_WORDS = {"upper": "an upper bound (reached at or before the first probed revision)",
                "lower": "a lower bound", "none": "censored both ways"}
BOOKKEEPING = ("panel", "method")  # claims about the setup, not a finding: counted apart
UNVERIFIED_COLUMNS = ["claim", "paper_value", "data_value", "reason"]


def _fmt(value, decimals: int | None = None) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v, decimals) for v in value) + "]"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value)).lower()
    if is_number(value):
        if decimals is not None:
            return f"{float(value):.{decimals}f}"
        return f"{value:.6g}" if isinstance(value, (float, np.floating)) else str(value)
    return str(value)


# Quantities whose value depends on the selectivity threshold: a differing claim is re-derived over this grid.
DIAGNOSTIC_THRESHOLDS = (2, 3, 5, 7, 10, 15, 20, 25, 30, 40, 50, 60, 75, 100, 150, 200, 300, 500, 1000)


def _reproducing_thresholds(ctx: AuditContext, claim: Claim, fn: Quantity) -> str:
    if "threshold" not in inspect.signature(fn).parameters or claim.quantity == "count_above":
        return ""
    hits = []
    for tau in DIAGNOSTIC_THRESHOLDS:
        try:
            value = fn(ctx, **{**claim.params, "threshold": float(tau)})
        except Unverifiable:
            continue
        value = value[0] if isinstance(value, tuple) else value
        if compare(claim, value):
            hits.append(float(tau))
    if not hits:
        return f"; no threshold of {DIAGNOSTIC_THRESHOLDS[0]:g}–{DIAGNOSTIC_THRESHOLDS[-1]:g}× reproduces the paper's value"
    runs = runs_text(bar_runs(hits, DIAGNOSTIC_THRESHOLDS))
    return (f"; the paper's value is reproduced at thresholds {runs} (of the grid's {len(DIAGNOSTIC_THRESHOLDS)} "
            "bars, audit.DIAGNOSTIC_THRESHOLDS)")


@dataclass(frozen=True)
class AuditResult:
    table: pd.DataFrame  # claim, paper_value, data_value, status (match / differs), reason, + finding, source, id
    unverified: pd.DataFrame  # claim, paper_value, data_value, reason, + finding, source, id

    @property
    def summary(self) -> dict[str, int]:
        """Counts of every claim (claims, match, differs, consistent_bound, differs_bound, unverified) and the same
        for the findings and ablations
        (findings_*) and for the bookkeeping claims (bookkeeping_*) apart."""
        out = {}
        for prefix, keep in (("", None), ("findings_", False), ("bookkeeping_", True)):
            t, u = (self.table, self.unverified) if keep is None else (
                self.table[self.table["finding"].isin(BOOKKEEPING) == keep],
                self.unverified[self.unverified["finding"].isin(BOOKKEEPING) == keep])
            counts = t["status"].value_counts().to_dict()
            out.update({f"{prefix}claims": len(t) + len(u), f"{prefix}match": counts.get("match", 0),
                        f"{prefix}differs": counts.get("differs", 0),
                        f"{prefix}consistent_bound": counts.get("consistent (bound)", 0),
                        f"{prefix}differs_bound": counts.get("differs (bound)", 0), f"{prefix}unverified": len(u)})
        return out


def run_audit(dev: pd.DataFrame, *, claims: list[Claim] | str | Path | None = None,
              published: PublishedData | None = None, nulls: pd.DataFrame | None = None,
              diagnose: bool = True) -> AuditResult:
    """Re-derive every claim from `dev` (plus the published metadata / ablations and an F6 null table when given)
    and compare. Works on any source; claims about revisions or files a source lacks land in `unverified`.
    diagnose=True re-derives each differing threshold-dependent claim over DIAGNOSTIC_THRESHOLDS and names the
    thresholds that would reproduce the paper (most of the audit's run time; turn it off for quick checks)."""
    claims = load_claims(claims if claims is not None else CLAIMS_PATH) if not isinstance(claims, list) else claims
    with F.reuse_indexes():  # the sweeps re-evaluate findings on the same frames many times
        return _audit(AuditContext(dev=dev, published=published, nulls=nulls), claims, diagnose)


def _unpack(value) -> tuple:
    """A quantity's value, context and bound: value, (value, context) or (value, context, bound)."""
    if not isinstance(value, tuple):
        return value, "", "exact"
    return (*value, "exact") if len(value) == 2 else value


def _audit(ctx: AuditContext, claims: list[Claim], diagnose: bool) -> AuditResult:
    verified, unverified = [], []
    for claim in claims:
        fn = QUANTITIES[claim.quantity]
        extra = {"finding": claim.finding, "source": claim.source, "id": claim.id}
        label = f"{claim.id}: {claim.text}"
        paper_text = _fmt(claim.paper, claim.decimals)
        note = f" (note: {claim.note})" if claim.note else ""
        try:
            value = fn(ctx, **claim.params)
        except Unverifiable as why:
            unverified.append({"claim": label, "paper_value": paper_text,
                               "data_value": "" if why.data_value is None else _fmt(why.data_value),
                               "reason": f"{why}{note}", **extra})
            continue
        value, context, bound = _unpack(value)
        context = f" [{context}]" if context else ""
        if claim.other_run:  # the files hold another run: shown, never counted as a match or a mismatch
            agree = "agrees with" if compare(claim, value) else "differs from"
            unverified.append({"claim": label, "paper_value": paper_text, "data_value": _fmt(value),
                               "reason": f"the paper's value comes from another run ({claim.other_run}); the files' "
                                         f"value {agree} it at the paper's precision{context}", **extra})
            continue
        if bound != "exact":  # a censored value: compared as the bound it is, never a plain match
            ok = consistent_with_bound(claim, value, bound)
            status = "consistent (bound)" if ok else "differs (bound)"
            reason = f"the data give {_BOUND_WORDS.get(bound, bound)}, {_fmt(value)}: the paper's {paper_text} " \
                     f"{'is' if ok else 'is not'} on its side{context}{note if not ok else ''}"
        elif compare(claim, value):
            exact = not is_number(claim.paper) or claim.significant or isinstance(claim.paper, int)
            rule = "equal" if exact else f"equal at the paper's precision (±{half_unit(claim):g})"
            status, reason = "match", f"{rule}{context}"
        else:
            status = "differs"
            reason = f"data give {_fmt(value)}, paper {paper_text}{context}" \
                     f"{_reproducing_thresholds(ctx, claim, fn) if diagnose else ''}{note}"
        verified.append({"claim": label, "paper_value": paper_text, "data_value": _fmt(value),
                         "status": status, "reason": reason, **extra})
    extra_cols = ["finding", "source", "id"]
    return AuditResult(pd.DataFrame(verified, columns=AUDIT_COLUMNS + extra_cols),
                       pd.DataFrame(unverified, columns=UNVERIFIED_COLUMNS + extra_cols))


def audit_table(dev: pd.DataFrame | None, *, published: PublishedData | None = None,
                claims: str | Path | None = None, findings: list[str] | None = None
                ) -> tuple[pd.DataFrame, dict[str, int]]:
    """Every claim in one table -- finding, id, claim, paper_value, data_value, status (match / differs /
    unverified), reason -- optionally only those of `findings`, and the summary counts. No data: an empty table."""
    columns = ["finding", "id", "claim", "paper_value", "data_value", "status", "reason"]
    if dev is None:
        return pd.DataFrame(columns=columns), {}
    result = run_audit(dev, claims=claims or CLAIMS_PATH, published=published)
    table = pd.concat([result.table, result.unverified.assign(status="unverified")], ignore_index=True)
    if findings:
        table = table[table["finding"].isin(findings)]
    return table[columns], result.summary
