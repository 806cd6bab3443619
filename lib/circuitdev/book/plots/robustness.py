"""How robust (issue 21): a claim's value across the grid of bars, one readable panel per model, the paper's bar
marked (`robustness_curves`, the "How robust" block of every findings page), and all claims x bars at a glance
(`robustness_map`, the robustness page). Both take `findings.robustness_table` (+ tier)."""

from __future__ import annotations

import math
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import LogLocator, MaxNLocator

from circuitdev.analysis.findings import ALL, ROBUSTNESS_CLAIMS
from circuitdev.book.plots.axes import figure_title, placeholder, plain_log_ticks, tier_title

_VARIED_WORDS = {"first_token": "first-token bar", "induction": "induction bar", "previous_token": "previous-token bar",
                 "self": "self bar"}
_LINE_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]
_RULE_DASHES = ["", (4, 2), (1, 1.5), (5, 2, 1, 2)]
_CENSOR_MARKERS = {"lower": "^", "upper": "v", "none": "D"}


def _panels_of(table: pd.DataFrame) -> list[tuple[str, str]]:
    keys = table[["tier", "panel"]].drop_duplicates() if "tier" in table.columns else \
        table[["panel"]].drop_duplicates().assign(tier="")
    return [(t, p) for t, p in zip(keys["tier"], keys["panel"])]


