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
# # Session 3 · Sinks, and what "selectivity" hides
#
# An *attention sink* is a head that puts much of its attention on the first token. The paper counts a head as a sink
# ("first-token" or BOS class) when its first-token selectivity **at the second A** is at least 30×. Three things that
# number hides, each worked out here on the default toy model, `toy-pythia` (the cell below lists its sink heads, from
# the same records the book's toy page and F2 read):
#
# 1. **Which query?** The paper reads one query, the second A. Averaging over every query gives the *all-query* score,
#    which can disagree with it head by head (**3.1**).
# 2. **How much attention is 30×?** Selectivity is a ratio: the same mass on position 0 gives a different selectivity
#    at another context length. You derive the relation and check it against the screen numerically (**3.2**).
# 3. **When does a head park?** A sink head can be *active-dormant*: busy on inputs that give it a job, parked on the
#    first token otherwise. Its parking share on each kind of training window shows it (**3.3**).
#
# About 35 minutes.

# %% tags=["parameters"]
# the toy panel: toy-pythia, toy-olmo or toy-olmoe (which of them form sink heads, and where: the toy panel page)
panel: str = "toy-pythia"
# a head parks on position 0 at a query when its attention there exceeds this (Gu et al.'s epsilon)
eps: float = 0.3

# %%
from circuitdev import workshop
import numpy as np
import pandas as pd
import torch
import matplotlib.pyplot as plt
import seaborn as sns

import circuitdev
from circuitdev.workshop import checks, data, diagrams

workshop.setup()

# %% [markdown]
# What this session builds: blue boxes are data, orange ones the functions you write (with their exercise
# numbers), green ones what your results are checked against.

# %%
diagrams.session_diagram(3)
plt.show()

# %%
record = data.toy_table(panel)  # every revision x head of the panel: the probe's records
final_rev = data.final_revision(panel)
final = record[record["revision"] == final_rev].reset_index(drop=True)
names = [f"L{l}H{h}" for l, h in zip(final["layer"], final["head"])]
print(f"{panel}: {record['revision'].nunique()} revisions x {len(final)} heads; final revision {final_rev}")
sinks = final[final["sel_first_token"] >= 30]  # the paper's sink heads: first-token selectivity >= 30x at the second A
print(f"sink heads at {final_rev}: " + (", ".join(f"L{l}H{h}" for l, h in zip(sinks["layer"], sinks["head"])) or
                                        "none (try another panel)"))

# %% [markdown]
# ## 1 · The second A, or every query?
#
# The probe stores two first-token scores for every head: `sel_first_token`, the paper's (the second A's attention to
# position 0 over its mean attention at the baseline positions), and `sel_first_token_allq`, the same ratio of means
# taken over every query past the first four, with its own baseline for each query: the mean attention that query
# gives to its other keys, (1 − a[q, 0]) / q. Over the whole run they disagree a lot:

# %%
fig, ax = plt.subplots(figsize=(6.2, 5))
sns.scatterplot(data=record.assign(layer=record["layer"].astype(str)), x="sel_first_token", y="sel_first_token_allq",
                hue="layer", style="layer", ax=ax, s=28)
for axis in ("x", "y"):
    getattr(ax, f"set_{axis}scale")("log")
ax.axvline(30, color="#d62728", lw=0.8, ls=":")
ax.axhline(30, color="#d62728", lw=0.8, ls=":")
ax.set_xlabel("second-A first-token selectivity (the paper's)")
ax.set_ylabel("all-query first-token selectivity")
ax.set_title(f"{panel}: every head at every revision (30× dotted)")
sns.move_legend(ax, "upper left", bbox_to_anchor=(1.02, 1), title="layer")  # beside the plot, off the points
plt.show()
both = final[["sel_first_token", "sel_first_token_allq", "mass_first_token", "mass_first_token_allq"]]
both.astype(float).set_axis(names).query("sel_first_token > 10 or sel_first_token_allq > 10").round(2)

# %% [markdown]
# ### Exercise 3.1 — the all-query first-token score · difficulty ●●○○○ · importance ●●●○○ · 10 min
#
# Write `allq_first_token(attn, skip)` for one layer's full attention patterns `attn` (N, H, T, T) — row q is query
# q's attention over keys 0..q. Return a pair of (H,) arrays:
#
# - `mass`: the mean of attn[n, h, q, 0] over sequences n and queries q ≥ skip;
# - `selectivity`: mass divided by the mean, over the same (n, q), of (1 − attn[n, h, q, 0]) / q — query q's mean
#   attention on each of its q other keys — floored at 1e-8.
#
# (Ratio of means again: average the numerator and the denominator separately, then divide.)

