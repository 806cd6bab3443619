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
# a third, two thirds and all of its heads pass {glue:text}`f4-paper-induction-threshold` after a small share of
# training (for two thirds: {glue:text}`f4-paper-67-share` of the tokens).
#
# **What we compute.** S_final = the heads with induction selectivity ≥ {glue:text}`f4-threshold` at the final
# revision; recall(r) = the share of S_final already ≥ {glue:text}`f4-threshold` at revision r
# (`findings.circuit_recall`), and the first revision reaching each level (`findings.recall_milestones`).

# %% tags=["remove-cell"]
from circuitdev.analysis import findings
from circuitdev.book import Source, chapter, plots, with_interval_text

# %% tags=["parameters", "remove-cell"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# circuit membership and "found" both use sel_induction ≥ this (paper: 50x)
induction_threshold: float = 50.0  # in (0, inf)
# recall levels (paper: 1/3, 2/3, 3/3)
levels: list[float] = [0.3333333333333333, 0.6666666666666666, 1.0]  # in (0, 1]

# %% tags=["remove-input"]
ch = chapter("f4_convergence", globals())
recall = ch.apply(findings.circuit_recall, threshold=induction_threshold, intervals=True)
reached = ch.apply(lambda dev: findings.recall_milestones(findings.circuit_recall(dev, threshold=induction_threshold),
                                                          levels=levels))
circuits = ch.apply(findings.final_circuit, threshold=induction_threshold)
ch.glue("threshold", induction_threshold, "{:g}×")
ch.glue_list("paper-67-share", ch.claimed("F4.recall_fraction"), "paper", "{:g}%")

# %% [markdown]
# ## Recall over training
#
# {numref}`fig-f4-recall` follows, for each model, the share of its final induction circuit that already passes
# {glue:text}`f4-threshold`. The bands of the probed tiers are 95% intervals from {glue:text}`f4-boot`, with the
# final circuit itself re-screened on every resample: in the toy panel the final circuits hold
# {glue:text}`f4-toy-circuit-size` heads. The published tier has no per-sequence data and so no band; its
# uncertainty is the threshold sensitivity ({doc}`sensitivity`).

# %% tags=["remove-input"]
ch.figure(plots.recall_curves(recall, threshold=induction_threshold), name="fig-f4-recall",
          caption=f"Recall of the final-revision induction circuit (heads ≥ {induction_threshold:g}×) at every "
                  "revision, against training tokens; dotted lines at one, two and three thirds; bands: 95% "
                  "bootstrap intervals over the probe batch's sequences (record tiers only).")
ch.glue_bootstrap()
final = recall.groupby(["tier", "panel"], sort=False).tail(1) if len(recall) else recall
ch.glue_list("toy-circuit-size", with_interval_text(final, "n_circuit", "{:.0f}") if len(final) else final,
             "n_circuit_ci", tier="toy")

# %% [markdown]
# ## When the circuit is found
#
# The final circuits in the authors' files are {glue:text}`f4-pub-circuits`. Two thirds of each are found after
# {glue:text}`f4-pub-67-share` of training. In the toy panel the circuits are {glue:text}`f4-toy-circuits` and two
# thirds are found after {glue:text}`f4-toy-67-share` of training.

# %% tags=["remove-input"]
names = circuits.groupby(["tier", "panel"], sort=False)["name"].agg(" ".join).reset_index() if len(circuits) else circuits
two_thirds = reached[(reached["level"] - levels[min(1, len(levels) - 1)]).abs() < 1e-9] if len(reached) else reached
for tier, key in (("published", "pub"), ("toy", "toy")):
    ch.glue_list(f"{key}-circuits", names, "name", "{{{}}}", tier=tier, sep="; ")
    ch.glue_list(f"{key}-67-share", two_thirds, "token_fraction", lambda f: f"{100 * f:.2g}%", tier=tier,
                 missing="never")
ch.table(reached, caption="First revision reaching each recall level.")

# %% [markdown]
# ## Seeds
#
# Trained again from other seeds (the build's `toy_seeds` setting, {doc}`../rerun`), the toy models end with these
# numbers of induction heads (≥ 50×): {glue:text}`f4-toy-seeds`.

# %% tags=["remove-input"]
spread = ch.seed_spread(findings.revision_metric, "value", name="induction_heads", fmt="{:.0f}")
ch.glue_list("toy-seeds", spread, "values", tier="toy", sep="; ",
             absent="not trained in this build (its `toy_seeds` lists seed 0 only)")
if len(spread):
    ch.table(spread, caption="Induction heads (≥ 50×) at the final revision of each toy model across training seeds.")

# %% [markdown]
# ## The paper's numbers beside the authors' data
#
# The paper's one-third entries are not reproducible under its own rule in the authors' files; the table shows
# what the files give.

# %% tags=["remove-input"]
ch.paper_vs_data("F4")
