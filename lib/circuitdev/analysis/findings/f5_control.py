"""F5's controls (issue 21 item 5, issue 23 item 7): is the circuit's PR lead more than any head would show?

- `elevation_base_rate`: the share of ALL heads a rule calls "elevated" at each revision. Where it is high early
  (the default rule marks 93% of OLMoE's heads at its first revision), any head that forms late gets a positive
  lead almost automatically.
- `lead_null`: the circuit's median lead beside a permutation null -- the circuit's formation times given to heads
  drawn at random from all heads (formation times shuffled across heads), the lead re-read with the same
  elevation rule and the same censoring (`f5_pr_lead.lead_value`) -- with a one-sided p-value for "the circuit's
  median lead exceeds the null", the median lead of the non-circuit heads against the same formation times, and
  that of heads that formed but left the circuit by the final revision.
- `pr_against_null`, `null_pr_summary`: a head's PR against its PR on random tokens (the null PR of method
  reference §3, stored per revision by `circuitdev null-pr`, `sources.null_pr`).

Pure functions over a developmental table with a `pr` column (and the null-PR table).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from circuitdev.analysis.devtable import final_circuit, require
from circuitdev.analysis.findings.claim import RobustClaim
from circuitdev.analysis.findings.f5_pr_lead import (FORMATION_THRESHOLDS, ElevationRule, PanelHeads, first_true,
                                                     panel_matrices, select_heads, lead_bound_text, lead_censoring,
                                                     lead_hangs_on, lead_over_bars, lead_value, pr_elevated)
from circuitdev.errors import ConfigError
from circuitdev.schema import BOS_THRESHOLD, head_name, sel_column

__all__ = ["LEAD_NULL_TABLE", "LEAD_POWER_TABLE", "elevation_base_rate", "lead_null", "lead_null_texts",
           "lead_null_settings", "lead_null_tests", "power_conclusion",
           "pr_against_null", "null_pr_summary"]

# the columns a page shows of a lead_null table (+ tier): the rest are in reanalyse's f5_lead_null.csv
LEAD_NULL_TABLE = ["tier", "panel", "head_class", "rule", "heads", "defined", "lower", "upper", "median_lead",
                   "other_median_lead", "transient_median_lead", "null_mean", "null_lo", "null_hi", "p_value",
                   "base_rate_first"]
# ... and the columns that say whether each test can reject at all (min_p) and what it concludes (power)
LEAD_POWER_TABLE = ["tier", "panel", "head_class", "rule", "median_lead", "p_value", "p_greater", "min_p", "power"]
N_PERMUTATIONS = 10_000  # permutations of the null: a p-value of 0.05 has a Monte Carlo error of about 0.002
PERMUTATION_SEED = 0
ALPHA = 0.05  # the level a test must be able to reach (min_p) and reach (p_value)
NULL_PR_QUANTILE = 0.99  # the paper's null PR statistic: the 99th percentile over every head (and draw)


def elevation_base_rate(dev: pd.DataFrame, *, rule: ElevationRule = "fraction-of-peak",
                        level: float = 0.5) -> pd.DataFrame:
    """The share of all heads (with a PR) that `rule` at `level` calls elevated at each revision, and the share
    whose FIRST elevation is there (what a lead is measured from). Columns: panel, revision, revision_index,
    tokens_b, n_heads, n_elevated, share_elevated, n_first, share_first, rule, level."""
    require(dev, ["pr"], "elevation_base_rate")
    frames = []
    for panel, revs, _, _, mats in panel_matrices(dev, ["pr"]):
        pr = mats["pr"][~np.isnan(mats["pr"]).all(axis=1)]  # (heads with a PR, revisions)
        if not len(pr):
            continue
        up = pr_elevated(pr, rule=rule, level=level)
        first = first_true(up)
        known = (~np.isnan(pr)).sum(axis=0)
        n_first = np.bincount(first[first >= 0], minlength=pr.shape[1])
        frames.append(pd.DataFrame({
            "panel": panel, "revision": revs["revision"], "revision_index": np.arange(pr.shape[1]),
            "tokens_b": revs["tokens_b"], "n_heads": known, "n_elevated": up.sum(axis=0),
            "share_elevated": up.sum(axis=0) / np.maximum(known, 1), "n_first": n_first,
            "share_first": n_first / len(pr), "rule": rule, "level": level}))
    columns = ["panel", "revision", "revision_index", "tokens_b", "n_heads", "n_elevated", "share_elevated",
               "n_first", "share_first", "rule", "level"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


LEAD_NULL_COLUMNS = ["panel", "head_class", "rule", "level", "heads", "defined", "lower", "upper", "median_lead",
                     "other_heads",
                "other_median_lead", "transient_heads", "transient_median_lead", "null_mean", "null_lo", "null_hi",
                "p_value", "p_greater", "min_p", "n_perm", "seed", "first_revision", "base_rate_first"]


def lead_null(dev: pd.DataFrame, *, head_class: str = "induction", threshold: float | None = None,
              heads: PanelHeads | None = None, rule: ElevationRule = "fraction-of-peak", level: float = 0.5,
              n_perm: int = N_PERMUTATIONS, seed: int = PERMUTATION_SEED) -> pd.DataFrame:
    """F5 with a control, one row per panel (LEAD_NULL_COLUMNS):

    heads / defined / lower / upper / median_lead: the circuit (final-revision heads of `head_class` at
    `threshold`, or `heads`), how many of its leads are defined, how many of those are lower / upper bounds
    (`f5_pr_lead` censoring), and their median (bounds at their value: a lower bound when all are lower bounds).
    other_heads / other_median_lead: every non-circuit head with a PR, its lead read against each of the circuit's
    formation times (all pairs pooled) -- what a head outside the circuit would show under the same rules.
    transient_heads / transient_median_lead: heads that reached the threshold at some revision but not at the final
    one, with their own formation (same rules).
    null_mean / null_lo / null_hi: mean and 95% range of the median lead when the circuit's formation times are
    given to as many heads drawn at random (without replacement) from all heads with a PR, `n_perm` times
    (`numpy.random.default_rng(seed)`); draws whose leads are all undefined are left out (n_perm counts the rest).
    p_value = (1 + #{null median >= observed}) / (1 + n_perm): one-sided, "the circuit's median lead exceeds what
    random heads show"; p_greater = (1 + #{null median > observed}) / (1 + n_perm), the same without ties (P(null >
    observed)). min_p: the test's power -- the p_value of the best outcome the data could give under the same null
    and draws: every circuit head elevated at the earliest revision any head is (NaN when even that gives no
    lead); min_p >= 0.05 means the test cannot reject whatever the data. first_revision / base_rate_first: the
    share of all heads elevated at the first revision. A panel whose first revision is the initialisation (0
    tokens) reads leads with `at_init` (f5_pr_lead: an elevation there gives no lead)."""
    if n_perm < 1:
        raise ConfigError(f"n_perm must be >= 1, got {n_perm}")
    tau = FORMATION_THRESHOLDS.get(head_class, BOS_THRESHOLD) if threshold is None else threshold
    require(dev, ["pr", sel_column(head_class)], "lead_null")
    chosen = select_heads(dev, heads, head_class, tau)
    rng = np.random.default_rng(seed)
    rows = []
    for panel, revs, layers, hs, mats in panel_matrices(dev, [sel_column(head_class), "pr"]):
        key = layers * 10**4 + hs
        want = chosen[chosen["panel"] == panel]
        circuit = np.isin(key, want["layer"].to_numpy() * 10**4 + want["head"].to_numpy())
        has_pr = ~np.isnan(mats["pr"]).all(axis=1)
        if not circuit.any() or not has_pr.any():
            continue
        rows.append({"panel": panel, "head_class": head_class, "rule": rule, "level": level,
                     **_panel_null(revs, mats, circuit, has_pr, sel_column(head_class), tau, rule, level, n_perm,
                                   rng), "seed": seed})
    return pd.DataFrame(rows, columns=LEAD_NULL_COLUMNS)


def _panel_null(revs: dict, mats: dict, circuit: np.ndarray, has_pr: np.ndarray, column: str, tau: float,
                rule: ElevationRule, level: float, n_perm: int, rng: np.random.Generator) -> dict:
    """One panel's row of `lead_null` (less panel, class, rule, level, seed): the circuit's leads, the other and
    transient heads', the permutation null and its power (min_p)."""
    n_rev = len(revs["revision"])
    init = bool(revs["tokens_b"][0] == 0)  # the first revision is the initialisation (a toy panel's step0)
    formed = mats[column] >= tau
    f_all = first_true(formed)
    e_all = first_true(pr_elevated(mats["pr"], rule=rule, level=level))
    f_c = f_all[circuit]
    observed = lead_value(f_c, e_all[circuit], n_rev, has_pr[circuit], at_init=init)
    kinds = lead_censoring(f_c, e_all[circuit], has_pr[circuit], at_init=init)
    others = ~circuit & has_pr
    other = lead_value(f_c[None, :], e_all[others][:, None], n_rev, at_init=init)  # (other heads, formations)
    transient = ~circuit & formed.any(axis=1) & ~formed[:, -1] & has_pr
    trans = lead_value(f_all[transient], e_all[transient], n_rev, at_init=init)
    pool = np.flatnonzero(has_pr)
    k = int(circuit.sum())
    null = _null_medians(f_c, e_all[pool], n_rev, k, n_perm, rng, init) if k <= len(pool) else np.array([])
    obs = float(np.nanmedian(observed)) if np.isfinite(observed).any() else np.nan
    earliest = e_all[pool][e_all[pool] >= 0].min() if (e_all[pool] >= 0).any() else -1
    best = lead_value(f_c, np.full(k, earliest), n_rev, has_pr[circuit], at_init=init)
    best = float(np.nanmedian(best)) if np.isfinite(best).any() else np.nan
    up0 = pr_elevated(mats["pr"][has_pr], rule=rule, level=level)[:, 0]
    return {
        "heads": k, "defined": int(np.isfinite(observed).sum()), "lower": int((kinds == "lower").sum()),
        "upper": int((kinds == "upper").sum()), "median_lead": obs, "other_heads": int(others.sum()),
        "other_median_lead": _median(other), "transient_heads": int(transient.sum()),
        "transient_median_lead": _median(trans), "null_mean": float(null.mean()) if len(null) else np.nan,
        "null_lo": float(np.percentile(null, 2.5)) if len(null) else np.nan,
        "null_hi": float(np.percentile(null, 97.5)) if len(null) else np.nan,
        "p_value": _p(null, obs, ">="), "p_greater": _p(null, obs, ">"), "min_p": _p(null, best, ">="),
        "n_perm": len(null), "first_revision": revs["revision"][0], "base_rate_first": float(up0.mean())}


