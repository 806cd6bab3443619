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
# # F4 · Does the screen converge early?

# %% tags=["remove-cell"]
from circuitdev.analysis import findings, uncertainty
from circuitdev.analysis.audit import audit_table
from circuitdev.book import Source, chapter, fmt_times, number_text, plots, with_interval_text

# %% tags=["parameters", "remove-cell"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# circuit membership and "found" both use `sel_induction` ≥ this (paper: 50x)
induction_threshold: float = 50.0  # in (0, inf)
# recall levels (paper: 1/3, 2/3, 3/3)
levels: list[float] = [0.3333333333333333, 0.6666666666666666, 1.0]  # in (0, 1]

# %% tags=["remove-input"]
ch = chapter("f4_convergence", globals())
ch.verdict("F4.recall");  # the verdict under the title: what the data support (issue 29)

# %% [markdown]
# **The paper's claim.** The induction circuit found at the end of training is visible to the screen long before:
# a third, two thirds and all of its heads pass {glue:text}`f4-paper-induction-threshold` after a small share of
# training (for two thirds: {glue:text}`f4-paper-67-share` of the tokens).
#
# **What we compute.** $S_{\mathrm{final}}$ = the heads with induction selectivity ≥ {glue:text}`f4-threshold` at
# the final revision; $\mathrm{recall}(r)$ = the share of $S_{\mathrm{final}}$ already ≥ {glue:text}`f4-threshold` at
# revision $r$, and beside it what the screen at $r$ catches that is not the final circuit: $\mathrm{precision}(r)$ =
# the share of the heads screened at $r$ that are in $S_{\mathrm{final}}$, and the Jaccard overlap of the two sets
# (`findings.circuit_recall`); the first revision reaching each recall level (`findings.recall_milestones`); and the
# heads that rise and fade — screened at some revision but not in $S_{\mathrm{final}}$ (`findings.faded_heads`).

# %% tags=["remove-input"]
recall = ch.apply(findings.circuit_recall, threshold=induction_threshold, intervals=True)
reached = ch.apply(lambda dev: findings.recall_milestones(findings.circuit_recall(dev, threshold=induction_threshold),
                                                          levels=levels))
circuits = ch.apply(findings.final_circuit, threshold=induction_threshold)
faded = ch.apply(findings.faded_heads, threshold=induction_threshold)
ch.glue("threshold", induction_threshold, "{:g}×")
ch.glue_list("paper-67-share", ch.claimed("F4.recall_fraction"), "paper", "{:g}%")

# %% [markdown]
# ## Recall and precision over training
#
# {numref}`fig-f4-recall` follows, for each model, the share of its final induction circuit that already passes
# {glue:text}`f4-threshold` (recall), the share of the heads passing it that belong to that circuit (precision) and
# the overlap of the two sets (Jaccard). The bands of the probed tiers are 95% re-measurement intervals (the probe
# batch resampled: {glue:text}`f4-boot`), with the final circuit itself re-screened on every resample: in the toy
# panel the final circuits hold {glue:text}`f4-toy-circuit-size` heads. They cover measuring the same trained model
# again, not training it again. Where the resamples centre away from the point because heads sit near the bar, an
# interval is widened to include the point: {glue:text}`f4-widened`. The published tier has no per-sequence data and
# so no band; how its entries move with the bar is on the robustness page ({doc}`robustness`).

# %% tags=["remove-input", "full-width"]
ch.figure(plots.recall_curves(recall, threshold=induction_threshold), name="fig-f4-recall", caption="Recall (solid), "
          f"precision (dashed) and Jaccard overlap (dotted) of the screen (heads ≥ {induction_threshold:g}×) with the "
          f"final circuit, one panel per model; a gap: no head screened. Bands: 95% {uncertainty.INTERVAL_NAME}.")
ch.glue_bootstrap()
final = recall.groupby(["tier", "panel"], sort=False).tail(1) if len(recall) else recall
ch.glue_list("toy-circuit-size", with_interval_text(final, "n_circuit", "{:.0f}") if len(final) else final,
             "n_circuit_ci", tier="toy")
