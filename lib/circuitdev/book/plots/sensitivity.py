"""The sensitivity page's figure: final-revision counts as a function of the selectivity threshold."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from circuitdev.book.plots.axes import figure_title, panel_color, placeholder, plain_log_ticks
from circuitdev.schema import BOS_THRESHOLD, INDUCTION_THRESHOLD, PREV_TOKEN_THRESHOLD

# The paper's threshold per class, marked on each panel of the figure.
PAPER_THRESHOLDS: dict[str, float] = {"first-token": BOS_THRESHOLD, "induction": INDUCTION_THRESHOLD,
                                      "previous-token": PREV_TOKEN_THRESHOLD}


def threshold_sensitivity(sens: pd.DataFrame, *, paper_thresholds: dict[str, float] | None = None) -> Figure:
    """Counts at each panel's final revision as a function of the selectivity threshold: share of heads that are
    sinks (%) for first-token, number of heads for the other classes; one panel per class, stacked on one shared
    threshold axis so that each reads at the page's width, one line per (tier, panel). `sens`:
    findings.threshold_sensitivity(final_only=True) + tier."""
    if sens.empty:
        return placeholder("No developmental table from any tier.", title="Threshold sensitivity")
    paper_thresholds = paper_thresholds or PAPER_THRESHOLDS
    classes = list(pd.unique(sens["head_class"]))
    fig, axes = plt.subplots(len(classes), 1, figsize=(9.5, 2.9 * len(classes) + 1.4), squeeze=False, sharex=True,
                             layout="constrained")
    sens = sens.assign(label=sens["panel"] + " · " + sens["tier"])
    colors = {lab: panel_color(p, i) for i, (lab, p) in enumerate(zip(sens["label"], sens["panel"]))}
    dashes = {"published": "", "toy": (4, 2), "measured": (1, 1)}
    for ax, cls in zip(axes[:, 0], classes):
        g = sens[sens["head_class"] == cls]
        bos = cls == "first-token"
        y = 100 * g["fraction"] if bos else g["n"]
        for lab, gl in g.assign(y=y).groupby("label", sort=False):
            ax.plot(gl["threshold"], gl["y"], color=colors[lab], dashes=dashes.get(gl["tier"].iloc[0], ""),
                    label=lab, lw=1.6)
        if cls in paper_thresholds:
            ax.axvline(paper_thresholds[cls], color="#d62728", lw=1, ls=":")
            ax.annotate(f" paper {paper_thresholds[cls]:g}×", (paper_thresholds[cls], 1), fontsize=9,
                        xycoords=("data", "axes fraction"), ha="left", va="top", color="#d62728")
        ax.set_xscale("log")
        plain_log_ticks(ax, "x")
        ax.set_ylabel("share of heads\nthat are sinks (%)" if bos else "heads (log scale)")
        ax.set_title(f"{cls} heads at the final revision", fontsize=11)
        if not bos:
            ax.set_yscale("symlog", linthresh=1)
            plain_log_ticks(ax)
        ax.set_ylim(bottom=0)
    axes[-1, 0].set_xlabel("selectivity threshold τ (×, log scale)")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(3, len(labels)), fontsize=9, frameon=False)
    figure_title(fig, "How the final-revision counts depend on the selectivity threshold")
    return fig
