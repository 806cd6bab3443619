"""The controls the F5, F6 and spectral top-K pages show beside the paper's findings: what they read per record panel
beside their tiers' developmental tables, and the sentences they glue from it (`glue_*`: each glues the keys its
docstring lists, so that a page stays a reading of the paper).

- `null_pr_calibration`: each head's PR against its PR on random tokens (`sources.null_pr`, stored by
  `circuitdev null-pr`) for every panel of the record tiers that has it -- `findings.pr_against_null` and
  `findings.null_pr_summary`, with a `tier` column first.
- `topk_breakdowns`: `findings.topk_breakdown` of every present tier, K = the paper's 45 for the published models
  and the same share of heads (`findings.scaled_k`, by the panel file's family) for the others.
- `null_scales`: which baseline each record panel's selectivities and null draws divide by (F6 on one scale).

The published tier has no null PR and no null draws; absent data give empty frames, never errors.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from circuitdev.analysis import findings
from circuitdev.book.tiers import Tiers
from circuitdev.errors import CircuitdevError


def _records(tiers: Tiers):
    """(tier, panel, its rows) for every panel of the present record tiers."""
    for t in tiers.present:
        if t.name != "published":
            for panel in t.panels:
                yield t.name, panel, t.table[t.table["panel"] == panel]


def null_pr_calibration(tiers: Tiers, results_dir: str | Path, *, head_class: str = "induction",
                        threshold: float | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(calibrated, summary): `findings.pr_against_null` of every record panel with a stored null PR (its current
    rows), plus `draws` (random batches per revision); `findings.null_pr_summary` of each, with the final
    `head_class` circuit's heads above the null quantile. Both with `tier` first; empty when none is stored."""
    from circuitdev.sources.null_pr import current_null_pr

    calibrated, summary = [], []
    for tier, panel, rows in _records(tiers):
        try:
            stored = current_null_pr(results_dir, panel)
        except CircuitdevError:
            stored = None
        if stored is None or stored.empty:
            continue
        cal = findings.pr_against_null(rows, stored).assign(draws=int(stored["draw"].nunique()))
        calibrated.append(cal.assign(tier=tier))
        summary.append(findings.null_pr_summary(cal, rows, head_class=head_class, threshold=threshold).assign(
            tier=tier))
    cal = pd.concat(calibrated, ignore_index=True) if calibrated else pd.DataFrame(columns=["tier", "panel", "draws"])
    out = pd.concat(summary, ignore_index=True) if summary else pd.DataFrame(
        columns=["tier", "panel", "revision", "heads", "n_above_q", "circuit_above_q"])
    return cal[["tier", *[c for c in cal.columns if c != "tier"]]], out[["tier", *[c for c in out if c != "tier"]]]


def topk_k(tiers: Tiers, *, top_k: int = findings.PAPER_TOP_K) -> dict[str, int]:
    """K per panel: `top_k` for the published models; for a record panel, its head count times the paper's share
    for its family (`findings.scaled_k`, the family from its panel file; unknown: Pythia's share), times
    top_k / 45."""
    from circuitdev.sources.panels import load_panel

    out = {}
    for t in tiers.present:
        for panel in t.panels:
            if t.name == "published":
                out[panel] = top_k
                continue
            try:
                family = load_panel(panel, resolve_hub=False).family
            except CircuitdevError:
                family = None
            rows = t.table[t.table["panel"] == panel]
            n_heads = len(rows[["layer", "head"]].drop_duplicates())
            out[panel] = max(1, round(findings.scaled_k(n_heads, family) * top_k / findings.PAPER_TOP_K))
    return out


def topk_breakdowns(tiers: Tiers, *, top_k: int = findings.PAPER_TOP_K) -> pd.DataFrame:
    """`findings.topk_breakdown` of every present tier with K per panel from `topk_k`; `tier` first."""
    k = topk_k(tiers, top_k=top_k)
    out = tiers.apply(findings.topk_breakdown, k=k)
    return out if len(out) else pd.DataFrame(columns=["tier", *findings.BREAKDOWN_COLUMNS])


