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
# # Model appendix: {glue:text}`model-title`
#
# This appendix follows one model through training with the paper's instruments: the all-head six-class screen at
# every revision, the circuit heads it finds at the final revision, their participation-ratio (PR) trajectories, and
# a group ablation of the induction circuit with matched-random and upper-bound controls. It is executed once per
# panel by the pipeline (`book/_generated/model-<panel>.ipynb`); run it yourself on any panel with the command in
# {doc}`../rerun`.

# %% tags=["remove-cell"]
from typing import Optional

from circuitdev import notebook as nb
from circuitdev.notebook import AblationMode, ModelSource, Rule

_before = set(globals())

# %% [markdown]
# ## Parameters
#
# Each parameter is typed; a misspelt or ill-typed one stops the notebook here with a message naming it. The
# thresholds only change how the stored records are read (the records themselves hold raw selectivities), so
# changing them re-runs nothing expensive. `results_dir`, `published_dir`, `data_dir` and `panels` are set by the
# pipeline for every notebook.

# %% tags=["parameters"]
# a panel name (data/panels/NAME.yaml), a panel YAML file or a published model
panel: str = "toy-pythia"
# records (probe records), published (authors' files) or auto (records first)
source: ModelSource = "auto"
# revisions to show (None: all of the panel's)
revisions: Optional[list[str]] = None
# a head counts for class c when sel_c ≥ this (paper: 30x)
class_threshold: float = 30.0
# induction circuit: sel_induction ≥ this (paper: 50x)
induction_threshold: float = 50.0
# previous-token circuit: sel_prev ≥ this and best class (paper: 100x)
prev_token_threshold: float = 100.0
# per-class (the paper's counts) or best-class (argmax class only)
rule: Rule = "per-class"
# probe revisions without a record first (GPU advised for 1B models)
compute_missing: bool = False
# ablate the final-revision induction circuit (loads the final checkpoint)
ablation: bool = True
# matched-random seeds (paper: 123; several give a spread)
ablation_seeds: list[int] = [123]
# zero (the paper's) or mean ablation
ablation_mode: AblationMode = "zero"
# sequences per forward pass (speed and memory only)
batch_size: int = 8
# auto (CUDA, then MPS, then CPU), cpu, cuda or mps
device: str = "auto"
# probe records (None: data/results of the repository)
results_dir: Optional[str] = None
# authors' files (auto: ../shared/published if it exists; None: none)
published_dir: Optional[str] = "auto"
# data folder holding panels/ (None: the repository's data/)
data_dir: Optional[str] = None
# set by the pipeline for every notebook; not used on this page
panels: Optional[list[str]] = None

# %% tags=["remove-cell"]
nb.check_notebook_parameters(globals(), _before)

# %% tags=["hide-input"]
import pandas as pd

from circuitdev import findings, plots
from circuitdev.schema import HEAD_CLASSES

nb.setup()
nb.use_data_dir(data_dir)
glue = nb.Glue("model")
tier = nb.model_tier(panel, source=source, published_dir=published_dir, results_dir=results_dir,
                     revisions=revisions, compute_missing=compute_missing, batch_size=batch_size, device=device)
name = nb.panel_name(panel)
glue("title", name)
glue("tier", nb.TIER_LABELS[tier.name])
tiers = nb.Tiers({tier.name: tier})
provenance = tiers.provenance()
if not tier.present:
    nb.note(tier.note, title=f"No data for {name}")

# %% [markdown]
# ## The panel
#
# Source of this page: **{glue:text}`model-tier`**. {glue:text}`model-summary` {glue:text}`model-screen`

# %% tags=["hide-input"]
if tier.present:
    dev = tier.table
    revs = findings.revisions(dev)
    glue("summary", f"{len(revs)} revisions from {nb.fmt_tokens(revs['tokens_b'].min())} to "
                    f"{nb.fmt_tokens(revs['tokens_b'].max())} training tokens, {int(revs['n_heads'].iloc[0])} heads "
                    f"({dev['layer'].max() + 1} layers × {dev['head'].max() + 1} heads).")
    glue("screen", nb.screen_settings(tier, name))
    nb.show_table(revs.assign(tokens=revs["tokens_b"].map(nb.fmt_tokens))[
        ["revision", "step", "tokens", "token_fraction", "n_heads"]],
        caption=f"Revisions of {name}. {provenance}", formats={"token_fraction": "{:.2%}"})
else:
    glue("summary", "No data: see the note above.")
    glue("screen", "(no screen settings without data)")

# %% [markdown]
# ## The screen at every revision
#
# Every head is scored against the six classes of the method chapter; the heat maps count, per layer and revision,
# the heads whose selectivity for a class reaches the class threshold ({glue:text}`model-class-threshold`,
# counting rule {glue:text}`model-rule`). Reading across a row shows a layer acquiring a role; reading down a column
# shows where in depth each role lives at that point of training.

