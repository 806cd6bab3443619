"""F5's figure: participation ratio and selectivity of each circuit head on one time axis."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from circuitdev.book.plots.axes import TokenAxis, figure_title, placeholder, plain_log_ticks, token_counts
from circuitdev.schema import INDUCTION_THRESHOLD


def pr_selectivity(traj: pd.DataFrame, *, threshold: float = INDUCTION_THRESHOLD, class_label: str = "induction",
                   max_panels: int = 6) -> Figure:
    """F5: per circuit head, PR − 1 (top row) and selectivity (bottom row) on one token axis per model; the dashed
    vertical line marks the head's formation (first revision ≥ threshold). `traj`: findings.head_trajectories + tier."""
    traj = traj[traj["pr"].notna()] if len(traj) else traj
    if traj.empty:
        return placeholder("No PR trajectory for any circuit head (the tier has no PR, or no circuit).",
                           title="PR and selectivity per circuit head")
    keys = list(traj[["tier", "panel"]].drop_duplicates().itertuples(index=False, name=None))[:max_panels]
    fig, axes = plt.subplots(2, len(keys), figsize=(4.4 * len(keys), 6.2), squeeze=False, sharex="col",
                             layout="constrained")
    for j, (tier, panel) in enumerate(keys):
        g = traj[(traj["tier"] == tier) & (traj["panel"] == panel)].assign(tokens=lambda d: token_counts(d))
        axis = TokenAxis.of(g["tokens"])
        g = g.assign(x=axis.x(g["tokens"]))
        heads = list(pd.unique(g["name"]))
        colors = dict(zip(heads, sns.color_palette("tab10", len(heads))))
        for name, gh in g.groupby("name", sort=False):
            axes[0, j].plot(gh["x"], gh["pr_signal"], marker="o", ms=3, color=colors[name], label=name)
            axes[1, j].plot(gh["x"], gh["selectivity"].clip(lower=1e-2), marker="o", ms=3, color=colors[name])
            formed = gh[gh["formed"]]
            if len(formed):
                for ax in axes[:, j]:
                    ax.axvline(formed["x"].iloc[0], color=colors[name], ls="--", lw=0.9, alpha=0.8)
        for ax in axes[:, j]:
            ax.set_yscale("log")
            plain_log_ticks(ax)
        axes[1, j].axhline(threshold, color="#d62728", lw=1, ls=":", label=f"{threshold:g}× formation")
        axes[0, j].set_title(f"{panel} · {tier}", fontsize=10)
        axes[0, j].set_ylabel("PR − 1 (floor 10⁻³, log)")
        axes[1, j].set_ylabel(f"{class_label} selectivity (×, log)")
        axis.apply(axes[1, j])
        axes[0, j].legend(fontsize=7, loc="lower right", title="head", title_fontsize=7)
    figure_title(fig, "Participation ratio and selectivity of each circuit head on one time axis")
    return fig
