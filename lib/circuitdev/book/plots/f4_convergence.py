"""F4's figure: recall of the final induction circuit over training."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from circuitdev.book.plots.axes import band, figure_title, placeholder, tier_lines, tier_title
from circuitdev.schema import INDUCTION_THRESHOLD


def recall_curves(recall: pd.DataFrame, *, threshold: float = INDUCTION_THRESHOLD) -> Figure:
    """F4: recall (%) of the final induction circuit over training, one line per model, one column per tier.
    `recall`: findings.circuit_recall + tier."""
    recall = recall[recall["recall"].notna()] if len(recall) else recall
    if recall.empty:
        return placeholder("No panel has an induction circuit at its final revision.", title="Circuit recall")
    fig, colors, per_tier = tier_lines(recall, height=3.6, width=5.0, pct=lambda d: 100 * d["recall"])
    for ax, tier, g, axis in per_tier:
        for panel, gp in g.groupby("panel", sort=False):
            n = int(gp["n_circuit"].iloc[0])
            x = axis.x(gp["tokens"])
            ax.step(x, gp["pct"], where="post", color=colors[panel], lw=2, label=f"{panel} ({n} heads)")
            ax.scatter(x, gp["pct"], color=colors[panel], s=16, zorder=3)
            band(ax, x, gp, "recall", color=colors[panel], scale=100, step="post")
        for level in (100 / 3, 200 / 3, 100):
            ax.axhline(level, color="grey", lw=0.7, ls=":")
        axis.apply(ax)
        ax.set_ylim(-5, 105)
        ax.set_ylabel(f"final circuit heads already ≥ {threshold:g}× (%)")
        ax.set_title(tier_title(tier), fontsize=10)
        ax.legend(fontsize=8, loc="upper left")
    figure_title(fig, "How early the final induction circuit is already visible to the screen")
    return fig
