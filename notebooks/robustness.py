# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Beyond the paper · How robust is each finding
#
# Every finding of the paper rests on a bar: a head counts as a sink at first-token selectivity ≥
# {glue:text}`rob-paper-bos-threshold`, as an induction head at ≥ {glue:text}`rob-paper-induction-threshold`, and a
# milestone is the first revision at which such a count crosses a line. The paper states each claim at one bar and
# one rule. This page re-evaluates every threshold-dependent claim over one grid of bars,
# {glue:text}`rob-grid` ({glue:text}`rob-n-bars` bars, `findings.ROBUSTNESS_THRESHOLDS`), and under every rule
# variant the library has (per-class or best-class counting; a milestone's first hit or the revision from which it
# holds for good), with the findings functions themselves (`findings.robustness_table`; `circuitdev reanalyse`
# writes the same table for the authors' files as `robustness.csv`).
#
# For each claim, cell and bar the map below says whether the paper's statement **holds**, **fails**, or rests on a
# **bound**: a milestone already reached at a model's first probed revision was reached at or before it, one never
# reached lies after the last, and whatever is built from them (a gap, a recall entry) is then a bound, not a value.
# The claims, what each row tests and what its value is:

# %% tags=["remove-cell"]
import pandas as pd

from circuitdev.analysis import findings
from circuitdev.book import Source, chapter, plots

# %% tags=["parameters", "remove-cell"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# the claims to evaluate (ids of findings.ROBUSTNESS_CLAIMS); empty: all of them
claims: list[str] = []

# %% tags=["remove-input"]
ch = chapter("robustness", globals(), prefix="rob")
chosen = claims or list(findings.ROBUSTNESS_CLAIMS)
ch.table(findings.claims_frame(chosen), caption="The threshold-dependent claims and the statement each row tests.")
ch.glue("grid", findings.ranges_text([(5.0, 100.0)]) + " in steps of 5×, then " +
        ", ".join(f"{t:g}×" for t in findings.ROBUSTNESS_THRESHOLDS if t > 100))
ch.glue("n-bars", len(findings.ROBUSTNESS_THRESHOLDS))
table = ch.apply(findings.robustness_table, claims=chosen)
for claim in chosen:
    ch.how_robust(claim, table=table, figure=False)
# the verdict of every claim on every tier (glued for the intro's table: rob-verdict-<claim>-<tier>[-<model>])
claim_verdicts = pd.concat([ch.verdict(claim, show=False) for claim in chosen], ignore_index=True)

# %% [markdown]
# ## The map
#
# {numref}`fig-rob-map-published` shows every claim of the authors' files at every bar, under the paper's rule: one
# block per claim, in it one row per model, item and moving bar. Blue: the paper's statement holds; vermillion: it
# fails; their light shades mark bars where the value is only a bound; grey: the claim has no value to test there
# (no rise to share, no lead measured). The outlined cell is the paper's own bar. The toy and measured tiers follow
# where the claims apply to them (the milestone and recall entries quote the published models' revisions and apply
# only to those models). F5's lead is the one claim with a null test: its cells are coloured by the claim's verdict
# (below), not by the sign of the lead alone, since a lead of the paper's sign that a permutation test does not show
# above chance, or cannot show whatever the data, supports nothing.

# %% tags=["remove-input", "full-width"]
for tier in ch.tiers.present:
    ch.figure(plots.robustness_map(table, tier=tier.name, verdicts=claim_verdicts), name=f"fig-rob-map-{tier.name}",
              tiers=[tier.name],
              caption=f"Where each claim holds in the {tier.name} tier, claims × bars, under the paper's rule (blue: "
                      "holds, vermillion: fails, light: the value is a bound, grey: untestable; outlined: the "
                      "paper's bar). F5's lead is coloured by its verdict, not by its sign: a lead of the paper's sign "
                      "that its permutation test does not show above chance is vermillion, one the test cannot "
                      "decide whatever the data is grey.")

