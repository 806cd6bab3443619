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
# # F6 · Is the selectivity noise floor stable?
#
# **The paper's claim** (a finding added in the paper's second version). Attending to a random non-target position
# instead of B gives a null selectivity; its 99th percentile stays within {glue:text}`f6-paper-p99-range` over
# training in Pythia-1B, while the largest null value swings over {glue:text}`f6-paper-max-range`. Real induction
# heads sit far above the floor throughout.
#
# **What we compute.** The null draws of every probe record (`ProbeConfig.n_nulls` random positions per valid
# sequence, the record's sidecar) summarised per revision, and per panel whether p99 and max stay within a factor
# of {glue:text}`f6-stable-ratio` (`findings.noise_floor`). The authors' published folder holds no null draws, so
# the paper's values are drawn as claimed.
#
# **One scale.** A null draw is attention at a random position divided by the same baseline as the record's real
# selectivities, so the two can be compared. The paper's baseline is 50 fixed positions; the toy panels leave each
# sequence's A and B out of it (`baseline_excludes_ab`), and their null draws do the same (records of format 4 on;
# older records divided the null by the paper's baseline and are re-probed). Here: {glue:text}`f6-scale`.

# %% tags=["remove-cell"]
import pandas as pd

from circuitdev.analysis import findings
from circuitdev.analysis.claims import paper_noise_floor
from circuitdev.book import Source, chapter, controls, fmt_times, plots

# %% tags=["parameters", "remove-cell"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# a statistic is stable when its max/min over revisions is at most this
stable_ratio: float = 2.0  # in [1, inf)
# draw the paper's claimed Pythia values beside ours
show_paper: bool = True
# reference lines: the class and induction thresholds
thresholds: list[float] = [30.0, 50.0]  # in (0, inf)

# %% tags=["remove-input"]
ch = chapter("f6_noise_floor", globals())
ours, paper = ch.apply(findings.null_statistics, nulls=True), paper_noise_floor()
ch.glue("paper-p99-range", f"{paper['null_p99'].min():g}–{paper['null_p99'].max():g}×")
ch.glue("paper-max-range", f"{paper['null_max'].min():g}–{paper['null_max'].max():g}×")
ch.glue("stable-ratio", stable_ratio, "{:g}")
if ch.tiers.get("published") is not None:
    ch.note("The authors' published folder holds no null-selectivity draws, so this finding cannot be re-derived "
            "from it; the paper's claimed values are drawn instead (tier `paper`). Our own probe records carry "
            "null draws (ProbeConfig.n_nulls).", title="Published tier: no null draws")
scales = controls.null_scales(ch.tiers, ch.folders.results_dir)
ch.glue_list("scale", scales, "text", sep="; ", absent="n/a (no records in this build)")
if not scales["one_scale"].all():
    ch.note(", ".join(scales.query("~one_scale")["panel"]) + ": the null draws divide by the paper's baseline, the "
            "selectivities leave A and B out of it (records before format 4). Re-probe them (`circuitdev probe "
            "--panel NAME` refreshes such records).", kind="warning", title="Null and signal on two scales")
if len(ours) and (ours["n_nulls"] < 100).any():
    ch.note(f"{'All' if (ours['n_nulls'] < 100).all() else 'Some'} records hold only {int(ours['n_nulls'].min())} null draws per head, far fewer than the paper's "
            "calibration runs; their maxima are noisy. Re-probe with `--set n_nulls=500` for a stable p99.",
            kind="warning", title="Few null draws")

# %% [markdown]
# ## Floor and signal over training
#
# {numref}`fig-f6-floor` draws the null p99, the null maximum and the largest real induction selectivity of every
# panel against training tokens.

# %% tags=["remove-input", "full-width"]
ch.figure(plots.noise_floor(pd.concat([ours, paper], ignore_index=True) if show_paper else ours, thresholds=thresholds),
          name="fig-f6-floor", tiers=["toy", "measured"],
          extra=["paper — claims F6.null_p99, F6.null_max, F6.real_max of data/claims.yaml"] if show_paper else [],
          caption="Null-selectivity 99th percentile (solid green), null maximum (dashed orange) and the largest real "
                  "induction selectivity (blue) per revision, log scales; grey dotted lines at the class and induction "
                  "thresholds. Tier `paper` shows the values the paper reports for Pythia-1B.")

# %% [markdown]
# ## Is it stable?
#
# In the paper's numbers the p99 varies by a factor of {glue:text}`f6-paper-p99-ratio` and the maximum by
# {glue:text}`f6-paper-max-ratio`. In the toy panel: {glue:text}`f6-toy-p99-ratio` for p99 and
# {glue:text}`f6-toy-max-ratio` for the maximum; in measured real panels: {glue:text}`f6-measured-p99-ratio`.
#
# **How robust.** "Stable" is a bar too: max/min over the revisions at most {glue:text}`f6-stable-ratio`. Each
# verdict hangs on two revisions, the lowest and the highest p99, and holds for any factor at least their ratio: in
# the paper's numbers {glue:text}`f6-paper-p99-hangs-on`; in the toy panel {glue:text}`f6-toy-p99-hangs-on`. The
# maximum is a single draw and moves far more: in the toy panel {glue:text}`f6-toy-max-hangs-on`.

# %% tags=["remove-input"]
summary = pd.concat([findings.noise_floor(g.drop(columns="tier"), stable_ratio=stable_ratio).assign(tier=tier)
                     for tier, g in pd.concat([ours, paper], ignore_index=True).groupby("tier", sort=False)])
for tier in ("paper", "toy", "measured"):
    ch.glue_list(f"{tier}-p99-ratio", summary, "p99_ratio", "{:.3g}×", tier=tier, absent="n/a (no null draws)")
    ch.glue_list(f"{tier}-max-ratio", summary, "max_ratio", "{:.3g}×", tier=tier, absent="n/a (no null draws)")
    for stat in ("p99", "max"):
        ch.glue_list(f"{tier}-{stat}-hangs-on", summary, f"{stat}_hangs_on", tier=tier, sep="; ", absent="no null draws")
ch.table(summary[["tier", "panel", "n_revisions", "p99_min", "p99_max", "p99_ratio", "p99_stable", "max_ratio",
                  "max_stable"]], precision=2, caption=f"Noise floor per panel: stable when max/min ≤ {stable_ratio:g}.",
         formats={"p99_min": fmt_times, "p99_max": fmt_times})  # selectivities; the ratios get "×" by name
if len(ours):
    ch.table(ours, caption="Null statistics of every record (from the records' null draws).",
             formats={c: fmt_times for c in ("null_p99", "null_max", "real_max")})

# %% [markdown]
# ## The paper's numbers beside the authors' data

# %% tags=["remove-input"]
ch.paper_vs_data("F6")