def lead_null_texts(null: pd.DataFrame) -> pd.DataFrame:
    """`lead_null` rows with `text`: "+2 against a null mean of +1.4, p = 0.43", the median marked as a bound where
    its leads are (`f5_pr_lead.lead_bound_text`); and `power`, whether the test can reject at all and what it
    concludes (issue 29): "cannot reject at 0.05 whatever the data (the best attainable p is 0.74)", "could
    reject (best attainable p 0.011) and does not: no lead beyond chance", "rejects: a lead beyond chance"."""
    def text(r) -> str:
        lead = lead_bound_text(r["median_lead"], r["defined"], r["lower"], r["upper"])
        return f"{lead} against a null mean of {r['null_mean']:+.2g}, p = {r['p_value']:.2g}" \
            if pd.notna(r["p_value"]) else f"{lead} (no null)"

    def power(r) -> str:
        min_p = r.get("min_p", np.nan)
        if pd.isna(min_p) or pd.isna(r["p_value"]):
            return "no test: no lead is defined"
        if min_p >= ALPHA:
            return f"cannot reject at {ALPHA:g} whatever the data (the best attainable p is {min_p:.2g})"
        if r["p_value"] >= ALPHA:
            return f"could reject (best attainable p {min_p:.2g}) and does not: no lead beyond chance"
        return f"rejects (p = {r['p_value']:.2g}): a lead beyond chance"
    rows = list(null.iterrows())
    return null.assign(text=[text(r) for _, r in rows] if len(null) else [],
                       power=[power(r) for _, r in rows] if len(null) else [])


