"""The refinement page's figure: a per-revision quantity on the refined grid beside the default grid."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from circuitdev.book.plots.axes import TokenAxis, band, figure_title, placeholder, token_counts

# The per-revision metrics of `findings.REVISION_METRICS` in a few words, for axis labels, titles and tables.
_METRIC_WORDS = {"bos_fraction": "share of heads that are sinks", "induction_heads": "induction heads",
                 "prev_token_heads": "previous-token heads", "sink_heads": "sink heads"}


def metric_label(name: str, *, axis: bool = False) -> str:
    """A per-revision metric's name in words: "bos_fraction" -> "share of heads that are sinks"; an F3 milestone
    -> "“≥ 3 heads with induction selectivity ≥ 50×” holds". axis=True: the short form for a y axis ("... (%)" for
    a share, "milestone holds" for a yes / no milestone)."""
    from circuitdev.analysis import findings
    from circuitdev.errors import ConfigError

    if name in _METRIC_WORDS:
        return _METRIC_WORDS[name] + (" (%)" if axis and name == "bos_fraction" else "")
    try:
        words = findings.milestone(name).describe()
    except ConfigError:
        return name.replace("_", " ")
    return "milestone holds" if axis else f"“{words}” holds"


def refined_trajectory(refined: pd.DataFrame, grid: pd.DataFrame, *, value: str, ylabel: str, title: str,
                       window: tuple[float, float] | None = None, refined_window: tuple[float, float] | None = None,
                       scale: float = 1.0) -> Figure:
    """A per-revision quantity on the refined revision grid (line, markers, 95% band) beside the default grid
    (dashed), over all of training (left) and zoomed on the event (right); shaded: the event's window on the default
    grid (light) and after refinement (dark). `refined` / `grid`: one panel's rows (tokens_b, value[, _lo / _hi],
    refined: bool); windows in tokens_b."""
    if refined.empty:
        return placeholder("No records for this panel.", title=title)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
    zoom = window or (refined["tokens_b"].min(), refined["tokens_b"].max())
    pad = 0.35 * (zoom[1] - zoom[0])
    binary = set(pd.unique(refined[value].dropna())) <= {0, 1}  # a yes / no quantity (a milestone)
    # a yes / no quantity holds from one revision to the next: drawn as steps, with no interpolated "band"
    steps = {"drawstyle": "steps-post"} if binary else {}
    for ax, sel in zip(axes, (None, (zoom[0] - pad, zoom[1] + pad))):
        part = refined if sel is None else refined[refined["tokens_b"].between(*sel)]
        base = grid if sel is None else grid[grid["tokens_b"].between(*sel)]
        axis = TokenAxis.of(token_counts(part))
        x = axis.x(token_counts(part))
        ax.plot(axis.x(token_counts(base)), scale * base[value], color="#7f7f7f", ls="--", marker="o", ms=4, lw=1,
                label="default grid", zorder=2, **steps)
        ax.plot(x, scale * part[value], color="#1f77b4", lw=1.6, label="refined grid", zorder=3, **steps)
        new = part["refined"].to_numpy(dtype=bool)
        ax.scatter(x[new], scale * part.loc[new, value], marker="D", s=30, color="#d62728", zorder=4,
                   label="added by refinement")
        if not binary:
            band(ax, x, part, value, color="#1f77b4", scale=scale)
        for win, shade in ((window, 0.12), (refined_window, 0.3)):
            if win is not None:
                ax.axvspan(*axis.x([win[0] * 1e9, win[1] * 1e9]), color="#ff7f0e", alpha=shade, lw=0, zorder=0)
        axis.apply(ax)
        ax.set_ylabel(ylabel)
        if binary:  # no 0.2 steps
            ax.set_yticks([0, scale], ["no", "yes"])
        ax.set_title("all of training" if sel is None else "zoomed on the event (shaded: its window, before → "
                     "after)", fontsize=9)
    axes[0].legend(fontsize=7, loc="upper left")
    figure_title(fig, title)
    return fig
