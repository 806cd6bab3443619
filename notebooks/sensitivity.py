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
# # Beyond the paper · How much rests on the thresholds
#
# Every finding counts heads whose selectivity passes a fixed threshold: {glue:text}`sens-bos-threshold` for sinks,
# {glue:text}`sens-ind-threshold` for induction. Selectivity is a ratio with a heavy tail, so the counts could
# depend on that choice. This chapter recomputes the final-revision counts over a log grid of thresholds
# (`findings.threshold_sensitivity`) and the F2 shape at every threshold (`findings.shape_sensitivity`).

# %% tags=["remove-cell"]
from typing import Optional

from circuitdev import notebook as nb
from circuitdev.notebook import Rule, Source
from circuitdev.schema import HeadClass

_before = set(globals())

# %% [markdown]
# ## Parameters

# %% tags=["parameters"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# classes to sweep
head_classes: list[HeadClass] = ["first-token", "induction", "previous-token"]
# the paper's sink threshold (marked on the figure)
bos_threshold: float = 30.0
# the paper's induction threshold (marked on the figure)
induction_threshold: float = 50.0
# the paper's previous-token circuit threshold (marked on the figure)
prev_token_threshold: float = 100.0
# per-class (the paper's counting) or best-class
rule: Rule = "per-class"
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

tiers, glue = nb.open_chapter("sens", sources, data_dir=data_dir, published_dir=published_dir,
                              results_dir=results_dir, panels=panels)
glue("bos-threshold", bos_threshold, "{:g}×")
glue("ind-threshold", induction_threshold, "{:g}×")
sens = tiers.apply(findings.threshold_sensitivity, head_classes=head_classes, rule=rule, final_only=True)
shapes = tiers.apply(findings.shape_sensitivity, rule=rule)

# %% [markdown]
# ## Final-revision counts against the threshold
#
# {numref}`fig-sensitivity-thresholds` shows, for each class, how many heads pass as the threshold moves; the red
# dotted line is the paper's threshold.

# %% tags=["hide-input"]
nb.show_figure(plots.threshold_sensitivity(sens, paper_thresholds={
    "first-token": bos_threshold, "induction": induction_threshold, "previous-token": prev_token_threshold}),
    name="fig-sensitivity-thresholds",
    caption="Heads passing the threshold at each model's final revision, as a function of the threshold (log "
            "axis): the BOS fraction (%) for first-token, head counts for the other classes; solid lines "
            "published, dashed toy, dotted measured.", provenance=tiers.provenance())

# %% [markdown]
# ## Does OLMo's transition survive other thresholds?
#
# F2 calls OLMo's sink emergence a transition. In the authors' files that verdict holds at
# {glue:text}`sens-olmo-transition` of the {glue:text}`sens-n-thresholds` thresholds swept (from
# {glue:text}`sens-olmo-transition-min` to {glue:text}`sens-olmo-transition-max`); Pythia is a transition at
# {glue:text}`sens-pythia-transition` and OLMoE at {glue:text}`sens-olmoe-transition` of them.

# %% tags=["hide-input"]
pub = shapes[shapes["tier"] == "published"] if len(shapes) else shapes
glue("n-thresholds", len(findings.SENSITIVITY_THRESHOLDS))
for key, panel in (("olmo", "olmo-1b-0724"), ("pythia", "pythia-1b"), ("olmoe", "olmoe-1b-7b-0924")):
    rows = pub[(pub["panel"] == panel) & (pub["shape"] == "transition")] if len(pub) else pub
    glue(f"{key}-transition", len(rows) if len(pub) else None, absent="n/a")
    if key == "olmo":
        glue("olmo-transition-min", rows["threshold"].min() if len(rows) else None, "{:g}×", absent="n/a")
        glue("olmo-transition-max", rows["threshold"].max() if len(rows) else None, "{:g}×", absent="n/a")
if len(shapes):
    wide = shapes.pivot_table(index="threshold", columns=["tier", "panel"], values="shape", aggfunc="first")
    wide.columns = [f"{p} ({t})" for t, p in wide.columns]
    nb.show_table(wide.reset_index(), caption="F2 shape (ramp / transition / flat) at every BOS threshold.")
