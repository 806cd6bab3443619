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
# # Session 4 · Causal checks and the spectral signal
#
# A high selectivity says where a head looks, not that the model needs it. The paper checks its screen causally —
# knock the screened heads out and see whether the model still predicts B — and looks for a signal that comes *before*
# a head crosses its threshold: the **participation ratio** (PR) of the head's output. Here you
#
# 1. write the knock-out (zero ablation) yourself and run it through a hook on the toy model (**4.1**);
# 2. build the paper's control, matched-random heads, and compare the circuit with it (**4.2**);
# 3. write the participation ratio (**4.3**);
# 4. ask, on your own run from session 2, whether PR rises before selectivity (**4.4**).
#
# About 40 minutes.

# %% tags=["parameters"]
# the toy panel whose final checkpoint is ablated
panel: str = "toy-pythia"
# the family of your own run (session 2's mini preset; trained here if it is missing)
family: str = "gpt_neox"
# matched-random seeds (the paper: 123)
seeds: list[int] = [123, 1, 7, 42, 99]
# the screen ablated against matched-random heads (the paper's induction circuit: 50x; see section 2)
screen_threshold: float = 90.0

# %%
from circuitdev import workshop
import math
import textwrap

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
import matplotlib.pyplot as plt

import circuitdev
from circuitdev.analysis.findings import f5_pr_lead as lead_lib
from circuitdev.book import plots as book_plots
from circuitdev.book.display import show_table, significant
from circuitdev.measure.ablation import matched_random_groups
from circuitdev.toy import PANEL_NAMES
from circuitdev.workshop import checks, data, diagrams, plots

workshop.setup()

# %% [markdown]
# What this session builds: blue boxes are data, orange ones the functions you write (with their exercise
# numbers), green ones what your results are checked against.

# %%
diagrams.session_diagram(4)
plt.show()

# %%
cfg = data.toy_config(panel)
batch = circuitdev.induction_batch(cfg.n, cfg.seq_len, cfg.seed, cfg.vocab_range, first_token=cfg.first_token_id)
model = data.toy_model(panel)
layout = circuitdev.family_of(model)  # where each layer's attention output projection lives
record = data.toy_table(panel)
final = record[record["revision"] == data.final_revision(panel)]


def screen(threshold: float) -> dict[int, list[int]]:
    """{layer: heads} with induction selectivity >= threshold at the final revision (the probe's record)."""
    out = {}
    for l, h, sel in zip(final["layer"], final["head"], final["sel_induction"]):
        if sel >= threshold:
            out.setdefault(int(l), []).append(int(h))
    return out


circuit = screen(cfg.induction_threshold)
print(f"{panel}'s induction circuit (>= {cfg.induction_threshold:g}x at the final revision): {circuit}")

# %% [markdown]
# ## 1 · Knock heads out
#
# Each attention layer ends with an output projection $W_O$ applied to the concatenated head outputs: its input has
# shape $(B, T, H \cdot d_{\mathrm{head}})$, head $h$ owning the columns $h \cdot d_{\mathrm{head}}$ …
# $(h+1) \cdot d_{\mathrm{head}} - 1$. *Zero ablation* (the paper's only kind) sets a head's columns to 0 at every
# position before $W_O$.

# %% [markdown]
# ### Exercise 4.1 — zero some heads · difficulty ●●○○○ · importance ●●●●○ · 10 min
#
# Write `zero_heads(z, heads, d_head)`: return a **copy** of `z` (B, T, H · d_head) with the columns of every head in
# `heads` set to 0.

# %% [markdown]
# #### Hint
#
# Copy first (`z.clone()`: the check looks at its input afterwards), then zero each listed head's slice of the last
# dimension: head h owns the columns from h·d_head up to, not including, (h + 1)·d_head.

# %%
def zero_heads(z: torch.Tensor, heads: list[int], d_head: int) -> torch.Tensor:
    """A copy of W_O's input with the listed heads' slices zeroed."""
    # BEGIN SOLUTION
    out = z.clone()
    for h in heads:
        out[..., h * d_head:(h + 1) * d_head] = 0
    return out
    # END SOLUTION