def robustness_curves(table: pd.DataFrame, claim: str, *, rules: Sequence[str] | None = None,
                      ncols: int = 3) -> Figure:
    """One claim across the grid of bars: one panel per (tier, model), the claim's value against the bar (log x),
    one colour per moving bar (or item), one dash per rule (solid: the paper's); filled markers where the paper's
    statement holds, hollow where it fails, triangles where the value is a bound (▲ at least, ▼ at most); the
    paper's bar a dotted vertical line. `table`: findings.robustness_table(claims=[claim]) + tier; `rules`: the rule
    variants to draw (default: the paper's and the first alternative)."""
    g = table[table["claim"] == claim] if len(table) else table
    if g.empty:
        return placeholder(f"No tier has data that {claim} applies to.", title=f"How robust: {claim}")
    if rules is None:
        order = list(pd.unique(g.loc[g["paper_rule"], "rule"])) + list(pd.unique(g.loc[~g["paper_rule"], "rule"]))
        rules = order[:2]
    g = g[g["rule"].isin(rules)]
    keys = _panels_of(g)
    ncols = min(ncols, len(keys))
    nrows = math.ceil(len(keys) / ncols)
    # drawn at the width the page shows it (display.MAX_FIGURE_PX): ~3.3 inches a panel
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.3 * ncols, 3.0 * nrows + 1.1), squeeze=False,
                             layout="constrained")
    known = ROBUSTNESS_CLAIMS.get(claim)  # each claim declares how its value is drawn (findings.claim.RobustClaim)
    label, scale, ref = known.axis if known else ("value", "linear", None)
    lines = list(dict.fromkeys(zip(g["item"], g["varied"])))
    many_items = g["item"].nunique() > 1
    colors = {k: _LINE_COLORS[i % len(_LINE_COLORS)] for i, k in enumerate(lines)}
    dashes = {r: _RULE_DASHES[i % len(_RULE_DASHES)] for i, r in enumerate(rules)}
    capped = False
    for ax, (tier, panel) in zip(axes.flat, keys):
        here = g[(g["panel"] == panel) & ((g["tier"] == tier) if "tier" in g.columns else True)]
        kind = known.kind if known else "value"
        counts = kind == "count" or (panel == ALL and known is not None and known.all_label is not None)
        share = kind == "share" and panel != ALL
        if share:
            capped |= bool((here["value"] > 1).any())
            here = here.assign(value=here["value"].clip(upper=1.0))
        ax.set_title(f"{panel}\n{tier_title(tier)}" if tier else panel, fontsize=8.5)
        if not here["value"].notna().any():  # nothing to draw: say so instead of an empty frame
            ax.text(0.5, 0.5, "untestable here:\nno value at any bar", ha="center", va="center",
                    transform=ax.transAxes, fontsize=9, color="#555")
            ax.set_xticks([])
            ax.set_yticks([])
            continue
        for (item, varied), gl in here.groupby(["item", "varied"], sort=False):
            for rule, gr in gl.groupby("rule", sort=False):
                gr = gr.sort_values("threshold")
                c = colors[(item, varied)]
                ax.plot(gr["threshold"], gr["value"], color=c, dashes=dashes[rule], lw=1.4, zorder=2)
                for kind, gk in gr.groupby("bound", sort=False):
                    m = _CENSOR_MARKERS.get(kind, "o")
                    ax.scatter(gk["threshold"], gk["value"], marker=m, s=26 if m == "o" else 34, zorder=3,
                               facecolors=np.where(gk["holds"], c, "white"), edgecolors=c, linewidths=1.1)
            paper = gl["paper_threshold"].iloc[0]
            ax.axvline(paper, color=colors[(item, varied)], lw=1, ls=":", zorder=1)
        if ref is not None and panel != ALL:  # the statement's own bar is a per-model one
            ax.axhline(ref, color="#555", lw=0.8, zorder=0)
        ax.set_xscale("log")
        plain_log_ticks(ax, "x")
        if scale == "log" and (here["value"] > 0).any():
            ax.set_yscale("log")
            v = here["value"][here["value"] > 0]
            if v.max() / v.min() < 30:  # less than 1.5 decades: label 1, 2, 5, 10 too
                ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            plain_log_ticks(ax)
        elif scale == "symlog":
            ax.set_yscale("symlog", linthresh=1)
            plain_log_ticks(ax)
        ax.margins(y=0.12)  # markers at the extremes stay inside the frame
        vals = here["value"].dropna()
        if counts:  # heads or models: whole numbers from 0 (a log axis only for large counts)
            top = float(vals.max()) if len(vals) else 0.0
            if top <= 20:
                ax.set_yscale("linear")
            ax.set_ylim(-0.05 * max(top, 1) - 0.3, max(top * 1.12 + 0.5, 1.5))
            if top <= 20:
                ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        elif share:
            ax.set_ylim(-0.05, 1.08)
        elif scale != "log" and len(vals) and vals.max() == vals.min():  # a flat line: room around it, whole ticks
            ax.set_yscale("linear")
            ax.set_ylim(vals.min() - 1, vals.max() + 1)
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("bar (threshold, ×, log scale)", fontsize=8)
        ax.set_ylabel((known and known.all_label or label) if panel == ALL else label, fontsize=7.5)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    handles = [Line2D([], [], color=colors[k], lw=1.6, label=(f"{k[0]} ({_VARIED_WORDS.get(k[1], k[1])})"
                                                               if many_items else _VARIED_WORDS.get(k[1], k[1])))
               for k in lines]
    handles += [Line2D([], [], color="#444", dashes=dashes[r], lw=1.4, label=r + (" (paper)" if i == 0 else ""))
                for i, r in enumerate(rules)]
    handles += [Line2D([], [], ls="", marker="o", color="#444", label="holds"),
                Line2D([], [], ls="", marker="o", markerfacecolor="white", color="#444", label="fails"),
                Line2D([], [], ls="", marker="^", color="#444", label="bound: at least"),
                Line2D([], [], ls="", marker="v", color="#444", label="bound: at most"),
                Line2D([], [], color="#444", ls=":", lw=1, label="paper's bar")]
    if capped:
        handles.append(Line2D([], [], ls="", label="shares above 1 drawn at 1 (the trajectory falls back after "
                                                   "its jump)"))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(5, len(handles)), fontsize=7.5, frameon=False)
    figure_title(fig, f"How robust: {claim} across bars (filled: the paper's statement holds)")
    return fig


# the map's cell states, colour-blind safe (Okabe-Ito): blue holds, vermillion fails, their light shades where the
# value is only a bound (an event at the first probed revision or never reached), grey where the claim has no value
# to test at that bar (F2 with no rise to share, F5 with no lead measured)
STATES = ["holds", "holds (value a bound)", "fails (value a bound)", "fails", "untestable"]
STATE_COLORS = ["#0072B2", "#9ecae1", "#f5c28a", "#D55E00", "#d9d9d9"]


def map_states(g: pd.DataFrame) -> np.ndarray:
    """Each row's index into STATES: untestable when the value is missing, else holds / fails, a bound or not."""
    holds, bound = g["holds"].astype(bool).to_numpy(), g["censored"].astype(bool).to_numpy()
    state = np.where(holds, np.where(bound, 1, 0), np.where(bound, 2, 3))
    return np.where(pd.to_numeric(g["value"], errors="coerce").notna().to_numpy(), state, 4)


