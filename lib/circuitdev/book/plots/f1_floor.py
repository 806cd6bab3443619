"""F1's figures: BOS-class heads per layer over training, and how close the floor layers come to the bar."""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from circuitdev.book.display import fmt_tokens
from circuitdev.book.plots.axes import figure_title, heatmap, placeholder, plain_log_ticks, tier_lines, tier_title
from circuitdev.schema import BOS_THRESHOLD


def bos_layer_heatmaps(layers: pd.DataFrame, *, threshold: float = BOS_THRESHOLD,
                       floor_layers: Sequence[int] = (0, 1),
                       heads_per_layer: dict[str, int] | None = None, col_wrap: int = 2) -> Figure:
    """F1: BOS-class heads (first-token ≥ threshold) per layer over revisions, one heatmap per (tier, panel); the
    floor layers are outlined, two a row (the page's width). `layers`: findings.layer_counts + tier."""
    if layers.empty:
        return placeholder("No developmental table from any tier.", title="BOS heads per layer")
    keys = list(layers[["tier", "panel"]].drop_duplicates().itertuples(index=False, name=None))
    ncols = min(col_wrap, len(keys))
    nrows = int(np.ceil(len(keys) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 4.2 * nrows), squeeze=False, layout="constrained")
    for ax, (tier, panel) in zip(axes.flat, keys):
        g = layers[(layers["tier"] == tier) & (layers["panel"] == panel)]
        revs = g.drop_duplicates("revision").sort_values("revision_index")
        grid = g.pivot(index="layer", columns="revision_index", values="n").reindex(columns=revs["revision_index"])
        vmax = (heads_per_layer or {}).get(panel) or max(1, int(g["n"].max()))
        image = heatmap(ax, grid.to_numpy(dtype=float), vmax=vmax, cmap="mako_r",
                        xticklabels=[fmt_tokens(t * 1e9) for t in revs["tokens_b"]])
        fig.colorbar(image, ax=ax, shrink=0.8, label="BOS-class heads", ticks=MaxNLocator(integer=True))
        floor = [layer for layer in floor_layers if layer < len(grid)]
        if floor:
            ax.add_patch(Rectangle((-0.5, min(floor) - 0.5), len(revs), max(floor) - min(floor) + 1, fill=False,
                                   edgecolor="#d62728", lw=1.8))
        ax.set_xlabel("training tokens at the revision")
        ax.set_ylabel("layer")
        ax.tick_params(axis="y", labelsize=7, rotation=0)
        ax.set_title(f"{panel} · {tier}", fontsize=10)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    figure_title(fig, f"Heads with first-token selectivity ≥ {threshold:g}× per layer (red outline: layers "
                      f"{', '.join(map(str, floor_layers))})")
    return fig


def floor_margin(margin: pd.DataFrame, *, threshold: float = BOS_THRESHOLD,
                 floor_layers: Sequence[int] = (0, 1)) -> Figure:
    """F1, how close the floor comes to the bar: the largest first-token selectivity in the floor layers at every
    revision, one line per model, one column per tier, with its 95% re-measurement interval as error bars where the
    tier has one (a hollow marker where that interval had to be widened to include the point). Each model's
    strongest point is labelled with its head and its share of the bar. `margin`: findings.floor_margin + tier."""
    margin = margin[margin["value"].notna()] if len(margin) else margin
    if margin.empty:
        return placeholder("No floor-layer heads in any tier.", title="The floor's largest sink score")
    fig, colors, per_tier = tier_lines(margin, height=3.8, width=5.4, sharey=False)
    for ax, tier, g, axis in per_tier:
        for panel, gp in g.groupby("panel", sort=False):
            x, v = axis.x(gp["tokens"]), gp["value"].clip(lower=1e-2)
            ax.plot(x, v, color=colors[panel], marker="o", ms=3, lw=1.4, label=panel)
            if "value_lo" in gp.columns and gp["value_lo"].notna().any():
                err = np.vstack([(v - gp["value_lo"].clip(lower=1e-2)).clip(lower=0), (gp["value_hi"] - v).clip(lower=0)])
                ax.errorbar(x, v, yerr=err, fmt="none", ecolor=colors[panel], elinewidth=1, capsize=2, alpha=0.8)
            if "value_widened" in gp.columns and gp["value_widened"].fillna(False).astype(bool).any():
                w = gp["value_widened"].fillna(False).astype(bool).to_numpy()
                ax.scatter(np.asarray(x)[w], np.asarray(v)[w], s=40, facecolors="white", edgecolors=colors[panel],
                           zorder=4, lw=1.2)
            top = int(np.argmax(gp["value"].to_numpy()))
            if gp["value"].iloc[top] >= 0.25 * threshold:  # say what the floor hangs on where it comes near
                ax.annotate(f"{gp['name'].iloc[top]} {gp['value'].iloc[top]:.1f}× "
                            f"({gp['value'].iloc[top] / threshold:.0%} of bar)", (np.asarray(x)[top], v.iloc[top]),
                            xytext=(-6, 7), textcoords="offset points", ha="right", va="bottom", fontsize=7,
                            color=colors[panel], zorder=5,
                            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85})
        ax.axhline(threshold, color="#d62728", lw=1, ls=":")
        ax.annotate(f"{threshold:g}× bar", (0.01, threshold), xycoords=("axes fraction", "data"), fontsize=7,
                    color="#d62728", va="bottom", ha="left")
        ax.set_yscale("log")
        ax.set_ylim(top=max(ax.get_ylim()[1], 2.2 * threshold))  # room above the bar for the labels
        plain_log_ticks(ax)
        axis.apply(ax)
        ax.set_ylabel(f"top first-token sel., layers {', '.join(map(str, floor_layers))} (×)")
        ax.set_title(tier_title(tier), fontsize=10)
        ax.legend(fontsize=7, loc="best")
    figure_title(fig, "How close the floor layers come to the sink bar (error bars: re-measurement intervals)")
    return fig