# %%
checks.ex_4_1(zero_heads)

# %% [markdown]
# Now put it in the model with a forward pre-hook on each W_O (PyTorch calls the hook with W_O's input and uses what
# it returns instead), and read the model's prediction at the second A:

# %%
def ablated_metrics(spec: dict[int, list[int]]) -> dict[str, float]:
    """Loss and top-1 accuracy of B at the query with the heads of `spec` zeroed (your zero_heads, in hooks)."""
    hooks = [model.get_submodule(layout.out_proj_path(layer)).register_forward_pre_hook(
        lambda module, args, heads=heads: (zero_heads(args[0], heads, layout.head_dim),))
        for layer, heads in spec.items()]
    try:
        with torch.no_grad():
            logits = model(input_ids=torch.as_tensor(batch.tokens)).logits[:, -1]  # (N, V) at the query
    finally:
        for hook in hooks:
            hook.remove()
    target = torch.as_tensor(batch.target)
    return {"loss": float(F.cross_entropy(logits, target)), "acc_top1": float((logits.argmax(-1) == target).float().mean())}


def said(metrics: dict[str, float]) -> str:
    """The metrics in one line, each with three significant digits, as every table of the book writes them."""
    return ", ".join(f"{k} {significant(v)}" for k, v in metrics.items())


print("no ablation     ", said(ablated_metrics({})))
print("circuit ablated ", said(ablated_metrics(circuit)))
print("the library     ", said(circuitdev.evaluate(model, batch, circuit)))

# %% [markdown]
# ## 2 · Against what? Matched-random heads
#
# Removing *any* three heads of layer 1 might hurt. The paper's control removes as many heads from the same layers,
# drawn at random from the heads the screen did not pick.

# %% [markdown]
# ### Exercise 4.2 — matched random · difficulty ●●○○○ · importance ●●●○○ · 10 min
#
# Write `matched_random(spec, n_heads, seed)`: for each layer of `spec` (in the spec's order), draw
# `min(len(spec[layer]), number of other heads)` heads from the layer's **other** heads, with one
# `np.random.RandomState(seed)` for all layers and `rng.choice(eligible, size=k, replace=False)`; return
# `{layer: sorted heads}` (leave out a layer with nothing to draw).

# %% [markdown]
# #### Hint
#
# The layers share one random stream: create the `np.random.RandomState(seed)` once, before looping over
# `spec.items()`. In a layer, the eligible heads are the others, k is the smaller of the two counts, and the draw is
# `choice(eligible, size=k, replace=False)` on that stream; skip a layer with k = 0, and return sorted Python ints.

# %%
def matched_random(spec: dict[int, list[int]], n_heads: int, seed: int) -> dict[int, list[int]]:
    """Same layers and per-layer counts as `spec`, drawn from the other heads (the paper's RNG stream)."""
    # BEGIN SOLUTION
    rng = np.random.RandomState(seed)
    out = {}
    for layer, heads in spec.items():
        eligible = [h for h in range(n_heads) if h not in set(heads)]
        k = min(len(heads), len(eligible))
        if k:
            out[layer] = sorted(int(h) for h in rng.choice(eligible, size=k, replace=False))
    return out
    # END SOLUTION


# %%
checks.ex_4_2(matched_random)

# %% [markdown]
# In this toy, **every** head of layer 1 is an induction head at 50×: the paper's circuit is the whole layer, and
# its control has nothing left to draw (try `matched_random(circuit, 4, 123)`). The paper's layers have 8 or 16 heads.
# So here the screen is the sharpest heads — `screen_threshold` (90×) — against matched-random draws from the
# rest of their layer. A layer of 4 heads leaves few draws (possibly one: then every seed draws the same heads), so
# the comparison adds a second control the library offers for small models (`matched_random_groups(...,
# scope="any")`): as many heads, drawn from **any** layer outside the screen, one distinct group per seed.

