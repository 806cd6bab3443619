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
# # Session 1 · The probe by hand
#
# The paper classifies every attention head of a model by where its **last query** looks, on a batch of random
# sequences built so that the right next token can only be found by *induction*. In this session you rebuild that
# screen from its parts and check it against the library, one small function at a time:
#
# 1. the paper's induction batch, and one toy model's attention on one sequence (a picture);
# 2. the key positions each of the six head classes is looking for (**1.1**);
# 3. the selectivity of one class: attention at its target over attention at 50 fixed "baseline" positions (**1.2**);
# 4. all six at once, checked against `circuitdev.measure.screen.selectivities` (**1.3**);
# 5. the toy panel's variant of the baseline, which leaves each sequence's A and B out, checked against the probe's
#    own record of this model (**1.4**).
#
# About 40 minutes. Every exercise is a function; the cell after it checks your answer and prints one line, ✔ or ✘
# with what differs. The model is `toy-pythia`: a 4-layer, 4-head GPT-NeoX-like model trained on a CPU in three minutes
# (`book/toy_recipe.md`), at its final checkpoint.

# %% tags=["parameters"]
# the toy panel whose final checkpoint you probe: toy-pythia, toy-olmo or toy-olmoe
panel: str = "toy-pythia"
# the sequence of the batch the pictures show
sequence: int = 0

# %%
from circuitdev import workshop
import textwrap

import numpy as np
import pandas as pd
import torch
import matplotlib.pyplot as plt

import circuitdev
from circuitdev.measure.positions import baseline_positions, induction_ceiling, local_positions
from circuitdev.schema import HEAD_CLASSES
from circuitdev.workshop import checks, data, diagrams, plots

workshop.setup()

# %% [markdown]
# What this session builds: blue boxes are data, orange ones the functions you write (with their exercise
# numbers), green ones what your results are checked against.

# %%
diagrams.session_diagram(1)
plt.show()

# %% [markdown]
# ## 1 · The paper's induction batch
#
# Each sequence is random filler with one planted bigram **A B** somewhere in the first half and a second **A** at the
# last position, the *query* q = T − 1. A model that has learned induction predicts **B** there, and to do it one of
# its heads must look back at B ("what came after A last time?"). At T = 256 this is the paper's batch, token for
# token (`circuitdev.induction_batch`, method reference §1). The toy models read 64-token contexts of their own 1024-id
# vocabulary and always saw a BOS token first, so their panel file asks for T = 64, ids in [258, 1024) and the BOS at
# position 0; everything else is the paper's draw.

# %%
cfg = data.toy_config(panel)  # the panel's probe settings: seq_len 64, ids [258, 1024), BOS at position 0
batch = circuitdev.induction_batch(cfg.n, cfg.seq_len, cfg.seed, cfg.vocab_range, first_token=cfg.first_token_id)
N, T = batch.tokens.shape  # (500, 64)
i = sequence  # the sequence we look at
a = int(batch.first_a[i])
print(f"{N} sequences of T = {T} tokens; query q = {batch.query}; {int(batch.valid.sum())} valid")
print(f"sequence {i}: first A at {a} (id {batch.tokens[i, a]}), B at {a + 1} (id {batch.tokens[i, a + 1]}), "
      f"second A at {T - 1} (id {batch.tokens[i, T - 1]}); the model should predict B = {batch.target[i]}")
print(batch.tokens[i])

# %% [markdown]
# ## 2 · One model, one sequence: where does the last query look?
#
# `circuitdev.capture` runs the model once over the batch (in chunks) and keeps, for every layer and head, the
# **query row** of the attention pattern: how the second A's attention is spread over the 64 keys. That is all the
# screen needs: `attn_rows` has shape (N, L, H, T).

# %%
model = data.toy_model(panel)  # the final checkpoint (trained first if this machine has none)
cap = circuitdev.capture(model, batch.tokens, batch_size=250)
attn_rows = cap.attn_rows  # (N, L, H, T): row q of every head's attention, for every sequence
L, H = attn_rows.shape[1:3]
print(tuple(attn_rows.shape), f"rows sum to {float(attn_rows[0, 0, 0].sum()):.4g}")
fig = plots.attention_rows(attn_rows[i], first_a=a, title=f"{panel}, final checkpoint: sequence {i}, query = "
                                                          "the second A")
plt.show()

