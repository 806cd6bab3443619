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
# # F3 · Does induction come before sinks?

# %% tags=["remove-cell"]
from circuitdev.analysis import findings
from circuitdev.book import Rule, Source, chapter, fmt_tokens_b, plots
from circuitdev.book.behaviour import record_behaviour

# %% tags=["parameters", "remove-cell"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# per-class (the paper's counting) or best-class
rule: Rule = "per-class"
# the induction milestone (a name of findings.PAPER_MILESTONES)
gap_start: str = "induction_3_heads"
# the sink milestone
gap_end: str = "bos_50pct"
# False: first revision reaching it (the paper); True: from which it always holds
sustained: bool = False
# behavioural milestones: top-1 accuracy at the query crossing these shares
top1_levels: list[float] = [0.25, 0.5]  # in (0, 1]
# behavioural milestones: the repeat (copy) score `icl_score` crossing these values (nats)
icl_levels: list[float] = [1.0, 3.0]  # in (0, inf)
# behavioural milestones: ablating the final circuit costs at least this share of top-1
drop_levels: list[float] = [0.1, 0.25]  # in (0, 1]

# %% tags=["remove-input"]
ch = chapter("f3_milestones", globals())
ch.verdict("F3.gap")  # the verdict under the title: what the data support (issue 29)
ch.verdict("F3.milestones");  # the verdict under the title: what the data support (issue 29)

# %% [markdown]
# **The paper's claim.** "Capability first, sinks later": in every model the first revision with
# {glue:text}`f3-paper-gap-start` comes well before the first revision with {glue:text}`f3-paper-gap-end`, an
# order of magnitude of training tokens later in the OLMo models. Both milestones are **attention patterns**: a head
# that attends like an induction head is not yet a model that copies in context. This page therefore states the
# attention milestones (induction first, sinks later) and, where the records measure behaviour at every revision (the
# toy and measured tiers), puts the capability itself beside them. In the toy panel:
# {glue:text}`f3-toy-capability`. The authors' files hold no behaviour per revision, so for the published models
# the claim stays one about attention.
#
# **What we compute.** The first revision reaching each milestone of the paper's table (`findings.milestones`,
# listed below), and the gap from {glue:text}`f3-gap-start` to {glue:text}`f3-gap-end` as a token ratio
# (`findings.milestone_gap`). A milestone already reached at a model's first probed revision was reached *at or
# before* it, one never reached lies *after* the last: such values are bounds, written "≤ 20B", "> 3.05T" and, for a
# gap built from them, "≥ 21×". The head-count milestones are absolute, so the toy models, which have fewer heads
# than some of them ask for, cannot reach those.

# %% tags=["remove-input"]
ms = ch.apply(findings.milestones, rule=rule, sustained=sustained, intervals=True)
gaps = ch.apply(lambda dev: findings.gap_texts(findings.milestones(dev, rule=rule, sustained=sustained),
                                               start=gap_start, end=gap_end, fmt=fmt_tokens_b))
for key, name in {"paper-gap-start": "induction_3_heads", "paper-gap-end": "bos_50pct", "gap-start": gap_start,
                  "gap-end": gap_end}.items():
    ch.glue(key, findings.milestone(name).describe())
ch.table(findings.describe_milestones(), caption="The milestones of the paper's table.")

# %% [markdown]
# ## The timeline
#
# {numref}`fig-f3-timeline` places every milestone on the token axis, one panel per tier on its own token axis; the
# grey bar joins the induction milestone to the sink milestone and is labelled with their token ratio. An arrow
# marks a bound: to the left from a milestone already reached at the first probed revision, to the right from a
# hollow marker at the last revision for one never reached.

# %% tags=["remove-input", "full-width"]
revs = ch.apply(findings.revisions)
ch.figure(plots.milestone_timeline(ms, gaps, revisions=revs), name="fig-f3-timeline",
          caption=f"First revision reaching each milestone; grey bar: the gap `{gap_start}` → `{gap_end}` (≥ / ≤: a "
                  "bound); thin bar: the re-measurement interval (the probe batch resampled) of the first revision.")

# %% [markdown]
# ## The gap
#
# In the authors' files the gap is {glue:text}`f3-pub-olmo-gap` in OLMo
# ({glue:text}`f3-pub-olmo-start` → {glue:text}`f3-pub-olmo-end` tokens),
# {glue:text}`f3-pub-olmoe-gap` in OLMoE ({glue:text}`f3-pub-olmoe-start` → {glue:text}`f3-pub-olmoe-end`) and
# {glue:text}`f3-pub-pythia-gap` in Pythia ({glue:text}`f3-pub-pythia-start` → {glue:text}`f3-pub-pythia-end`).
# OLMoE's induction milestone already holds at its first probed revision, so its gap is a lower bound, not a value.
# In the toy panel: {glue:text}`f3-toy-gaps`.

# %% tags=["remove-input"]
ch.glue_frame(gaps, {"gap": "{}", "start": "{}", "end": "{}"})
ch.glue_list("toy-gaps", gaps, "gap", tier="toy", missing="never closed")
ch.table(findings.reached_table(ms, fmt_tokens_b),
         caption="Tokens at the first revision reaching each milestone (≤: at the first probed revision; >: never).")
ch.table(gaps.reindex(columns=["tier", "panel", "start", "end", "gap", "bound", "checkpoints"]), caption="The gap.")