# %% [markdown]
# ## The verdicts
#
# One verdict per claim, model and item, by one set of rules applied in this order (`findings.claim_verdicts`;
# `circuitdev reanalyse` writes the same for the authors' files as `verdicts.csv`): **untestable** when no value
# exists at the paper's bar, or when the statistic has the claim's direction but its null test cannot reject at 0.05
# whatever the data; **not supported** when it fails at the paper's bar under the paper's rule, or when its null test
# could reject and does not; **fragile** when it holds there but fails (with a value, not a bound) at a neighbouring
# bar (±5×) or under another rule variant; **supported** otherwise. "bound": the value at the paper's bar is
# censored. The book's first page quotes these verdicts, and each findings chapter states its own under its title.

# %% tags=["remove-input"]
ch.table(claim_verdicts[["tier", *findings.VERDICT_COLUMNS]] if len(claim_verdicts) else claim_verdicts,
         caption="The verdict of every claim, model and item, with the reason that decided it.")

# %% [markdown]
# ## Claim by claim
#
# Where the paper's statement holds, as the set of bar ranges it really is (in the authors' files). What each claim
# hangs on at the paper's bar (the deciding head and its margin) is said once, in its chapter's "How robust".
#
# **F1, the layer floor** (no first-token head in layers 0/1 at any revision) holds for
# {glue:text}`rob-robust-f1-floor-pub-ranges` (what it hangs on: {doc}`f1_floor`). Toy panel:
# {glue:text}`rob-robust-f1-floor-toy-ranges`.
#
# **F2, the three shapes** (Pythia a ramp, OLMo a transition, OLMoE a ramp) hold for
# {glue:text}`rob-robust-f2-shapes-pub-ranges` (what decides a shape: {doc}`f2_shapes`).
#
# **F3, the gap** (the induction milestone strictly before the sink milestone) holds,
# {glue:text}`rob-robust-f3-gap-pub-ranges` (what it hangs on: {doc}`f3_milestones`). Toy panel:
# {glue:text}`rob-robust-f3-gap-toy-ranges`.
#
# **F3, the milestone table** (each milestone first reached at the revision the paper gives):
# {glue:text}`rob-robust-f3-milestones-pub-ranges`.
#
# **F4, the recall entries** (recall of the final circuit reaching 1/3, 2/3 and all of it at the revisions the
# paper gives): {glue:text}`rob-robust-f4-recall-pub-ranges` (each entry hangs on one circuit head:
# {doc}`f4_convergence`).
#
# **F5, the PR lead** (the median lead of PR over formation positive; zero for previous-token heads, as the paper
# says): {glue:text}`rob-robust-f5-lead-pub-ranges`. Toy panel: {glue:text}`rob-robust-f5-lead-toy-ranges`.

# %% [markdown]
# ## Rules: does the verdict at the paper's bar change with the rule?
#
# The same claims at the paper's own bar under every rule variant: a claim whose verdict flips from per-class to
# best-class counting, or from a milestone's first hit to the revision from which it holds for good, rests on the
# rule as much as on the data. Across the tiers, {glue:text}`rob-rule-flips` of the
# {glue:text}`rob-rule-cells` claim cells evaluated under more than one rule change their verdict with the rule.

# %% tags=["remove-input"]
at_bar = table[table["threshold"] == table["paper_threshold"]] if len(table) else table
verdicts = findings.rule_verdicts(at_bar)
ch.glue("rule-flips", int(verdicts["flips"].sum()) if len(verdicts) else None)
ch.glue("rule-cells", len(verdicts) if len(verdicts) else None)
ch.table(verdicts, caption="Each claim at the paper's bar: its verdict under the paper's rule, then under the other "
         "rule variants (holds / fails; * a bound).")
summary = findings.claim_summary(table) if len(table) else table
# one value per row, in its claim's unit ("3.05T", not "3,048" billions beside it): value_text, not value_at_paper
ch.table(summary.drop(columns=["value_at_paper"], errors="ignore").rename(columns={"value_text": "value_at_paper"}),
         caption="Per claim, model and moving bar: bars where the paper's statement holds (under the paper's rule), "
                 "and the value at the paper's bar in the claim's unit.")