# %% [markdown]
# Each line is one head. A few stand out at once: heads that put nearly all their weight on **B** (induction), on the
# key just before the query (previous-token), on **position 0** (the first token: a sink). The same numbers for the
# four keys that matter, head by head:

# %%
keys = {"A (first_a)": a, "B (first_a + 1)": a + 1, "first token (0)": 0, "previous token (q - 1)": T - 2}
picked = pd.DataFrame({name: attn_rows[i, :, :, k].reshape(-1).numpy() for name, k in keys.items()},
                      index=[f"L{l}H{h}" for l in range(L) for h in range(H)])
ax = picked.plot.bar(figsize=(11, 3.2), width=0.8)
ax.set_ylabel("attention of the query")
ax.set_title(f"sequence {i}: attention to A, B, the first and the previous token, per head")
plt.show()

# %% [markdown]
# One sequence can mislead (a head may hit B by chance). The screen averages over the whole batch and compares with
# what the head gives to keys that mean nothing. First, the targets.

# %% [markdown]
# ### Exercise 1.1 — the six class targets · difficulty ●○○○○ · importance ●●●●○ · 5 min
#
# The paper's six classes and the key each one looks at from the query q = T − 1 (method reference §2):
#
# | class | target key |
# |---|---|
# | induction | B, the token after the first A |
# | previous-token | the token before the query |
# | duplicate-token | the first A |
# | first-token | position 0 |
# | self | the query itself |
# | local | the four keys q−2, q−3, q−4, q−5 |
#
# Write `class_targets(first_a, seq_len)`: a dict from each class name (as in `HEAD_CLASSES`, hyphenated) to its
# target position(s) — an int or a list of ints.

# %% [markdown]
# #### Hint
#
# The query is q = `seq_len` − 1, and every target is an offset from q or from `first_a`. Use the class names
# exactly as `HEAD_CLASSES` spells them; `local` is a list of four ints, the others one int each.

# %%
def class_targets(first_a: int, seq_len: int) -> dict:
    """{class: key position(s)} for a sequence whose first A sits at `first_a`; the query is seq_len - 1."""
    # BEGIN SOLUTION
    q = seq_len - 1
    return {"induction": first_a + 1, "previous-token": q - 1, "duplicate-token": first_a, "first-token": 0,
            "self": q, "local": [q - 2, q - 3, q - 4, q - 5]}
    # END SOLUTION


# %%
checks.ex_1_1(class_targets)

# %% [markdown]
# ## 3 · Selectivity: attention at the target over attention at the baseline
#
# A head's **selectivity** for a class is a ratio of two batch means (average first, then divide):
#
# $$\mathrm{sel}_c[L, H] = \frac{\operatorname{mean}_{n \in S_c}\; a[n, L, H, t_c(n)]}
#   {\max\big(\operatorname{mean}_{n,\; p \in P}\; a[n, L, H, p],\; 10^{-8}\big)}$$
#
# where $t_c(n)$ is the class's target in sequence $n$, $S_c$ the sequences it averages over (for induction and
# duplicate-token only the *valid* ones, where B occurs exactly once before the query; all of them for the other
# classes), and $P$ the **baseline**: 50 positions drawn once with `RandomState(0)`, the same for every sequence
# (`baseline_positions(T)`; at T = 64 it is capped at the eligible positions). A head at 30× attends to its target
# thirty times more than to a typical key; the paper classifies a head by its best class at ≥ 30×.

# %% [markdown]
# ### Exercise 1.2 — selectivity of one class · difficulty ●●○○○ · importance ●●●●● · 10 min
#
# Write `selectivity_one_class(attn_rows, targets, valid, baseline)`:
#
# - `attn_rows`: (N, L, H, T) tensor of query rows; `targets`: (N,) the target key of each sequence;
#   `valid`: (N,) bool, the sequences the target mean averages over; `baseline`: (P,) the baseline positions;
# - returns an (L, H) array.
#
# Average over sequences *before* dividing, and floor the baseline at 1e-8. Work in float64 if you like
# (`torch.as_tensor(attn_rows, dtype=torch.float64)`).

# %% [markdown]
# #### Hint
#
# Advanced indexing picks each sequence's own key: `a[torch.arange(N), :, :, targets]` has shape (N, L, H).
# Keep the rows where `valid` is True and average them. For the baseline, `a[..., baseline]` is (N, L, H, P): average
# it over sequences *and* positions (dims 0 and 3). Divide last, with the denominator floored
# (`clamp(min=1e-8)` or `np.maximum(..., 1e-8)`).