# %% [markdown]
# ### First reached, or reached for good?
#
# The paper's rule takes the first revision at which a milestone holds, even if it fails again later. The page's
# `sustained` option asks instead for the first revision from which it holds at every later one. Under it the
# order in OLMo changes: its gap becomes {glue:text}`f3-pub-olmo-sustained`
# ({glue:text}`f3-pub-olmo-sustained-start` → {glue:text}`f3-pub-olmo-sustained-end`): three induction heads at
# the bar hold for good only late, while the sinks, once there, stay. OLMoE's sustained gap is
# {glue:text}`f3-pub-olmoe-sustained` and Pythia's {glue:text}`f3-pub-pythia-sustained`.

# %% tags=["remove-input"]
held = ch.apply(lambda dev: findings.gap_texts(findings.milestones(dev, rule=rule, sustained=True), start=gap_start,
                                               end=gap_end, fmt=fmt_tokens_b))
ch.glue_frame(held.rename(columns={"gap": "sustained", "start": "sustained_start", "end": "sustained_end"}),
              {"sustained": "{}", "sustained-start": "{}", "sustained-end": "{}"})

# %% [markdown]
# ## How robust
#
# The gap is a ratio of two first revisions, each decided by a count crossing a bar. Over the grid of bars of the
# robustness table ({doc}`robustness`), the paper's statement (the induction milestone strictly before the sink
# milestone) holds in the authors' files for {glue:text}`f3-robust-f3-gap-pub-ranges`; in the toy panel for
# {glue:text}`f3-robust-f3-gap-toy-ranges`.
#
# What the gap hangs on at the paper's bars: the more fragile of its two milestones, the one whose deciding head
# is nearest its bar. In OLMo, {glue:text}`f3-robust-f3-gap-pub-olmo-hangs-on`. In OLMoE,
# {glue:text}`f3-robust-f3-gap-pub-olmoe-hangs-on`. In Pythia, {glue:text}`f3-robust-f3-gap-pub-pythia-hangs-on`.
# In the toy panel: {glue:text}`f3-robust-f3-gap-toy-hangs-on`.

# %% tags=["remove-input", "full-width"]
robust = ch.how_robust("F3.gap")

# %% [markdown]
# ## How sure: the window of each milestone
#
# A grid of revisions only says that a milestone was first reached somewhere after the revision before it, and a
# finite batch adds noise: with {glue:text}`f3-boot` the first revision reaching it moves between resamples. For a
# probed tier the **window** of a milestone runs from the revision before its earliest first revision (95% of the
# resamples) to its latest: a re-measurement interval (the probe batch resampled), not a training-seed interval. In
# the toy panel: {glue:text}`f3-toy-windows`. The grid's part of a window shrinks when more revisions are probed
# where the count changes ({doc}`refinement`). The published tier has no per-sequence data and so no window beyond
# its grid; how much its milestones rest on the bars is the section above.

# %% tags=["remove-input"]
ch.glue_bootstrap()
win = findings.with_texts(ms, fmt_tokens_b).dropna(subset=["window"])
ch.glue_list("toy-windows", win.assign(panel=win["panel"] + " " + win["milestone"]), "window", tier="toy", sep="; ")
ch.table(win.reindex(columns=["tier", "panel", "milestone", "revision", "window", "reached_share", "window_censored"]),
         caption="The re-measurement window (the probe batch resampled) of each milestone a probed tier reaches.")

# %% [markdown]
# ## Behaviour beside attention
#
# The record tiers measure what the model does at every revision, in the same pass as the selectivities: top-1
# accuracy at the query that should copy B, and a repeat (copy) score, column `icl_score` (the loss on a repeated
# random span's first occurrence minus the loss on its repeat: how well the model copies a span it has seen, not
# {cite:t}`olsson2022context`'s in-context-learning score, the loss at a late token of a context minus at an early
# one), each with its interval from the same resamples, and, where
# `circuitdev ablate --over-training` ran, the top-1 lost when the final induction circuit is zero-ablated. Their
# milestones follow the same first-hit rule: {glue:text}`f3-behaviour-milestones`. {numref}`fig-f3-behaviour` puts
# them beside the attention milestones on one token axis per model. In the toy panel, in token order:
# {glue:text}`f3-toy-behaviour-order`. The published tier has no behaviour per revision (the authors' files hold
# selectivities and participation ratios only), so for the published models the claim stays one about attention
# patterns.

# %% tags=["remove-input", "full-width"]
specs = findings.behaviour_specs(top1=top1_levels, icl=icl_levels, drop=drop_levels)
behaviour = record_behaviour(ch.tiers, ch.folders.results_dir, specs=specs, sustained=sustained)
order = findings.milestone_order(ms, behaviour, names=[gap_start, gap_end], specs=specs, fmt=fmt_tokens_b)
ch.glue("behaviour-milestones", "; ".join(s.describe() for s in specs))
ch.glue_list("toy-behaviour-order", order, "order", tier="toy", sep=" | ", absent="no toy records with behaviour")
ch.glue_list("toy-capability", order, "summary", tier="toy", sep="; ", absent="no toy records with behaviour")
ch.figure(plots.behaviour_timeline(ms, behaviour, revisions=revs), name="fig-f3-behaviour",
          caption="Behavioural milestones (below the dashed line) beside the attention milestones (above), one panel "
                  "per model; thin bar: the re-measurement interval (the probe batch resampled); arrows: bounds.")
ch.table(findings.with_texts(behaviour, fmt_tokens_b).reindex(columns=["tier", "panel", "milestone", "reached",
                                                                      "window"]), caption="Behavioural milestones.")

# %% [markdown]
# ## The paper's numbers beside the authors' data

# %% tags=["remove-input"]
ch.paper_vs_data("F3")
