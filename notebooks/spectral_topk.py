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
# # The spectral top-K: which heads have the most PR
#
# **What the authors' files hold.** Beside the six selectivities of every head, each per-revision file lists the
# top {glue:text}`spectral-top-k` heads by participation ratio (PR, {doc}`f5_pr_lead`) with their class at that
# revision, and counts them by class (`class_breakdown_topK`). The ranking is by the PR *integral* over the whole
# run (the trapezoid of max(PR − 1, 0) over the log of training tokens, a feature of the whole trajectory): one set
# of heads per model, classified anew at every revision — in the authors' files,
# {glue:text}`spectral-topk-same` — not the heads of highest PR at each revision.
#
# **The paper's reason for class-specific screens.** Ranking all heads by PR and taking the top K would mostly
# return first-token (sink) heads late in training, so the paper screens each class on its own. We test that
# statement on the authors' counts, recompute the counts from the trajectories, and compute the same breakdown for
# the toy and measured tiers from our records (`findings.spectral_topk`).

# %% tags=["remove-cell"]
import pandas as pd

from circuitdev.analysis import findings
from circuitdev.book import Source, chapter, controls, plots

# %% tags=["parameters", "remove-cell"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# the paper's top-K size (the record panels get the same share of their heads)
top_k: int = 45  # in [1, inf)

# %% tags=["remove-input", "full-width"]
ch = chapter("spectral_topk", globals())
breakdown = controls.topk_breakdowns(ch.tiers, top_k=top_k)
dominance = findings.dominance_texts(findings.topk_dominance(breakdown))
controls.glue_topk(ch, breakdown, dominance, top_k)
ch.figure(plots.topk_bars(breakdown), name="fig-spectral-topk",
          caption="Class of each of the top-K heads by PR integral at every revision (stacked bars, revisions in "
                  "token order), one axis per model and tier: K = 45 for the published models, the same share of "
                  "heads for the others.")

# %% [markdown]
# ## Do first-token heads dominate it late in training?
#
# {numref}`fig-spectral-topk` shows the class breakdown over training. At the final revision first-token heads are
# {glue:text}`spectral-topk-pub-final` of the top {glue:text}`spectral-top-k`: the largest class in
# {glue:text}`spectral-topk-pub-dominates` published models, and the largest from {glue:text}`spectral-topk-pub-from`
# on. Our recomputation — the
# integral from each head's PR trajectory, the top K, their classification at every revision — gives the authors'
# count at {glue:text}`spectral-topk-recomputed` of the {glue:text}`spectral-topk-cells` (revision, class) cells
# they count.
#
# **The toy and measured tiers.** K is scaled to a panel's heads as 45 is to the paper's model of the same family
# (35% of Pythia-1B's 128 heads, 17.6% of OLMo's and OLMoE's 256): {glue:text}`spectral-topk-toy-k`. A run that
# never reaches 1B tokens is integrated from its first revision with tokens (the authors' clip at 1B would give
# every toy head an integral of 0). At their final revision the toy panels' largest class among these heads is
# {glue:text}`spectral-topk-toy-largest`: first-token heads lead the ranking in {glue:text}`spectral-topk-toy-dominates`
# toy panels.

# %% tags=["remove-input"]
ch.table(dominance.drop(columns=["final_text", "from_text"]), precision=2,
         caption="The top-K at the final revision: first-token heads (count, share), the largest class, whether "
                 "first-token heads are it, and the revision (and share of the run's tokens) from which they stay "
                 "the largest class.")

# %% [markdown]
# ## Against the base rate: enriched, depleted or as expected?
#
# "The largest class in the top K" is no evidence that PR favours a class when the class is also the largest among
# all heads. The base rate: drawing K heads at random from the model's heads at that revision, of which a class has
# its share, gives an expected count (hypergeometric: `findings.topk_enrichment`, written for the authors' files by
# `circuitdev reanalyse` as `spectral_topk_enrichment.csv`). A class is **enriched** when the top K holds more of
# it than random draws would reach at p < 0.05 (one-sided), **depleted** when fewer, **as expected** otherwise.
# At the final revision, first-token heads in the top K against their base rate: {glue:text}`spectral-enrich-pub`
# in the published models; {glue:text}`spectral-enrich-toy` in the toy panels. The paper's reason for
# class-specific screens — the top K would mostly return sink heads — holds only where they are enriched, not where
# they are merely numerous.

# %% tags=["remove-input"]
enrich = pd.concat([findings.topk_enrichment(breakdown[breakdown["tier"] == t.name].drop(columns="tier"), t.table)
                    .assign(tier=t.name) for t in ch.tiers.present], ignore_index=True) if len(breakdown) else \
    pd.DataFrame(columns=["tier", *findings.ENRICHMENT_COLUMNS])
enrich["reading"] = [findings.enrichment_word(r) for r in enrich.to_dict("records")]
last = enrich.merge(breakdown.groupby(["tier", "panel"])["revision"].last().reset_index(), on=["tier", "panel",
                                                                                           "revision"])
sinks = last[last["class"] == "first-token"]
for tier, key in [(t.name, k) for t in ch.tiers.present for n, k in (("published", "pub"), ("toy", "toy"))
                  if t.name == n]:  # an absent tier's key reads "not in this build"
    rows = sinks[sinks["tier"] == tier]
    ch.glue(f"enrich-{key}", "; ".join(f"{p}: {o} of {k} against {e:.1f} expected, {w}" for p, o, k, e, w in zip(
        rows["panel"], rows["observed"], rows["k"], rows["expected"], rows["reading"])) or None,
        absent="no first-token head in any top K")
ch.table(last[["tier", "panel", "revision", "class", "observed", "expected", "k", "base_count", "n_heads", "p_fewer",
               "p_more", "reading"]], precision=3,
         caption="The top K at the final revision, class by class: observed beside the count expected from the "
                 "class's share of all heads (hypergeometric), the one-sided p-values, and the reading.")
