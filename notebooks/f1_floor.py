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
# # F1 · No sink heads in the first two layers
#
# **The paper's claim.** Attention-sink heads (first-token, "BOS", selectivity ≥ {glue:text}`f1-paper-bos-threshold`)
# appear throughout the depth of every model, but never in layers 0 and 1 — in none of the authors'
# {glue:text}`f1-pub-runs` (model, revision) runs.
#
# **What we compute.** Sink heads (first-token ≥ {glue:text}`f1-threshold`) per layer at every revision
# (`findings.layer_counts`) and, per run, how many of them sit in layers {glue:text}`f1-floor-layers`
# (`findings.floor_check`); then, per model, whether the floor holds, fails or lies within the noise of the
# measurement (`findings.floor_verdict`), from 95% bootstrap intervals over the probe batch's sequences.

# %% tags=["remove-cell"]
import pandas as pd

from circuitdev.analysis import findings
from circuitdev.book import Rule, Source, chapter, plots, value_of, with_interval_text

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
layers = ch.apply(findings.layer_counts, threshold=bos_threshold, rule=rule)
floor = ch.apply(findings.floor_check, layers=floor_layers, threshold=bos_threshold, rule=rule)
ch.glue("threshold", bos_threshold, "{:g}×")
ch.glue("floor-layers", " and ".join(map(str, floor_layers)))

# %% [markdown]
# ## Sink heads per layer
#
# {numref}`fig-f1-layers` maps, for each model, the number of sink heads in every layer at every revision; the red
# outline marks layers {glue:text}`f1-floor-layers`.

# %% tags=["remove-input"]
heads = {p: int(t.table[t.table["panel"] == p]["head"].max()) + 1 for t in ch.tiers.present for p in t.panels}
ch.figure(plots.bos_layer_heatmaps(layers, threshold=bos_threshold, floor_layers=floor_layers, heads_per_layer=heads),
          name="fig-f1-layers",
          caption=f"Heads with first-token selectivity ≥ {bos_threshold:g}× ({rule} rule) per layer (rows) and "
                  "revision (columns, training tokens), one panel per model and tier; the red outline marks layers "
                  f"{', '.join(map(str, floor_layers))}.")

# %% [markdown]
# ## Does the floor hold?
#
# In the authors' files the floor holds at {glue:text}`f1-pub-held` of {glue:text}`f1-pub-runs` runs (at most
# {glue:text}`f1-pub-most` sink heads in layers {glue:text}`f1-floor-layers` at any run). In the toy panel it holds
# at {glue:text}`f1-toy-held` of {glue:text}`f1-toy-runs` revisions ({glue:text}`f1-toy-broken`); in measured real
# panels at {glue:text}`f1-measured-held` of {glue:text}`f1-measured-runs`.

# %% tags=["remove-input"]
per_tier = findings.floor_summary(floor, by=["tier"])
ch.glue_frame(per_tier, {"runs": "{}", "held": "{}", "most": "{}", "broken": "{}"}, by=["tier"])
ch.table(findings.floor_summary(floor, by=["tier", "panel"]),
         caption=f"Runs per model whose layers {floor_layers} hold no sink head.")

# %% [markdown]
# ## Holds, fails, or within noise
#
# A count at a bar hides how near the bar a head sits. {numref}`fig-f1-margin` follows the floor layers' strongest
# sink score at every revision, with its 95% interval from {glue:text}`f1-boot` (`circuitdev.measure.bootstrap`).
# Per model the floor **holds** when every floor head's interval lies below {glue:text}`f1-threshold` at every
# revision, **fails** when some floor head reaches the bar in 97.5% of the resamples, and is **within noise**
# otherwise: the data cannot tell. In the toy panel: {glue:text}`f1-toy-verdicts`. For `toy-pythia` the verdict,
# with the floor head that decides it, is **{glue:text}`f1-toy-pythia`** against the {glue:text}`f1-threshold` bar.
# On its default grid alone — the revisions of its panel file, without the {glue:text}`f1-toy-pythia-refined`
# that refinement added around its sink onset and its induction transition ({doc}`refinement`) — it is
# **{glue:text}`f1-toy-pythia-grid`**. Where the two differ, a floor head crossed the bar only between two revisions
# of the default grid: a coarse grid can miss a short-lived sink head as easily as a noisy one.
#
# The published tier has no per-sequence data — the authors' files hold one selectivity per head — so its verdicts
# ({glue:text}`f1-pub-verdicts`) carry no interval; its uncertainty is how the counts move with the threshold
# ({doc}`sensitivity`).

# %% tags=["remove-input"]
view = ch.panel_view("toy-pythia")  # the toy-pythia verdict also on its default grid (no refined revisions)
on_grid = view.apply_on_grid(findings.floor_verdict, layers=floor_layers, threshold=bos_threshold, rule=rule).assign(
    tier="toy (default grid)") if view is not None and view.boot is not None else None
verdict = with_interval_text(pd.concat([ch.apply(findings.floor_verdict, layers=floor_layers, threshold=bos_threshold,
                                                 rule=rule, intervals=True), on_grid]), "value", "{:.1f}×", name="value_ci")
ch.glue_bootstrap()
verdict = verdict.assign(statement=verdict["verdict"] + ": " + verdict["name"] + " at " + verdict["revision"]
                         + " reads " + verdict["value_ci"])
ch.glue("toy-pythia", value_of(verdict, "statement", tier="toy", panel="toy-pythia"), absent="n/a (not probed here)")
ch.glue("toy-pythia-grid", value_of(verdict, "statement", tier="toy (default grid)", panel="toy-pythia"),
        absent="n/a (not probed here)")
ch.glue("toy-pythia-refined", None if view is None else f"{len(view.refined)} revisions", absent="no revisions")
ch.glue_list("toy-verdicts", verdict, "verdict", tier="toy")
ch.glue_list("pub-verdicts", verdict, "verdict", tier="published")
margin = ch.apply(findings.floor_margin, layers=floor_layers, intervals=True)
ch.figure(plots.floor_margin(margin, threshold=bos_threshold, floor_layers=floor_layers), name="fig-f1-margin",
          caption=f"The largest first-token selectivity among the heads of layers {floor_layers} at every revision, "
                  f"against the {bos_threshold:g}× bar (log scale); error bars: 95% bootstrap interval over the probe "
                  "batch's sequences (record tiers only; the published files have no per-sequence data).")
ch.table(verdict[["tier", "panel", "verdict", "name", "revision", "value_ci", "n_floor_max"]],
         caption="F1 per model: the verdict and the floor head that decides it, with its 95% interval.")

# %% [markdown]
# ## The paper's numbers beside the authors' data

# %% tags=["remove-input"]
ch.paper_vs_data("F1")
