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
# # F2 · The paper's claim: three shapes of sink emergence

# %% tags=["remove-cell"]
from circuitdev.analysis import findings, uncertainty
from circuitdev.book import Rule, Source, chapter, fmt_pct, fmt_tokens_b, plots, value_of, with_interval_text

# %% tags=["parameters", "remove-cell"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# a head is a sink head when first-token selectivity ≥ this (paper: 30x)
bos_threshold: float = 30.0  # in (0, inf)
# per-class (the paper's counting) or best-class
rule: Rule = "per-class"
# a jump (or one e-fold of tokens) carrying at least this share of the total rise makes a transition
transition_share: float = 0.5  # in [0, 1]
# no shape is called for a rise below this many percentage points ...
min_rise_pp: float = 10.0  # in [0, 100]
# ... or below this many heads of the model
min_rise_heads: int = 3  # in [0, inf)

# %% tags=["remove-input"]
ch = chapter("f2_shapes", globals())
ch.verdict("F2.shapes");  # the verdict under the title: what the data support (issue 29)

# %% [markdown]
# **The paper's claim.** The share of attention heads that are attention sinks (first-token, "BOS", selectivity
# ≥ {glue:text}`f2-paper-bos-threshold`) rises over training in a shape that differs by architecture: a steady ramp
# in Pythia, a sudden transition in dense OLMo, and an early, gradual rise that saturates lower in the
# mixture-of-experts OLMoE.
#
# **What we compute.** The BOS fraction $n_{\mathrm{first}}(\tau)/n_{\mathrm{heads}}$ at every revision of every panel, here at
# τ = {glue:text}`f2-threshold` (`findings.bos_fraction`), and two shape descriptors per panel
# (`findings.trajectory_shape`): the largest jump between adjacent revisions and its share of the total rise — a
# "transition" when one step carries at least {glue:text}`f2-transition-share` of it — and, because that share
# depends on where the revisions fall, the steepest rise per e-fold of training tokens (Δ percentage points /
# Δ ln tokens, measured over at least one e-fold) and the share of the whole rise it carries. No shape is called
# for a rise smaller than {glue:text}`f2-min-rise`.

# %% tags=["remove-input"]
frac = ch.apply(findings.bos_fraction, threshold=bos_threshold, rule=rule, intervals=True)
shape = ch.apply(lambda dev: findings.trajectory_shape(findings.bos_fraction(dev, threshold=bos_threshold, rule=rule),
                 transition_share=transition_share, min_rise_pp=min_rise_pp, min_rise_heads=min_rise_heads))
ch.glue("threshold", bos_threshold, "{:g}×")
ch.glue("transition-share", transition_share, "{:.0%}")
ch.glue("min-rise", f"{min_rise_pp:g} percentage points or than {min_rise_heads} heads of the model")

# %% [markdown]
# ## BOS fraction over training
#
# {numref}`fig-f2-bos-fraction` shows the BOS fraction against training tokens for every model of every tier, each
# tier on its own scale (a small model's fractions are a few of its heads: the right-hand axis counts them). The bands of the
# probed tiers are 95% re-measurement intervals (the probe batch resampled: {glue:text}`f2-boot`): the count of sink
# heads recomputed on every resample, every head from the same draws; they cover measuring the same trained model
# again, not training it again. The toy panel ends at {glue:text}`f2-toy-final-ci` (the resamples' mean:
# {glue:text}`f2-toy-final-mean`). Where the resamples centre away from the point count, because heads sit near the
# bar, an interval is widened to include the point: {glue:text}`f2-widened`. The published tier has no per-sequence
# data, so it has no band; how its fractions move with the threshold is its uncertainty ({doc}`sensitivity`).

# %% tags=["remove-input", "full-width"]
ch.figure(plots.bos_fraction_lines(frac, threshold=bos_threshold), name="fig-f2-bos-fraction", caption="Share of heads "
          f"with first-token selectivity ≥ {bos_threshold:g}× ({rule} rule) against training tokens, one line per model, "
          f"each tier on its own axes; bands: 95% {uncertainty.INTERVAL_NAME} (record tiers only).")
ch.glue_bootstrap()
final = with_interval_text(frac.groupby(["tier", "panel"], sort=False).tail(1), "bos_fraction", fmt_pct) if len(frac) else frac
ch.glue_list("toy-final-ci", final, "bos_fraction_ci", tier="toy")
ch.glue_list("toy-final-mean", final.assign(mean=final.get("bos_fraction_boot_mean")), "mean", fmt_pct, tier="toy")
ch.glue_list("widened", frac[frac.filter(items=["bos_fraction_widened"]).eq(True).any(axis=1)], "revision",
             absent="no interval on this page had to be")

