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
# a group ablation of the induction circuit with matched-random and upper-bound controls. The pipeline runs it once
# per panel; run it yourself on any panel with `circuitdev notebook run model -p panel NAME` ({doc}`../rerun`).

# %% tags=["remove-cell"]
import pandas as pd

from circuitdev.analysis import findings, pr_lead
from circuitdev.book import (TIER_LABELS, AblationMode, ModelPage, ModelSource, Rule, chapter, fmt_pct, fmt_tokens_b,
                             plots)
from circuitdev.schema import HEAD_CLASSES

# %% tags=["parameters", "remove-cell"]
# a panel name (data/panels/NAME.yaml), a panel YAML file or a published model
panel: str = "toy-pythia"
# records (probe records), published (authors' files) or auto (records first)
source: ModelSource = "auto"
# revisions to show (None: all of the panel's)
revisions: list[str] | None = None
# a head counts for class c when sel_c ≥ this (paper: 30x)
class_threshold: float = 30.0  # in (0, inf)
# induction circuit: sel_induction ≥ this (paper: 50x)
induction_threshold: float = 50.0  # in (0, inf)
# previous-token circuit: sel_prev ≥ this and best class (paper: 100x)
prev_token_threshold: float = 100.0  # in (0, inf)
# per-class (the paper's counts) or best-class (argmax class only)
rule: Rule = "per-class"
# probe revisions without a record first (GPU advised for 1B models)
compute_missing: bool = False
# ablate the final-revision induction circuit (loads the final checkpoint)
ablation: bool = True
# matched-random seeds (paper: 123; several give a spread)
ablation_seeds: list[int] = [123]  # in [0, inf)
# zero (the paper's) or mean ablation
ablation_mode: AblationMode = "zero"
# sequences per forward pass (speed and memory only)
batch_size: int = 8  # in [1, inf)
# auto (CUDA, then MPS, then CPU), cpu, cuda or mps
device: str = "auto"

# %% tags=["remove-input"]
ch = chapter("model", globals())
page = ModelPage.open(panel, source=source, published_dir=ch.folders.published_dir, results_dir=ch.folders.results_dir,
                      revisions=revisions, compute_missing=compute_missing, batch_size=batch_size, device=device)
name, tier = page.name, ch.use_tier(page.tier)
dev = tier.table if tier.present else pd.DataFrame()
revs = findings.revisions(dev) if tier.present else pd.DataFrame()
ch.glue("title", name)
ch.glue("tier", TIER_LABELS[tier.name])
ch.glue("summary", f"{len(revs)} revisions from {fmt_tokens_b(revs['tokens_b'].min())} to "
                   f"{fmt_tokens_b(revs['tokens_b'].max())} training tokens, {int(revs['n_heads'].iloc[0])} heads "
                   f"({dev['layer'].max() + 1} layers × {dev['head'].max() + 1} heads)." if tier.present else None,
        absent="No data: see the note above.")
ch.glue("screen", page.screen_settings() if tier.present else None, absent="(no screen settings without data)")

# %% [markdown]
# ## The panel
#
# Source of this page: **{glue:text}`model-tier`**. {glue:text}`model-summary` {glue:text}`model-screen`

# %% tags=["remove-input"]
if tier.present:
    ch.table(revs.assign(tokens=revs["tokens_b"].map(fmt_tokens_b))[["revision", "step", "tokens", "token_fraction",
                                                                     "n_heads"]] if "step" in revs else revs,
             caption=f"Revisions of {name}. {ch.tiers.provenance()}", formats={"token_fraction": "{:.2%}"})

# %% [markdown]
# ## The screen at every revision
#
# Every head is scored against the six classes of the method chapter; the heat maps count, per layer and revision,
# the heads whose selectivity for a class reaches the class threshold ({glue:text}`model-class-threshold`,
# counting rule {glue:text}`model-rule`). Reading across a row shows a layer acquiring a role; reading down a column
# shows where in depth each role lives at that point of training.

# %% tags=["remove-input"]
ch.glue("class-threshold", class_threshold, "{:g}×")
ch.glue("rule", rule)
if tier.present:
    counts = pd.concat([findings.layer_counts(dev, head_class=c, threshold=class_threshold, rule=rule)
                        .assign(head_class=c) for c in HEAD_CLASSES], ignore_index=True)
    ch.figure(plots.class_count_heatmaps(counts, title=f"{name}: heads per layer and class over training",
                                         heads_per_layer=int(dev["head"].max()) + 1), name=f"fig-model-{name}-screen",
              caption=f"Per-revision screen of {name}: heads per layer (rows) whose selectivity for the class "
                      f"reaches {class_threshold:g}× ({rule} rule), at each revision (columns, with training tokens).")

