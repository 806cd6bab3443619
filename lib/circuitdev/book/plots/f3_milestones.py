"""F3's figures: when each milestone is first reached, with the induction -> sink gap (`milestone_timeline`), and the
behavioural milestones beside the attention ones on one token axis per model (`behaviour_timeline`). Censored
milestones are drawn as bounds: an arrow to the left from a milestone already reached at the first probed revision
(it was reached at or before it), a hollow marker with an arrow to the right at the last revision for one never
reached; a gap built from them is labelled "≥" / "≤"."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from matplotlib import pyplot as plt
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from circuitdev.analysis.findings import bound_text, fmt_ratio
from circuitdev.book.plots.axes import (TOKENS_LABEL, TokenAxis, figure_title, placeholder, tier_title,
                                        token_counts)

_MILESTONE_STYLE = {
    "induction_3_heads": ("o", "#1f77b4", "induction ≥3 heads"),
    "induction_5_heads": ("o", "#aec7e8", "induction ≥5 heads"),
    "previous_token_30_heads": ("^", "#9467bd", "prev-token ≥30 heads"),
    "self_30_heads": ("v", "#c5b0d5", "self ≥30 heads"),
    "bos_10pct": ("s", "#fdd0a2", "BOS ≥10%"),
    "bos_30pct": ("s", "#fd8d3c", "BOS ≥30%"),
    "bos_50pct": ("s", "#d94801", "BOS ≥50%"),
    "bos_70pct": ("s", "#7f2704", "BOS ≥70%"),
}
_BEHAVIOUR_STYLE = {
    "top1_25pct": ("*", "#74c476", "top-1 ≥ 25%"),
    "top1_50pct": ("*", "#238b45", "top-1 ≥ 50%"),
    "icl_1nat": ("D", "#bcbddc", "repeat (copy) score ≥ 1 nat"),
    "icl_3nats": ("D", "#6a51a3", "repeat (copy) score ≥ 3 nats"),
    "drop_10pp": ("P", "#bf812d", "ablating the circuit costs ≥ 10 pp"),
    "drop_25pp": ("P", "#8c510a", "ablating the circuit costs ≥ 25 pp"),
    "necessary": ("X", "#543005", "circuit necessary (drop beyond random groups > 0)"),
}
_GAP_LABEL = "induction ≥3 heads → BOS ≥50%"


def _style(name: str) -> tuple[str, str, str]:
    return _MILESTONE_STYLE.get(name) or _BEHAVIOUR_STYLE.get(name) or ("o", "#777", name)


def _label(rows: pd.DataFrame, name: str) -> str:
    """A behavioural milestone at a bar outside the default styles, labelled from its measure and level."""
    from circuitdev.analysis.findings import BehaviourMilestone

    r = rows[rows["milestone"] == name].iloc[0]
    return BehaviourMilestone(name, r["measure"], float(r["level"])).label() if "measure" in r and \
        pd.notna(r.get("measure")) else name


def _bound_arrow(ax, axis: TokenAxis, x: float, y: float, bound: str, color: str) -> None:
    """An arrow from a censored milestone towards where the true one lies: left for "upper" (at or before the first
    probe), right for "lower" (after the last)."""
    if bound not in ("upper", "lower"):
        return
    step = (axis.hi / axis.lo) ** 0.06 if axis.scale == "log" else 0.05 * (axis.hi - axis.lo)
    to = (x / step if axis.scale == "log" else x - step) if bound == "upper" else \
        (x * step if axis.scale == "log" else x + step)
    ax.annotate("", xy=(to, y), xytext=(x, y), arrowprops=dict(arrowstyle="-|>", color=color, lw=1.1,
                                                                  mutation_scale=8), zorder=4)


def _markers(ax, axis: TokenAxis, rows: pd.DataFrame, y: np.ndarray, name: str) -> None:
    """One milestone's markers at `y`: its window bar, the marker (hollow when never reached, drawn at the last
    revision) and the bound arrow."""
    marker, color, label = _style(name)
    if "window_from_tokens_b" in rows.columns:  # the stretch in which the milestone is first reached (95%)
        win = (rows["window_from_tokens_b"].notna() & rows["tokens_b_hi"].notna()).to_numpy()
        for y0, a, b in zip(y[win], rows.loc[win, "window_from_tokens_b"], rows.loc[win, "tokens_b_hi"]):
            ax.plot(axis.x([a * 1e9, b * 1e9]), [y0, y0], color=color, lw=1.6, zorder=2, marker="|", markersize=7)
    bound = rows["bound"].to_numpy() if "bound" in rows.columns else np.full(len(rows), "exact")
    at = rows["bound_tokens_b"] if "bound_tokens_b" in rows.columns else rows["tokens_b"]
    x = axis.x(at.astype(float).to_numpy() * 1e9)
    never = bound == "lower"
    ax.scatter(x[~never], y[~never], marker=marker, color=color, s=42, edgecolor="black", linewidth=0.4,
               label=label, zorder=3)
    ax.scatter(x[never], y[never], marker=marker, facecolor="white", edgecolor=color, s=42, linewidth=1.2, zorder=3)
    for xi, yi, b in zip(x, y, bound):
        _bound_arrow(ax, axis, float(xi), float(yi), b, color)


def _drawn_tokens(rows: pd.DataFrame) -> pd.Series:
    """The token counts a milestone table puts on the axis: its markers (at the bound where censored) and windows."""
    cols = [c for c in ("bound_tokens_b", "tokens_b", "window_from_tokens_b", "tokens_b_hi") if c in rows.columns]
    return pd.concat([rows[c] for c in cols]).astype(float).dropna() * 1e9 if cols else pd.Series(dtype=float)


def drawn_axis(rows: pd.DataFrame, gaps: pd.DataFrame | None = None, grid: pd.Series | None = None) -> TokenAxis:
    """One panel's token axis spanning what it draws (markers, windows, gap bars and the tips of the bound arrows),
    not every probed revision: Pythia's revisions start at 2M tokens, three decades before its first milestone, and
    an axis over them left most of the panel empty. `grid` (the tier's revisions, optional) only chooses log or
    linear, as the revisions' spacing does for every token axis of the book; where what is drawn spans no range (every
    milestone never reached: all at the last revision), the axis spans the revisions, so those sit at its right end."""
    drawn = [_drawn_tokens(rows)]
    if gaps is not None and len(gaps):
        drawn += [gaps["start_tokens_b"].dropna() * 1e9, gaps["end_tokens_b"].dropna() * 1e9]
    tokens = pd.concat(drawn).to_numpy(dtype=float)
    has_grid = grid is not None and len(grid.dropna())
    if has_grid and len(np.unique(tokens[np.isfinite(tokens) & (tokens > 0)])) < 2:
        axis = TokenAxis.of(np.concatenate([tokens, grid.to_numpy(dtype=float)]))
    else:
        axis = TokenAxis.of(tokens)
        if has_grid:
            axis = replace(axis, scale=TokenAxis.of(grid).scale)
    if axis.scale == "linear" and axis.lo <= 0:  # nothing after init drawn: nothing to fit
        return axis
    # room for the bound arrows (_bound_arrow), which point past the first / last value drawn
    bound = rows["bound"] if "bound" in rows.columns else pd.Series(dtype=str)
    at = rows["bound_tokens_b"].astype(float) * 1e9 if "bound_tokens_b" in rows.columns else pd.Series(dtype=float)
    upper, lower = at[(bound == "upper") & (at > 0)], at[(bound == "lower") & (at > 0)]
    if axis.scale == "log":
        step = (axis.hi / axis.lo) ** 0.06
        lo = min([axis.lo, *(upper / step)])
        hi = max([axis.hi, *(lower * step)])
    else:
        step = 0.05 * (axis.hi - axis.lo)
        lo = max(min([axis.lo, *(upper - step)]), axis.lo * 1e-3)
        hi = max([axis.hi, *(lower + step)])
    return replace(axis, lo=float(lo), hi=float(hi))


def milestone_timeline(ms: pd.DataFrame, gaps: pd.DataFrame | None = None, *,
                       revisions: pd.DataFrame | None = None) -> Figure:
    """F3: when each milestone is first reached (markers on a token axis, one row per model), one panel per tier
    (stacked, each on its own token axis), with the induction → sink gap as a bar labelled by its token ratio ("≥"
    / "≤" when it is a bound). `ms`: findings.milestones + tier; `gaps`: findings.milestone_gap + tier (optional);
    `revisions` (findings.revisions + tier, optional): chooses each tier's log or linear axis. Each panel's axis
    spans what it draws (`drawn_axis`), with a small margin."""
    if ms.empty:
        return placeholder("No developmental table from any tier.", title="Milestones")
    tiers = list(pd.unique(ms["tier"]))
    heights = [0.9 + 0.75 * ms.loc[ms["tier"] == t, "panel"].nunique() for t in tiers]
    fig, axes = plt.subplots(len(tiers), 1, figsize=(10, sum(heights) + 1.2), squeeze=False, layout="constrained",
                             gridspec_kw={"height_ratios": heights})
    for ax, tier in zip(axes[:, 0], tiers):
        g = ms[ms["tier"] == tier].assign(tokens=lambda d: token_counts(d))
        gt = gaps[gaps["tier"] == tier] if gaps is not None and len(gaps) else None
        grid = revisions.loc[revisions["tier"] == tier, "tokens_b"] * 1e9 if revisions is not None and \
            len(revisions) else None
        axis = drawn_axis(g, gt, grid)
        panels = list(pd.unique(g["panel"]))
        ypos = {p: i for i, p in enumerate(panels)}
        offsets = dict(zip(_MILESTONE_STYLE, np.linspace(-0.25, 0.25, len(_MILESTONE_STYLE))))
        for row in (gt.itertuples() if gt is not None else []):
            ratio = getattr(row, "bound_ratio", row.token_ratio)
            if not np.isfinite(ratio):
                continue
            y, bound = ypos[row.panel], getattr(row, "bound", "exact")
            ends = [getattr(row, "start_tokens_b") if np.isfinite(row.start_tokens_b) else None,
                    getattr(row, "end_tokens_b") if np.isfinite(row.end_tokens_b) else None]
            a, b = (e if e is not None else axis.hi / 1e9 for e in ends)
            ax.plot(axis.x([a * 1e9, b * 1e9]), [y, y], color="#444", lw=5, alpha=0.25 if bound == "exact" else 0.12,
                    solid_capstyle="butt", zorder=1)
            ax.annotate(bound_text(ratio, bound, fmt_ratio), (axis.mid(a * 1e9, b * 1e9), y), xytext=(0, 7),
                        textcoords="offset points", ha="center", fontsize=8, color="#333")
        for name in _MILESTONE_STYLE:
            hit = g[(g["milestone"] == name)]
            if "bound_tokens_b" not in hit.columns:
                hit = hit[hit["tokens"].notna()]
            if len(hit):
                _markers(ax, axis, hit, np.array([ypos[p] for p in hit["panel"]], dtype=float) + offsets[name], name)
        ax.set_yticks(range(len(panels)), panels)
        ax.set_ylim(len(panels) - 0.5, -0.5)
        if g["tokens"].gt(0).any() or 0 < axis.lo < axis.hi:
            axis.apply(ax)  # (nothing reached: the revisions' span, the never-reached markers at its right end)
        else:
            ax.set_xticks([])
            ax.set_xlabel(TOKENS_LABEL)
        if not g["tokens"].gt(0).any():
            ax.text(0.02, 0.5, "no milestone reached at a revision after initialisation", ha="left", va="center",
                    transform=ax.transAxes, fontsize=9, bbox=dict(facecolor="white", edgecolor="none", alpha=0.85))
        ax.set_title(tier_title(tier), fontsize=10)
    handles = [Line2D([], [], ls="", marker=m, color=c, markeredgecolor="black", markersize=7, label=lab)
               for m, c, lab in _MILESTONE_STYLE.values()]
    handles += [Line2D([], [], ls="", marker="o", markerfacecolor="white", color="#555", label="never reached (at the "
                       "last revision, →)"), Line2D([], [], color="#555", marker=r"$\leftarrow$", ls="", markersize=9,
                                                    label="reached at the first probed revision (≤)")]
    fig.legend(handles=handles, loc="outside lower center", ncol=4, fontsize=8, frameon=False)
    figure_title(fig, f"First revision reaching each milestone (grey bar: {_GAP_LABEL})")
    return fig


def behaviour_timeline(ms: pd.DataFrame, behaviour: pd.DataFrame, *, revisions: pd.DataFrame | None = None) -> Figure:
    """F3 beside behaviour: for each model with behaviour per revision (the record tiers), one panel on its own token
    axis with one row per milestone: the attention milestones it reaches (findings.milestones) and the behavioural
    ones (findings.behaviour_milestones: top-1, ICL score, the cost of ablating the final circuit), each with its
    window from the resamples where there is one. `ms`, `behaviour`: + tier; `revisions` (findings.revisions + tier,
    optional): each model's axis spans all its revisions."""
    if behaviour.empty:
        return placeholder("No tier has behaviour per revision (top-1, ICL score): the toy and measured records "
                           "carry it from record format 3 on.", title="Behaviour beside attention")
    keys = list(dict.fromkeys(zip(behaviour["tier"], behaviour["panel"])))
    groups = []
    for tier, panel in keys:
        a = ms[(ms["tier"] == tier) & (ms["panel"] == panel)] if len(ms) else ms
        a = a[a["revision"].notna() & a["milestone"].isin(list(_MILESTONE_STYLE))] if len(a) else a
        b = behaviour[(behaviour["tier"] == tier) & (behaviour["panel"] == panel)]
        groups.append((tier, panel, pd.concat([a, b], ignore_index=True)))
    heights = [1.0 + 0.3 * len(g) for *_, g in groups]
    fig, axes = plt.subplots(len(groups), 1, figsize=(10, sum(heights) + 1.0), squeeze=False, layout="constrained",
                             gridspec_kw={"height_ratios": heights})
    for ax, (tier, panel, g) in zip(axes[:, 0], groups):
        tokens = [g["bound_tokens_b"], g.get("window_from_tokens_b", pd.Series(dtype=float))]
        if revisions is not None and len(revisions):
            tokens.append(revisions.loc[(revisions["tier"] == tier) & (revisions["panel"] == panel), "tokens_b"])
        axis = TokenAxis.of((pd.concat(tokens) * 1e9).dropna())
        names = list(g["milestone"])
        for i, name in enumerate(names):
            _markers(ax, axis, g.iloc[[i]], np.array([float(i)]), name)
        n_attention = int(g["milestone"].isin(list(_MILESTONE_STYLE)).sum())
        if 0 < n_attention < len(g):
            ax.axhline(n_attention - 0.5, color="#999", lw=0.8, ls="--")
        ax.set_yticks(range(len(names)), [_style(n)[2] if n in _MILESTONE_STYLE or n in _BEHAVIOUR_STYLE else
                                          _label(g, n) for n in names], fontsize=8)
        ax.set_ylim(len(names) - 0.5, -0.5)
        axis.apply(ax)
        ax.set_title(f"{panel} · {tier_title(tier)} (above the dashed line: attention; below: behaviour)",
                     fontsize=9)
    figure_title(fig, "Behaviour beside attention: the first revision reaching each milestone")
    return fig
