"""F6's figure: the null-selectivity floor against the real signal over training."""

from __future__ import annotations

from typing import Sequence

import pandas as pd
from matplotlib.figure import Figure

from circuitdev.book.plots.axes import TokenAxis, figure_title, placeholder, plain_log_ticks, tier_title, token_counts
from circuitdev.book.plots.panel_grid import panel_grid, panel_keys
from circuitdev.schema import BOS_THRESHOLD, INDUCTION_THRESHOLD


def noise_floor(nulls: pd.DataFrame, *, thresholds: Sequence[float] = (BOS_THRESHOLD, INDUCTION_THRESHOLD)) -> Figure:
    """F6: null-selectivity p99 and max against the largest real induction selectivity, over training; one column
    per (tier, panel), two per row. `nulls`: tier, panel, tokens_b, null_p99, null_max, real_max (tier "paper" =
    claimed)."""
    if nulls.empty:
        return placeholder("No null-selectivity draws in any tier: probe with n_nulls > 0.",
                           title="Selectivity noise floor")
    keys = panel_keys(nulls)
    fig, blocks = panel_grid(len(keys), height=3.4)  # two panels per row: legible at the page's width
    styles = {"real_max": ("real max (induction)", "-", "#1f77b4"), "null_max": ("null max", "--", "#ff7f0e"),
              "null_p99": ("null p99", "-", "#2ca02c")}
    for (ax,), (tier, panel) in zip(blocks, keys):
        g = nulls[(nulls["tier"] == tier) & (nulls["panel"] == panel)].sort_values("tokens_b")
        axis = TokenAxis.of(token_counts(g))
        for col, (label, ls, color) in styles.items():
            ax.plot(axis.x(token_counts(g)), g[col], ls=ls, color=color, marker="o", ms=3, label=label)
        for t in thresholds:
            ax.axhline(t, color="grey", lw=0.7, ls=":")
            ax.annotate(f"{t:g}×", (1, t), xycoords=("axes fraction", "data"), fontsize=7, color="grey",
                        ha="right", va="bottom")
        ax.set_yscale("log")
        plain_log_ticks(ax)
        axis.apply(ax)
        ax.set_ylabel("selectivity (×, log)")
        ax.set_title(f"{panel} · {tier_title(tier)}", fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
    figure_title(fig, "The selectivity noise floor (null p99) against the real signal over training")
    return fig
