"""F4's figure: recall, precision and Jaccard overlap of the screen with the final induction circuit over training."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from circuitdev.book.plots.axes import (TokenAxis, band, figure_title, palette, placeholder, tier_title,
                                        token_counts)
from circuitdev.schema import INDUCTION_THRESHOLD

# how each measure is drawn: recall solid in the model's colour (its band behind it), precision dashed dark grey,
# Jaccard dotted grey (a measure equal to another hides behind it: precision 100% puts Jaccard on recall)
_MEASURES = (("recall", "-", None, "recall (share of the final circuit screened)"),
             ("precision", "--", "#444444", "precision (share of the screened heads in it)"),
             ("jaccard", ":", "#888888", "Jaccard overlap"))


def recall_curves(recall: pd.DataFrame, *, threshold: float = INDUCTION_THRESHOLD) -> Figure:
    """F4: recall, precision and Jaccard overlap (%) of the induction screen with the final circuit over training,
    one panel per model (a row of panels per tier, each tier on its own token axis), recall with its 95%
    re-measurement band where the tier has one. A revision where nothing is screened has no precision (a gap).
    `recall`: findings.circuit_recall + tier."""
    recall = recall[recall["recall"].notna()] if len(recall) else recall
    if recall.empty:
        return placeholder("No panel has an induction circuit at its final revision.", title="Circuit recall")
    tiers = list(pd.unique(recall["tier"]))
    per_tier = {t: list(pd.unique(recall.loc[recall["tier"] == t, "panel"])) for t in tiers}
    ncols = max(len(p) for p in per_tier.values())
    fig, axes = plt.subplots(len(tiers), ncols, figsize=(4.3 * ncols, 3.1 * len(tiers)), squeeze=False,
                             sharey=True, layout="constrained")
    colors = palette(list(pd.unique(recall["panel"])))
    for row, tier in zip(axes, tiers):
        g = recall[recall["tier"] == tier].assign(tokens=lambda d: token_counts(d))
        axis = TokenAxis.of(g["tokens"])
        for ax, panel in zip(row, per_tier[tier]):
            gp = g[g["panel"] == panel]
            x = axis.x(gp["tokens"])
            for column, style, color, label in _MEASURES:
                if column not in gp.columns:
                    continue
                ax.step(x, 100 * gp[column], where="post", color=color or colors[panel], ls=style,
                        lw=2.2 if color is None else 1.3, label=label, zorder=2 if color is None else 3)
            ax.scatter(x, 100 * gp["recall"], color=colors[panel], s=14, zorder=3)
            band(ax, x, gp, "recall", color=colors[panel], scale=100, step="post")
            for level in (100 / 3, 200 / 3, 100):
                ax.axhline(level, color="grey", lw=0.6, ls=":", zorder=0)
            axis.apply(ax)
            ax.set_ylim(-5, 105)
            ax.set_title(f"{panel} · {tier_title(tier)} ({int(gp['n_circuit'].iloc[-1])} heads)", fontsize=9)
            ax.xaxis.label.set_size(8)
            ax.tick_params(labelsize=8)
        for ax in row[len(per_tier[tier]):]:
            ax.axis("off")
        row[0].set_ylabel("%")
    axes[0][0].legend(fontsize=7, loc="upper left")
    figure_title(fig, f"How early the final induction circuit (≥ {threshold:g}×) is visible, and what else the "
                      "screen catches")
    return fig
