"""The method page's figure: where each head class looks from the query in one sequence of the batch."""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure


def batch_layout(first_a: int, seq_len: int, baseline: Sequence[int], *, n_local: int = 4) -> Figure:
    """Method: where each head class looks from the query (the second A at T − 1) in one sequence of the batch,
    with the fixed baseline positions the selectivities are divided by."""
    q = seq_len - 1
    targets = [("first-token (BOS)", [0], "#8c564b"), ("induction (B)", [first_a + 1], "#d62728"),
               ("duplicate-token (first A)", [first_a], "#ff7f0e"),
               ("local", list(range(q - 1 - n_local, q - 1)), "#bcbd22"), ("previous-token", [q - 1], "#9467bd"),
               ("self (query)", [q], "#1f77b4")]
    fig, ax = plt.subplots(figsize=(8, 2.8), layout="constrained")
    ax.hlines(0, 0, q, color="#cccccc", lw=6, zorder=0)
    ax.scatter(list(baseline), np.zeros(len(baseline)) - 0.35, marker="|", s=120, color="#7f7f7f",
               label=f"baseline positions ({len(baseline)})")
    for i, (label, pos, color) in enumerate(targets):
        ax.scatter(pos, np.zeros(len(pos)) + 0.35, s=46, color=color, edgecolor="black", linewidth=0.4,
                   label=label, zorder=3)
    ax.annotate("query = second A", (q, 0), xytext=(q - 40, 0.75), fontsize=8,
                arrowprops={"arrowstyle": "->", "color": "#444"})
    ax.set_xlim(-4, q + 4)
    ax.set_ylim(-0.8, 1.0)
    ax.set_yticks([])
    ax.set_xlabel("position in the sequence (token index)")
    ax.legend(ncol=4, fontsize=8, loc="upper left", bbox_to_anchor=(0, -0.3), frameon=False)
    ax.set_title("Where each class looks from the query, in one sequence of the induction batch", fontsize=10)
    return fig
