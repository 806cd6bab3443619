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
# (`findings.head_trajectories`), its formation (first revision ≥ the class threshold) and its elevation (first
# revision where PR − 1 reaches a share of its own peak), and the lead in checkpoints between the two
# (`findings.pr_lead`). The paper does not define "elevated", so the lead is also shown over a grid of definitions
# (`findings.pr_lead_sensitivity`).

# %% tags=["remove-cell"]
from typing import Optional

from circuitdev import notebook as nb
from circuitdev.findings import ElevationRule
from circuitdev.notebook import Source
from circuitdev.schema import HeadClass

_before = set(globals())

# %% [markdown]
# ## Parameters
#
# `elevation_rule` and `elevation_level` define "elevated" (see `findings.pr_elevated`): `fraction-of-peak` with
# a level of one half means PR − 1 has reached half of its own maximum.

# %% tags=["parameters"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# the class whose circuit heads are drawn
head_class: HeadClass = "induction"
# formation threshold (None: the class's, 50x induction, 100x prev, 30x BOS)
threshold: Optional[float] = None
# fraction-of-peak, ratio-to-start or above-level
elevation_rule: ElevationRule = "fraction-of-peak"
# the level of the elevation rule
elevation_level: float = 0.5
# classes whose lead is tabulated
lead_classes: list[HeadClass] = ["induction", "previous-token", "first-token"]
# probe records (None: data/results of the repository)
results_dir: Optional[str] = None
# authors' files (auto: ../shared/published if it exists; None: none)
published_dir: Optional[str] = "auto"
# data folder holding panels/ (None: the repository's data/)
data_dir: Optional[str] = None
# record panels to read (None: every panel with records)
panels: Optional[list[str]] = None

# %% tags=["remove-cell"]
nb.check_notebook_parameters(globals(), _before)

# %% tags=["hide-input"]
import pandas as pd

from circuitdev import findings, plots

tiers, glue = nb.open_chapter("f5", sources, data_dir=data_dir, published_dir=published_dir,
                              results_dir=results_dir, panels=panels)
tau = findings.FORMATION_THRESHOLDS.get(head_class, 30.0) if threshold is None else threshold
traj = tiers.apply(findings.head_trajectories, head_class=head_class, threshold=tau)
leads = pd.concat([tiers.apply(findings.pr_lead, head_class=c, rule=elevation_rule, level=elevation_level)
                   for c in lead_classes], ignore_index=True)
paper = nb.claimed("F5.lead").set_index("head_class")["paper"]
for c in ("induction", "previous-token", "first-token"):
    glue(f"paper-lead-{c}", paper.get(c), absent="n/a")
glue("class", head_class)
glue("threshold", tau, "{:g}×")
glue("rule", f"{elevation_rule} at {elevation_level:g}")

# %% [markdown]
# ## PR and selectivity of the circuit heads
#
# {numref}`fig-f5-pr` puts each {glue:text}`f5-class` circuit head's PR − 1 above its selectivity on one time
# axis; the dashed line is its formation at {glue:text}`f5-threshold`.

# %% tags=["hide-input"]
nb.show_figure(plots.pr_selectivity(traj, threshold=tau, class_label=head_class), name="fig-f5-pr",
               caption=f"PR − 1 (top, log) and {head_class} selectivity (bottom, log) of every final-revision "
                       f"{head_class}-circuit head, per model and tier; dashed lines mark formation (first revision "
                       f"≥ {tau:g}×).", provenance=tiers.provenance())

# %% [markdown]
# ## The lead
#
# With "elevated" read as {glue:text}`f5-rule`, the median lead of induction heads in the authors' files is
# {glue:text}`f5-pub-lead-induction` checkpoints, of previous-token heads {glue:text}`f5-pub-lead-previous-token`
# and of sink heads {glue:text}`f5-pub-lead-first-token` (positive: PR first). In the toy panel the induction lead
# is {glue:text}`f5-toy-lead-induction`.

# %% tags=["hide-input"]
if len(leads):
    medians = leads.groupby(["tier", "panel", "head_class"], sort=False).agg(
        heads=("name", "size"), formed=("formation_index", "count"),
        median_lead=("lead_checkpoints", "median"), min_lead=("lead_checkpoints", "min"),
        max_lead=("lead_checkpoints", "max")).reset_index()
    nb.show_table(medians, caption=f"Lead of PR elevation over formation, in checkpoints, per model and class "
                                   f"(elevation: {elevation_rule} at {elevation_level:g}).")
else:
    medians = pd.DataFrame(columns=["tier", "panel", "head_class", "median_lead"])
for tier, key in (("published", "pub"), ("toy", "toy")):
    for c in ("induction", "previous-token", "first-token"):
        rows = medians[(medians["tier"] == tier) & (medians["head_class"] == c)]
        glue(f"{key}-lead-{c}", nb.per_panel(rows, "median_lead", "{:+g}"), absent="n/a")

# %% [markdown]
# ## How much the lead depends on the definition of "elevated"

# %% tags=["hide-input"]
grid = tiers.apply(findings.pr_lead_sensitivity, head_class=head_class, threshold=tau)
if len(grid):
    table = grid.groupby(["tier", "panel", "rule", "level"], sort=False)["lead_checkpoints"].median().unstack(
        ["rule", "level"])
    table.columns = [f"{r} {lv:g}" for r, lv in table.columns]
    nb.show_table(table.reset_index(), caption=f"Median {head_class} lead (checkpoints) under each definition of "
                                               "elevated (columns: rule and level).")

# %% [markdown]
# ## The paper's numbers beside the authors' data

# %% tags=["hide-input"]
audit = nb.paper_vs_data(tiers, ["F5"])
if audit is None:
    nb.note("The comparison needs the published tier (see the note at the top of the page).")
else:
    nb.show_table(audit, caption="F5 claims: the paper's value and the value in the authors' files.")
