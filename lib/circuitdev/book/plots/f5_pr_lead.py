"""F5's figures: PR and selectivity of each circuit head on one time axis; the lead against its permutation null; the
share of all heads a rule calls elevated; a head's PR against its PR on random tokens; the spectral top-K by class.
One readable panel per model, at most two per row."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator, MaxNLocator

from circuitdev.book.plots.axes import figure_title, placeholder, plain_log_ticks, tier_title, token_tick
from circuitdev.book.plots.panel_grid import (figure_legend, finish_panel, panel_axes, panel_grid, panel_keys,
                                              panel_rows)
from circuitdev.schema import INDUCTION_THRESHOLD

RULE_STYLES = {"fraction-of-peak": ("#1f77b4", "-"), "peak-to-date": ("#d62728", "--"),
               "ratio-to-start": ("#2ca02c", "-."), "above-level": ("#9467bd", ":")}
CLASS_COLORS = {"induction": "#d62728", "previous-token": "#1f77b4", "duplicate-token": "#8c564b",
                "first-token": "#2ca02c", "self": "#ff7f0e", "local": "#9467bd", "unclassified": "#c7c7c7"}


def pr_selectivity(traj: pd.DataFrame, *, threshold: float = INDUCTION_THRESHOLD, class_label: str = "induction",
                   max_panels: int = 6) -> Figure:
    """F5: per circuit head, PR − 1 (upper axis) and selectivity (lower axis) on one token axis, one block per model
    (two per row); the dashed vertical line marks the head's formation (first revision ≥ threshold).
    `traj`: findings.head_trajectories + tier."""
    traj = traj[traj["pr"].notna()] if len(traj) else traj
    if traj.empty:
        return placeholder("No PR trajectory for any circuit head (the tier has no PR, or no circuit).",
                           title="PR and selectivity per circuit head")
    keys = panel_keys(traj)[:max_panels]
    one = len(keys) == 1  # a model page's one model: the text column's width, not half of it
    fig, blocks = panel_grid(len(keys), width=9.0 if one else 5.2, height=3.2 if one else 2.7, rows_per=2)
    for (top, bottom), (tier, panel) in zip(blocks, keys):
        g, axis = panel_rows(traj, tier, panel)
        g = g.assign(x=axis.x(g["tokens"]))
        heads = list(pd.unique(g["name"]))
        colors = dict(zip(heads, sns.color_palette("tab10", len(heads))))
        for name, gh in g.groupby("name", sort=False):
            top.plot(gh["x"], gh["pr_signal"], marker="o", ms=3, color=colors[name], label=name)
            bottom.plot(gh["x"], gh["selectivity"].clip(lower=1e-2), marker="o", ms=3, color=colors[name])
            formed = gh[gh["formed"]]
            if len(formed):
                for ax in (top, bottom):
                    ax.axvline(formed["x"].iloc[0], color=colors[name], ls="--", lw=0.9, alpha=0.8)
        for ax in (top, bottom):
            ax.set_yscale("log")
            lo, hi = ax.get_ylim()
            if hi / lo < 300:  # under ~2.5 decades: label 1-2-5 within each decade, else a decade has one label
                ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            plain_log_ticks(ax)
            axis.apply(ax)
        top.set_xlabel("")
        bottom.axhline(threshold, color="#d62728", lw=1, ls=":")
        top.set_title(f"{panel} · {tier_title(tier)}", fontsize=10)
        top.set_ylabel("PR − 1 (log)")
        bottom.set_ylabel(f"{class_label} sel. (×, log)")
        top.legend(fontsize=7, loc="best", title="head", title_fontsize=7, ncol=2 if len(heads) > 4 else 1)
    figure_title(fig, f"PR − 1 (upper) and {class_label} selectivity (lower) of each circuit head; dashed: formation "
                      f"(dotted: the {threshold:g}× bar)")
    return fig


def lead_vs_null(nulls: pd.DataFrame, *, head_class: str = "induction") -> Figure:
    """F5's control: per model (rows; one block per tier, whose checkpoint counts differ) and elevation rule
    (columns), the circuit's median lead (black; a triangle when every lead is a bound: ▶ at least, ◀ at most), the
    permutation null's mean (square) and 95% range (grey bar), the non-circuit heads' median lead against the same
    formation times (diamond), and the one-sided p-value. `nulls`: findings.lead_null + tier."""
    rows = nulls[nulls["head_class"] == head_class] if len(nulls) else nulls
    if rows.empty:
        return placeholder(f"No {head_class} circuit with a PR trajectory in any tier: no lead to test.",
                           title="The circuit's lead against a permutation null")
    rules, tiers = list(pd.unique(rows["rule"])), list(pd.unique(rows["tier"]))
    sizes = [rows[rows["tier"] == t]["panel"].nunique() for t in tiers]
    fig, axes = plt.subplots(len(tiers), len(rules), figsize=(5.0 * len(rules), 0.62 * sum(sizes) + 1.2 * len(tiers)
                                                               + 0.6), squeeze=False, layout="constrained",
                             gridspec_kw={"height_ratios": [s + 0.8 for s in sizes]})
    for i, tier in enumerate(tiers):
        panels = list(pd.unique(rows.loc[rows["tier"] == tier, "panel"]))
        for ax, rule in zip(axes[i], rules):
            g = rows[(rows["rule"] == rule) & (rows["tier"] == tier)]
            for y, panel in enumerate(panels):
                r = g[g["panel"] == panel]
                if r.empty:
                    continue
                r = r.iloc[0]
                ax.plot([r["null_lo"], r["null_hi"]], [y, y], color="#9e9e9e", lw=6, alpha=0.6,
                        solid_capstyle="butt", label="null: 95% range")
                ax.plot(r["null_mean"], y, "s", mfc="white", mec="#555555", ms=7, label="null: mean")
                ax.plot(r["other_median_lead"], y + 0.22, "D", color="#ff7f0e", ms=5,
                        label="non-circuit heads: median")
                bound = r["defined"] > 0 and r.get("lower", 0) == r["defined"]
                upper = r["defined"] > 0 and r.get("upper", 0) == r["defined"]
                ax.plot(r["median_lead"], y, ">" if bound else "<" if upper else "o", color="black", ms=8,
                        label="circuit: median (▶ a lower bound)")
                p = f"p = {r['p_value']:.2g}" if pd.notna(r["p_value"]) else "p n/a"
                ax.annotate(p, (1.0, y), xycoords=("axes fraction", "data"), xytext=(4, 0),
                            textcoords="offset points", va="center", fontsize=8)
            ax.axvline(0, color="grey", lw=0.8, ls=":")
            ax.set_yticks(range(len(panels)), panels, fontsize=8)
            ax.set_ylim(len(panels) - 0.4, -0.6)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            level = g["level"].iloc[0] if len(g) else float("nan")
            ax.set_title(f"{tier_title(tier)} · elevation: {rule} at {level:g}", fontsize=9)
            if i == len(tiers) - 1:
                ax.set_xlabel("lead in checkpoints (> 0: PR elevated first)")
    figure_legend(fig, axes.flat)
    figure_title(fig, f"Does the {head_class} circuit's PR lead exceed that of random heads? (one-sided p at right)")
    return fig


def base_rate_lines(base: pd.DataFrame) -> Figure:
    """The share of ALL heads each elevation rule calls elevated at each revision, one axis per model.
    `base`: findings.elevation_base_rate (one or more rules) + tier."""
    if base.empty:
        return placeholder("No PR trajectory in any tier: no base rate.", title="How many heads are 'elevated'")
    fig, cells = panel_axes(base, height=2.9)
    for ax, tier, panel, g, axis in cells:
        for (rule, level), gr in g.groupby(["rule", "level"], sort=False):
            color, ls = RULE_STYLES.get(rule, ("#7f7f7f", "-"))
            ax.plot(axis.x(gr["tokens"]), 100 * gr["share_elevated"], ls=ls, color=color, marker="o", ms=3,
                    label=f"{rule} {level:g}")
        ax.set_ylim(-3, 103)
        ax.set_ylabel("heads elevated (%)")
        finish_panel(ax, axis, tier, panel)
        ax.legend(fontsize=7, loc="best")
    figure_title(fig, "The base rate: the share of all heads each rule calls elevated, per revision")
    return fig


def pr_null_calibration(calibrated: pd.DataFrame, heads: pd.DataFrame | None = None, *,
                        max_heads: int = 4) -> Figure:
    """A head's PR against its PR on random tokens, per revision: for the chosen heads of each panel (`heads`:
    panel, layer, head; default the first `max_heads` of each panel) the PR (line) over the range of its own null
    draws (band, same colour), and the null quantile over all heads (grey dashed). `calibrated`:
    findings.pr_against_null + tier."""
    if calibrated.empty:
        return placeholder("No null PR stored for any panel: run `circuitdev null-pr --panel NAME` (the book's "
                           "build does so for the toy panels).", title="PR against its random-token null")
    fig, cells = panel_axes(calibrated, height=3.3)
    for ax, tier, panel, g, axis in cells:
        chosen = heads[heads["panel"] == panel] if heads is not None else None
        names = list(pd.unique(g.merge(chosen[["layer", "head"]], on=["layer", "head"])["name"])) \
            if chosen is not None and len(chosen) else list(pd.unique(g["name"]))
        names = names[:max_heads]
        colors = dict(zip(names, sns.color_palette("tab10", len(names))))
        for name in names:
            gh = g[g["name"] == name].sort_values("tokens")
            x = axis.x(gh["tokens"])
            ax.fill_between(x, gh["null_min"], gh["null_max"], color=colors[name], alpha=0.2, lw=0,
                            label="its PR on random tokens (min–max over draws)" if name == names[0] else None)
            ax.plot(x, gh["pr"], color=colors[name], marker="o", ms=3, label="a circuit head's PR" if name == names[0]
                    else None)
            ax.annotate(name, (x[-1], gh["pr"].iloc[-1]), xytext=(3, 0), textcoords="offset points", va="center",
                        fontsize=7.5, color=colors[name], fontweight="bold")
        q = g.drop_duplicates("revision").sort_values("tokens")
        ax.plot(axis.x(q["tokens"]), q["null_q"], color="#555555", ls="--", lw=1,
                label="99th percentile of every head's null PR")
        ax.set_ylabel("participation ratio")
        axis.apply(ax)
        left, right = ax.get_xlim()  # room for the head labels at the right end
        ax.set_xlim(left, right * (right / left) ** 0.1 if axis.scale == "log" else right + 0.08 * (right - left))
        ax.set_title(f"{panel} · {tier_title(tier)}", fontsize=10)
    figure_legend(fig, [c[0] for c in cells], ncol=3)
    figure_title(fig, "Circuit heads' PR against their PR on random tokens (bands: min–max over the null draws)")
    return fig


def topk_bars(breakdown: pd.DataFrame) -> Figure:
    """The spectral top-K by class over training: at each revision (bars, in token order) how many of the model's
    K heads of highest PR integral are of each class there; one axis per model. `breakdown`:
    findings.topk_breakdown (+ tier)."""
    if breakdown.empty:
        return placeholder("No PR trajectory in any tier: no top-K ranking.", title="The spectral top-K by class")
    breakdown = breakdown if "tier" in breakdown.columns else breakdown.assign(tier="published")
    keys = panel_keys(breakdown)
    fig, blocks = panel_grid(len(keys), height=3.2)
    for (ax,), (tier, panel) in zip(blocks, keys):
        g = breakdown[(breakdown["tier"] == tier) & (breakdown["panel"] == panel)]
        wide = g.pivot_table(index=["revision_index", "tokens_b"], columns="class", values="count", aggfunc="sum")
        wide = wide[[c for c in CLASS_COLORS if c in wide.columns]]
        x, bottom = np.arange(len(wide)), np.zeros(len(wide))
        for cls in wide.columns:
            ax.bar(x, wide[cls], bottom=bottom, color=CLASS_COLORS[cls], width=0.85, label=cls)
            bottom += wide[cls].to_numpy()
        tokens = wide.index.get_level_values("tokens_b").to_numpy(dtype=float) * 1e9
        step = max(1, len(x) // 10)
        ax.set_xticks(x[::step], ["init" if t == 0 else token_tick(t) for t in tokens[::step]], rotation=45,
                      fontsize=8)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("revision (training tokens)")
        ax.set_ylabel(f"heads of the top {int(g['k'].iloc[0])}")
        ax.set_title(f"{panel} · {tier_title(tier)}", fontsize=10)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in CLASS_COLORS.values()]
    fig.legend(handles, list(CLASS_COLORS), loc="outside lower center", ncol=len(CLASS_COLORS), fontsize=8)
    figure_title(fig, "Which classes the heads of highest PR belong to, over training (the spectral top-K)")
    return fig
