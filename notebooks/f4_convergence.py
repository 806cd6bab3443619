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
# # F4 · The screen converges early
#
# **The paper's claim.** The induction circuit found at the end of training is visible to the screen long before:
# a third, two thirds and all of its heads pass {glue:text}`f4-threshold` after a small share of training (for two
# thirds: {glue:text}`f4-paper-67-share` of the tokens).
#
# **What we compute.** S_final = the heads with induction selectivity ≥ {glue:text}`f4-threshold` at the final
# revision; recall(r) = the share of S_final already ≥ {glue:text}`f4-threshold` at revision r (`findings.circuit_recall`), and the first revision reaching each
# level (`findings.recall_milestones`).

# %% tags=["remove-cell"]
from typing import Optional

from circuitdev import notebook as nb
from circuitdev.notebook import Source

_before = set(globals())

# %% [markdown]
# ## Parameters

# %% tags=["parameters"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# circuit membership and "found" both use sel_induction ≥ this (paper: 50x)
induction_threshold: float = 50.0
# recall levels (paper: 1/3, 2/3, 3/3)
levels: list[float] = [0.3333333333333333, 0.6666666666666666, 1.0]
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
from circuitdev import findings, plots

tiers, glue = nb.open_chapter("f4", sources, data_dir=data_dir, published_dir=published_dir,
                              results_dir=results_dir, panels=panels)
recall = tiers.apply(findings.circuit_recall, threshold=induction_threshold)
reached = tiers.apply(lambda dev: findings.recall_milestones(findings.circuit_recall(
    dev, threshold=induction_threshold), levels=levels))
circuits = tiers.apply(findings.final_circuit, threshold=induction_threshold)
glue("threshold", induction_threshold, "{:g}×")
glue("paper-67-share", nb.per_panel(nb.claimed("F4.recall_fraction"), "paper", "{:g}%"))

# %% [markdown]
# ## Recall over training
#
# {numref}`fig-f4-recall` follows, for each model, the share of its final induction circuit that already passes
# {glue:text}`f4-threshold`.

# %% tags=["hide-input"]
nb.show_figure(plots.recall_curves(recall, threshold=induction_threshold), name="fig-f4-recall",
               caption=f"Recall of the final-revision induction circuit (heads ≥ {induction_threshold:g}×) at every "
                       "revision, against training tokens; dotted lines at one, two and three thirds.",
               provenance=tiers.provenance())

# %% [markdown]
# ## When the circuit is found
#
# The final circuits in the authors' files are {glue:text}`f4-pub-circuits`. Two thirds of each are found after
# {glue:text}`f4-pub-67-share` of training. In the toy panel the circuits are {glue:text}`f4-toy-circuits` and two
# thirds are found after {glue:text}`f4-toy-67-share` of training.

# %% tags=["hide-input"]
two_thirds = levels[1] if len(levels) > 1 else levels[0]
as_share = "{:.2g}%".format
for tier, key in (("published", "pub"), ("toy", "toy")):
    glue(f"{key}-circuits", nb.circuit_names(circuits, tier=tier), absent="n/a (no data in this tier)")
    glue(f"{key}-67-share", nb.per_panel(nb.select(reached, tier=tier, level=two_thirds), "token_fraction",
                                         lambda f: as_share(100 * f) if f == f else "never"), absent="n/a")
if len(reached):
    nb.show_table(reached, caption="First revision reaching each recall level.")

# %% [markdown]
# ## The paper's numbers beside the authors' data
#
# The paper's one-third entries are not reproducible under its own rule in the authors' files; the table shows
# what the files give.

# %% tags=["hide-input"]
audit = nb.paper_vs_data(tiers, ["F4"])
if audit is None:
    nb.note("The comparison needs the published tier (see the note at the top of the page).")
else:
    nb.show_table(audit, caption="F4 claims: the paper's value and the value in the authors' files.")
