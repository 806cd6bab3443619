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
# **The paper's claim.** Attention-sink heads (first-token, "BOS", selectivity ≥ {glue:text}`f1-threshold`)
# appear throughout the depth of every model, but never in layers {glue:text}`f1-floor-layers` — in none of the
# authors' {glue:text}`f1-pub-runs` (model, revision) runs.
#
# **What we compute.** BOS-class heads per layer at every revision (`findings.layer_counts`) and, per run, how many
# of them sit in the floor layers (`findings.floor_check`).

# %% tags=["remove-cell"]
from typing import Optional

from circuitdev import notebook as nb
from circuitdev.notebook import Rule, Source

_before = set(globals())

# %% [markdown]
# ## Parameters
#
# `floor_layers` are the layers the claim is about; `bos_threshold` and `rule` define a sink head.

# %% tags=["parameters"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# a head is a sink head when first-token selectivity ≥ this (paper: 30x)
bos_threshold: float = 30.0
# per-class (the paper's counting) or best-class
rule: Rule = "per-class"
# the layers that should never hold a sink head
floor_layers: list[int] = [0, 1]
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

tiers, glue = nb.open_chapter("f1", sources, data_dir=data_dir, published_dir=published_dir,
                              results_dir=results_dir, panels=panels)
layers = tiers.apply(findings.layer_counts, threshold=bos_threshold, rule=rule)
floor = tiers.apply(findings.floor_check, layers=floor_layers, threshold=bos_threshold, rule=rule)
glue("threshold", bos_threshold, "{:g}×")
glue("floor-layers", " and ".join(map(str, floor_layers)))

# %% [markdown]
# ## Sink heads per layer
#
# {numref}`fig-f1-layers` maps, for each model, the number of sink heads (first-token ≥ {glue:text}`f1-threshold`)
# in every layer at every revision; the red outline marks layers {glue:text}`f1-floor-layers`.

# %% tags=["hide-input"]
heads_per_layer = {p: int(t.table[t.table["panel"] == p]["head"].max()) + 1 for t in tiers.present for p in t.panels}
nb.show_figure(plots.bos_layer_heatmaps(layers, threshold=bos_threshold, floor_layers=floor_layers,
                                        heads_per_layer=heads_per_layer),
               name="fig-f1-layers",
               caption=f"Heads with first-token selectivity ≥ {bos_threshold:g}× ({rule} rule) per layer (rows) "
                       "and revision (columns, training tokens), one panel per model and tier; the red outline "
                       f"marks layers {', '.join(map(str, floor_layers))}.",
               provenance=tiers.provenance())

# %% [markdown]
# ## Does the floor hold?
#
# In the authors' files the floor holds at {glue:text}`f1-pub-held` of {glue:text}`f1-pub-runs` runs (at most
# {glue:text}`f1-pub-max` sink heads in layers {glue:text}`f1-floor-layers` at any run). In the toy panel it holds at
# {glue:text}`f1-toy-held` of {glue:text}`f1-toy-runs` revisions ({glue:text}`f1-toy-broken`); in measured real
# panels at {glue:text}`f1-measured-held` of {glue:text}`f1-measured-runs`.

# %% tags=["hide-input"]
for tier in ("published", "toy", "measured"):
    rows = floor[floor["tier"] == tier] if len(floor) else floor
    key = {"published": "pub"}.get(tier, tier)
    glue(f"{key}-runs", len(rows) or None, absent="0")
    glue(f"{key}-held", int(rows["holds"].sum()) if len(rows) else None, absent="n/a")
    glue(f"{key}-max", int(rows["n_floor"].max()) if len(rows) else None, absent="n/a")
    broken = rows[~rows["holds"]] if len(rows) else rows
    glue(f"{key}-broken", "broken at " + ", ".join(f"{p} {r}" for p, r in zip(broken["panel"], broken["revision"]))
         if len(broken) else ("never broken" if len(rows) else None), absent="no data")
if len(floor):
    summary = floor.groupby(["tier", "panel"], sort=False).agg(
        runs=("holds", "size"), runs_holding=("holds", "sum"), most_floor_heads=("n_floor", "max")).reset_index()
    nb.show_table(summary, caption=f"Runs per model whose layers {floor_layers} hold no sink head.")

# %% [markdown]
# ## The paper's numbers beside the authors' data

# %% tags=["hide-input"]
audit = nb.paper_vs_data(tiers, ["F1"])
if audit is None:
    nb.note("The comparison needs the published tier (see the note at the top of the page).")
else:
    nb.show_table(audit, caption="F1 claims: the paper's value and the value in the authors' files.")
