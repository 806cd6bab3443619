"""F3's figure: when each milestone is first reached, with the induction -> sink gap."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from circuitdev.book.plots.axes import (TOKENS_LABEL, TokenAxis, figure_title, placeholder, tier_columns, tier_title,
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


def milestone_timeline(ms: pd.DataFrame, gaps: pd.DataFrame | None = None, *,
                       revisions: pd.DataFrame | None = None) -> Figure:
    """F3: when each milestone is first reached (markers on a token axis, one row per model, one column per tier),
    with the induction → sink gap as a bar labelled by its token ratio. `ms`: findings.milestones + tier; `gaps`:
    findings.milestone_gap + tier (optional); `revisions` (findings.revisions + tier, optional): each tier's axis
    spans all its revisions, not only the milestones reached."""
    if ms.empty:
        return placeholder("No developmental table from any tier.", title="Milestones")
    fig, axes, tiers = tier_columns(ms, height=0.9 + 0.75 * ms.groupby("tier")["panel"].nunique().max(),
                                    width=5.4, sharey=False)
    for ax, tier in zip(axes[0], tiers):
        g = ms[ms["tier"] == tier].assign(tokens=lambda d: token_counts(d))
        drawn = [g["tokens"].dropna()]
        if revisions is not None and len(revisions):
            drawn.append(revisions.loc[revisions["tier"] == tier, "tokens_b"] * 1e9)
        if gaps is not None and len(gaps):
            gt = gaps[gaps["tier"] == tier]
            drawn += [gt["start_tokens_b"].dropna() * 1e9, gt["end_tokens_b"].dropna() * 1e9]
        axis = TokenAxis.of(pd.concat(drawn))
        panels = list(pd.unique(g["panel"]))
        ypos = {p: i for i, p in enumerate(panels)}
        offsets = np.linspace(-0.25, 0.25, len(_MILESTONE_STYLE))
        if gaps is not None and len(gaps):
            for row in gaps[gaps["tier"] == tier].itertuples():
                if np.isfinite(row.token_ratio):
                    y = ypos[row.panel]
                    ax.plot(axis.x([row.start_tokens_b * 1e9, row.end_tokens_b * 1e9]), [y, y], color="#444", lw=5,
                            alpha=0.25, solid_capstyle="butt", zorder=1)
                    mid = axis.mid(row.start_tokens_b * 1e9, row.end_tokens_b * 1e9)
                    ax.annotate(f"×{row.token_ratio:.3g}", (mid, y), xytext=(0, 7), textcoords="offset points",
                                ha="center", fontsize=8, color="#333")
        for off, (name, (marker, color, label)) in zip(offsets, _MILESTONE_STYLE.items()):
            hit = g[(g["milestone"] == name) & g["tokens"].notna()]
            y = np.array([ypos[p] for p in hit["panel"]], dtype=float) + off
            if "window_from_tokens_b" in hit.columns:  # the stretch in which the milestone is first reached (95%)
                win = hit["window_from_tokens_b"].notna() & hit["tokens_b_hi"].notna()
                for y0, a, b in zip(y[win.to_numpy()], hit.loc[win, "window_from_tokens_b"], hit.loc[win, "tokens_b_hi"]):
                    ax.plot(axis.x([a * 1e9, b * 1e9]), [y0, y0], color=color, lw=1.6, zorder=2,
                            marker="|", markersize=7)
            ax.scatter(axis.x(hit["tokens"]), y, marker=marker, color=color, s=38,
                       edgecolor="black", linewidth=0.4, label=label, zorder=3)
        ax.set_yticks(range(len(panels)), panels)
        ax.set_ylim(len(panels) - 0.5, -0.5)
        if g["tokens"].gt(0).any():
            axis.apply(ax)
        else:
            ax.text(0.5, 0.5, "no milestone reached at a revision after initialisation", ha="center", va="center",
                    transform=ax.transAxes, fontsize=9)
            ax.set_xticks([])
            ax.set_xlabel(TOKENS_LABEL)
        ax.set_title(tier_title(tier), fontsize=10)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=4, fontsize=8, frameon=False)
    figure_title(fig, "First revision reaching each milestone (grey bar: induction ≥3 heads → BOS ≥50%)")
    return fig
