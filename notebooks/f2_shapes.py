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
# ≥ {glue:text}`f2-threshold`) rises over training in a shape that differs by architecture: a steady ramp in Pythia, a sudden transition
# in dense OLMo, and an early, gradual rise that saturates lower in the mixture-of-experts OLMoE.
#
# **What we compute.** The BOS fraction n_first(τ)/n_heads at every revision of every panel
# (`findings.bos_fraction`), and a shape descriptor per panel (`findings.trajectory_shape`): the largest jump between
# adjacent revisions and its share of the total rise — a "transition" when one step carries at least
# {glue:text}`f2-transition-share` of it.

# %% tags=["remove-cell"]
from typing import Optional

from circuitdev import notebook as nb
from circuitdev.notebook import Rule, Source

_before = set(globals())

# %% [markdown]
# ## Parameters
#
# `sources` picks the tiers shown side by side; the thresholds are the paper's by default. The pipeline sets the
# four folder parameters for every notebook.

# %% tags=["parameters"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# a head is a sink head when first-token selectivity ≥ this (paper: 30x)
bos_threshold: float = 30.0
# per-class (the paper's counting) or best-class
rule: Rule = "per-class"
# a jump carrying at least this share of the total rise makes a transition
transition_share: float = 0.5
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

tiers, glue = nb.open_chapter("f2", sources, data_dir=data_dir, published_dir=published_dir,
                              results_dir=results_dir, panels=panels)
frac = tiers.apply(findings.bos_fraction, threshold=bos_threshold, rule=rule)
shape = tiers.apply(lambda dev: findings.trajectory_shape(findings.bos_fraction(dev, threshold=bos_threshold,
                                                                              rule=rule),
                                                          transition_share=transition_share))
glue("threshold", bos_threshold, "{:g}×")
glue("transition-share", transition_share, "{:.0%}")

# %% [markdown]
# ## BOS fraction over training
#
# {numref}`fig-f2-bos-fraction` shows the BOS fraction against training tokens for every model of every tier.

# %% tags=["hide-input"]
nb.show_figure(plots.bos_fraction_lines(frac, threshold=bos_threshold), name="fig-f2-bos-fraction",
               caption=f"Share of heads whose first-token selectivity is at least {bos_threshold:g}× "
                       f"({rule} rule), against training tokens (log axis), one line per model; tiers side by side "
                       "because their token ranges differ by six orders of magnitude.",
               provenance=tiers.provenance())

# %% [markdown]
# ## Shapes
#
# In the authors' files, Pythia ends at {glue:text}`f2-pub-final-pythia`, OLMo at {glue:text}`f2-pub-final-olmo` and
# OLMoE at {glue:text}`f2-pub-final-olmoe` of heads. OLMo's largest single step, {glue:text}`f2-pub-olmo-jump`
# between {glue:text}`f2-pub-olmo-jump-from` and {glue:text}`f2-pub-olmo-jump-to` tokens, carries
# {glue:text}`f2-pub-olmo-jump-share` of its whole rise (shape: {glue:text}`f2-pub-olmo-shape`); Pythia's largest
# step carries {glue:text}`f2-pub-pythia-jump-share` ({glue:text}`f2-pub-pythia-shape`) and OLMoE's
# {glue:text}`f2-pub-olmoe-jump-share` ({glue:text}`f2-pub-olmoe-shape`). The final dense-minus-MoE gap (OLMo − OLMoE)
# is {glue:text}`f2-pub-moe-gap`.
#
# In the toy panel the final BOS fractions are {glue:text}`f2-toy-final` and the shapes {glue:text}`f2-toy-shapes`;
# measured real panels: {glue:text}`f2-measured-final`.

# %% tags=["hide-input"]
pub = shape[shape["tier"] == "published"] if len(shape) else shape
short = {"pythia": "pythia-1b", "olmo": "olmo-1b-0724", "olmoe": "olmoe-1b-7b-0924"}
for key, panel in short.items():
    glue(f"pub-final-{key}", nb.value_at(pub, "final_pct", panel=panel), "{:.1f}%", absent="n/a (no published data)")
    glue(f"pub-{key}-jump-share", nb.value_at(pub, "jump_share", panel=panel), "{:.0%}", absent="n/a")
    glue(f"pub-{key}-shape", nb.value_at(pub, "shape", panel=panel), absent="n/a")
glue("pub-olmo-jump", nb.value_at(pub, "largest_jump_pp", panel="olmo-1b-0724"), "+{:.1f} pp", absent="n/a")
glue("pub-olmo-jump-from", nb.value_at(pub, "jump_from_tokens_b", panel="olmo-1b-0724"), nb.fmt_tokens)
glue("pub-olmo-jump-to", nb.value_at(pub, "jump_to_tokens_b", panel="olmo-1b-0724"), nb.fmt_tokens)
olmo, olmoe = (nb.value_at(pub, "final_pct", panel=p) for p in ("olmo-1b-0724", "olmoe-1b-7b-0924"))
glue("pub-moe-gap", None if olmo is None or olmoe is None else olmo - olmoe, "{:.1f} pp", absent="n/a")
glue("toy-final", nb.per_panel(shape, "final_pct", "{:.1f}%", tier="toy"), absent="not available (no toy records)")
glue("toy-shapes", nb.per_panel(shape, "shape", tier="toy"), absent="not available")
glue("measured-final", nb.per_panel(shape, "final_pct", "{:.1f}%", tier="measured"), absent="none probed")
if len(shape):
    nb.show_table(shape[["tier", "panel", "n_revisions", "start_pct", "final_pct", "largest_jump_pp", "jump_share",
                         "jump_from_revision", "jump_to_revision", "jump_token_ratio", "saturation_revision",
                         "shape"]],
                  caption=f"Shape of the BOS-fraction trajectory per model (τ = {bos_threshold:g}×, transition ⇔ "
                          f"one step ≥ {transition_share:.0%} of the rise).", precision=3)

# %% [markdown]
# ## The paper's numbers beside the authors' data
#
# Each row is a numeric claim of the paper about this finding (data/claims.yaml), re-derived from the published files:
# `match` means equal at the precision the paper writes; `differs` comes with the data's value and, where a
# threshold is involved, the thresholds at which the paper's number would be reproduced.

# %% tags=["hide-input"]
audit = nb.paper_vs_data(tiers, ["F2"])
if audit is None:
    nb.note("The comparison needs the published tier (see the note at the top of the page).")
else:
    glue("pub-claims-match", int((audit["status"] == "match").sum()))
    nb.show_table(audit, caption="F2 claims: the paper's value and the value in the authors' files.")
glue("pub-claims-total", None if audit is None else len(audit))