# %%
def selectivity_one_class(attn_rows, targets, valid, baseline):
    """(L, H) selectivity: mean attention at each sequence's target (valid sequences) / mean baseline attention."""
    # BEGIN SOLUTION
    a = torch.as_tensor(attn_rows, dtype=torch.float64)  # (N, L, H, T)
    n = torch.arange(a.shape[0])
    at_target = a[n, :, :, torch.as_tensor(targets)]  # (N, L, H): each sequence's own target key
    target_mean = at_target[torch.as_tensor(valid)].mean(0)  # (L, H), over the valid sequences
    base = a[..., torch.as_tensor(baseline)].mean(dim=(0, 3))  # (L, H), over all sequences and baseline positions
    return (target_mean / base.clamp(min=1e-8)).numpy()
    # END SOLUTION


# %%
checks.ex_1_2(selectivity_one_class)

# %% [markdown]
# The toy's induction selectivity, head by head, with the paper's baseline:

# %%
base = baseline_positions(T)  # (P,) the paper's fixed set, capped at T = 64
ind = selectivity_one_class(attn_rows, batch.first_a + 1, batch.valid, base)  # (L, H)
pd.DataFrame(ind, index=[f"layer {l}" for l in range(L)], columns=[f"head {h}" for h in range(H)]).round(1)

# %% [markdown]
# ### Exercise 1.3 — all six classes · difficulty ●●●○○ · importance ●●●●○ · 10 min
#
# Write `six_selectivities(attn_rows, batch)` returning `{class: (L, H) array}` for the six classes, with the paper's
# baseline `baseline_positions(batch.seq_len)`. Build it from your two functions: induction and duplicate-token average
# over `batch.valid`, the other four over every sequence, and *local* is the mean of the four selectivities of its
# keys (a mean of ratios with the same denominator is the ratio of the mean). `batch.first_a` holds each sequence's
# first A.

# %% [markdown]
# #### Hint
#
# Loop over `HEAD_CLASSES`. For a class, build the (N,) array of targets from
# `class_targets(int(batch.first_a[n]), T)[c]`, and call `selectivity_one_class` with it. `local` has four targets per
# sequence: four calls, one per key, then their mean. The rows: `batch.valid` for induction and duplicate-token, an
# all-True array for the other four.

# %%
def six_selectivities(attn_rows, batch) -> dict:
    """{class: (L, H)} with the paper's baseline, from class_targets and selectivity_one_class."""
    # BEGIN SOLUTION
    n, t = batch.n, batch.seq_len
    base = baseline_positions(t)
    everyone = np.ones(n, dtype=bool)
    sel = {}
    for c in HEAD_CLASSES:
        per_seq = [np.atleast_1d(class_targets(int(fa), t)[c]) for fa in batch.first_a]  # N arrays of 1 (or 4) keys
        rows = batch.valid if c in ("induction", "duplicate-token") else everyone
        sel[c] = np.mean([selectivity_one_class(attn_rows, np.array([p[j] for p in per_seq]), rows, base)
                          for j in range(len(per_seq[0]))], axis=0)
    return sel
    # END SOLUTION


# %%
checks.ex_1_3(six_selectivities)

# %% [markdown]
# Your screen beside the library's on the toy model, and the class each head gets (best class at ≥ 30×, else
# unclassified):

# %%
mine = six_selectivities(attn_rows, batch)
library = circuitdev.selectivities(attn_rows, batch)  # circuitdev.measure.screen.selectivities, the paper's baseline
print(f"largest relative difference from the library: "
      f"{max(float(np.max(np.abs(mine[c] / library[c] - 1))) for c in HEAD_CLASSES):.2g}")
table = pd.DataFrame({c: mine[c].reshape(-1) for c in HEAD_CLASSES},
                     index=[f"L{l}H{h}" for l in range(L) for h in range(H)])
table["best class"] = table.idxmax(axis=1).where(table.max(axis=1) >= 30, "unclassified")
table.round(1)

# %% [markdown]
# ## 4 · Why the toy leaves A and B out of its baseline
#
# At T = 64 the paper's 50 baseline positions cover almost every position B can take. A perfect induction head then
# raises its *own* baseline whenever B lands on a baseline position, and cannot score more than about
# `induction_ceiling(64)` ≈ 56× however sharp it is; at T = 256 the ceiling is ≈ 235×, far above the 50× bar. So the
# toy panels screen with a documented variant, `baseline_excludes_ab: true`: each sequence's A and B are dropped from
# its own baseline.