def null_scales(tiers: Tiers, results_dir: str | Path) -> pd.DataFrame:
    """Per record panel: the baseline its selectivities divide by ("A/B excluded" or "paper"), the one(s) its null
    draws do (`sources.record_format.null_baseline`; None: no draws), one_scale (the two agree, or there are no
    draws) and text (a clause for a page). Columns: tier, panel, selectivities, nulls, one_scale, text."""
    from circuitdev.sources.records import PanelRecords
    from circuitdev.sources.record_format import null_baseline

    rows = []
    for tier, panel, _ in _records(tiers):
        try:
            read = PanelRecords.open(results_dir, panel).read(on_missing="skip")
        except CircuitdevError:
            continue
        sel = "A/B excluded" if read.config.get("baseline_excludes_ab") else "paper"
        drawn = sorted({b for meta in read.sidecars.values() if (b := null_baseline(meta)) is not None})
        one = not drawn or drawn == [sel]
        text = (f"both on the {sel} baseline" if drawn else f"selectivities on the {sel} baseline, no null draws") \
            if one else f"selectivities on the {sel} baseline, null draws on the {' and '.join(drawn)} one"
        rows.append({"tier": tier, "panel": panel, "selectivities": sel, "nulls": " and ".join(drawn) or None,
                     "one_scale": one, "text": text})
    return pd.DataFrame(rows, columns=["tier", "panel", "selectivities", "nulls", "one_scale", "text"])


# ------------------------------------------------------------------------------------------------ glued sentences

TIER_KEYS = {"published": "pub", "toy": "toy", "measured": "measured"}


def glue_leads(ch, medians: pd.DataFrame) -> None:
    """F5's lead: `<pub|toy>-<class>` (the median lead per model, marked as a bound: findings.lead_texts) and
    `<tier>-exact` / `-bounds` / `-undefined` (how many leads of the tier are exact, bounds, undefined)."""
    for tier in ("published", "toy"):
        for c in ("induction", "previous-token", "first-token"):
            ch.glue_list(f"{TIER_KEYS[tier]}-{c}", medians[medians["head_class"] == c], "text", tier=tier)
    sums = medians.groupby("tier").sum(numeric_only=True) if len(medians) else pd.DataFrame()
    sums = sums.assign(bounds=sums["lower"] + sums["upper"]).reset_index() if len(sums) else pd.DataFrame(
        columns=["tier"])
    ch.glue_frame(sums, {"exact": "{:.0f}", "bounds": "{:.0f}", "undefined": "{:.0f}"}, by=("tier",))


def glue_base_rates(ch, base: pd.DataFrame, rule: str, causal_rule: str) -> None:
    """The share of all heads elevated at the first revision: `<tier>-<model>-base-first` (rule) and
    `-causal-first` (causal_rule) per published model, `toy-base-first` / `toy-causal-first` (lists)."""
    first = base[base["revision_index"] == 0] if len(base) else pd.DataFrame(
        columns=["tier", "panel", "rule", "share_elevated"])
    wide = first.pivot_table(index=["tier", "panel"], columns="rule", values="share_elevated", sort=False) \
        .reset_index() if len(first) else pd.DataFrame(columns=["tier", "panel"])
    wide = wide.rename(columns={rule: "base_first", causal_rule: "causal_first"})
    ch.glue_frame(wide, {"base-first": "{:.0%}", "causal-first": "{:.0%}"})
    for key in ("base_first", "causal_first"):
        ch.glue_list(f"toy-{key.replace('_', '-')}", wide.reindex(columns=["tier", "panel", key]), key, "{:.0%}",
                     tier="toy")


def glue_null(ch, null: pd.DataFrame, head_class: str, rule: str, causal_rule: str) -> pd.DataFrame:
    """The permutation null of `head_class`: `null-<pub|toy>-default` / `-causal` (the median lead with the null's
    mean and p, per model: findings.lead_null_texts), `null-significant` ("k of n" tests at p < 0.05),
    `first-revisions` (of the published models). Returns the class's rows."""
    mine = null[null["head_class"] == head_class] if len(null) else null
    for r, key in ((rule, "default"), (causal_rule, "causal")):
        for tier in ("published", "toy"):
            ch.glue_list(f"null-{TIER_KEYS[tier]}-{key}", mine[mine["rule"] == r] if len(mine) else mine, "text",
                         tier=tier, sep="; ")
    tests = mine["p_value"].notna().sum() if len(mine) else 0
    ch.glue("null-significant", f"{int((mine['p_value'] < 0.05).sum())} of {int(tests)}" if tests else None)
    ch.glue_list("first-revisions", mine.drop_duplicates(["tier", "panel"]) if len(mine) else mine,
                 "first_revision", tier="published")
    return mine