# %%
def head_names(spec: dict[int, list[int]]) -> str:
    """{1: [2, 3]} -> "L1H2, L1H3" ("none" for an empty spec)."""
    return ", ".join(f"L{l}H{h}" for l in sorted(spec) for h in sorted(spec[l])) or "none"


sharp = screen(screen_threshold)
screen_label = f"the {screen_threshold:g}× screen ({head_names(sharp)})"
rows = [{"condition": "baseline", "label": "no ablation", "n_ablated": 0, **ablated_metrics({})},
        {"condition": "screen", "label": screen_label, "n_ablated": sum(map(len, sharp.values())),
         "spec": head_names(sharp), **ablated_metrics(sharp)}]
# the paper's matched-random control, drawn with your function for each seed; identical draws are one row
draws: dict[str, tuple[dict, list[int]]] = {}  # heads -> (the draw, the seeds that drew it)
for seed in seeds:
    control = matched_random(sharp, layout.n_heads, seed)
    draws.setdefault(head_names(control), (control, []))[1].append(seed)
for names_, (control, drawn_by) in draws.items():
    if control:  # a screen filling its layers leaves nothing to draw: no row that ablates nothing
        rows.append({"condition": "matched_random", "label": "matched random (same layers)",
                     "n_ablated": sum(map(len, control.values())), "seed": drawn_by[0], "spec": names_,
                     "drawn by seeds": ", ".join(map(str, drawn_by)), **ablated_metrics(control)})
# the any-layer control: as many heads from any layer outside the screen, distinct groups (seeds seeds[0], +1, ...)
anywhere = matched_random_groups(sharp, layout.n_heads, len(seeds), seed=seeds[0], scope="any",
                                 n_layers=layout.n_layers)
any_label = f"random heads from any layer (mean of {len(anywhere.groups)} groups)"
for seed, group in anywhere.groups:
    rows.append({"condition": "random_any", "label": any_label, "n_ablated": sum(map(len, group.values())),
                 "seed": seed, "spec": head_names(group), "drawn by seeds": str(seed), **ablated_metrics(group)})
upper = {layer: list(range(layout.n_heads)) for layer in sharp}
rows.append({"condition": "upper_bound", "label": "upper bound (whole layers)",
             "n_ablated": sum(map(len, upper.values())), "spec": head_names(upper), **ablated_metrics(upper)})
ablation = pd.DataFrame(rows).assign(n=batch.n)  # n: the sequences behind each top-1 (the bars' intervals)

# how many distinct matched-random draws the seeds gave, and why (computed from the screen and the layer size)
outside = {l: layout.n_heads - len(hs) for l, hs in sharp.items()}  # heads of each screened layer outside the screen
possible = math.prod(math.comb(o, min(len(sharp[l]), o)) for l, o in outside.items() if o)
why = "; ".join(f"layer {l} holds only {o} head{'s' * (o != 1)} outside the screen, which takes {len(sharp[l])} there"
                if o else f"layer {l} holds no head outside the screen (no random head there)"
                for l, o in outside.items())
n_draws = sum(1 for control, _ in draws.values() if control)
if not n_draws:
    note = (f"The matched-random control has nothing to draw ({why}), so it is left out rather than ablating "
            "nothing.")
elif n_draws < len(seeds) and possible <= n_draws:
    note = (f"The {len(seeds)} seeds ({', '.join(map(str, seeds))}) gave {n_draws} distinct matched-random "
            f"draw{'s' * (n_draws != 1)}: {why}, so only {possible} draw{'s' * (possible != 1)} exist"
            f"{'s' * (possible == 1)} and every seed draws {'the same heads' if possible == 1 else 'among them'} "
            f"({' / '.join(draws)}). The table shows each distinct draw once.")
else:
    note = (f"The {len(seeds)} seeds gave {n_draws} distinct matched-random draws (of {possible} possible; {why}).")
print(textwrap.fill(note, 80))
print(textwrap.fill(f"The any-layer control: {len(anywhere.groups)} distinct groups of {anywhere.n_heads} heads, each "
                    f"drawn from the {layout.n_layers * layout.n_heads - sum(map(len, sharp.values()))} heads outside "
                    f"the screen in any layer (seeds {', '.join(str(s) for s, _ in anywhere.groups)}).", 80))

