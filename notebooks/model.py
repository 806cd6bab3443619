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
# a group ablation of the induction circuit against controls drawn for that circuit. For a model trained or probed
# here it also ablates the final circuit at every revision (when does it become necessary?); for a published model
# it shows the authors' second ablation task, greater-than. The pipeline runs it once per panel; run it yourself on
# any panel with `circuitdev notebook run model -p panel NAME` ({doc}`../rerun`).

# %% tags=["remove-cell"]
import pandas as pd

from circuitdev.analysis import findings
from circuitdev.analysis.findings import f5_pr_lead as pr_lead
from circuitdev.book import (TIER_LABELS, AblationMode, ModelPage, ModelSource, Rule, chapter, fmt_pct, fmt_tokens_b,
                             plots)
from circuitdev.book import model_ablation as abl
from circuitdev.schema import HEAD_CLASSES

# %% tags=["parameters", "remove-cell"]
# a panel name (data/panels/NAME.yaml), a panel YAML file or a published model
panel: str = "toy-pythia"
# records (probe records), published (authors' files) or auto (records first)
source: ModelSource = "auto"
# revisions to show (not set: all of the panel's)
revisions: list[str] | None = None
# a head counts for a class when its selectivity for it ≥ this (paper: 30x)
class_threshold: float = 30.0  # in (0, inf)
# induction circuit: `sel_induction` ≥ this (paper: 50x)
induction_threshold: float = 50.0  # in (0, inf)
# previous-token circuit: `sel_previous_token` ≥ this and best class (paper: 100x)
prev_token_threshold: float = 100.0  # in (0, inf)
# per-class (the paper's counts) or best-class (argmax class only)
rule: Rule = "per-class"
# probe revisions without a record first (GPU advised for 1B models)
compute_missing: bool = False
# ablate the final-revision induction circuit (loads the final checkpoint)
ablation: bool = True
# distinct random groups per control, seeds 123, 124, ... (the first is the paper's one draw)
ablation_groups: int = 5  # in [1, 100]
# zero (the paper's) or mean ablation
ablation_mode: AblationMode = "zero"
# sequences per forward pass (speed and memory only); None: the records' own (250 on a toy panel, the probe's
# batch on a real one), 8 where there are no records yet
batch_size: int | None = None  # in [1, inf)
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
# Source of this page: {glue:text}`model-tier`. {glue:text}`model-summary` {glue:text}`model-screen`

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
# counting rule {glue:text}`model-rule`), one bar for every class as in the paper's screen. The circuit below uses
# its own, stricter bar ({glue:text}`model-ind-threshold` for induction), so a head can count here before it joins
# the circuit. Reading across a row shows a layer acquiring a role; reading down a column shows where in depth each
# role lives at that point of training.

# %% tags=["remove-input", "full-width"]
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
# The induction circuit is every head with induction selectivity ≥ {glue:text}`model-ind-threshold`; the
# previous-token circuit adds the best-class condition at ≥ {glue:text}`model-prev-threshold`.
# {glue:text}`model-circuits`

# %% tags=["remove-input"]
ch.glue("ind-threshold", induction_threshold, "{:g}×")
ch.glue("prev-threshold", prev_token_threshold, "{:g}×")
ind = findings.final_circuit(dev, threshold=induction_threshold) if tier.present else pd.DataFrame(columns=["name"])
prev = findings.final_circuit(dev, head_class="previous-token", threshold=prev_token_threshold,
                              rule="best-class") if tier.present else pd.DataFrame(columns=["name"])
bos = findings.bos_fraction(dev, threshold=class_threshold, rule=rule).iloc[-1] if tier.present else {}
ch.glue("n-induction", len(ind) if tier.present else None)
ch.glue("n-prev", len(prev) if tier.present else None)
ch.glue("circuits", f"At {bos['revision']}, the final revision, the induction circuit holds {len(ind)} "
                    f"head{'s' * (len(ind) != 1)} ({' '.join(ind['name']) or 'none'}) and the previous-token circuit "
                    f"{len(prev)} head{'s' * (len(prev) != 1)}; {fmt_pct(bos['bos_fraction'])} of all heads are "
                    f"first-token (sink) heads at ≥ {class_threshold:g}×." if tier.present else None,
        absent="Without data there are no circuit heads to list (see the line at the top of the page).")
if tier.present:
    ch.table(pd.concat([ind.assign(circuit=f"induction ≥{induction_threshold:g}×"),
                        prev.assign(circuit=f"previous-token ≥{prev_token_threshold:g}× (best class)")])[
        ["circuit", "name", "layer", "head", "selectivity"]], caption=f"Circuit heads of {name} at {bos['revision']} "
        "(above 10,000× the baseline's attention is near zero and the ratio says little more).",
        formats={"selectivity": lambda v: f"{v:,.0f}×" if v < 1e4 else "> 10,000×"})

# %% [markdown]
# ## PR trajectories of the circuit heads
#
# The participation ratio of a head's output at the query measures how many directions its output spreads over
# across the batch. The figure puts each induction-circuit head's PR − 1 (top) above its induction selectivity
# (bottom) on one token axis; the dashed line is the revision at which the head first reaches
# {glue:text}`model-ind-threshold`.

# %% tags=["remove-input", "full-width"]
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
# Zeroing a head sets its slice of the attention output projection's input to 0 at every position; the model is
# then scored at the query, where it should predict B. The circuit is *necessary* when zeroing it lowers top-1 more
# than zeroing as many other heads does, so its controls must be drawn for it: a matched random set has the
# circuit's layers and per-layer counts with heads from outside the circuit; whole layers give an upper bound.
# Every top-1 below carries its 95% binomial (Wilson) interval for the batch the ablation scored.
# {glue:text}`model-ablation-text`

