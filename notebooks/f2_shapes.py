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
# # F2 · Three shapes of sink emergence
#
# **The paper's claim.** The share of attention heads that are attention sinks (first-token, "BOS", selectivity
# ≥ {glue:text}`f2-paper-bos-threshold`) rises over training in a shape that differs by architecture: a steady ramp
# in Pythia, a sudden transition in dense OLMo, and an early, gradual rise that saturates lower in the
# mixture-of-experts OLMoE.
#
# **What we compute.** The BOS fraction n_first(τ)/n_heads at every revision of every panel, here at
# τ = {glue:text}`f2-threshold` (`findings.bos_fraction`), and a shape descriptor per panel
# (`findings.trajectory_shape`): the largest jump between adjacent revisions and its share of the total rise — a
# "transition" when one step carries at least {glue:text}`f2-transition-share` of it.

# %% tags=["remove-cell"]
from circuitdev.analysis import findings
from circuitdev.book import Rule, Source, chapter, fmt_pct, fmt_tokens_b, plots, value_of, with_interval_text

# %% tags=["parameters", "remove-cell"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# a head is a sink head when first-token selectivity ≥ this (paper: 30x)
bos_threshold: float = 30.0  # in (0, inf)
# per-class (the paper's counting) or best-class
rule: Rule = "per-class"
# a jump carrying at least this share of the total rise makes a transition
transition_share: float = 0.5  # in [0, 1]

# %% tags=["remove-input"]
ch = chapter("f2_shapes", globals())
frac = ch.apply(findings.bos_fraction, threshold=bos_threshold, rule=rule, intervals=True)
shape = ch.apply(lambda dev: findings.trajectory_shape(findings.bos_fraction(dev, threshold=bos_threshold, rule=rule),
                                                       transition_share=transition_share))
ch.glue("threshold", bos_threshold, "{:g}×")
ch.glue("transition-share", transition_share, "{:.0%}")

# %% [markdown]
# ## BOS fraction over training
#
# {numref}`fig-f2-bos-fraction` shows the BOS fraction against training tokens for every model of every tier. The
# bands of the probed tiers are 95% intervals from {glue:text}`f2-boot`: the count of sink heads recomputed on every
# resample, every head from the same draws. The toy panel ends at {glue:text}`f2-toy-final-ci`. The published tier
# has no per-sequence data, so it has no band; how its fractions move with the threshold is its uncertainty
# ({doc}`sensitivity`).

# %% tags=["remove-input"]
ch.figure(plots.bos_fraction_lines(frac, threshold=bos_threshold), name="fig-f2-bos-fraction",
          caption=f"Share of heads whose first-token selectivity is at least {bos_threshold:g}× ({rule} rule), "
                  "against training tokens, one line per model; each tier on its own token axis; bands: 95% "
                  "bootstrap intervals over the probe batch's sequences (record tiers only).")
ch.glue_bootstrap()
final = with_interval_text(frac.groupby(["tier", "panel"], sort=False).tail(1), "bos_fraction", fmt_pct) if len(frac) else frac
ch.glue_list("toy-final-ci", final, "bos_fraction_ci", tier="toy")

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
# In the toy panel the final BOS fractions are {glue:text}`f2-toy-final` and the shapes {glue:text}`f2-toy-shapes`;
# measured real panels: {glue:text}`f2-measured-final`.

# %% tags=["remove-input"]
ch.glue_frame(shape, {"final-pct": "{:.1f}%", "jump-share": "{:.0%}", "shape": "{}",
                      "largest-jump-pp": "+{:.1f} pp", "jump-from-tokens-b": fmt_tokens_b,
                      "jump-to-tokens-b": fmt_tokens_b})
gap = [value_of(shape, "final_pct", tier="published", panel=p) for p in ("olmo-1b-0724", "olmoe-1b-7b-0924")]
ch.glue("pub-moe-gap", None if None in gap else gap[0] - gap[1], "{:.1f} pp")
ch.glue_list("toy-final", shape, "final_pct", "{:.1f}%", tier="toy")
ch.glue_list("toy-shapes", shape, "shape", tier="toy")
ch.glue_list("measured-final", shape, "final_pct", "{:.1f}%", tier="measured", absent="none probed")
ch.table(shape[["tier", "panel", "n_revisions", "start_pct", "final_pct", "largest_jump_pp", "jump_share",
                "jump_from_revision", "jump_to_revision", "jump_token_ratio", "saturation_revision", "shape"]]
         if len(shape) else shape, caption=f"Shape of the BOS-fraction trajectory per model (τ = {bos_threshold:g}×, "
                                           f"transition ⇔ one step ≥ {transition_share:.0%} of the rise).")

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
# ## The paper's numbers beside the authors' data
#
# Each row is a numeric claim of the paper about this finding (`data/claims.yaml`), re-derived from the published
# files: `match` means equal at the precision the paper writes; `differs` comes with the data's value and, where a
# threshold is involved, the thresholds at which the paper's number would be reproduced.

# %% tags=["remove-input"]
ch.paper_vs_data("F2")