fig = book_plots.ablation_bars(ablation, title=f"{panel}: the {screen_threshold:g}× screen ({head_names(sharp)}) "
                                               "against random heads (top-1 accuracy of B at the query)")
plt.show()
show_table(ablation[["condition", "spec", "n_ablated", "seed", "drawn by seeds", "loss", "acc_top1"]],
           "zero ablation at the final revision (seed: the draw's first seed; — where none is drawn)")

# %% [markdown]
# Read the bars with the layer in mind: the matched-random heads here are layer-1 heads too, and less selective
# induction heads at that. If removing them costs about as much as removing the screened ones, the screen's 90× bar
# separates heads that all do the job; if the screen's bar is much lower, the sharpest heads carry most of it. The
# any-layer groups (mostly heads of other layers) ask a different question: does removing *any* as many heads hurt this
# much, or only these?
#
# ## 3 · The participation ratio
#
# Take one head's output at the query on $N$ sequences: an $(N, d_{\mathrm{head}})$ matrix $M$, **not centred**. Its squared
# singular values $s_i^2$ say how the energy spreads over directions; normalise them to $p_i = s_i^2 / \sum_j s_j^2$ and
#
# $$\mathrm{PR} = \exp\Big(-\sum_i p_i \log(p_i + 10^{-12})\Big)$$
#
# — 1 when the head always writes the same direction, $d_{\mathrm{head}}$ when it writes all directions equally.

# %% [markdown]
# ### Exercise 4.3 — the participation ratio · difficulty ●●○○○ · importance ●●●●○ · 10 min
#
# Write `participation_ratio(M)` for a 2-D array (N, d) → a float, exactly as above (floor the total energy at
# 1e-12).

# %% [markdown]
# #### Hint
#
# `np.linalg.svd(M, compute_uv=False)` gives the singular values s. Then p = s² / max(Σ s², 1e-12) and
# PR = exp(−Σ p·log(p + 1e-12)). Do not subtract the mean of M.

# %%
def participation_ratio(M) -> float:
    """exp(entropy) of the normalised squared singular values of the raw matrix M (N, d)."""
    # BEGIN SOLUTION
    s = np.linalg.svd(np.asarray(M, dtype=np.float64), compute_uv=False)  # (min(N, d),)
    p = s**2 / max(float((s**2).sum()), 1e-12)
    return float(np.exp(-(p * np.log(p + 1e-12)).sum()))
    # END SOLUTION


# %%
checks.ex_4_3(participation_ratio)

# %%
cap = circuitdev.capture(model, batch.tokens, batch_size=250)
head_out = cap.head_out[:cfg.n_pr]  # (N, L, H, d_head): each head's output at the query, the paper's first 500 rows
mine = np.array([[participation_ratio(head_out[:, l, h]) for h in range(layout.n_heads)]
                 for l in range(layout.n_layers)])
print(f"largest relative difference from the record's pr: "
      f"{float(np.max(np.abs(mine.reshape(-1) / final['pr'].to_numpy() - 1))):.2g}")
pd.DataFrame(mine, index=[f"layer {l}" for l in range(layout.n_layers)],
             columns=[f"head {h}" for h in range(layout.n_heads)]).round(2)

# %% [markdown]
# ## 4 · Does PR rise before selectivity? On your own run
#
# The paper's F5: a circuit head's PR becomes *elevated* before its selectivity crosses the formation threshold. The
# paper does not define "elevated"; the book's default is PR − 1 ≥ half of the head's own peak of PR − 1 over the run.

# %% [markdown]
# ### Exercise 4.4 — formation and elevation · difficulty ●●●○○ · importance ●●●●○ · 10 min
#
# Write `pr_lead(pr, sel, threshold, level)` for one head's trajectories over R revisions (`pr` and `sel`, (R,) each):
# return `(formation, elevation)` — the first index with sel ≥ threshold, and the first index with
# PR − 1 ≥ level · max(PR − 1) (and a peak above 0) — each None where there is none.