# %% [markdown]
# #### Hint
#
# `col0 = a[:, :, skip:, 0]` is (N, H, Q): each query's attention on position 0, and `q = np.arange(skip, T)`
# are the matching query positions (they broadcast over the last axis). The mass is the mean of `col0` over axes 0 and 2;
# the baseline is the mean of `(1 - col0) / q` over the same axes; divide the two means, the denominator floored.

# %%
def allq_first_token(attn, skip: int):
    """(mass (H,), selectivity (H,)) of position 0 over every query q >= skip."""
    # BEGIN SOLUTION
    a = torch.as_tensor(attn, dtype=torch.float64)  # (N, H, T, T)
    q = torch.arange(skip, a.shape[-1], dtype=torch.float64)  # (Q,) the queries used
    col0 = a[:, :, skip:, 0]  # (N, H, Q): attention of each query on position 0
    mass = col0.mean(dim=(0, 2))  # (H,)
    base = ((1 - col0) / q).mean(dim=(0, 2))  # (H,) mean attention on one other key
    return mass.numpy(), (mass / base.clamp(min=1e-8)).numpy()
    # END SOLUTION


# %%
checks.ex_3_1(allq_first_token)

# %% [markdown]
# Now on the model: full attention patterns of every layer on the probe batch, and your score beside the probe's.

# %%
cfg = data.toy_config(panel)
batch = circuitdev.induction_batch(cfg.n, cfg.seq_len, cfg.seed, cfg.vocab_range, first_token=cfg.first_token_id)
model = data.toy_model(panel)
patterns = data.attention_patterns(model, batch.tokens)  # {layer: (N, H, T, T)}
mine = np.concatenate([allq_first_token(patterns[l], cfg.allq_skip)[1] for l in sorted(patterns)])  # (L * H,)
print(f"largest relative difference from the probe's record: "
      f"{float(np.max(np.abs(mine / final['sel_first_token_allq'].to_numpy() - 1))):.2g}")

# %% [markdown]
# ## 2 · How much attention is 30×?
#
# Suppose a head puts mass *m* on position 0 and spreads the rest evenly over the other T − 1 keys. Every baseline key
# then gets (1 − m)/(T − 1), so its selectivity is a fixed function of m and T — and the same m gives very different
# selectivities at T = 64 (the toy) and T = 256 (the paper).

# %% [markdown]
# ### Exercise 3.2 — from mass to selectivity and back · difficulty ●●○○○ · importance ●●●●○ · 10 min
#
# Derive the relation on paper first. Then write `selectivity_from_mass(m, T)` and its inverse
# `mass_for_selectivity(s, T)`. The check builds attention rows with mass m on position 0 and the rest spread evenly,
# runs the library's screen on them at T = 64 and T = 256, and compares with your formula.

# %% [markdown]
# #### Hint
#
# With mass m on position 0, the other T − 1 keys share the remaining 1 − m equally, and the screen's
# baseline is the attention of one such key. The selectivity divides m by it. For the inverse, write s = (that
# expression) and solve for m: it is linear in m once you multiply out the denominator.

# %%
def selectivity_from_mass(m: float, T: int) -> float:
    """First-token selectivity of a head with mass m on position 0 and the rest spread evenly over T - 1 keys."""
    # BEGIN SOLUTION
    return m * (T - 1) / (1 - m)
    # END SOLUTION


def mass_for_selectivity(s: float, T: int) -> float:
    """The mass on position 0 that gives selectivity s at context length T (the inverse)."""
    # BEGIN SOLUTION
    return s / (s + T - 1)
    # END SOLUTION


# %%
checks.ex_3_2(selectivity_from_mass, mass_for_selectivity)

# %% [markdown]
# The paper's 30× bar asks for about a third of a head's attention at T = 64 but a tenth at T = 256: read the toy's
# first-token scores with that harder bar in mind. On the toy's heads (every revision), the second-A scores scatter
# around the T = 64 curve, within a factor of about two (the rest of a real head's attention is not spread evenly).
# The all-query scores follow a lower curve: query q has only q other keys, so its even-spread selectivity is
# m·q/(1 − m), and averaging the baseline over queries 4 … 63 acts like a context of about 21 tokens.

# %%
for t in (64, 256):
    print(f"T = {t}: 30x needs mass {mass_for_selectivity(30, t):.2f} on position 0; "
          f"mass 0.2 gives {selectivity_from_mass(0.2, t):.0f}x")
