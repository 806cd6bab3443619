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
# (`findings.floor_check`).

# %% tags=["remove-cell"]
from circuitdev.analysis import findings
from circuitdev.book import Rule, Source, chapter, plots

# %% tags=["parameters", "remove-cell"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# a head is a sink head when first-token selectivity ≥ this (paper: 30x)
bos_threshold: float = 30.0
# per-class (the paper's counting) or best-class
rule: Rule = "per-class"
# the layers that should never hold a sink head (paper: 0 and 1)
floor_layers: list[int] = [0, 1]

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
# ## The paper's numbers beside the authors' data

# %% tags=["remove-input"]
ch.paper_vs_data("F1")