# %% [markdown]
# #### Hint
#
# Formation: the first entry of `np.flatnonzero(sel >= threshold)`. Elevation: with `signal = max(PR − 1, 0)`,
# the first index where `signal >= level * signal.max()` -- only when `signal.max() > 0`. Either is None when its list
# is empty.

# %%
def pr_lead(pr, sel, threshold: float, level: float):
    """(formation index, elevation index) of one head; None where it never forms / never elevates."""
    # BEGIN SOLUTION
    pr, sel = np.asarray(pr, dtype=float), np.asarray(sel, dtype=float)
    formed = np.flatnonzero(sel >= threshold)
    signal = np.maximum(pr - 1, 0)
    up = np.flatnonzero((signal >= level * signal.max()) & (signal.max() > 0))
    return (int(formed[0]) if len(formed) else None, int(up[0]) if len(up) else None)
    # END SOLUTION


# %%
checks.ex_4_4(pr_lead)

# %% [markdown]
# One thing to know before applying it: at initialisation a head's output is random and spread over every direction,
# so PR starts high, collapses within the first few dozen steps, and only then rises again as the head learns its
# job. "Elevated" must be judged after that collapse, so each trajectory below starts at its PR minimum.

# %%
run = data.train_mini(family, live=False)  # your run of session 2 (trained now if this machine has none)
own = data.mini_table(run)


def leads_of(table: pd.DataFrame, name: str, threshold: float = 50.0, level: float = 0.5) -> pd.DataFrame:
    """Formation and PR elevation (your pr_lead, from each head's PR minimum on) of the final induction heads (or the
    two most selective ones when none reached the threshold)."""
    steps = np.array(sorted(table["step"].unique()))
    fin = table[table["step"] == steps[-1]].sort_values("sel_induction", ascending=False)
    chosen = fin[fin["sel_induction"] >= threshold]
    if chosen.empty:
        chosen = fin.head(2)
        print(f"{name}: no head reached {threshold:g}x; following its two most selective induction heads")
    rows = []
    for l, h in zip(chosen["layer"], chosen["head"]):
        g = table[(table["layer"] == l) & (table["head"] == h)].sort_values("step")
        pr, sel = g["pr"].to_numpy(), g["sel_induction"].to_numpy()
        start = int(np.argmin(pr))  # the end of the initial collapse
        formation, elevation = pr_lead(pr[start:], sel[start:], threshold, level)
        at = lambda i: None if i is None else int(steps[start + i])  # noqa: E731
        rows.append({"run": name, "head": f"L{l}H{h}", "PR minimum at step": int(steps[start]),
                     "PR elevated at step": at(elevation), "forms at step": at(formation),
                     "lead (checkpoints)": None if None in (formation, elevation) else formation - elevation})
    return pd.DataFrame(rows)


default_panel = PANEL_NAMES[family]  # the default toy panel of the same family
leads = pd.concat([leads_of(own, f"yours ({run.panel})"), leads_of(data.toy_table(default_panel), default_panel)],
                  ignore_index=True)
leads

# %%
fin = own[own["step"] == own["step"].max()].sort_values("sel_induction", ascending=False)
followed = {run.panel: [f"L{l}H{h}" for l, h in zip(fin["layer"][:3], fin["head"][:3])]}
traj = lead_lib.head_trajectories(own, head_class="induction", threshold=50.0, heads=followed).assign(tier="your run")
fig = book_plots.pr_selectivity(traj, threshold=50.0)
plt.show()

# %% [markdown]
# A positive lead means the head's output spread over more directions before it became selective — the paper's
# claim. With one short run and coarse checkpoints, read the leads as a few data points, not a verdict: the book's F5
# chapter ({doc}`../f5_pr_lead`) shows how the answer moves with the definition of "elevated" (try `level=0.25` or
# `0.75` in `leads_of`), and the library's `pr_lead` applied to the whole trajectory, initial collapse included,
# reports every head "elevated" at step 0.
#
# **Next session:** the authors' own files — re-derive a finding, move a threshold, and check one of the paper's
# numbers by hand.