def lead_null_tests(null: pd.DataFrame, *, rule: ElevationRule = "fraction-of-peak", level: float = 0.5
                    ) -> pd.DataFrame:
    """F5.lead's null tests for the verdicts (`verdicts.TEST_COLUMNS`: claim, panel, item = the class, p_value,
    min_p), from `lead_null` rows (panel named `panel` or `model`) under the lead's default elevation rule."""
    columns = ["claim", "panel", "item", "p_value", "min_p"]
    if null is None or null.empty:
        return pd.DataFrame(columns=columns)
    null = null.rename(columns={"model": "panel"})
    null = null[(null["rule"] == rule) & np.isclose(null["level"].astype(float), level)]
    return pd.DataFrame({"claim": "F5.lead", "panel": null["panel"], "item": null["head_class"],
                         "p_value": null["p_value"], "min_p": null["min_p"]}, columns=columns)


def _p(null: np.ndarray, value: float, side: str) -> float:
    """(1 + #{null >= value}) / (1 + draws) (side ">=") or with ">" (no ties); NaN without draws or value."""
    if not len(null) or not np.isfinite(value):
        return np.nan
    return (1 + int((null >= value).sum() if side == ">=" else (null > value).sum())) / (1 + len(null))


def _median(values: np.ndarray) -> float:
    finite = np.asarray(values, dtype=float)[np.isfinite(values)]
    return float(np.median(finite)) if len(finite) else np.nan


