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
# # Session 2 · Watch a circuit form
#
# The paper follows 1B-parameter models through training by probing ten saved checkpoints each. Here you do the same
# with a model you train yourself on this laptop: the `mini` preset of the toy panel (one family, a shorter run than
# the default toy panel's; `book/toy_recipe.md`). How long that takes depends on the machine and on what else it is
# doing, so it is measured here, not promised: the cell before the training says how long it should take on this
# machine, and the training prints how long it took. Then you
#
# 1. probe every checkpoint of your run with the screen of session 1;
# 2. find when each head first crosses its class threshold (**2.1**);
# 3. find the milestones — the first previous-token head, the first induction head, three of them — and compare your
#    run with the default toy panel's record (**2.2**);
# 4. cross-check the induction heads with a second, independent induction score: *prefix matching* on repeated
#    random sequences (**2.3**).
#
# About 40 minutes, the training included. Start the training first (the next cells) and read on while it runs.

# %% tags=["parameters"]
# the family to train: gpt_neox (Pythia-like), olmo or olmoe
family: str = "gpt_neox"
# train again even when this machine already has the checkpoints (the run is seeded: the same model)
retrain: bool = False
# a previous-token head "forms" at this selectivity (the paper's circuit bar is 100x; a short run may stay below it)
prev_threshold: float = 30.0

# %%
from circuitdev import workshop
import textwrap

import numpy as np
import pandas as pd
import torch
import matplotlib.pyplot as plt
import seaborn as sns

from circuitdev.book.display import show_table
from circuitdev.measure.batch import repeated_batch
from circuitdev.measure.capture import prefix_matching_scores
from circuitdev.toy import PANEL_NAMES
from circuitdev.workshop import checks, data, diagrams
from circuitdev.workshop.paths import mini_recipe

workshop.setup()

# %% [markdown]
# What this session builds: blue boxes are data, orange ones the functions you write (with their exercise
# numbers), green ones what your results are checked against.

# %%
diagrams.session_diagram(2)
plt.show()

# %%
recipe = mini_recipe()
print(textwrap.fill(f"the mini preset: {recipe.n_layer} layers x {recipe.n_head} heads, d_model {recipe.d_model}, "
                    f"{recipe.steps} steps of {recipe.batch_size} x {recipe.seq_len} tokens; "
                    f"checkpoints at steps {list(recipe.grid())}", 80))

# %% [markdown]
# How fast can this machine train? On a laptop doing other work, torch's threads compete with that work: on a busy
# 2-core machine, two threads trained this model several times slower than one (the same heads either way). So the
# thread count is measured, not assumed: `circuitdev workshop doctor` times a few training steps with each count and
# stores the fastest; where it has not run, the next cell measures (a few seconds) and stores it.

# %%
# this machine's fastest torch thread count, and how long the mini run should take
plan = data.training_plan(log=lambda line: print(textwrap.fill(line, 80)))
print(textwrap.fill(plan.summary(), 80))

# %%
run = data.train_mini(family, retrain=retrain, threads=plan.threads)  # a progress bar and the loss, live
# the time measured in this run, beside what this machine was expected to take
print(textwrap.fill(data.timing_note(run, plan), 80))

# %% [markdown]
# The dashed line is where the curriculum's second phase starts: until then the model sees text and *periodic* windows
# (a short random span repeated); from there on, the windows named on the line join — *repeat* windows are random
# filler with a span seen twice, the probe's own layout. The loss jumps when they join (new, harder windows), then
# falls as the model learns to copy from a single earlier occurrence.
#
# ## 1 · Probe every checkpoint
#
# The probe of session 1 — the six selectivities of every head — on each saved checkpoint of your run, plus each head's
# participation ratio and prefix-matching score. About a second per checkpoint; the records go to the workshop's own
# folder (`workshop.paths.workshop_results_dir()`, apart from the book's records).

# %%
dev = data.mini_table(run)  # one row per (revision, layer, head)
steps = np.array(sorted(dev["step"].unique()))  # (R,)
L, H = dev["layer"].max() + 1, dev["head"].max() + 1


def trajectory(table: pd.DataFrame, column: str) -> np.ndarray:
    """(R, L, H) values of one column over the revisions of a developmental table (revisions in step order)."""
    t = table.sort_values(["step", "layer", "head"])
    return t[column].to_numpy().reshape(-1, int(t["layer"].max()) + 1, int(t["head"].max()) + 1)


