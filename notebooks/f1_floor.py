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
# # F1 · The paper's claim: no sink heads in the first two layers

# %% tags=["remove-cell"]
import pandas as pd

from circuitdev.analysis import findings, uncertainty
from circuitdev.book import Rule, Source, chapter, fmt_times, plots, value_of

# %% tags=["parameters", "remove-cell"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# a head is a sink head when first-token selectivity ≥ this (paper: 30x)
bos_threshold: float = 30.0  # in (0, inf)
# per-class (the paper's counting) or best-class
rule: Rule = "per-class"
# the layers that should never hold a sink head (paper: 0 and 1)
floor_layers: list[int] = [0, 1]  # in [0, inf)

# %% tags=["remove-input"]
ch = chapter("f1_floor", globals())
ch.verdict("F1.floor");  # the verdict under the title: what the data support (issue 29)

# %% [markdown]
# **The paper's claim.** Attention-sink heads (first-token, "BOS", selectivity ≥ {glue:text}`f1-paper-bos-threshold`)
# appear throughout the depth of every model, but never in layers 0 and 1 — in none of the authors'
# {glue:text}`f1-pub-runs` (model, revision) runs.
#
# **What we compute.** Sink heads (first-token ≥ {glue:text}`f1-threshold`) per layer at every revision
# (`findings.layer_counts`) and, per run, how many of them sit in layers {glue:text}`f1-floor-layers`
# (`findings.floor_check`); how close the floor layers come to the bar (`findings.floor_margin`,
# `findings.floor_headroom`); then, per model, whether the floor holds, fails or lies within the noise of the
# measurement (`findings.floor_verdict`), from the bootstrap replicates of the probe batch: a re-measurement interval
# (the probe batch resampled), which covers measuring one trained model again, not training it again.

# %% tags=["remove-input"]
layers = ch.apply(findings.layer_counts, threshold=bos_threshold, rule=rule)
floor = ch.apply(findings.floor_check, layers=floor_layers, threshold=bos_threshold, rule=rule)
ch.glue("threshold", bos_threshold, "{:g}×")
ch.glue("floor-layers", " and ".join(map(str, floor_layers)))

# %% [markdown]
# ## Sink heads per layer
#
# {numref}`fig-f1-layers` maps, for each model, the number of sink heads in every layer at every revision; the red
# outline marks layers {glue:text}`f1-floor-layers`.

# %% tags=["remove-input", "full-width"]
heads = {p: int(t.table[t.table["panel"] == p]["head"].max()) + 1 for t in ch.tiers.present for p in t.panels}
ch.figure(plots.bos_layer_heatmaps(layers, threshold=bos_threshold, floor_layers=floor_layers, heads_per_layer=heads),
          name="fig-f1-layers", caption=f"Heads with first-token selectivity ≥ {bos_threshold:g}× ({rule} rule) per "
          f"layer (rows) and revision (columns), one panel per model; the red outline marks layers {floor_layers}.")

# %% [markdown]
# ## Does the floor hold?
#
# In the authors' files the floor holds at {glue:text}`f1-pub-held` of {glue:text}`f1-pub-runs` runs (at most
# {glue:text}`f1-pub-most` sink heads in layers {glue:text}`f1-floor-layers` at any run). In the toy panel it holds
# at {glue:text}`f1-toy-held` of {glue:text}`f1-toy-runs` revisions ({glue:text}`f1-toy-broken`). Measured real
# panels: {glue:text}`f1-measured-floor`.

# %% tags=["remove-input"]
summary = findings.floor_summary(floor, by=["tier"])
ch.glue_frame(summary, {"runs": "{}", "held": "{}", "most": "{}", "broken": "{}"}, by=["tier"])
ch.glue_tier_sentence("measured-floor", summary, "it holds at {held} of {runs} revisions", tier="measured")
ch.table(findings.floor_summary(floor, by=["tier", "panel"]),
         caption=f"Runs per model whose layers {floor_layers} hold no sink head.")