def verdict_states(g: pd.DataFrame, verdicts: pd.DataFrame, claims: tuple[str, ...]) -> np.ndarray:
    """`map_states`, except that a cell of a claim in `claims` whose sign holds takes its row's verdict: a lead of
    the right sign that its permutation test does not (or cannot) show above chance is no support. Supported or
    fragile: holds; not supported: fails; untestable: untestable (bound shades kept)."""
    state = map_states(g)
    verdict = {(r["claim"], r["panel"], str(r["item"])): r["verdict"] for r in verdicts.to_dict("records")}
    mine = g["claim"].isin(claims).to_numpy()
    found = np.array([verdict.get((c, p, str(i)), "") for c, p, i in zip(g["claim"], g["panel"], g["item"])])
    held = mine & np.isin(state, (0, 1))
    state = np.where(held & (found == "not supported"), np.where(state == 0, 3, 2), state)  # holds -> fails
    return np.where(held & (found == "untestable"), 4, state)


def robustness_map(table: pd.DataFrame, *, tier: str | None = None, verdicts: pd.DataFrame | None = None,
                   by_verdict: tuple[str, ...] = ("F5.lead",)) -> Figure:
    """All claims x bars at a glance under the paper's rule: one block per claim, in it one row per (model, item,
    moving bar), one column per bar; the cell's state (STATES: holds, fails, either with the value a bound, or
    untestable) in its own colour (STATE_COLORS); the paper's bar outlined. `table`: findings.robustness_table
    (+ tier; `tier` picks one). `verdicts`: findings.claim_verdicts (+ tier): the claims of `by_verdict` (those
    with a null test: F5's lead) are coloured by their verdict, not by their sign (`verdict_states`)."""
    g = table[table["paper_rule"].astype(bool)] if len(table) else table
    if tier is not None and len(g):
        g = g[g["tier"] == tier]
    if g.empty:
        return placeholder("No claim applies to this tier's data.", title="Robustness map")
    bars = sorted(pd.unique(g["threshold"]))
    if verdicts is not None and tier is not None and "tier" in verdicts.columns:
        verdicts = verdicts[verdicts["tier"] == tier]
    g = g.assign(row=g["panel"] + " · " + g["item"].astype(str) + " · "
                 + g["varied"].map(lambda v: _VARIED_WORDS.get(v, v)),
                 state=verdict_states(g, verdicts, by_verdict) if verdicts is not None else map_states(g))
    claims = list(pd.unique(g["claim"]))
    sizes = [g.loc[g["claim"] == c, "row"].nunique() for c in claims]
    fig, axes = plt.subplots(len(claims), 1, figsize=(10, 0.24 * sum(sizes) + 0.55 * len(claims) + 1.3),
                             squeeze=False, layout="constrained", gridspec_kw={"height_ratios": sizes})
    cmap = ListedColormap(STATE_COLORS)
    for ax, claim in zip(axes[:, 0], claims):
        gc = g[g["claim"] == claim]
        rows = list(pd.unique(gc["row"]))
        grid = np.full((len(rows), len(bars)), np.nan)
        grid[[rows.index(r) for r in gc["row"]], [bars.index(t) for t in gc["threshold"]]] = gc["state"]
        ax.imshow(grid, aspect="auto", cmap=cmap, vmin=-0.5, vmax=len(STATES) - 0.5, interpolation="nearest")
        for r, paper in gc.groupby("row", sort=False)["paper_threshold"].first().items():
            if paper in bars:
                ax.add_patch(Rectangle((bars.index(paper) - 0.5, rows.index(r) - 0.5), 1, 1, fill=False, lw=1.6,
                                       edgecolor="black"))
        ax.set_yticks(range(len(rows)), rows, fontsize=8)
        ax.set_xticks(range(len(bars)), [f"{b:g}" for b in bars], fontsize=7.5, rotation=90)
        # the bars' labels above the first block and below the last (between blocks they crowded the claim titles)
        ax.tick_params(axis="x", labelbottom=claim == claims[-1], labeltop=claim == claims[0] and len(claims) > 1)
        ax.set_xticks(np.arange(len(bars) + 1) - 0.5, minor=True)
        ax.set_yticks(np.arange(len(rows) + 1) - 0.5, minor=True)
        ax.grid(which="minor", color="white", lw=0.6)
        ax.grid(which="major", visible=False)
        ax.tick_params(which="minor", length=0)
        ax.set_title(claim, fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("bar (selectivity threshold, ×)")
    fig.legend(handles=[Patch(color=c, label=s) for s, c in zip(STATES, STATE_COLORS)]
               + [Patch(fill=False, edgecolor="black", label="paper's bar")],
               loc="outside lower center", ncol=6, fontsize=8, frameon=False)
    title = f"Where each claim holds · {tier_title(tier)}" if tier else "Where each claim holds"
    figure_title(fig, title + " · claims × bars, the paper's rule")
    return fig
