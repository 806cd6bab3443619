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
# # F5 · Does the participation ratio rise before the circuit forms?

# %% tags=["remove-cell"]
import pandas as pd

from circuitdev.analysis import findings
from circuitdev.analysis.findings import f5_pr_lead as pr_lead
from circuitdev.book import ElevationRule, HeadClass, Source, chapter, controls, plots

# %% tags=["parameters", "remove-cell"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# the class whose circuit heads are drawn
head_class: HeadClass = "induction"
# formation threshold (not set: the class's, 50x induction, 100x prev, 30x BOS)
threshold: float | None = None  # in (0, inf)
# fraction-of-peak, peak-to-date, ratio-to-start or above-level
elevation_rule: ElevationRule = "fraction-of-peak"
# the level of the elevation rule
elevation_level: float = 0.5  # in (0, inf)
# the rule beside it that uses no future (the control's second column)
causal_rule: ElevationRule = "peak-to-date"
# the level of that rule
causal_level: float = 0.5  # in (0, inf)
# classes whose lead is tabulated
lead_classes: list[HeadClass] = ["induction", "previous-token", "first-token"]
# permutations of the null (formation times shuffled across heads)
n_permutations: int = 10000  # in [100, 1000000]
# seed of the permutations
permutation_seed: int = 0  # in [0, inf)

# %% tags=["remove-input"]
ch = chapter("f5_pr_lead", globals())
ch.verdict("F5.lead");  # the verdict under the title: what the data support (issue 29)

# %% [markdown]
# **The paper's claim.** A head's participation ratio (PR) — how many directions its output at the query spreads
# over — becomes elevated before the head passes its class threshold: by {glue:text}`f5-paper-lead-induction`
# checkpoints for induction heads, {glue:text}`f5-paper-lead-previous-token` for previous-token heads and
# {glue:text}`f5-paper-lead-first-token` for sink heads.
#
# **What we compute.** For every head of each final-revision circuit, PR and selectivity at every revision
# (`pr_lead.head_trajectories`), its formation (first revision ≥ the class threshold) and its elevation (first
# revision where PR − 1 reaches a share of its own peak), and the lead in checkpoints between the two
# (`pr_lead.pr_lead`). The paper does not define "elevated", so the lead is also shown over a grid of definitions
# (`pr_lead.pr_lead_sensitivity`). Then the controls a lead needs (`findings.f5_control`): how many heads of any
# kind a rule calls elevated (its base rate), whether the circuit leads by more than heads drawn at random (a
# permutation null), and where PR sits against PR on random tokens (the null PR). Which classes the heads of
# highest PR belong to over training, the authors' spectral top-K, is {doc}`spectral_topk`.

# %% tags=["remove-input"]
tau = pr_lead.FORMATION_THRESHOLDS.get(head_class, 30.0) if threshold is None else threshold
for key, value in {**{f"paper-lead-{c}": v for c, v in ch.claimed("F5.lead").set_index("head_class")["paper"].items()},
                   "class": head_class, "threshold": f"{tau:g}×", "rule": f"{elevation_rule} at {elevation_level:g}",
                   "causal-rule": f"{causal_rule} at {causal_level:g}", "n-perm": f"{n_permutations:,}"}.items():
    ch.glue(key, value)

# %% [markdown]
# ## PR and selectivity of the circuit heads
#
# {numref}`fig-f5-pr` puts each {glue:text}`f5-class` circuit head's PR − 1 above its selectivity on one time
# axis; the dashed line is its formation at {glue:text}`f5-threshold`.

# %% tags=["remove-input", "full-width"]
ch.figure(plots.pr_selectivity(ch.apply(pr_lead.head_trajectories, head_class=head_class, threshold=tau),
                               threshold=tau, class_label=head_class), name="fig-f5-pr",
          caption=f"PR − 1 (upper axis of each block) and {head_class} selectivity (lower axis) of every final "
                  f"{head_class}-circuit head, log scales; dashed: formation (first revision ≥ {tau:g}×, dotted).")

