"""The sink-measures page's figures: how many heads each of the three sink measures flags over training, which heads
and when, and the lowest layer each measure finds (F1's floor under each). One readable panel per model, at most
two per row."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from circuitdev.analysis.findings import stream_words
from circuitdev.book.plots.axes import figure_title, placeholder, plain_log_ticks
from circuitdev.book.plots.panel_grid import figure_legend, finish_panel, panel_axes, panel_keys

MEASURE_STYLES = {"second_a": ("#1f77b4", "o", "second-A selectivity ≥ bar (paper)"),
                  "all_query": ("#ff7f0e", "s", "all-query selectivity ≥ bar"),
                  "mass": ("#2ca02c", "^", "all-query mass > ε")}
LINE_STYLES = {"second_a": ("-", 7), "all_query": ("--", 5.5), "mass": (":", 4.5)}  # overlapping lines stay visible


def sink_counts(counts: pd.DataFrame) -> Figure:
    """Heads each measure flags at every revision, one axis per model. `counts`: findings.measure_counts + tier
    (n_second_a, n_all_query, n_mass; a measure a tier lacks is left out)."""
    if counts.empty:
        return placeholder("No developmental table in any tier.", title="Sink heads under three measures")
    fig, cells = panel_axes(counts, height=3.0)
    for ax, tier, panel, g, axis in cells:
        for m, (color, marker, label) in MEASURE_STYLES.items():
            col = f"n_{m}"
            if col in g.columns and g[col].notna().any():
                ls, ms = LINE_STYLES[m]
                ax.plot(axis.x(g["tokens"]), g[col].astype(float), color=color, marker=marker, ms=ms, ls=ls,
                        mfc="none" if m != "mass" else color, label=label)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("sink heads")
        finish_panel(ax, axis, tier, panel)
    figure_legend(fig, [c[0] for c in cells])
    figure_title(fig, "How many heads each measure calls a sink, over training")
    return fig


def sink_rates(rates: pd.DataFrame) -> Figure:
    """Gu et al.'s sink rate beside the all-query mass rate, one axis per model: `rates` is findings.sink_rates + tier
    (+ tokens); a rate a tier lacks (the published tier: both) is left out."""
    rows = rates[rates[["gu_sink_rate", "mass_sink_rate"]].notna().any(axis=1)] if len(rates) else rates
    if rows.empty:
        return placeholder("No record in this build holds the all-query measures (the authors' files do not).",
                           title="Two sink rates over training")
    fig, cells = panel_axes(rows, height=3.0)
    for ax, tier, panel, g, axis in cells:
        for col, color, marker, label in (("gu_sink_rate", "#d62728", "D", "Gu et al.'s sink rate (exact)"),
                                          ("mass_sink_rate", MEASURE_STYLES["mass"][0], "^",
                                           "share of heads over the all-query mass rule")):
            if g[col].notna().any():
                ax.plot(axis.x(g["tokens"]), g[col].astype(float), color=color, marker=marker, ms=5, label=label)
        ax.set_ylim(-0.03, 1.03)
        ax.set_ylabel("share of heads")
        finish_panel(ax, axis, tier, panel)
    figure_legend(fig, [c[0] for c in cells])
    figure_title(fig, "Gu et al.'s sink rate and the all-query mass rate, over training")
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


def first_position_norms(norms: pd.DataFrame, flags: pd.DataFrame | None = None, *,
                         measure: str = "second_a") -> Figure:
    """The position-0 residual norm against the median position's, per stream (one line per depth: the embeddings,
    then after each layer) over training, one axis per record panel (log y; the dotted line is 1×, no difference).
    A stream a sink head reads (its layer's input) is drawn thick from the first revision a head of that layer is a
    sink under `measure`. `norms`: findings.position_norms + tier; `flags`: findings.sink_flags + tier."""
    if norms.empty:
        return placeholder("No record carries first-position norms (records of format 3 or later do).",
                           title="First-position norms")
    depths = sorted(norms["depth"].unique())
    palette = plt.get_cmap("viridis")
    colors = {d: palette(i / max(len(depths) - 1, 1)) for i, d in enumerate(depths)}
    fig, cells = panel_axes(norms, height=3.0)
    for ax, tier, panel, g, axis in cells:
        f = flags[(flags["tier"] == tier) & (flags["panel"] == panel)] if flags is not None and len(flags) else None
        for (depth, stream), gs in g.groupby(["depth", "stream"], sort=True):
            x = axis.x(gs["tokens"])
            ax.plot(x, gs["norm_ratio"], color=colors[depth], lw=1.3, marker="o", ms=2.5,
                    label=stream_words(stream))
            sinks = f[(f["layer"] == depth) & f[measure].fillna(False).astype(bool)] if f is not None else None
            if sinks is not None and len(sinks):  # a sink layer's input, thick from its first sink on
                first = sinks["tokens_b"].min()
                later = gs[gs["tokens_b"] >= first]
                ax.plot(axis.x(later["tokens"]), later["norm_ratio"], color=colors[depth], lw=4, alpha=0.45,
                        solid_capstyle="round", label=f"read by sink heads of layer {depth}")
        ax.axhline(1.0, color="#555", lw=0.8, ls=":")
        ax.set_yscale("log")
        # an untrained model whose position-0 token embeds as zero (a padding row) reads ~0: keep the axis on the rest
        ax.set_ylim(max(0.2, 0.8 * g.loc[g["norm_ratio"] > 0.05, "norm_ratio"].min()), 1.3 * g["norm_ratio"].max())
        plain_log_ticks(ax)
        ax.set_ylabel("‖h₀‖ / median ‖hₜ‖")
        finish_panel(ax, axis, tier, panel)
    figure_legend(fig, [c[0] for c in cells], ncol=4)
    figure_title(fig, "The residual stream's norm at position 0 against the median position, per depth")
    return fig
