"""F2's figure: the whole-model BOS fraction over training."""

from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from circuitdev.book.plots.axes import band, figure_title, placeholder, tier_lines, tier_title
from circuitdev.schema import BOS_THRESHOLD


def bos_fraction_lines(frac: pd.DataFrame, *, threshold: float = BOS_THRESHOLD) -> Figure:
    """F2: whole-model BOS fraction (%) against training tokens, one line per model, one column per tier. Each tier
    has its own fraction axis, from 0 to a little above its highest value or band (the toy's few percent are not
    flattened on 0-100%); where the tier's models have the same number of heads, a right-hand axis counts them.
    `frac`: findings.bos_fraction + tier."""
    if frac.empty:
        return placeholder("No developmental table from any tier.", title="BOS fraction over training")
    fig, colors, per_tier = tier_lines(frac, height=3.8, width=5.0, sharey=False,
                                       pct=lambda d: 100 * d["bos_fraction"])
    for ax, tier, g, axis in per_tier:
        sns.lineplot(g.assign(x=axis.x(g["tokens"])), x="x", y="pct", hue="panel", palette=colors, marker="o", ax=ax)
        for p, gp in g.groupby("panel", sort=False):  # 95% bootstrap bands where the tier has them (the caption says)
            band(ax, axis.x(gp["tokens"]), gp, "bos_fraction", color=colors[p], scale=100)
        axis.apply(ax)
        ax.set_ylabel(f"heads with first-token ≥ {threshold:g}× (%)")
        highest = np.nanmax([g["pct"].max(), 100 * g.get("bos_fraction_hi", pd.Series(dtype=float)).max()])
        top = min(100.0, max(5.0, 1.15 * float(np.nan_to_num(highest))))
        ax.set_ylim(-0.02 * top, top)
        heads = pd.unique(g["n_heads"]) if "n_heads" in g.columns else []
        if len(heads) == 1 and top < 100:  # a small model: count its heads on the right
            n = float(heads[0])
            right = ax.secondary_yaxis("right", functions=(lambda y, n=n: y * n / 100, lambda k, n=n: 100 * k / n))
            right.set_ylabel(f"heads (of {n:g})", fontsize=8)
            right.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(tier_title(tier), fontsize=10)
        ax.legend(title="model", fontsize=8, title_fontsize=8, loc="upper left")
    figure_title(fig, "Attention-sink (BOS) heads as a share of all heads over training (each tier on its own "
                      "scale)")
    return fig
