"""The toy recipe page's figure of the recorded trials (issue 32): sink and induction heads per checkpoint."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from circuitdev.book.plots.axes import figure_title, placeholder, token_tick

_FAMILY_TITLES = {"gpt_neox": "GPT-NeoX-like (toy-pythia)", "olmo": "OLMo-like (toy-olmo)",
                  "olmoe": "OLMoE-like (toy-olmoe)"}
_TRIAL_COLORS = ("#7f7f7f", "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b")


def trial_counts(counts: pd.DataFrame, *, labels: dict[str, str] | None = None, sink_threshold: float = 30.0,
                 induction_threshold: float = 50.0) -> Figure:
    """One row per family, three panels: sink heads in layers >= 2 by the paper's second-A score (solid) and by the
    all-query score (dashed); the strongest all-query attention mass on position 0 in layers >= 2; induction heads.
    One colour per trial (`labels`: {trial: words}), trials in order of length; x: training tokens (log), step 0 left
    out. A cross on the first panel marks a checkpoint with a sink head in layers 0/1 (either score). `counts`:
    `toy.trials` rows."""
    if counts.empty:
        return placeholder("No toy trial is recorded (data/toy_trials/).", title="Toy trials")
    labels = labels or {}
    families = [f for f in _FAMILY_TITLES if f in set(counts["family"])]
    trials = list(counts.groupby("trial", sort=False)["tokens"].max().sort_values(kind="stable").index)  # by length
    colors = {t: _TRIAL_COLORS[i % len(_TRIAL_COLORS)] for i, t in enumerate(trials)}
    fig, axes = plt.subplots(len(families), 3, figsize=(11, 2.9 * len(families) + 0.9), layout="constrained",
                             squeeze=False, sharex=True)
    for row, family in zip(axes, families):
        for trial in trials:
            g = counts[(counts["family"] == family) & (counts["trial"] == trial) & (counts["tokens"] > 0)]
            g = g.sort_values("tokens")
            if g.empty:
                continue
            c, x = colors[trial], g["tokens"].to_numpy(dtype=float)
            row[0].plot(x, g["sinks_upper"], color=c, lw=1.6, marker="o", ms=3, label=labels.get(trial, trial))
            row[0].plot(x, g["sinks_upper_allq"], color=c, lw=1.2, ls="--")
            floor = (g["sinks_floor"] + g["sinks_floor_allq"]).to_numpy() > 0
            row[0].scatter(x[floor], np.zeros(floor.sum()), marker="x", color=c, s=40, zorder=5)
            row[1].plot(x, g["max_mass_upper_allq"], color=c, lw=1.6, marker="o", ms=3)
            row[2].plot(x, g["induction"], color=c, lw=1.6, marker="o", ms=3)
        row[0].set_ylabel(f"{_FAMILY_TITLES[family]}\nsink heads (≥ {sink_threshold:g}×)")
        row[1].set_ylabel("max mass on position 0")
        row[2].set_ylabel(f"induction heads (≥ {induction_threshold:g}×)")
        row[1].set_ylim(0, 1)
        for ax in (row[0], row[2]):
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_ylim(bottom=-0.3)
        for ax in row:
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(token_tick))
            ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("training tokens (log scale)")
    axes[0][0].set_title("sink heads in layers ≥ 2", fontsize=10)
    axes[0][1].set_title("attention on position 0, layers ≥ 2", fontsize=10)
    axes[0][2].set_title("induction heads", fontsize=10)
    found = {}  # one legend entry per trial, from whichever row drew it
    for ax in axes[:, 0]:
        for handle, name in zip(*ax.get_legend_handles_labels()):
            found.setdefault(name, handle)
    names, handles = list(found), list(found.values())
    fig.legend(handles, names, loc="outside lower center", ncol=1, frameon=False)  # one trial a line: labels are long
    figure_title(fig, "Sinks and induction heads per checkpoint in the recorded toy trials")
    return fig