# %% tags=["remove-input", "full-width"]
ab, why = page.ablation(run=ablation, threshold=induction_threshold, groups=ablation_groups, mode=ablation_mode,
                        batch_size=batch_size, device=device)
claimed = ch.claimed("A.induction_circuit") if tier.name == "published" else pd.DataFrame(columns=["key", "paper"])
paper_control = claimed.loc[claimed["key"] == f"{name}/ablate_matched_random/{len(ind)}", "paper"]
ch.glue("ablation-text", None if ab is None else abl.ablation_text(
    ab, prev_heads=list(prev["name"]), paper_control=paper_control.iloc[0] if len(paper_control) else None),
    absent=f"This page shows no ablation: {why}.")
if ab is not None:
    ch.figure(plots.ablation_bars(ab, title=f"{name}: top-1 at the query with heads zeroed, final revision",
                                  reported={"matched random set drawn for the circuit (the paper's number; not in "
                                            "the authors' files)": paper_control.iloc[0]} if len(paper_control)
                                  else None),
              name=f"fig-model-{name}-ablation",
              caption=f"{name}: top-1 accuracy at the query (bars; error bars: 95% Wilson interval on the batch of "
                      f"{int(ab['n'].iloc[0])} sequences; dots: random groups) with each head set zeroed. Red: the "
                      "induction circuit; blue: controls drawn for it; purple and grey hatched: other head sets and "
                      "the controls drawn for them; open diamond: a number the paper reports but the files do not "
                      "hold; dashed: no ablation.")
    ch.table(abl.ablation_summary(ab), caption=f"Ablation conditions of {name} "
             f"({'the authors’ files' if tier.name == 'published' else ablation_mode + ' ablation'}): what was "
             "zeroed, which head set a control was drawn for, and top-1 at the query.")

# %% [markdown]
# ## When the circuit becomes necessary
#
# The same zero ablation of the final circuit, repeated at every probed revision of training, with the circuit's
# controls (`circuitdev ablate --over-training`, on the probe's own batch), against the revisions at which the
# screen finds the circuit's heads. A revision counts as *necessary* when the circuit's drop in top-1 beyond the
# random groups' mean drop (the excess drop: the matched random groups, or random groups from any layer where the
# circuit fills its layers) has its 95% interval above 0; that interval covers the spread between the groups (a t
# interval over them) and the circuit's binomial noise. A drop against no ablation alone says what zeroing it costs.
# {glue:text}`model-necessity`

# %% tags=["remove-input", "full-width"]
over, why = page.over_training()
recall = findings.circuit_recall(dev, threshold=induction_threshold) if over is not None else None
nec = abl.necessity(over, recall) if over is not None else None
ch.glue("necessity", None if nec is None else abl.necessity_text(nec, threshold=induction_threshold),
        absent=f"This page shows no ablation over training: {why}.")
if over is not None:
    marks = {"circuit first necessary": nec["necessary"]["tokens_b"] if nec["necessary"] is not None else None,
             **{f"screen finds {what} ≥ {induction_threshold:g}×": nec[key][1]["tokens_b"]
                for key, what in (("first_head", "one of its heads"), ("whole", "all its heads"))
                if nec[key] and nec[key][1] is not None}}
    ch.figure(plots.ablation_over_training(over, title=f"{name}: top-1 at the query with the final circuit zeroed, "
                                                       "over training", marks=marks),
              name=f"fig-model-{name}-over-training",
              caption=f"{name}: top-1 at the query at every revision, intact and with the final induction circuit "
                      f"({over['n_circuit'].iloc[0]} heads) or its controls zeroed; bands: 95% Wilson intervals on "
                      f"the batch of {over['n'].iloc[0]} sequences; for random groups, the 95% interval of their mean over "
                      "the groups.")

# %% [markdown]
# ## The greater-than task
#
# The authors also ablated heads on a second task, greater-than: prompts of the form "The war lasted from the year
# 1732 to the year 17", which a model should continue with a later year. They score the share of prompts whose
# top-1 next token is a year above the start year, with each head set zeroed: the five heads their greater-than
# screen ranks first, a matched random set drawn for those five, and the two head sets the file calls the induction
# and the previous-token circuit. {glue:text}`model-gt-text`

# %% tags=["remove-input", "full-width"]
gt, why = page.greater_than()
ch.glue("gt-text", None if gt is None else abl.greater_than_text(gt, name, heads_per_layer=int(dev["head"].max()) + 1),
        absent=f"This page shows no greater-than ablation: {why}.")
if gt is not None:
    ch.figure(plots.ablation_bars(gt.assign(acc_top1=gt["top1_above"], acc_top1_lo=gt["top1_above_lo"],
                                            acc_top1_hi=gt["top1_above_hi"], n=gt["n_examples"], note=""),
                                  title=f"{name}: greater-than, share of prompts with a later year on top",
                                  xlabel="top-1 is a year above the start year (% of prompts, 95% Wilson interval)"),
              name=f"fig-model-{name}-greater-than",
              caption=f"{name}: the authors' greater-than ablation, on the {int(gt['n_examples'].iloc[0])} prompts "
                      "of their file (its n_examples); error bars: 95% Wilson interval. Colours as in the induction "
                      "ablation above.")
    ch.table(abl.greater_than_summary(gt),
             caption=f"The authors' greater-than ablation of {name}: top-1 a later year with its 95% Wilson interval "
                     f"on {int(gt['n_examples'].iloc[0])} prompts, the probabilities of a later and an earlier year "
                     "and their logit difference; whose circuit a head set named after a circuit is, and how many of "
                     "its heads the model lacks.")
