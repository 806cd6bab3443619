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
# # F5 · The participation ratio rises before the circuit forms
#
# **The paper's claim.** A head's participation ratio (PR) — how many directions its output at the query spreads
# over — becomes elevated before the head passes its class threshold: by {glue:text}`f5-paper-lead-induction`
# checkpoints for induction heads, {glue:text}`f5-paper-lead-previous-token` for previous-token heads and
# {glue:text}`f5-paper-lead-first-token` for sink heads.
#
# **What we compute.** For every head of each final-revision circuit, PR and selectivity at every revision
# (`pr_lead.head_trajectories`), its formation (first revision ≥ the class threshold) and its elevation (first
# revision where PR − 1 reaches a share of its own peak), and the lead in checkpoints between the two
# (`pr_lead.pr_lead`). The paper does not define "elevated", so the lead is also shown over a grid of definitions
# (`pr_lead.pr_lead_sensitivity`).

# %% tags=["remove-cell"]
import pandas as pd

from circuitdev.analysis import pr_lead
from circuitdev.book import ElevationRule, HeadClass, Source, chapter, plots

# %% tags=["parameters", "remove-cell"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# the class whose circuit heads are drawn
head_class: HeadClass = "induction"
# formation threshold (None: the class's, 50x induction, 100x prev, 30x BOS)
threshold: float | None = None  # in (0, inf)
# fraction-of-peak, ratio-to-start or above-level
elevation_rule: ElevationRule = "fraction-of-peak"
# the level of the elevation rule
elevation_level: float = 0.5  # in (0, inf)
# classes whose lead is tabulated
lead_classes: list[HeadClass] = ["induction", "previous-token", "first-token"]

# %% tags=["remove-input"]
ch = chapter("f5_pr_lead", globals())
tau = pr_lead.FORMATION_THRESHOLDS.get(head_class, 30.0) if threshold is None else threshold
traj = ch.apply(pr_lead.head_trajectories, head_class=head_class, threshold=tau)
leads = pd.concat([ch.apply(pr_lead.pr_lead, head_class=c, rule=elevation_rule, level=elevation_level)
                   for c in lead_classes], ignore_index=True)
paper = ch.claimed("F5.lead").set_index("head_class")["paper"]
for c in ("induction", "previous-token", "first-token"):
    ch.glue(f"paper-lead-{c}", paper.get(c))
ch.glue("class", head_class)
ch.glue("threshold", tau, "{:g}×")
ch.glue("rule", f"{elevation_rule} at {elevation_level:g}")

# %% [markdown]
# ## PR and selectivity of the circuit heads
#
# {numref}`fig-f5-pr` puts each {glue:text}`f5-class` circuit head's PR − 1 above its selectivity on one time
# axis; the dashed line is its formation at {glue:text}`f5-threshold`.

# %% tags=["remove-input"]
ch.figure(plots.pr_selectivity(traj, threshold=tau, class_label=head_class), name="fig-f5-pr",
          caption=f"PR − 1 (top, log) and {head_class} selectivity (bottom, log) of every final-revision "
                  f"{head_class}-circuit head, per model and tier; dashed lines mark formation (first revision "
                  f"≥ {tau:g}×).")

# %% [markdown]
# ## The lead
#
# With "elevated" read as {glue:text}`f5-rule`, the median lead of induction heads in the authors' files is
# {glue:text}`f5-pub-induction` checkpoints, of previous-token heads {glue:text}`f5-pub-previous-token` and of sink
# heads {glue:text}`f5-pub-first-token` (positive: PR first). In the toy panel the induction lead is
# {glue:text}`f5-toy-induction`.

# %% tags=["remove-input"]
medians = pr_lead.lead_summary(leads)
for tier, key in (("published", "pub"), ("toy", "toy")):
    for c in ("induction", "previous-token", "first-token"):
        ch.glue_list(f"{key}-{c}", medians[medians["head_class"] == c], "median_lead", "{:+g}", tier=tier)
ch.table(medians, caption=f"Lead of PR elevation over formation, in checkpoints, per model and class "
                          f"(elevation: {elevation_rule} at {elevation_level:g}).")

# %% [markdown]
# ## How much the lead depends on the definition of "elevated"

# %% tags=["remove-input"]
grid = ch.apply(pr_lead.pr_lead_sensitivity, head_class=head_class, threshold=tau)
if len(grid):
    table = grid.groupby(["tier", "panel", "rule", "level"], sort=False)["lead_checkpoints"].median().unstack(
        ["rule", "level"])
    table.columns = [f"{r} {lv:g}" for r, lv in table.columns]
    ch.table(table.reset_index(), caption=f"Median {head_class} lead (checkpoints) under each definition of "
                                          "elevated (columns: rule and level).")

# %% [markdown]
# ## The paper's numbers beside the authors' data

# %% tags=["remove-input"]
ch.paper_vs_data("F5")