def _null_medians(formation: np.ndarray, elevation: np.ndarray, n_rev: int, k: int, n_perm: int,
                  rng: np.random.Generator, at_init: bool = False, chunk: int = 2000) -> np.ndarray:
    """Median lead of `formation` (k,) given to k heads drawn without replacement from `elevation` (pool,), per
    permutation; permutations whose leads are all undefined are dropped. In chunks, to bound memory."""
    out = []
    for start in range(0, n_perm, chunk):
        m = min(chunk, n_perm - start)
        draw = rng.random((m, len(elevation))).argsort(axis=1)[:, :k]  # (m, k) distinct heads per permutation
        leads = lead_value(formation[None, :], elevation[draw], n_rev, at_init=at_init)
        ok = np.isfinite(leads).any(axis=1)
        with np.errstate(all="ignore"):
            out.append(np.nanmedian(np.where(ok[:, None], leads, 0.0), axis=1)[ok])
    return np.concatenate(out) if out else np.array([])


def lead_null_settings(dev: pd.DataFrame, settings, *, head_classes=("induction",), **kwargs) -> pd.DataFrame:
    """`lead_null` for every (rule, level) of `settings` and every class of `head_classes`, stacked."""
    frames = [lead_null(dev, head_class=c, rule=rule, level=level, **kwargs)
              for c in head_classes for rule, level in settings]
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=LEAD_NULL_COLUMNS)


# --------------------------------------------------------------------------------------------------- null PR


def pr_against_null(dev: pd.DataFrame, null_pr: pd.DataFrame | None, *,
                    quantile: float = NULL_PR_QUANTILE) -> pd.DataFrame:
    """Each head's PR beside its PR on random tokens, per revision. `null_pr`: one row per (panel, revision, draw,
    layer, head) with `null_pr` (`sources.null_pr.read_null_pr`). Columns: panel, revision, tokens_b, layer, head,
    name, pr, null_mean, null_min, null_max (over the head's draws), null_q (the `quantile` of every head's and
    draw's null PR at that revision: the paper's p99 statistic), above_own (PR above the head's largest null),
    above_q (PR above null_q), pr_minus_null (PR - null_mean). Empty without null PR."""
    columns = ["panel", "revision", "tokens_b", "layer", "head", "name", "pr", "null_mean", "null_min", "null_max",
               "null_q", "above_own", "above_q", "pr_minus_null"]
    if null_pr is None or len(null_pr) == 0:
        return pd.DataFrame(columns=columns)
    require(null_pr, ["panel", "revision", "draw", "layer", "head", "null_pr"], "pr_against_null")
    per_head = null_pr.groupby(["panel", "revision", "layer", "head"], sort=False)["null_pr"].agg(
        null_mean="mean", null_min="min", null_max="max").reset_index()
    q = null_pr.groupby(["panel", "revision"], sort=False)["null_pr"].quantile(quantile).rename("null_q")
    out = dev[["panel", "revision", "tokens_b", "layer", "head", "pr"]].merge(
        per_head, on=["panel", "revision", "layer", "head"]).merge(q.reset_index(), on=["panel", "revision"])
    out.insert(5, "name", [head_name(l, h) for l, h in zip(out["layer"], out["head"])])
    out["above_own"] = out["pr"] > out["null_max"]
    out["above_q"] = out["pr"] > out["null_q"]
    out["pr_minus_null"] = out["pr"] - out["null_mean"]
    return out[columns]