# %%
print(f"induction ceiling with the paper's baseline: {induction_ceiling(64):.0f}x at T = 64, "
      f"{induction_ceiling(256):.0f}x at T = 256")

# %% [markdown]
# ### Exercise 1.4 — the baseline without A and B · difficulty ●●●○○ · importance ●●●○○ · 10 min
#
# Write `baseline_without_ab(attn_rows, first_a, positions)` → (L, H): the mean attention over every (sequence,
# baseline position) pair **except** the positions `first_a[n]` and `first_a[n] + 1` of each sequence n. Pool the kept
# values and average once (sequences lose different numbers of positions, so a mean of per-sequence means is not the
# same).

# %% [markdown]
# #### Hint
#
# Broadcast a (N, P) mask: `keep = (positions[None, :] != first_a[:, None]) & (positions[None, :] !=
# first_a[:, None] + 1)`. Multiply `a[..., positions]` (N, L, H, P) by `keep[:, None, None, :]`, sum over sequences and
# positions, and divide by `keep.sum()`: one pooled mean.

# %%
def baseline_without_ab(attn_rows, first_a, positions):
    """(L, H) mean attention at the baseline positions, leaving out each sequence's own A and B."""
    # BEGIN SOLUTION
    a = torch.as_tensor(attn_rows, dtype=torch.float64)[..., torch.as_tensor(positions)]  # (N, L, H, P)
    pos = torch.as_tensor(positions)[None, :]  # (1, P)
    fa = torch.as_tensor(first_a)[:, None]  # (N, 1)
    keep = ((pos != fa) & (pos != fa + 1)).double()  # (N, P)
    return ((a * keep[:, None, None, :]).sum(dim=(0, 3)) / keep.sum()).numpy()
    # END SOLUTION


# %%
checks.ex_1_4(baseline_without_ab)

# %% [markdown]
# With this baseline your induction selectivities are the toy panel's own: the probe stored them for this checkpoint
# in `data/results/<panel>/` (one record per revision, written by `circuitdev probe`, which the book reads).

# %%
at_b = torch.as_tensor(attn_rows, dtype=torch.float64)[torch.arange(N), :, :, torch.as_tensor(batch.first_a + 1)]
yours = at_b[torch.as_tensor(batch.valid)].mean(0).numpy() / np.maximum(baseline_without_ab(attn_rows, batch.first_a,
                                                                                           base), 1e-8)  # (L, H)
record = data.toy_table(panel)
final = record[record["revision"] == data.final_revision(panel)]
compare = pd.DataFrame({"yours (A, B left out)": yours.reshape(-1),
                        "the probe's record": final["sel_induction"].to_numpy(), "paper's baseline": ind.reshape(-1)},
                       index=[f"L{l}H{h}" for l, h in zip(final["layer"], final["head"])])
worst = float(np.max(np.abs(compare["yours (A, B left out)"] / compare["the probe's record"] - 1)))
print(f"largest relative difference from the record: {worst:.2g}")
compare[compare["the probe's record"] > 10].round(1)

# %% [markdown]
# ## What you built
#
# `circuitdev.measure.screen` is these few lines, plus the null (attention at random non-target positions) and the
# all-query first-token score you will meet in session 3. Where the heads of each class sit in this checkpoint, read
# from your table of section 3 (best class at ≥ 30×):

# %%
def where_heads_sit(table: pd.DataFrame) -> str:
    """One sentence per class from the `best class` column: its heads (strongest first) and the layers holding them."""
    parts = []
    for c in HEAD_CLASSES:
        heads = table.index[table["best class"] == c]
        if len(heads):
            ranked = sorted(heads, key=lambda name: -table.loc[name, c])
            layers = sorted({int(name[1:name.index("H")]) for name in heads})
            parts.append(f"{c} heads in layer{'s' * (len(layers) > 1)} {', '.join(map(str, layers))} ("
                         + ", ".join(f"{name} {table.loc[name, c]:.0f}×" for name in ranked) + ")")
    return "; ".join(parts) + "." if parts else "no head reaches 30× in any class."


print(textwrap.fill(f"{panel}, final checkpoint: {where_heads_sit(table)}", 80, break_on_hyphens=False))

# %% [markdown]
# A class's heads need not share a layer: the previous-token screen can find heads in more than one layer, and an
# upper head or two parks on position 0. **Next session:** watch those heads appear while a model trains.
