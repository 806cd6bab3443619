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
# revision with {glue:text}`f3-gap-start` comes well before the first revision with {glue:text}`f3-gap-end`, an
# order of magnitude of training tokens later in the OLMo models.
#
# **What we compute.** The first revision reaching each milestone of the paper's table (`findings.milestones`,
# listed below), and the gap between two of them as a token ratio (`findings.milestone_gap`). The head-count
# milestones are absolute, so the toy models, which have fewer heads than some of them ask for, cannot reach those.

# %% tags=["remove-cell"]
from typing import Optional

from circuitdev import notebook as nb
from circuitdev.notebook import Rule, Source

_before = set(globals())

# %% [markdown]
# ## Parameters
#
# `gap_start` and `gap_end` name the two milestones whose distance is the induction → sink gap (names as in
# `findings.PAPER_MILESTONES`); `sustained` asks for the first revision from which a milestone holds for good.

# %% tags=["parameters"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# per-class (the paper's counting) or best-class
rule: Rule = "per-class"
# the capability milestone
gap_start: str = "induction_3_heads"
# the sink milestone
gap_end: str = "bos_50pct"
# False: first revision reaching it (the paper); True: from which it always holds
sustained: bool = False
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
import pandas as pd

from circuitdev import findings, plots

tiers, glue = nb.open_chapter("f3", sources, data_dir=data_dir, published_dir=published_dir,
                              results_dir=results_dir, panels=panels)
ms = tiers.apply(findings.milestones, rule=rule, sustained=sustained)
gaps = tiers.apply(lambda dev: findings.milestone_gap(findings.milestones(dev, rule=rule, sustained=sustained),
                                                      start=gap_start, end=gap_end))
glue("gap-start", nb.milestone_text(gap_start))
glue("gap-end", nb.milestone_text(gap_end))
nb.show_table(pd.DataFrame({"milestone": [m.name for m in findings.PAPER_MILESTONES],
                            "reached when": [nb.milestone_text(m.name) for m in findings.PAPER_MILESTONES]}),
              caption="The milestones of the paper's table.")

# %% [markdown]
# ## The timeline
#
# {numref}`fig-f3-timeline` places every milestone on the token axis; the grey bar joins the capability milestone
# to the sink milestone and is labelled with their token ratio.

# %% tags=["hide-input"]
nb.show_figure(plots.milestone_timeline(ms, gaps), name="fig-f3-timeline",
               caption="First revision at which each milestone holds, per model (rows) and tier (columns), on a "
                       f"log token axis; the grey bar is the gap from {gap_start} to {gap_end} with its token ratio. "
                       "Milestones never reached are not drawn (see the table).",
               provenance=tiers.provenance())

# %% [markdown]
# ## The gap
#
# In the authors' files the induction → sink gap is {glue:text}`f3-pub-gap-olmo` in OLMo
# ({glue:text}`f3-pub-span-olmo`), {glue:text}`f3-pub-gap-olmoe` in OLMoE ({glue:text}`f3-pub-span-olmoe`) and
# {glue:text}`f3-pub-gap-pythia` in Pythia ({glue:text}`f3-pub-span-pythia`). In the toy panel:
# {glue:text}`f3-toy-gaps`.

# %% tags=["hide-input"]
short = {"pythia": "pythia-1b", "olmo": "olmo-1b-0724", "olmoe": "olmoe-1b-7b-0924"}
pub = gaps[gaps["tier"] == "published"] if len(gaps) else gaps
for key, panel in short.items():
    glue(f"pub-gap-{key}", nb.value_at(pub, "token_ratio", panel=panel), "×{:.3g}", absent="n/a")
    start, end = (nb.value_at(pub, c, panel=panel) for c in ("start_tokens_b", "end_tokens_b"))
    glue(f"pub-span-{key}", None if start is None else f"{nb.fmt_tokens(start)} → {nb.fmt_tokens(end)} tokens",
         absent="no published data")
glue("toy-gaps", nb.per_panel(gaps, "token_ratio", lambda r: f"×{r:.3g}" if r == r else "never closed",
                              tier="toy"), absent="not available (no toy records)")
if len(ms):
    wide = ms.assign(reached=[nb.fmt_tokens(t) if t == t else "never" for t in ms["tokens_b"]]).pivot_table(
        index=["tier", "panel"], columns="milestone", values="reached", aggfunc="first", sort=False)
    wide = wide[[m.name for m in findings.PAPER_MILESTONES if m.name in wide.columns]].reset_index()
    nb.show_table(wide, caption=f"Training tokens at the first revision reaching each milestone.")
if len(gaps):
    nb.show_table(gaps, caption=f"The gap from {gap_start} to {gap_end}: token ratio and checkpoints.")

# %% [markdown]
# ## The paper's numbers beside the authors' data

# %% tags=["hide-input"]
audit = nb.paper_vs_data(tiers, ["F3"])
if audit is None:
    nb.note("The comparison needs the published tier (see the note at the top of the page).")
else:
    nb.show_table(audit, caption="F3 claims: the paper's value and the value in the authors' files.")