# %% [markdown]
# ## The lead
#
# With "elevated" read as {glue:text}`f5-rule`, the median lead of induction heads in the authors' files is
# {glue:text}`f5-pub-induction` checkpoints, of previous-token heads {glue:text}`f5-pub-previous-token` and of sink
# heads {glue:text}`f5-pub-first-token` (positive: PR first). In the toy panel the induction lead is
# {glue:text}`f5-toy-induction`.
#
# **Censored leads.** An event at the first probed revision happened *at or before* it. A head elevated there and
# formed later has a lead of *at least* its formation index (a lower bound, "≥"); a head formed there and elevated
# later has a lead of *at most* minus its elevation index (an upper bound, "≤"; so has a head never elevated); a
# head formed and elevated both at the first revision has no lead that can be read (undefined: left out, not scored
# 0). Where the first revision is the initialisation itself (a toy panel's step0, 0 tokens), nothing came before it:
# a head formed there formed there exactly, and a head elevated there has no lead at all (at initialisation the rule
# calls nearly every head elevated, so that elevation says nothing): undefined, not a bound — the toy leads are
# values or undefined, never bounds from step0. The table counts them; the medians take the bounds at their values.
# Under {glue:text}`f5-rule`, of the
# published circuit heads {glue:text}`f5-pub-exact` have an exact lead, {glue:text}`f5-pub-bounds` a bound and
# {glue:text}`f5-pub-undefined` none; in the toy panels {glue:text}`f5-toy-exact` exact,
# {glue:text}`f5-toy-bounds` bounds, {glue:text}`f5-toy-undefined` none.

# %% tags=["remove-input"]
medians = pr_lead.lead_texts(pr_lead.lead_summary(pd.concat(
    [ch.apply(pr_lead.pr_lead, head_class=c, rule=elevation_rule, level=elevation_level) for c in lead_classes])))
controls.glue_leads(ch, medians)
ch.table(medians.drop(columns=["text", "formed", "min_lead", "max_lead"]), caption="Lead of PR elevation over "
         "formation (checkpoints): exact leads, lower / upper bounds, undefined; medians of the defined and the exact.")

# %% [markdown]
# ## How often is any head "elevated"? The base rate
#
# A lead is only informative if heads outside the circuit are not elevated just as early. {numref}`fig-f5-base`
# shows, at every revision, the share of *all* heads each rule calls elevated. Under {glue:text}`f5-rule` the
# share at the first probed revision is {glue:text}`f5-pub-pythia-base-first` (Pythia-1B),
# {glue:text}`f5-pub-olmo-base-first` (OLMo-1B) and {glue:text}`f5-pub-olmoe-base-first` (OLMoE-1B-7B), and
# {glue:text}`f5-toy-base-first` in the toy panels. Where that share is high, a head that forms later gets a
# positive lead almost automatically. The rule takes the peak over the whole run, so it also uses the future. The
# rule beside it, {glue:text}`f5-causal-rule`, uses only what was measured up to each revision: PR must have climbed from its
# lowest value so far by that share of its highest PR − 1 so far, so no head is elevated at the first revision
# (there: {glue:text}`f5-pub-pythia-causal-first`, {glue:text}`f5-pub-olmo-causal-first`,
# {glue:text}`f5-pub-olmoe-causal-first`; toy: {glue:text}`f5-toy-causal-first`).

# %% tags=["remove-input", "full-width"]
settings = [(elevation_rule, elevation_level), (causal_rule, causal_level)]
base = pd.concat([ch.apply(findings.elevation_base_rate, rule=r, level=lv) for r, lv in settings], ignore_index=True)
controls.glue_base_rates(ch, base, elevation_rule, causal_rule)
ch.figure(plots.base_rate_lines(base), name="fig-f5-base", caption="Share of all heads (with a PR) each rule calls "
          "elevated at each revision (solid: the page's rule; dashed: the rule without future), per model and tier.")

# %% [markdown]
# ## The lead against heads drawn at random
#
# The control: give the circuit's formation times to as many heads drawn at random from all heads (formation
# times shuffled across heads, {glue:text}`f5-n-perm` permutations, seeded), read their leads with the same rule
# and the same censoring, and ask how often their median lead reaches the circuit's (a one-sided p-value).
# {numref}`fig-f5-null` draws the circuit's median lead beside the null's mean and 95% range, and the median lead
# of the non-circuit heads against the same formation times. Under {glue:text}`f5-rule` the
# {glue:text}`f5-class` circuit's median lead is {glue:text}`f5-null-pub-default` in the published models and
# {glue:text}`f5-null-toy-default` in the toy panels; under {glue:text}`f5-causal-rule`
# {glue:text}`f5-null-pub-causal` and {glue:text}`f5-null-toy-causal`. It exceeds the null at p < 0.05 in
# {glue:text}`f5-null-significant` of these model × rule tests.