ind, prev = trajectory(dev, "sel_induction"), trajectory(dev, "sel_previous_token")  # (R, L, H) each
fig, axes = plt.subplots(1, 2, figsize=(12, 3.8), sharey=True)
for ax, sel, name in ((axes[0], prev, "previous-token"), (axes[1], ind, "induction")):
    sns.heatmap(np.log10(np.clip(sel.reshape(len(steps), -1).T, 0.1, None)), ax=ax, cmap="viridis", vmin=-1, vmax=3,
                xticklabels=steps, yticklabels=[f"L{l}H{h}" for l in range(L) for h in range(H)],
                cbar_kws={"label": "log10 selectivity"})
    ax.set_title(f"{name} selectivity of each head")
    ax.set_xlabel("training step")
plt.show()

# %% [markdown]
# ## 2 · When does each head form?
#
# The paper's formation rule: a head *forms* at the first revision where its selectivity reaches the class threshold
# (induction 50×; previous-token 100×, which a run this short may not reach: here `prev_threshold`, 30× by default).

# %% [markdown]
# ### Exercise 2.1 — first crossing · difficulty ●●○○○ · importance ●●●●○ · 10 min
#
# Write `first_crossing(sel, threshold)`: `sel` is an (R, L, H) array of one class's selectivity over R revisions;
# return the (L, H) integer array of the first revision index r with sel[r] ≥ threshold, and −1 for a head that never
# gets there.

# %% [markdown]
# #### Hint
#
# `hit = sel >= threshold` is (R, L, H) booleans, and `hit.argmax(axis=0)` is the index of the first True
# along the revisions -- but it is also 0 where a head has no True at all. `hit.any(axis=0)` tells the two apart
# (`np.where(..., ..., -1)`).

# %%
def first_crossing(sel: np.ndarray, threshold: float) -> np.ndarray:
    """(L, H) index of the first revision at or above `threshold`; -1 where there is none."""
    # BEGIN SOLUTION
    hit = np.asarray(sel) >= threshold  # (R, L, H)
    return np.where(hit.any(axis=0), hit.argmax(axis=0), -1)
    # END SOLUTION


# %%
checks.ex_2_1(first_crossing)

# %%
formed = pd.DataFrame({
    f"previous-token ({prev_threshold:g}x) at step": [steps[r] if r >= 0 else None
                                                      for r in first_crossing(prev, prev_threshold).reshape(-1)],
    "induction (50x) at step": [steps[r] if r >= 0 else None for r in first_crossing(ind, 50).reshape(-1)],
    "final induction": ind[-1].reshape(-1).round(1)}, index=[f"L{l}H{h}" for l in range(L) for h in range(H)])
formed = formed[formed.iloc[:, :2].notna().any(axis=1)]
# steps as integers, "—" where a head never crosses (show_table formats whole-number float columns and NaN so)
show_table(formed, precision=1, index=True) if len(formed) else print("no head of this run reached its class threshold")

# %% [markdown]
# ## 3 · Milestones, and the default toy panel
#
# The paper times a run by milestones: the first revision at which at least *k* heads are at or above a threshold.

# %% [markdown]
# ### Exercise 2.2 — a milestone · difficulty ●●○○○ · importance ●●●○○ · 10 min
#
# Write `milestone(steps, sel, threshold, k)`: `steps` (R,) the training step of each revision, `sel` (R, L, H); return
# the first step at which at least `k` heads have sel ≥ threshold **at that revision** (a head that crossed earlier
# and fell back does not count), or None if that never happens.

# %% [markdown]
# #### Hint
#
# At each revision, count the heads at or above the threshold *there*: reshape `sel >= threshold` to
# (R, L·H) and sum over axis 1. The milestone is the step of the first revision whose count reaches k
# (`np.flatnonzero(counts >= k)`); return `int(steps[r])`, or None when there is none.

# %%
def milestone(steps: np.ndarray, sel: np.ndarray, threshold: float, k: int):
    """The first step with at least k heads at or above threshold, else None."""
    # BEGIN SOLUTION
    counts = (np.asarray(sel) >= threshold).reshape(len(steps), -1).sum(axis=1)  # (R,) heads per revision
    hit = np.flatnonzero(counts >= k)
    return int(steps[hit[0]]) if len(hit) else None
    # END SOLUTION


# %%
checks.ex_2_2(milestone)

# %% [markdown]
# The same milestones on your run and on the default toy panel of the same family (`toy-pythia` for `gpt_neox`: 2,500
# steps, the record the book shows):

# %%
default_panel = PANEL_NAMES[family]  # toy-pythia, toy-olmo or toy-olmoe
default = data.toy_table(default_panel)
d_steps = np.array(sorted(default["step"].unique()))
d_ind, d_prev = trajectory(default, "sel_induction"), trajectory(default, "sel_previous_token")
specs = [(f"first previous-token head ({prev_threshold:g}x)", "prev", prev_threshold, 1),
         ("first induction head (50x)", "ind", 50, 1), ("two induction heads (50x)", "ind", 50, 2),
         ("three induction heads (50x)", "ind", 50, 3), ("first previous-token head (100x, the paper's bar)", "prev",
                                                          100, 1)]
