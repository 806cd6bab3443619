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
# # F3 · Capability first, sinks later
#
# **The paper's claim.** The induction circuit forms early and the attention sink late: in every model the first
# revision with {glue:text}`f3-paper-gap-start` comes well before the first revision with
# {glue:text}`f3-paper-gap-end`, an order of magnitude of training tokens later in the OLMo models.
#
# **What we compute.** The first revision reaching each milestone of the paper's table (`findings.milestones`,
# listed below), and the gap from {glue:text}`f3-gap-start` to {glue:text}`f3-gap-end` as a token ratio
# (`findings.milestone_gap`). The head-count milestones are absolute, so the toy models, which have fewer heads
# than some of them ask for, cannot reach those.

# %% tags=["remove-cell"]
import pandas as pd

from circuitdev.analysis import findings
from circuitdev.book import Rule, Source, chapter, fmt_tokens_b, plots

# %% tags=["parameters", "remove-cell"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# per-class (the paper's counting) or best-class
rule: Rule = "per-class"
# the capability milestone (a name of findings.PAPER_MILESTONES)
gap_start: str = "induction_3_heads"
# the sink milestone
gap_end: str = "bos_50pct"
# False: first revision reaching it (the paper); True: from which it always holds
sustained: bool = False

# %% tags=["remove-input"]
ch = chapter("f3_milestones", globals())
ms = ch.apply(findings.milestones, rule=rule, sustained=sustained, intervals=True)
gaps = ch.apply(lambda dev: findings.milestone_gap(findings.milestones(dev, rule=rule, sustained=sustained),
                                                   start=gap_start, end=gap_end))
ch.glue("paper-gap-start", findings.milestone("induction_3_heads").describe())
ch.glue("paper-gap-end", findings.milestone("bos_50pct").describe())
ch.glue("gap-start", findings.milestone(gap_start).describe())
ch.glue("gap-end", findings.milestone(gap_end).describe())
ch.table(pd.DataFrame([(m.name, m.describe()) for m in findings.PAPER_MILESTONES], columns=["milestone", "reached when"]),
         caption="The milestones of the paper's table.")

# %% [markdown]
# ## The timeline
#
# {numref}`fig-f3-timeline` places every milestone on the token axis; the grey bar joins the capability milestone
# to the sink milestone and is labelled with their token ratio.

# %% tags=["remove-input"]
ch.figure(plots.milestone_timeline(ms, gaps, revisions=ch.apply(findings.revisions)), name="fig-f3-timeline",
          caption="First revision at which each milestone holds, per model (rows) and tier (columns), on a token axis; "
                  f"the grey bar is the gap from {gap_start} to {gap_end} with its token ratio; the thin bar through a "
                  "marker (probed tiers) is the milestone's window: from the revision before its earliest first "
                  "revision across 95% of the bootstrap resamples to its latest. Milestones never reached are not "
                  "drawn (see the table).")

# %% [markdown]
# ## The gap
#
# In the authors' files the gap is {glue:text}`f3-pub-olmo-token-ratio` in OLMo
# ({glue:text}`f3-pub-olmo-start-tokens-b` → {glue:text}`f3-pub-olmo-end-tokens-b` tokens),
# {glue:text}`f3-pub-olmoe-token-ratio` in OLMoE ({glue:text}`f3-pub-olmoe-start-tokens-b` →
# {glue:text}`f3-pub-olmoe-end-tokens-b`) and {glue:text}`f3-pub-pythia-token-ratio` in Pythia
# ({glue:text}`f3-pub-pythia-start-tokens-b` → {glue:text}`f3-pub-pythia-end-tokens-b`). In the toy panel:
# {glue:text}`f3-toy-gaps`.

# %% tags=["remove-input"]
ch.glue_frame(gaps, {"token-ratio": "×{:.3g}", "start-tokens-b": fmt_tokens_b, "end-tokens-b": fmt_tokens_b})
ch.glue_list("toy-gaps", gaps, "token_ratio", "×{:.3g}", tier="toy", missing="never closed")
reached = ms.assign(reached=[fmt_tokens_b(t) if t == t else "never" for t in ms["tokens_b"]]) if len(ms) else ms
if len(ms):
    wide = reached.pivot_table(index=["tier", "panel"], columns="milestone", values="reached", aggfunc="first",
                               sort=False)
    ch.table(wide[[m.name for m in findings.PAPER_MILESTONES if m.name in wide.columns]].reset_index(),
             caption="Training tokens at the first revision reaching each milestone.")
ch.table(gaps, caption=f"The gap from {gap_start} to {gap_end}: token ratio and checkpoints.")

# %% [markdown]
# ## How sure: the window of each milestone
#
# A grid of revisions only says that a milestone was first reached somewhere after the revision before it, and a
# finite batch adds noise: with {glue:text}`f3-boot` the first revision reaching it moves between resamples. For a
# probed tier the **window** of a milestone runs from the revision before its earliest first revision (95% of the
# resamples) to its latest. In the toy panel: {glue:text}`f3-toy-windows`. The grid's part of a window shrinks when
# more revisions are probed where the count changes ({doc}`refinement`). The published tier has no per-sequence
# data and so no window beyond its grid; its uncertainty is the threshold sensitivity ({doc}`sensitivity`).

# %% tags=["remove-input"]
ch.glue_bootstrap()
win = ms[ms["window_tokens_b"].notna()] if "window_tokens_b" in ms.columns else ms.iloc[:0]
win = win.assign(window=[f"{m} {fmt_tokens_b(a)} → {fmt_tokens_b(b)} tokens" for m, a, b in
                         zip(win["milestone"], win.get("window_from_tokens_b", []), win.get("tokens_b_hi", []))])
ch.glue_list("toy-windows", win, "window", tier="toy", sep="; ", absent="no probed milestone has a window here")
ch.table(win.reindex(columns=["tier", "panel", "milestone", "revision", "window_from_revision", "revision_hi",
                              "window", "reached_share"]), caption="The window of each milestone a probed tier reaches.")

# %% [markdown]
# ## The paper's numbers beside the authors' data

# %% tags=["remove-input"]
ch.paper_vs_data("F3")