# %% [markdown]
# ## Circuit heads at the final revision
#
# The induction circuit is every head with induction selectivity ≥ {glue:text}`model-ind-threshold`
# ({glue:text}`model-n-induction` heads: {glue:text}`model-induction-heads`); the previous-token circuit adds the
# best-class condition at ≥ {glue:text}`model-prev-threshold` ({glue:text}`model-n-prev` heads). At the final
# revision {glue:text}`model-bos-pct` of all heads are first-token (sink) heads at ≥ {glue:text}`model-class-threshold`.

# %% tags=["remove-input"]
ch.glue("ind-threshold", induction_threshold, "{:g}×")
ch.glue("prev-threshold", prev_token_threshold, "{:g}×")
ind = findings.final_circuit(dev, threshold=induction_threshold) if tier.present else pd.DataFrame(columns=["name"])
prev = findings.final_circuit(dev, head_class="previous-token", threshold=prev_token_threshold,
                              rule="best-class") if tier.present else pd.DataFrame(columns=["name"])
bos = findings.bos_fraction(dev, threshold=class_threshold, rule=rule).iloc[-1] if tier.present else {}
ch.glue("n-induction", len(ind) if tier.present else None)
ch.glue("induction-heads", " ".join(ind["name"]) or "none" if tier.present else None)
ch.glue("n-prev", len(prev) if tier.present else None)
ch.glue("bos-pct", bos.get("bos_fraction"), fmt_pct)
if tier.present:
    ch.table(pd.concat([ind.assign(circuit=f"induction ≥{induction_threshold:g}×"),
                        prev.assign(circuit=f"previous-token ≥{prev_token_threshold:g}× (best class)")])[
        ["circuit", "name", "layer", "head", "selectivity"]], caption=f"Circuit heads of {name} at {bos['revision']}.")

# %% [markdown]
# ## PR trajectories of the circuit heads
#
# The participation ratio of a head's output at the query measures how many directions its output spreads over
# across the batch. The figure puts each induction-circuit head's PR − 1 (top) above its induction selectivity
# (bottom) on one token axis; the dashed line is the revision at which the head first reaches
# {glue:text}`model-ind-threshold`.

# %% tags=["remove-input"]
traj = pr_lead.head_trajectories(dev, threshold=induction_threshold).assign(tier=tier.name) if tier.present else None
if traj is not None and not traj.empty and traj["pr"].notna().any():
    ch.figure(plots.pr_selectivity(traj, threshold=induction_threshold), name=f"fig-model-{name}-pr",
              caption=f"{name}: PR − 1 and induction selectivity of each final-revision induction-circuit head over "
                      "training; dashed lines mark formation.")
elif tier.present:
    ch.note("No PR trajectory to draw: " + ("the panel has no induction head at the final revision."
            if traj.empty else "these records carry no participation ratio."))

# %% [markdown]
# ## Group ablation at the final revision
#
# Zero-ablating the induction circuit at the output projection's input should break next-token prediction at the
# query; ablating as many random heads of the same layers (matched random) should not, and ablating whole layers
# gives an upper bound. Top-1 accuracy with the circuit ablated: {glue:text}`model-ablated-top1` (no ablation
# {glue:text}`model-baseline-top1`; matched random {glue:text}`model-random-top1`).

# %% tags=["remove-input"]
ab, why = page.ablation(run=ablation, threshold=induction_threshold, seeds=ablation_seeds, mode=ablation_mode,
                        batch_size=batch_size, device=device)
top1 = ab.groupby("condition")["acc_top1"].mean() if ab is not None else {}
for key, condition in (("ablated-top1", "screen"), ("baseline-top1", "baseline"), ("random-top1", "matched_random")):
    ch.glue(key, top1.get(condition), fmt_pct, absent="not run")
if ab is None:
    ch.note(f"No ablation on this page: {why}.", title="Ablation not run")
else:
    ch.figure(plots.ablation_bars(ab, title=f"{name}: group ablation at the final revision"), width="70%",
              name=f"fig-model-{name}-ablation",
              caption=f"{name}: top-1 accuracy at the query with no ablation, with the induction circuit ablated, with "
                      "matched-random heads of the same layers ablated, and with whole layers ablated (upper bound).")
    ch.table(ab, caption=f"Ablation conditions of {name} ({'authors' if tier.name == 'published' else ablation_mode} "
                         "ablation).")