# %% tags=["remove-input", "full-width"]
null = findings.lead_null_texts(pd.concat([ch.apply(findings.lead_null_settings, settings, head_classes=[c],
                                                    n_perm=n_permutations, seed=permutation_seed)
                                           for c in lead_classes], ignore_index=True))
controls.glue_null(ch, null, head_class, elevation_rule, causal_rule)
ch.figure(plots.lead_vs_null(null, head_class=head_class), name="fig-f5-null", caption="The circuit's median lead "
          "(black; a triangle where it is a bound) against the permutation null (square: mean; grey: 95% range), "
          "and the non-circuit heads' median lead against the same formation times (diamond); p-value at right.")
ch.table(null[findings.LEAD_NULL_TABLE], precision=2, caption="The lead against its null per model, class and rule: "
         "medians of the circuit, non-circuit and transient heads; the null's mean and 95% range; p.")

# %% [markdown]
# ## Can the test reject at all?
#
# A permutation test over few circuit heads and few revisions has a floor. Even the best outcome the data allow —
# every circuit head elevated at the earliest revision any head is — has a p-value under the same null, the smallest
# attainable p (`min_p`). Where it is 0.05 or more the test cannot reject whatever the data, and "not significant"
# is then true by construction: it says nothing for or against the paper. Of the {glue:text}`f5-power-tests`
# model × rule tests of the {glue:text}`f5-class` circuit, {glue:text}`f5-power-able` can reject at 0.05 and
# {glue:text}`f5-power-reject` of those do. Per model and rule: {glue:text}`f5-power-list`.
#
# **What this says.** {glue:text}`f5-power-conclusion`

# %% tags=["remove-input"]
controls.glue_power(ch, null, head_class)

# %% [markdown]
# ## What the lead hangs on
#
# The lead is read off two events per head, so it hangs on (i) the definition of "elevated" (the table below: the
# median lead under each definition), (ii) the first probed revision — every event before it collapses onto it,
# which is what the base rate measures; the authors' runs start at {glue:text}`f5-first-revisions` — and (iii) the
# formation threshold.

# %% tags=["remove-input"]
ch.table(pr_lead.sensitivity_medians(ch.apply(pr_lead.pr_lead_sensitivity, head_class=head_class, threshold=tau)),
         caption=f"Median {head_class} lead (checkpoints) under each definition of elevated (columns: rule, level).")

# %% [markdown]
# ## PR against PR on random tokens
#
# A head with no structure still has a PR. The authors calibrate PR once, at the final checkpoint, on sequences of
# uniform random tokens; here every toy revision has it (circuitdev null-pr: {glue:text}`f5-null-pr-draws` random
# batches per revision, as many sequences as the PR itself uses). {numref}`fig-f5-null-pr` draws each circuit
# head's PR over the range of its own null draws and the 99th percentile of every head's null PR. At the final
# revision {glue:text}`f5-null-pr-final` heads exceed that 99th percentile; the circuit heads among them:
# {glue:text}`f5-null-pr-circuit`.

# %% tags=["remove-input", "full-width"]
cal, summary = controls.null_pr_calibration(ch.tiers, ch.folders.results_dir, head_class=head_class, threshold=tau)
controls.glue_null_pr(ch, cal, summary)
ch.figure(plots.pr_null_calibration(cal, ch.apply(findings.final_circuit, head_class=head_class, threshold=tau)),
          name="fig-f5-null-pr", tiers=["toy", "measured"], caption="PR of each final circuit head (lines) over the "
          "range of its PR on random tokens (bands: min–max over the null draws) and the 99th percentile of every "
          "head's null PR (dashed), per revision.")

# %% [markdown]
# ## How robust
#
# The lead depends on the bar at which a head counts as formed. Over the grid of bars of the robustness table
# ({doc}`robustness`), a positive median lead holds in the authors' files for
# {glue:text}`f5-robust-f5-lead-pub-ranges`; in the toy panel for {glue:text}`f5-robust-f5-lead-toy-ranges`. At the
# paper's bars it hangs on {glue:text}`f5-robust-f5-lead-pub-hangs-on`.

# %% tags=["remove-input", "full-width"]
robust = ch.how_robust("F5.lead")

# %% [markdown]
# ## The paper's numbers beside the authors' data

# %% tags=["remove-input"]
ch.paper_vs_data("F5")