ch.glue_list("widened", recall[recall.filter(like="_widened").eq(True).any(axis=1)], "revision", absent="none")

# %% [markdown]
# ## When the circuit is found, and what else is found with it
#
# The final circuits in the authors' files are {glue:text}`f4-pub-circuits`. Two thirds of each are found after
# {glue:text}`f4-pub-67-share` of training (≤ marks a share reached already at the first probed revision, so at or
# before it; "never": not reached by the last). In the toy panel the circuits are {glue:text}`f4-toy-circuits` and two
# thirds are found after {glue:text}`f4-toy-67-share` of training.
#
# An early screen is also a loose one. Where recall first reaches two thirds, the share of the screened heads that
# are in the final circuit (precision) is {glue:text}`f4-pub-precision-67` in the authors' files and
# {glue:text}`f4-toy-precision-67` in the toy panel (every level in the first table below). The other heads rise past
# the bar and fade before the end of training — {glue:text}`f4-pub-faded` in the authors' files,
# {glue:text}`f4-toy-faded` in the toy panel; the second table gives when they pass, their peak and their final
# selectivity.

# %% tags=["remove-input", "full-width"]
names = circuits.groupby(["tier", "panel"], sort=False)["name"].agg(" ".join).reset_index() if len(circuits) else circuits
gone = faded.groupby(["tier", "panel"], sort=False)["name"].agg(", ".join).reset_index() if len(faded) else faded
two_thirds = reached[(reached["level"] - levels[min(1, len(levels) - 1)]).abs() < 1e-9] if len(reached) else reached
# a censored entry is a bound: reached at or before the first probed revision ("≤"), or never ("> the last")
for tier, key in (("published", "pub"), ("toy", "toy")):
    ch.glue_list(f"{key}-circuits", names, "name", "{{{}}}", tier=tier, sep="; ")
    ch.glue_list(f"{key}-67-share", two_thirds, "share", tier=tier, missing="never")
    ch.glue_list(f"{key}-precision-67", two_thirds, "precision", "{:.0%}", tier=tier, missing="n/a")
    ch.glue_list(f"{key}-faded", gone, "name", tier=tier, sep="; ", absent="none")
ch.table(reached.drop(columns=["level", "revision_index"], errors="ignore"), precision=3, caption="First revision "
         "reaching each recall level, and the screen there: n_found of n_screened heads are in the final circuit.")
ch.table(faded, formats={"peak": fmt_times, "final": fmt_times},
         caption=f"Heads that rise and fade: induction ≥ {induction_threshold:g}× at some revision (passes: how many) "
                 "but not in the final circuit; peak and final: their induction selectivity.")

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
# ## How robust
#
# Each recall entry of the paper's F4 table is a first revision at which a share of the final circuit passes the
# induction bar. Over the grid of bars of the robustness table ({doc}`robustness`), the paper's entries hold in the
# authors' files for {glue:text}`f4-robust-f4-recall-pub-ranges` (the paper states them for its three models only,
# so the toy has no entry to test). At the paper's bar they hang on {glue:text}`f4-robust-f4-recall-pub-hangs-on`.

# %% tags=["remove-input", "full-width"]
robust = ch.how_robust("F4.recall")

# %% [markdown]
# ## The paper's numbers beside the authors' data
#
# Of the paper's {glue:text}`f4-claims-total` F4 numbers, the authors' own files reproduce
# {glue:text}`f4-claims-match` at the precision the paper writes. These differ (the paper's value, then the files';
# tokens in billions, shares in percent): {glue:text}`f4-differs`. The table gives every claim with its reason.

# %% tags=["remove-input"]
pub = ch.tiers.get("published")
audit = audit_table(pub.table if pub is not None else None, published=pub and pub.published, findings=["F4"])[0]
ch.glue_list("differs", audit[audit["status"] == "differs"].assign(panel=lambda d: d["id"], text=lambda d: "paper "
             + d["paper_value"].map(number_text) + ", data " + d["data_value"].map(number_text)), "text", sep="; ",
             absent="none")
ch.paper_vs_data("F4")
