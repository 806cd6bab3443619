"""The method page's figure: where each head class looks from the query in one sequence of the batch."""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure


def batch_layout(first_a: int, seq_len: int, baseline: Sequence[int], *, n_local: int = 4) -> Figure:
    """Method: where each head class looks from the query (the second A at T − 1) in one sequence of the batch,
    with the fixed baseline positions the selectivities are divided by. The whole sequence on top; below, the two
    stretches where targets crowd together drawn position by position: around the bigram A B, and the end of the
    sequence up to the query (local, previous-token and self sit on adjacent positions there)."""
    q = seq_len - 1
    targets = [("first-token (position 0)", [0], "#8c564b"), ("induction (B)", [first_a + 1], "#d62728"),
               ("duplicate-token (first A)", [first_a], "#ff7f0e"),
               ("local (q − 5 … q − 2)", list(range(q - 1 - n_local, q - 1)), "#bcbd22"),
               ("previous-token (q − 1)", [q - 1], "#9467bd"), ("self (the query q)", [q], "#1f77b4")]
    base = np.asarray(list(baseline))
    fig = plt.figure(figsize=(10, 5.2), layout="constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=[1, 1.15])
    whole = fig.add_subplot(grid[0, :])
    zooms = [(fig.add_subplot(grid[1, 0]), (max(0, first_a - 4), min(q, first_a + 5)), "around the bigram A B"),
             (fig.add_subplot(grid[1, 1]), (max(0, q - 12), q), "the end of the sequence, up to the query")]
    for ax, (lo, hi), title in [(whole, (0, q), None), *zooms]:
        ax.hlines(0, lo - 0.5, hi + 0.5, color="#cccccc", lw=6, zorder=0)
        shown = base[(base >= lo) & (base <= hi)]
        ax.scatter(shown, np.zeros(len(shown)) - 0.35, marker="|", s=140, color="#7f7f7f",
                   label=f"baseline positions ({len(base)})" if ax is whole else None)
        for label, pos, color in targets:
            pos = [p for p in pos if lo <= p <= hi]
            ax.scatter(pos, np.zeros(len(pos)) + 0.35, s=60 if ax is not whole else 46, color=color,
                       edgecolor="black", linewidth=0.4, label=label if ax is whole else None, zorder=3)
        ax.set_ylim(-0.8, 1.0)
        ax.set_yticks([])
        pad = 4 if ax is whole else 0.7
        ax.set_xlim(lo - pad, hi + pad)
        if ax is not whole:
            ax.set_xticks(range(lo, hi + 1))
            ax.tick_params(axis="x", labelsize=8)
            ax.set_title(f"Zoom: {title}", fontsize=10)
            ax.set_xlabel("position (token index)")
            for p, text in ((first_a, "A"), (first_a + 1, "B"), (q, "A")):
                if lo <= p <= hi:
                    ax.annotate(text, (p, 0.35), xytext=(0, 9), textcoords="offset points", ha="center",
                                fontsize=9, fontweight="bold")
    whole.annotate("query = second A", (q, 0), xytext=(q - 60, 0.75), fontsize=9,
                   arrowprops={"arrowstyle": "->", "color": "#444"})
    whole.set_xlabel("position in the sequence (token index)")
    whole.set_title("The whole sequence", fontsize=10)
    fig.suptitle("Where each class looks from the query, in one sequence of the induction batch", fontweight="bold")
    fig.legend(*whole.get_legend_handles_labels(), loc="outside lower center", ncol=4, fontsize=9, frameon=False)
    return fig