# %% [markdown]
# ## By how much
#
# A count at a bar hides how near the bar a head sits. The strongest first-token selectivity of any head in layers
# {glue:text}`f1-floor-layers`, over all revisions, is in the authors' files: Pythia {glue:text}`f1-pub-pythia-where`,
# OLMo {glue:text}`f1-pub-olmo-where` and OLMoE {glue:text}`f1-pub-olmoe-where`. A floor holds at every bar above
# its strongest head and fails at every bar at or below it, so the paper's statement for all three models fails at
# any bar at or below {glue:text}`f1-pub-all-fails-at-or-below` ({glue:text}`f1-pub-all-where`): at
# {glue:text}`f1-threshold` it holds by a margin of {glue:text}`f1-pub-all-margin` of the bar. In the toy panel
# (the strongest point value, without an interval): {glue:text}`f1-toy-where`.
#
# {numref}`fig-f1-margin` follows the floor layers' strongest sink score at every revision. Its error bars are
# re-measurement intervals (the probe batch resampled, {glue:text}`f1-boot`) of that maximum itself, re-taken over
# the floor heads on every resample. A maximum over noisy heads leans upwards; where its resamples miss the point
# value the interval is widened to include it (a hollow marker): {glue:text}`f1-widened`.

# %% tags=["remove-input", "full-width"]
room = ch.apply(findings.floor_headroom, layers=floor_layers, threshold=bos_threshold, overall=True)
ch.glue_frame(room, {"where": "{}", "fails-at-or-below": "{:.1f}×", "margin": "{:.0%}", "share-of-bar": "{:.0%}"})
ch.glue_list("toy-where", room[room["panel"] != "all"], "where", tier="toy", sep="; ")
margin = ch.apply(findings.floor_margin, layers=floor_layers, intervals=True)
ch.glue_list("widened", margin[margin["value_widened"] == True], "revision", absent="none had to be")  # noqa: E712
ch.glue_bootstrap()
ch.figure(plots.floor_margin(margin, threshold=bos_threshold, floor_layers=floor_layers), name="fig-f1-margin",
          caption=f"The largest first-token selectivity in layers {floor_layers} at every revision against the bar; "
          f"error bars: 95% {uncertainty.INTERVAL_NAME} of the maximum; hollow: {uncertainty.WIDENED_NOTE}.")

# %% [markdown]
# ## Holds, fails, or within noise
#
# For a model probed here the bootstrap replicates decide, over every floor head and every revision of the model
# (the looks). The floor **fails** when the same floor head, at the same revision, reaches {glue:text}`f1-threshold`
# in at least 97.5% of the resamples; a head that passes in some resamples while another passes in others does not
# make it fail. It **holds** when in at least 97.5% of the resamples no floor head reaches the bar at any revision: a
# simultaneous band over all the looks, whose upper end (the 97.5% quantile of each resample's largest floor score)
# then lies below the bar. Otherwise it is **within noise**: the data cannot tell. A 97.5% rule decided on B
# resamples has a binomial standard error of √(0.025 · 0.975 / B) at its cut ({glue:text}`f1-toy-mc-se` here); a
# verdict whose deciding share lies within two such errors of the cut could change with more resamples, and says so.
#
# Each verdict names its **deciding head**: the floor head and revision whose resamples reach the bar most often,
# which need not be the strongest point value above, and so may sit at another revision. In the toy panel, over
# every revision probed: {glue:text}`f1-toy-verdicts`. The same verdict on the default grid alone — the revisions of
# its panel file, without the {glue:text}`f1-toy-pythia-refined` that refinement added around its sink onset and
# its induction transition ({doc}`refinement`) — reads for `toy-pythia`: {glue:text}`f1-toy-pythia-grid`; its
# deciding head and interval are those of the default grid's revisions. Where the two verdicts differ, a floor head
# crossed the bar only between two revisions of the default grid: a coarse grid can miss a short-lived sink head as
# easily as a noisy one. The table below gives one row for each (the default grid's as "toy (default grid)").
#
# **What the bar means in attention.** Selectivity is a ratio to the attention on other keys, so the same bar asks
# for a different share of a head's attention at another context length: a head whose remaining attention spreads
# evenly over the other T − 1 keys reads s = m(T − 1)/(1 − m) with mass m on position 0. The statements above give
# each deciding head's mass beside the mass the bar means at the T its model was probed at; at the paper's context
# length the bar means a mass of {glue:text}`f1-paper-bar-mass`.
#
# These intervals cover measuring one trained model again, not training it again. Seed replicas of the toy, where
# this build trained them, get one verdict each: {glue:text}`f1-toy-seed-verdicts`. The published tier has no
# per-sequence data — the authors' files hold one selectivity per head — so its verdicts (in the table) are the
# paper's rule on the point values; their uncertainty is the margin above and how the floor moves with the bar
# ({doc}`robustness`).

