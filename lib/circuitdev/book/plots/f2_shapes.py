"""F2's figure: the whole-model BOS fraction over training."""

from __future__ import annotations

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from circuitdev.book.plots.axes import band, figure_title, placeholder, tier_lines, tier_title
from circuitdev.schema import BOS_THRESHOLD


def bos_fraction_lines(frac: pd.DataFrame, *, threshold: float = BOS_THRESHOLD) -> Figure:
    """F2: whole-model BOS fraction (%) against training tokens, one line per model, one column per tier.
    `frac`: findings.bos_fraction + tier."""
    if frac.empty:
        return placeholder("No developmental table from any tier.", title="BOS fraction over training")
    fig, colors, per_tier = tier_lines(frac, height=3.8, width=5.0, pct=lambda d: 100 * d["bos_fraction"])
    for ax, tier, g, axis in per_tier:
        sns.lineplot(g.assign(x=axis.x(g["tokens"])), x="x", y="pct", hue="panel", palette=colors, marker="o", ax=ax)
        for p, gp in g.groupby("panel", sort=False):  # 95% bootstrap bands where the tier has them (the caption says)
            band(ax, axis.x(gp["tokens"]), gp, "bos_fraction", color=colors[p], scale=100)
        axis.apply(ax)
        ax.set_ylabel(f"heads with first-token ≥ {threshold:g}× (%)")
        ax.set_ylim(-2, 100)
        ax.set_title(tier_title(tier), fontsize=10)
        ax.legend(title="model", fontsize=8, title_fontsize=8, loc="upper left")
    figure_title(fig, "Attention-sink (BOS) heads as a share of all heads over training")
    return fig
