"""The sink-measures page's figures: how many heads each of the three sink measures flags over training, which heads
and when, and the lowest layer each measure finds (F1's floor under each). One readable panel per model, at most
two per row."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from circuitdev.book.plots.axes import figure_title, placeholder
from circuitdev.book.plots.panel_grid import figure_legend, finish_panel, panel_axes, panel_keys

MEASURE_STYLES = {"second_a": ("#1f77b4", "o", "second-A selectivity ≥ bar (paper)"),
                  "all_query": ("#ff7f0e", "s", "all-query selectivity ≥ bar"),
                  "gu": ("#2ca02c", "^", "Gu et al. mass > ε")}
LINE_STYLES = {"second_a": ("-", 7), "all_query": ("--", 5.5), "gu": (":", 4.5)}  # overlapping lines stay visible


def sink_counts(counts: pd.DataFrame) -> Figure:
    """Heads each measure flags at every revision, one axis per model. `counts`: findings.measure_counts + tier
    (n_second_a, n_all_query, n_gu; a measure a tier lacks is left out)."""
    if counts.empty:
        return placeholder("No developmental table in any tier.", title="Sink heads under three measures")
    fig, cells = panel_axes(counts, height=3.0)
    for ax, tier, panel, g, axis in cells:
        for m, (color, marker, label) in MEASURE_STYLES.items():
            col = f"n_{m}"
            if col in g.columns and g[col].notna().any():
                ls, ms = LINE_STYLES[m]
                ax.plot(axis.x(g["tokens"]), g[col].astype(float), color=color, marker=marker, ms=ms, ls=ls,
                        mfc="none" if m != "gu" else color, label=label)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("sink heads")
        finish_panel(ax, axis, tier, panel)
    figure_legend(fig, [c[0] for c in cells])
    figure_title(fig, "How many heads each measure calls a sink, over training")
    return fig


def sink_timeline(flags: pd.DataFrame, *, max_heads: int = 12) -> Figure:
    """Which heads each measure flags, and when: per record panel one axis, a row per head that some measure flags
    (at most `max_heads`, lowest layers first), a marker per measure at each revision it flags the head.
    `flags`: findings.sink_flags + tier (the published tier, one measure, is left out)."""
    rows = flags[flags["tier"] != "published"] if len(flags) else flags
    measures = [m for m in MEASURE_STYLES if m in rows.columns]
    if len(rows):
        anyflag = np.zeros(len(rows), bool)
        for m in measures:
            anyflag |= rows[m].fillna(False).to_numpy(dtype=bool)
        rows = rows.assign(_any=anyflag)
    if rows.empty or not rows["_any"].any():
        return placeholder("No head is a sink under any measure in the toy or measured tiers (the published tier "
                           "holds one measure only).", title="Which heads, when, under each measure")
    most = rows[rows["_any"]].groupby(["tier", "panel"])["name"].nunique().max()
    fig, cells = panel_axes(rows, height=1.6 + 0.45 * min(int(most), max_heads),  # as tall as its rows need
                            keys=panel_keys(rows[rows["_any"]]))
    for ax, tier, panel, g, axis in cells:
        names = list(g[g["_any"]].sort_values(["layer", "head"])["name"].drop_duplicates())[:max_heads]
        for y, name in enumerate(names):
            gh = g[g["name"] == name]
            for k, m in enumerate(measures):
                color, marker, label = MEASURE_STYLES[m]
                hit = gh[gh[m].fillna(False).to_numpy(dtype=bool)]
                ax.scatter(axis.x(hit["tokens"]), np.full(len(hit), y + (k - 1) * 0.22), color=color,
                           marker=marker, s=14, label=label if y == 0 else None)
        ax.set_yticks(range(len(names)), names, fontsize=8)
        ax.set_ylim(len(names) - 0.4, -0.6)
        finish_panel(ax, axis, tier, panel)
    figure_legend(fig, [c[0] for c in cells])
    figure_title(fig, "Which heads each measure calls a sink, and from when (one row per head)")
    return fig


def sink_floor(lowest: pd.DataFrame, *, floor_layers: tuple[int, ...] = (0, 1)) -> Figure:
    """F1's floor under each measure: the lowest layer holding a head the measure flags, per revision (no marker:
    none flagged), the floor layers shaded. `lowest`: findings.lowest_layers + tier."""
    if lowest.empty:
        return placeholder("No developmental table in any tier.", title="F1's floor under each measure")
    fig, cells = panel_axes(lowest, height=3.0)
    for ax, tier, panel, g, axis in cells:
        ax.axhspan(min(floor_layers) - 0.5, max(floor_layers) + 0.5, color="#d62728", alpha=0.12, lw=0,
                   label=f"floor (layers {', '.join(map(str, floor_layers))})")
        for k, (m, gm) in enumerate(g.groupby("measure", sort=False)):
            color, marker, label = MEASURE_STYLES.get(m, ("#7f7f7f", "o", m))
            gm = gm.sort_values("tokens")
            ax.plot(axis.x(gm["tokens"]), gm["lowest_layer"].astype(float) + (k - 1) * 0.08, color=color,
                    marker=marker, ms=3.5, lw=1, label=label)
        n_layers = int(g["n_layers"].max())
        ax.set_ylim(n_layers - 0.5, -0.5)
        ax.set_yticks(range(n_layers), [str(i) for i in range(n_layers)], fontsize=7 if n_layers > 8 else 8)
        ax.set_ylabel("lowest sink layer")
        finish_panel(ax, axis, tier, panel)
    figure_legend(fig, [c[0] for c in cells])
    figure_title(fig, "F1's floor under each measure: the lowest layer with a sink head, per revision")
    return fig