t_allq = 1 + 1 / np.mean(1 / np.arange(cfg.allq_skip, cfg.seq_len))  # the all-query score's effective context
m = np.linspace(0.001, 0.97, 300)
fig, ax = plt.subplots(figsize=(6.8, 4.4))
for t, color, label in ((256, "#ff7f0e", "even spread, T = 256"), (64, "#1f77b4", "even spread, T = 64"),
                        (t_allq, "#2ca02c", f"all-query, even spread (T ≈ {t_allq:.0f})")):
    ax.plot(m, [selectivity_from_mass(x, t) for x in m], color=color, label=label)
ax.scatter(record["mass_first_token"], record["sel_first_token"], s=9, color="#1f77b4", alpha=0.55,
           label=f"{panel} heads: second A")
ax.scatter(record["mass_first_token_allq"], record["sel_first_token_allq"], s=9, color="#2ca02c", alpha=0.55,
           marker="x", label=f"{panel} heads: all queries")
ax.axhline(30, color="#d62728", ls=":", lw=1, label="30×")
ax.set_yscale("log")
ax.set_ylim(1e-2, 1e4)
ax.set_xlabel("mass on position 0")
ax.set_ylabel("first-token selectivity")
ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1))  # beside the plot, off the points
plt.show()

# %% [markdown]
# ## 3 · Active or dormant?
#
# A head that parks on the first token might do so always, or only when it has nothing to do. Feed the model each kind
# of window it was trained on — text, periodic repeats, random filler with repeated spans, and the Bigram-Backcopy
# task (after a gate-trigger pair, copy the token before the gate) — plus the probe batch itself, and count how often
# each head parks.

# %% [markdown]
# ### Exercise 3.3 — parking share · difficulty ●●○○○ · importance ●●●○○ · 10 min
#
# Write `parking_share(attn0, eps, skip)`: `attn0` (N, L, H, T) holds, for every sequence, head and query position q,
# the attention of query q on position 0. Return the (L, H) share of (sequence, query ≥ skip) pairs where that
# attention is strictly above `eps` — a per-query cousin of Gu et al.'s sink rate (they average each sequence's
# queries first, query 0 included, then threshold the sequence; the book's sink-measures page holds theirs).

# %% [markdown]
# #### Hint
#
# `np.asarray(attn0)[..., skip:] > eps` is a boolean array; the mean of booleans is a share. Average over
# the sequences (axis 0) and the queries (the last axis).

# %%
def parking_share(attn0, eps: float, skip: int):
    """(L, H) share of (sequence, query >= skip) where the query's attention on position 0 exceeds eps."""
    # BEGIN SOLUTION
    a = np.asarray(attn0)[..., skip:]  # (N, L, H, Q)
    return (a > eps).mean(axis=(0, 3))
    # END SOLUTION


# %%
checks.ex_3_3(parking_share)

# %%
inputs = {"probe batch (random filler)": batch.tokens[:128], **{k: data.windows(k, 128) for k in data.WINDOW_KINDS}}
shares = {}
for kind, tokens in inputs.items():
    pats = data.attention_patterns(model, tokens)
    attn0 = torch.stack([pats[l][..., 0] for l in sorted(pats)], dim=1)  # (N, L, H, T): each query on position 0
    shares[kind] = parking_share(attn0.numpy(), eps, cfg.allq_skip).reshape(-1)
park = pd.DataFrame(shares, index=names)
fig, ax = plt.subplots(figsize=(7.5, 6))
sns.heatmap(park, annot=True, fmt=".2f", cmap="rocket_r", vmin=0, vmax=1, ax=ax, cbar_kws={"label": "parking share"})
ax.set_title(f"{panel}: share of queries putting > {eps:g} of their attention on position 0")
plt.show()

# %% [markdown]
# Read it head by head. The upper-layer sink heads park on random filler — the probe batch, and the filler of the
# repeat windows — and hardly at all on text or on the backcopy task, where upper layers have work to do: they are
# *active-dormant*, not always-on. The layer-1 induction heads do the opposite: they park on the backcopy windows,
# which have no repeated span to copy. So a head's sink score depends on what the input asks of it, and the probe's
# random filler is the input on which dormant heads show. The paper's real models have no BOS and far longer
# contexts; whether their sinks are dormant in the same way is a question this toy can raise but not answer
# (`book/toy_recipe.md`).
#
# **Next session:** do the induction heads *cause* the model's induction, and does anything announce them before
# they form?