rows = []
for label, cls, threshold, k in specs:
    mine = milestone(steps, prev if cls == "prev" else ind, threshold, k)
    theirs = milestone(d_steps, d_prev if cls == "prev" else d_ind, threshold, k)
    rows.append({"milestone": label, f"your {run.panel} (step)": mine, f"{default_panel} (step)": theirs})
milestones = pd.DataFrame(rows)
show_table(milestones, "the first step of each milestone (— : never reached)")

# %% [markdown]
# In the default panel, previous-token heads come first, in layer 0; the induction heads of layer 1 follow once the
# repeat windows join — they need a previous-token head below them to compose with (K-composition: the induction head
# finds "the token whose *previous* token was A"). Check the order in your run: a shorter run gets there in fewer
# steps, with fewer and less sharp heads (its previous-token heads may never reach the paper's 100×). On the loss
# curve:

# %%
fig, ax = plt.subplots(figsize=(8, 3))
ax.plot(run.steps, run.losses, lw=1)
for (label, *_), step, color in zip(specs[:2], [milestones.iloc[0, 1], milestones.iloc[1, 1]], ("#2ca02c", "#d62728")):
    if step is not None and not pd.isna(step):
        ax.axvline(step, color=color, ls="--", lw=1.2, label=f"{label}: step {int(step)}")
ax.set_xlabel("training step")
ax.set_ylabel("training loss")
if ax.get_legend_handles_labels()[0]:
    ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# ## 4 · A second opinion: prefix matching
#
# Selectivity needs the paper's special batch. Olsson et al. (2022) score induction heads differently: feed a random
# sequence whose second half repeats its first half; an induction head at position i of the second half attends to
# the token *after* the earlier copy of token i, at i − half + 1.

# %% [markdown]
# ### Exercise 2.3 — prefix matching · difficulty ●●○○○ · importance ●●●○○ · 10 min
#
# Write `prefix_matching(attn)`: `attn` is one layer's attention patterns (N, H, T, T) on such sequences (T even,
# half = T // 2). Return the (H,) mean, over sequences and over the queries i = half … T − 1, of attn[n, h, i, i − half + 1].

# %% [markdown]
# #### Hint
#
# With the second-half queries `q = np.arange(half, T)` and their keys `q - half + 1`, the expression
# `attn[:, :, q, q - half + 1]` pairs each query with its own key (shape (N, H, Q)); average over sequences and queries.

# %%
def prefix_matching(attn) -> np.ndarray:
    """(H,) mean attention from each second-half query to the token after its earlier copy."""
    # BEGIN SOLUTION
    a = torch.as_tensor(attn, dtype=torch.float64)  # (N, H, T, T)
    t = a.shape[-1]
    half = t // 2
    q = torch.arange(half, t)  # (Q,) second-half queries
    return a[:, :, q, q - half + 1].mean(dim=(0, 2)).numpy()  # (H,)
    # END SOLUTION


# %%
checks.ex_2_3(prefix_matching)

# %% [markdown]
# Your score on every checkpoint of your run (layer 1, where the induction heads live), beside the library's
# (`circuitdev.measure.capture.prefix_matching_scores`, stored in the records as `prefix_matching`):

# %%
cfg = data.toy_config(run.panel)
rep = repeated_batch(32, cfg.seq_len, cfg.seed, cfg.vocab_range, first_token=cfg.first_token_id)  # (32, T)
scores = []
for rev in [f"step{s}" for s in steps]:
    model = data.toy_model(run.panel, rev)
    scores.append(prefix_matching(data.attention_patterns(model, rep, layers=[1])[1]))  # (H,)
scores = np.array(scores)  # (R, H)
library = prefix_matching_scores(model, rep)[1]  # the final checkpoint, the library's
print("final checkpoint, layer 1: yours", scores[-1].round(3), "library", library.round(3))
fig, axes = plt.subplots(1, 2, figsize=(11, 3.2))
for h in range(H):
    axes[0].plot(steps, scores[:, h], marker="o", ms=3, label=f"L1H{h}")
    axes[1].plot(steps, np.clip(ind[:, 1, h], 0.1, None), marker="o", ms=3, label=f"L1H{h}")
axes[0].set_title("prefix matching (your function)")
axes[1].set_title("induction selectivity (the paper's screen)")
axes[1].set_yscale("log")
axes[1].axhline(50, color="#d62728", ls=":", lw=1)
for ax in axes:
    ax.set_xlabel("training step")
axes[0].legend(fontsize=7)
plt.show()

# %% [markdown]
# The two scores rise together: the heads the screen calls induction heads do copy on any repeated text, not just on
# the paper's batch. **Next session:** the other kind of head this toy forms — the attention sink — and what a
# selectivity number hides about it.