def glue_power(ch, null: pd.DataFrame, head_class: str) -> None:
    """Whether the lead tests of `head_class` can reject at all and what they conclude (issue 29 item 3):
    `power-tests`, `power-able`, `power-reject`, `power-list` (per model and rule) and `power-conclusion`
    (findings.power_conclusion), then the table of findings.LEAD_POWER_TABLE."""
    mine = null[(null["head_class"] == head_class) & null["p_value"].notna()] if len(null) else null
    said = findings.power_conclusion(mine)
    for key in ("tests", "able", "reject"):
        ch.glue(f"power-{key}", said[key])
    ch.glue("power-list", "; ".join(f"{p} ({t}), {r}: {w}" for t, p, r, w in zip(mine["tier"], mine["panel"],
                                                                               mine["rule"], mine["power"])) or None,
            absent="no test: no lead is defined in this build")
    ch.glue("power-conclusion", said["conclusion"])
    # no test in this build: the same columns, no rows (all 26 of an empty frame scrolled sideways at 1280 px)
    ch.table(null.reindex(columns=findings.LEAD_POWER_TABLE), precision=2, caption="Whether each test can "
             "reject at all: the smallest attainable p (min_p: every circuit head elevated at the earliest revision "
             "any head is), the p-value (≥; p_greater: strictly greater), and what the test concludes.")


def glue_null_pr(ch, calibrated: pd.DataFrame, summary: pd.DataFrame) -> None:
    """The PR null: `null-pr-draws` (random batches per revision), `null-pr-final` ("k of n" heads above the null
    p99 at the final revision, per panel), `null-pr-circuit` (the circuit heads among them)."""
    final = summary.groupby(["tier", "panel"], sort=False).tail(1) if len(summary) else summary
    final = final.assign(text=[f"{a} of {h}" for a, h in zip(final["n_above_q"], final["heads"])],
                         circuit=[c or "none" for c in final["circuit_above_q"]])
    ch.glue("null-pr-draws", "/".join(map(str, sorted(set(calibrated["draws"])))) or None, absent="no")
    ch.glue_list("null-pr-final", final, "text", absent="n/a (no null PR stored; run circuitdev null-pr)")
    ch.glue_list("null-pr-circuit", final, "circuit", absent="n/a")


def glue_topk(ch, breakdown: pd.DataFrame, dominance: pd.DataFrame, top_k: int) -> None:
    """The spectral top-K: `top-k`; from the published tier `topk-pub-final` (first-token heads at the final
    revision), `topk-pub-from` (from when they lead), `topk-<pub|toy>-dominates` ("k of n" models where they are the
    largest class at the final revision), `topk-same` (heads
    the authors list per model), `topk-recomputed` / `topk-cells` (cells where our recomputation gives the authors'
    count, of those they count); `topk-toy-k`, `topk-toy-largest`."""
    ch.glue("top-k", top_k)
    for key, column, tier in (("pub-final", "final_text", "published"), ("pub-from", "from_text", "published"),
                              ("toy-largest", "largest", "toy"), ("toy-k", "k", "toy")):
        ch.glue_list(f"topk-{key}", dominance, column, tier=tier)
    for tier in ("published", "toy"):
        rows = dominance[dominance["tier"] == tier] if len(dominance) else dominance
        ch.glue(f"topk-{TIER_KEYS[tier]}-dominates", f"{int(rows['dominates'].sum())} of {len(rows)}" if len(rows)
                else None)
    pub = ch.tiers.get("published")
    authors = pub.published.topk if pub is not None else pd.DataFrame(columns=["panel", "revision", "class", "count"])
    check = breakdown.merge(authors, on=["panel", "revision", "class"], suffixes=("", "_authors")) \
        if top_k == findings.PAPER_TOP_K and len(breakdown) else pd.DataFrame(columns=["count", "count_authors"])
    ch.glue("topk-recomputed", int((check["count"] == check["count_authors"]).sum()) if len(check) else None)
    ch.glue("topk-cells", len(check) if len(check) else None)
    listed = pub.published.features.groupby("panel")[["layer", "head"]].apply(
        lambda g: len(g.drop_duplicates())) if pub is not None and len(pub.published.features) else None
    ch.glue("topk-same", f"{int(listed.max())} distinct heads over all the files of a model" if listed is not None
            else None, absent="n/a (no published tier)")