# %% [markdown]
# ## Shapes
#
# In the authors' files the BOS fraction ends at {glue:text}`f2-pub-pythia-final-pct` in Pythia,
# {glue:text}`f2-pub-olmo-final-pct` in OLMo and {glue:text}`f2-pub-olmoe-final-pct` in OLMoE. OLMo's largest
# single step, {glue:text}`f2-pub-olmo-largest-jump-pp` between {glue:text}`f2-pub-olmo-jump-from-tokens-b` and
# {glue:text}`f2-pub-olmo-jump-to-tokens-b` tokens, carries {glue:text}`f2-pub-olmo-jump-share` of its whole rise
# (a {glue:text}`f2-pub-olmo-shape`); Pythia's largest step carries {glue:text}`f2-pub-pythia-jump-share`
# (a {glue:text}`f2-pub-pythia-shape`), OLMoE's {glue:text}`f2-pub-olmoe-jump-share`
# (a {glue:text}`f2-pub-olmoe-shape`). The final dense-minus-MoE gap (OLMo − OLMoE) is {glue:text}`f2-pub-moe-gap`.
#
# **Per e-fold of tokens.** A jump's share depends on the grid: one step across a 10× token gap lumps what a finer
# grid would spread over several. The steepest rise per e-fold of training does not move when revisions are added
# where nothing changes. OLMo rises by at most {glue:text}`f2-pub-olmo-steepest-pp-per-efold` per e-fold
# (between {glue:text}`f2-pub-olmo-steepest-from-tokens-b` and {glue:text}`f2-pub-olmo-steepest-to-tokens-b`
# tokens): {glue:text}`f2-pub-olmo-efold-share` of its whole rise within one e-fold, a
# {glue:text}`f2-pub-olmo-shape-efold`. OLMoE: {glue:text}`f2-pub-olmoe-steepest-pp-per-efold`
# ({glue:text}`f2-pub-olmoe-efold-share`, a {glue:text}`f2-pub-olmoe-shape-efold`); Pythia:
# {glue:text}`f2-pub-pythia-steepest-pp-per-efold` ({glue:text}`f2-pub-pythia-efold-share`, a
# {glue:text}`f2-pub-pythia-shape-efold`).
#
# In the toy panel the final BOS fractions are {glue:text}`f2-toy-final`. Their rises, {glue:text}`f2-toy-rises`, are
# held against the minimum rise (the table's `min_rise_pp`: the larger of the two rules for a model of that size), so the
# shapes are {glue:text}`f2-toy-shapes` (both measures in the table). Measured real panels: {glue:text}`f2-measured-final`.

# %% tags=["remove-input", "full-width"]
ch.glue_frame(shape, {"final-pct": "{:.1f}%", "jump-share": "{:.0%}", "shape": "{}", "largest-jump-pp": "+{:.1f} pp",
                      "jump-from-tokens-b": fmt_tokens_b, "jump-to-tokens-b": fmt_tokens_b, "efold-share": "{:.0%}",
                      "steepest-pp-per-efold": "+{:.1f} pp", "steepest-from-tokens-b": fmt_tokens_b,
                      "steepest-to-tokens-b": fmt_tokens_b, "shape-efold": "{}"})
gap = [value_of(shape, "final_pct", tier="published", panel=p) for p in ("olmo-1b-0724", "olmoe-1b-7b-0924")]
ch.glue("pub-moe-gap", None if None in gap else gap[0] - gap[1], "{:.1f} pp")
ch.glue_list("toy-final", shape, "final_pct", "{:.1f}%", tier="toy")
ch.glue_list("toy-rises", shape, "rise_pp", "{:+.1f} pp", tier="toy")
ch.glue_list("toy-shapes", shape, "shape", tier="toy")
ch.glue_list("measured-final", shape, "final_pct", "{:.1f}%", tier="measured", absent="none probed")
ch.table(shape.reindex(columns=["tier", "panel", "rise_pp", "min_rise_pp", "largest_jump_pp", "jump_from_revision", "jump_share",
                                "shape", "steepest_pp_per_efold", "efold_share", "shape_efold"]), precision=2,
         caption="Shapes per model (percentage points): the largest jump, from the revision it starts at; the steepest "
                 "rise per e-fold of tokens; flat: the rise is below the minimum, no shape is called.")

# %% [markdown]
# ## What else differs between the runs
#
# Each architecture comes from one training run, so a difference of shape between them is also a difference of
# training data, tokens per step, size and length of training. The table below lists, for every run, what its panel
# file and its table say. The toy panel trains its three architectures the same way (the toy recipe,
# {doc}`../toy_recipe`), which takes the training differences out and leaves the architecture.

# %% tags=["remove-input", "full-width"]
runs = ch.apply(findings.run_differences)
ch.table(runs.reindex(columns=["tier", "panel", "architecture", "layers", "heads_per_layer", "tokens_per_step",
                              "final_tokens_b", "description"]), formats={"final_tokens_b": fmt_tokens_b},
         caption="The runs side by side: from the panel files and the tables; final_tokens_b: at the last revision.")

# %% [markdown]
# ## Seeds
#
# Trained again from other seeds (the build's `toy_seeds` setting, {doc}`../rerun`), the toy models end at these
# BOS fractions: {glue:text}`f2-toy-seeds`.

# %% tags=["remove-input"]
spread = ch.seed_spread(findings.bos_fraction, "bos_fraction", threshold=bos_threshold, rule=rule, fmt="{:.1%}")
ch.glue_list("toy-seeds", spread, "values", tier="toy", sep="; ",
             absent="not trained in this build (its `toy_seeds` lists seed 0 only)")
if len(spread):
    ch.table(spread, caption="Final BOS fraction of each toy model across training seeds.")

# %% [markdown]
# ## How robust
#
# Over the grid of bars of the robustness table ({doc}`robustness`), the paper's contrast (its three shapes, one per
# model) holds in the authors' files for {glue:text}`f2-robust-f2-shapes-pub-ranges`. At the paper's bar it hangs on
# {glue:text}`f2-robust-f2-shapes-pub-hangs-on`.

# %% tags=["remove-input", "full-width"]
robust = ch.how_robust("F2.shapes")

# %% [markdown]
# ## The paper's numbers beside the authors' data
#
# Each row is a numeric claim of the paper about this finding (`data/claims.yaml`), re-derived from the published
# files: `match` means equal at the precision the paper writes; `differs` comes with the data's value and, where a
# threshold is involved, the thresholds at which the paper's number would be reproduced.

# %% tags=["remove-input"]
ch.paper_vs_data("F2")