# %% tags=["hide-input"]
glue("class-threshold", class_threshold, "{:g}×")
glue("rule", rule)
if tier.present:
    counts = pd.concat([findings.layer_counts(dev, head_class=c, threshold=class_threshold, rule=rule)
                        .assign(head_class=c) for c in HEAD_CLASSES], ignore_index=True)
    heads_per_layer = int(dev["head"].max()) + 1
    fig = plots.class_count_heatmaps(counts, title=f"{name}: heads per layer and class over training",
                                     heads_per_layer=heads_per_layer)
    nb.show_figure(fig, name=f"fig-model-{name}-screen",
                   caption=f"Per-revision screen of {name}: heads per layer (rows) whose selectivity for the class "
                           f"reaches {class_threshold:g}× ({rule} rule), at each revision (columns, with training "
                           "tokens).", provenance=provenance)

# %% [markdown]
# ## Circuit heads at the final revision
#
# The induction circuit is every head with induction selectivity ≥ {glue:text}`model-ind-threshold`
# ({glue:text}`model-n-induction` heads: {glue:text}`model-induction-heads`); the previous-token circuit adds the
# best-class condition at ≥ {glue:text}`model-prev-threshold` ({glue:text}`model-n-prev` heads). At the final
# revision {glue:text}`model-bos-pct` of all heads are first-token (sink) heads at ≥ {glue:text}`model-class-threshold`.

# %% tags=["hide-input"]
glue("ind-threshold", induction_threshold, "{:g}×")
glue("prev-threshold", prev_token_threshold, "{:g}×")
if tier.present:
    ind = findings.final_circuit(dev, head_class="induction", threshold=induction_threshold)
    prev = findings.final_circuit(dev, head_class="previous-token", threshold=prev_token_threshold, rule="best-class")
    bos = findings.bos_fraction(dev, threshold=class_threshold, rule=rule).iloc[-1]
    glue("n-induction", len(ind))
    glue("induction-heads", " ".join(ind["name"]) or "none")
    glue("n-prev", len(prev))
    glue("bos-pct", bos["bos_fraction"], nb.fmt_pct)
    circuits = pd.concat([ind.assign(circuit=f"induction ≥{induction_threshold:g}×"),
                          prev.assign(circuit=f"previous-token ≥{prev_token_threshold:g}× (best class)")])
    nb.show_table(circuits[["circuit", "name", "layer", "head", "selectivity"]],
                  caption=f"Circuit heads of {name} at {bos['revision']}.")
else:
    for key in ("n-induction", "induction-heads", "n-prev", "bos-pct"):
        glue(key, None)

# %% [markdown]
# ## PR trajectories of the circuit heads
#
# The participation ratio of a head's output at the query measures how many directions its output spreads over
# across the batch. The figure puts each induction-circuit head's PR − 1 (top) above its induction selectivity
# (bottom) on one token axis; the dashed line is the revision at which the head first reaches
# {glue:text}`model-ind-threshold`.

# %% tags=["hide-input"]
if tier.present:
    traj = findings.head_trajectories(dev, head_class="induction", threshold=induction_threshold).assign(
        tier=tier.name)
    if traj.empty or traj["pr"].isna().all():
        nb.note("No PR trajectory to draw: " + ("the panel has no induction head at the final revision."
                if traj.empty else "these records carry no participation ratio."))
    else:
        nb.show_figure(plots.pr_selectivity(traj, threshold=induction_threshold), name=f"fig-model-{name}-pr",
                       caption=f"{name}: PR − 1 and induction selectivity of each final-revision induction-circuit "
                               "head over training; dashed lines mark formation.", provenance=provenance)

# %% [markdown]
# ## Group ablation at the final revision
#
# Zero-ablating the induction circuit at the output projection's input should break next-token prediction at the
# query; ablating as many random heads of the same layers (matched random) should not, and ablating whole layers
# gives an upper bound. Top-1 accuracy with the circuit ablated: {glue:text}`model-ablated-top1` (no ablation
# {glue:text}`model-baseline-top1`; matched random {glue:text}`model-random-top1`).

# %% tags=["hide-input"]
ab, why = nb.model_ablation(tier, panel, run=ablation, threshold=induction_threshold, seeds=ablation_seeds,
                            mode=ablation_mode, batch_size=batch_size, device=device)
glue("ablated-top1", nb.mean_metric(ab, "screen"), nb.fmt_pct, absent="not run")
glue("baseline-top1", nb.mean_metric(ab, "baseline"), nb.fmt_pct, absent="not run")
glue("random-top1", nb.mean_metric(ab, "matched_random"), nb.fmt_pct, absent="not run")
if ab is None:
    nb.note(f"No ablation on this page: {why}.", title="Ablation not run")
else:
    nb.show_figure(plots.ablation_bars(ab, title=f"{name}: group ablation at the final revision"),
                   name=f"fig-model-{name}-ablation", width="70%",
                   caption=f"{name}: top-1 accuracy at the query with no ablation, with the induction circuit "
                           "ablated, with matched-random heads of the same layers ablated, and with whole layers "
                           "ablated (upper bound).", provenance=provenance)
    nb.show_table(ab.drop(columns=[c for c in ("spec",) if c in ab.columns]),
                  caption=f"Ablation conditions of {name} ({'authors' if tier.name == 'published' else ablation_mode} "
                          "ablation).")