def null_pr_summary(calibrated: pd.DataFrame, dev: pd.DataFrame | None = None, *,
                    head_class: str = "induction", threshold: float | None = None) -> pd.DataFrame:
    """Per (panel, revision) of `pr_against_null`: heads, null_q, n_above_q and share_above_q (heads whose PR
    exceeds the null quantile), n_above_own, median_pr, median_null; with `dev`, also circuit_above_q: the final
    `head_class` circuit's heads above the null quantile (as "L1H2 L1H3"; "" when none)."""
    columns = ["panel", "revision", "tokens_b", "heads", "null_q", "n_above_q", "share_above_q", "n_above_own",
               "median_pr", "median_null", "circuit_above_q"]
    if calibrated.empty:
        return pd.DataFrame(columns=columns)
    out = calibrated.groupby(["panel", "revision"], sort=False).agg(
        tokens_b=("tokens_b", "first"), heads=("name", "size"), null_q=("null_q", "first"),
        n_above_q=("above_q", "sum"), n_above_own=("above_own", "sum"), median_pr=("pr", "median"),
        median_null=("null_mean", "median")).reset_index()
    out["share_above_q"] = out["n_above_q"] / out["heads"]
    out["circuit_above_q"] = ""
    if dev is not None:
        tau = FORMATION_THRESHOLDS.get(head_class, BOS_THRESHOLD) if threshold is None else threshold
        circ = final_circuit(dev, head_class=head_class, threshold=tau)[["panel", "layer", "head"]]
        hit = calibrated.merge(circ, on=["panel", "layer", "head"])
        hit = hit[hit["above_q"]].groupby(["panel", "revision"], sort=False)["name"].agg(" ".join)
        out["circuit_above_q"] = [hit.get((p, r), "") for p, r in zip(out["panel"], out["revision"])]
    return out[columns]




def power_conclusion(tests: pd.DataFrame, *, alpha: float = ALPHA) -> dict:
    """What a set of lead tests (`lead_null_texts` rows with a p-value) says together, by the verdict rules: how many
    there are, how many can reject at all (min_p < alpha), how many do (p_value < alpha), and the conclusion in
    words -- none can tell; none of those that can does (no evidence of a lead); all do; or mixed."""
    able = tests[tests["min_p"] < alpha] if len(tests) else tests
    reject = able[able["p_value"] < alpha] if len(able) else able
    n_able, n_reject = len(able), len(reject)
    words = ("No test here can reject: these data cannot show a lead beyond chance, for the paper or against it."
             if not n_able else
             "None of the tests that can reject does: where the data could show a lead beyond chance, they show "
             "none, so the lead is no evidence that PR rises before formation." if not n_reject else
             "Every test that can reject does: where the data can tell, the lead is beyond chance."
             if n_reject == n_able else
             f"The lead is beyond chance in {n_reject} of the {n_able} tests that can tell and not in the others: "
             "the evidence is mixed.")
    return {"tests": len(tests), "able": n_able, "reject": n_reject, "conclusion": words}


# --------------------------------------------------------------------------------------- F5 as a robustness claim
F5_CLASSES = ("induction", "previous-token", "first-token")  # the circuits F5 speaks of


def lead_claim_tests(dev: pd.DataFrame) -> pd.DataFrame:
    """F5.lead's null test on one developmental table, per model and class: the permutation null of the lead under
    its default rule (`lead_null`, `lead_null_tests`); no rows where the table has no PR."""
    if "pr" not in dev.columns:
        return lead_null_tests(None)
    nulls = [lead_null(dev, head_class=c) for c in F5_CLASSES if sel_column(c) in dev.columns]
    nulls = [n for n in nulls if len(n)]
    return lead_null_tests(pd.concat(nulls, ignore_index=True) if nulls else None)


LEAD_CLAIM = RobustClaim(
    "F5.lead", "F5",
    "the median PR lead over formation has the paper's sign (positive; zero for previous-token heads)",
    "median lead (checkpoints) over the final circuit", ("per-class",), lead_over_bars, lead_hangs_on,
    unit=lambda v: f"{v:g} checkpoints", axis=("median PR lead (checkpoints)", "linear", 0.0),
    null_tests=lead_claim_tests)