# %% tags=["remove-input", "full-width"]
view = ch.panel_view("toy-pythia")  # the toy-pythia verdict also on its default grid (no refined revisions)
lengths = {p: int(c["seq_len"]) for t in ch.tiers.present for p, c in t.probe_configs.items() if "seq_len" in c}
args = dict(layers=floor_layers, threshold=bos_threshold, rule=rule, seq_len=lengths)
on_grid = view.apply_on_grid(findings.floor_verdict, **args).assign(tier="toy (default grid)") \
    if view is not None and view.boot is not None else None
verdict = pd.concat([ch.apply(findings.floor_verdict, intervals=True, **args), on_grid], ignore_index=True)
ch.glue("toy-pythia-grid", value_of(verdict, "statement", tier="toy (default grid)", panel="toy-pythia"), absent="n/a")
ch.glue("toy-pythia-refined", None if view is None else f"{len(view.refined)} revisions", absent="no revisions")
ch.glue_list("toy-verdicts", verdict, "statement", tier="toy", sep="; ")
ch.glue("toy-mc-se", verdict.loc[verdict["tier"] == "toy", "mc_se"].max(), lambda x: f"{100 * x:.1f} points")
ch.glue("paper-bar-mass", f"{findings.bar_mass(bos_threshold, ch.paper.seq_len):.2f} at T = {ch.paper.seq_len}")
seeds = ch.apply(findings.floor_verdict, replicas=True, tiers=["toy"], **args)
ch.glue_list("toy-seed-verdicts", seeds[[findings.seed_of(p)[1] > 0 for p in seeds.get("panel", [])]], "verdict",
             tier="toy", absent="none in this build (its `toy_seeds` lists seed 0 only)")
ch.table(verdict[["tier", "panel", "verdict", "name", "revision", "value", "value_lo", "value_hi", "mass", "bar_mass",
                  "looks", "share_head", "share_any", "mc_close"]], caption="F1 per model: the verdict and its numbers.",
         formats=dict.fromkeys(["value", "value_lo", "value_hi"], fmt_times))  # value: the deciding head's selectivity

# %% [markdown]
# ## How robust
#
# Over the grid of bars of the robustness table ({doc}`robustness`), and under both counting rules, the floor (no
# head of layers 0/1 at the bar, at any revision) holds in the authors' files for
# {glue:text}`f1-robust-f1-floor-pub-ranges`; in the toy panel for {glue:text}`f1-robust-f1-floor-toy-ranges`. At
# the paper's bar it hangs on {glue:text}`f1-robust-f1-floor-pub-hangs-on`; in the toy panel on
# {glue:text}`f1-robust-f1-floor-toy-hangs-on`.

# %% tags=["remove-input", "full-width"]
robust = ch.how_robust("F1.floor")

# %% [markdown]
# ## The paper's numbers beside the authors' data
#
# The F1 rows below compare counts, so they read "match" whatever the margin: the floor rows hold with the strongest
# floor head at {glue:text}`f1-pub-pythia-share-of-bar` (Pythia), {glue:text}`f1-pub-olmo-share-of-bar` (OLMo) and
# {glue:text}`f1-pub-olmoe-share-of-bar` (OLMoE) of the {glue:text}`f1-threshold` bar.

# %% tags=["remove-input"]
ch.paper_vs_data("F1")
