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
# Every finding counts heads whose selectivity passes a fixed threshold: the paper uses
# {glue:text}`sens-paper-bos-threshold` for sinks and {glue:text}`sens-paper-induction-threshold` for induction.
# Selectivity is a ratio with a heavy tail, so the counts could depend on that choice. This chapter recomputes the
# final-revision counts over a log grid of thresholds (`findings.threshold_sensitivity`) and the F2 shape at every
# threshold (`findings.shape_sensitivity`).

# %% tags=["remove-cell"]
from circuitdev.analysis import findings
from circuitdev.book import HeadClass, Rule, Source, chapter, plots

# %% tags=["parameters", "remove-cell"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# classes to sweep
head_classes: list[HeadClass] = ["first-token", "induction", "previous-token"]
# per-class (the paper's counting) or best-class
rule: Rule = "per-class"

# %% tags=["remove-input"]
ch = chapter("sensitivity", globals(), prefix="sens")
sens = ch.apply(findings.threshold_sensitivity, head_classes=head_classes, rule=rule, final_only=True)
shapes = ch.apply(findings.shape_sensitivity, rule=rule)

# %% [markdown]
# ## Final-revision counts against the threshold
#
# {numref}`fig-sensitivity-thresholds` shows, for each class, how many heads pass as the threshold moves; the red
# dotted line is the paper's threshold.

# %% tags=["remove-input", "full-width"]
paper = ch.paper
ch.figure(plots.threshold_sensitivity(sens, paper_thresholds={
    "first-token": paper.bos_threshold, "induction": paper.induction_threshold,
    "previous-token": paper.prev_token_threshold}), name="fig-sensitivity-thresholds",
    caption="Heads passing the threshold at each model's final revision, as a function of the threshold (log axis): "
            "the share of heads that are sinks (%) for first-token, head counts for the other classes; solid lines "
            "published, dashed toy, dotted measured.")

# %% [markdown]
# ## Does OLMo's transition survive other thresholds?
#
# F2 calls OLMo's sink emergence a transition (one step between revisions carries at least half of the rise, and the
# rise is large enough to call a shape: {doc}`f2_shapes`). In the authors' files that verdict holds at
# {glue:text}`sens-pub-olmo-count` of the {glue:text}`sens-n-thresholds` thresholds swept, which are not one
# stretch of the grid but these: {glue:text}`sens-pub-olmo-ranges`. Pythia is a transition at
# {glue:text}`sens-pub-pythia-count` of them ({glue:text}`sens-pub-pythia-ranges`) and OLMoE at
# {glue:text}`sens-pub-olmoe-count` ({glue:text}`sens-pub-olmoe-ranges`). Each range lists consecutive
# thresholds of the grid; between two ranges the shape is something else (the table below).

# %% tags=["remove-input", "full-width"]
ch.glue("n-thresholds", len(findings.SENSITIVITY_THRESHOLDS))
ch.glue_frame(findings.shape_ranges(shapes, thresholds=findings.SENSITIVITY_THRESHOLDS) if len(shapes) else shapes,
              {"count": "{}", "ranges": "{}"})
if len(shapes):
    wide = shapes.pivot_table(index="threshold", columns=["tier", "panel"], values="shape", aggfunc="first")
    wide.columns = [f"{p} ({t})" for t, p in wide.columns]
    ch.table(wide.reset_index(), caption="F2 shape (ramp / transition / flat: a rise too small to call a shape) at "
                                         "every BOS threshold.")
