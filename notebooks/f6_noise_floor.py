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
# # F6 · The selectivity noise floor is stable
#
# **The paper's claim** (a finding added in the paper's second version). Attending to a random non-target position
# instead of B gives a null selectivity; its 99th percentile stays within {glue:text}`f6-paper-p99-range` over
# training in Pythia-1B, while the largest null value swings over {glue:text}`f6-paper-max-range`. Real induction
# heads sit far above the floor throughout.
#
# **What we compute.** The null draws of every probe record (`ProbeConfig.n_nulls` random positions per valid
# sequence, the record's sidecar) summarised per revision, and per panel whether p99 and max stay within a factor
# of `stable_ratio` (`findings.noise_floor`). The authors' published folder holds no null draws, so the paper's
# values are drawn as claimed.

# %% tags=["remove-cell"]
from typing import Optional

from circuitdev import notebook as nb
from circuitdev.notebook import Source

_before = set(globals())

# %% [markdown]
# ## Parameters

# %% tags=["parameters"]
# tiers to show: published, toy, measured
sources: list[Source] = ["published", "toy", "measured"]
# a statistic is stable when its max/min over revisions is at most this
stable_ratio: float = 2.0
# draw the paper's claimed Pythia values beside ours
show_paper: bool = True
# reference lines: the class and induction thresholds
thresholds: list[float] = [30.0, 50.0]
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

tiers, glue = nb.open_chapter("f6", sources, data_dir=data_dir, published_dir=published_dir,
                              results_dir=results_dir, panels=panels)
ours = nb.record_nulls(tiers)
paper = nb.paper_noise_floor()
glue("paper-p99-range", f"{paper['null_p99'].min():g}–{paper['null_p99'].max():g}×")
glue("paper-max-range", f"{paper['null_max'].min():g}–{paper['null_max'].max():g}×")
if tiers.get("published") is not None:
    nb.note("The authors' published folder holds no null-selectivity draws, so this finding cannot be re-derived "
            "from it; the paper's claimed values are drawn instead (tier `paper`). Our own probe records carry "
            "null draws (ProbeConfig.n_nulls).", title="Published tier: no null draws")
if (not ours.empty) and (ours["n_nulls"] < 100).any():
    nb.note(f"Some records hold only {int(ours['n_nulls'].min())} null draws per head, far fewer than the "
            "paper's calibration runs; their maxima are noisy. Re-probe with `--set n_nulls=500` for a stable p99.",
            kind="warning", title="Few null draws")

# %% [markdown]
# ## Floor and signal over training
#
# {numref}`fig-f6-floor` draws the null p99, the null maximum and the largest real induction selectivity of every
# panel against training tokens.

# %% tags=["hide-input"]
shown = pd.concat([ours, paper], ignore_index=True) if show_paper else ours
nb.show_figure(plots.noise_floor(shown, thresholds=thresholds), name="fig-f6-floor",
               caption="Null-selectivity 99th percentile (solid green), null maximum (dashed orange) and the "
                       "largest real induction selectivity (blue) per revision, log scales; grey dotted lines at "
                       "the class and induction thresholds. Tier `paper` shows the values the paper reports for "
                       "Pythia-1B.",
               provenance=tiers.provenance(tiers=["toy", "measured"], extra=[
                   "paper — claims F6.null_p99, F6.null_max, F6.real_max of data/claims.yaml"] if show_paper else []))

# %% [markdown]
# ## Is it stable?
#
# In the paper's numbers the p99 varies by a factor of {glue:text}`f6-paper-p99-ratio` and the maximum by
# {glue:text}`f6-paper-max-ratio`. In the toy panel: {glue:text}`f6-toy-p99-ratio` for p99 and
# {glue:text}`f6-toy-max-ratio` for the maximum; in measured real panels: {glue:text}`f6-measured-p99-ratio`.

# %% tags=["hide-input"]
frames = []
for tier, g in pd.concat([ours, paper], ignore_index=True).groupby("tier", sort=False):
    frames.append(findings.noise_floor(g.drop(columns="tier"), stable_ratio=stable_ratio).assign(tier=tier))
summary = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
for tier in ("paper", "toy", "measured"):
    rows = summary[summary["tier"] == tier] if len(summary) else summary
    glue(f"{tier}-p99-ratio", nb.per_panel(rows, "p99_ratio", "{:.3g}×"), absent="n/a (no null draws)")
    glue(f"{tier}-max-ratio", nb.per_panel(rows, "max_ratio", "{:.3g}×"), absent="n/a (no null draws)")
if len(summary):
    nb.show_table(summary[["tier", "panel", "n_revisions", "p99_min", "p99_max", "p99_ratio", "p99_stable",
                           "max_ratio", "max_stable"]], precision=2,
                  caption=f"Noise floor per panel: stable when max/min ≤ {stable_ratio:g}.")
if len(ours):
    nb.show_table(ours, caption="Null statistics of every record (from the records' sidecars).")

# %% [markdown]
# ## The paper's numbers beside the authors' data

# %% tags=["hide-input"]
audit = nb.paper_vs_data(tiers, ["F6"])
if audit is None:
    nb.note("The comparison needs the published tier (see the note at the top of the page).")
else:
    nb.show_table(audit, caption="F6 claims: the paper's value and the value in the authors' files.")
