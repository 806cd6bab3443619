"""The one-model page's figures: heads per layer and class over training, and the group ablation."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from circuitdev.book.display import fmt_tokens
from circuitdev.book.plots.axes import figure_title, heatmap, placeholder
from circuitdev.schema import HEAD_CLASSES


def class_count_heatmaps(counts: pd.DataFrame, *, title: str, heads_per_layer: int | None = None) -> Figure:
    """Per-model screen: for each head class, heads per layer (rows) at each revision (columns).

    `counts`: columns head_class, revision, revision_index, tokens_b, layer, n (findings.layer_counts per class)."""
    if counts.empty:
        return placeholder("No records to screen.", title=title)
    classes = [c for c in HEAD_CLASSES if c in set(counts["head_class"])]
    ncols = 3 if len(classes) > 2 else len(classes)
    nrows = int(np.ceil(len(classes) / ncols))
    revs = counts.drop_duplicates("revision").sort_values("revision_index")
    n_layers = int(counts["layer"].max()) + 1
    w = max(4.2, 0.42 * len(revs) + 1.6)
    h = max(2.6, 0.28 * n_layers + 1.6)
    fig, axes = plt.subplots(nrows, ncols, figsize=(w * ncols, h * nrows), squeeze=False, layout="constrained")
    vmax = heads_per_layer or max(1, int(counts["n"].max()))
    xt = [fmt_tokens(t * 1e9) for t in revs["tokens_b"]]
    for ax, cls in zip(axes.flat, classes):
        grid = counts[counts["head_class"] == cls].pivot(index="layer", columns="revision_index", values="n")
        grid = grid.reindex(index=range(n_layers), columns=revs["revision_index"]).fillna(0)
        image = heatmap(ax, grid.to_numpy(dtype=float), vmax=vmax, cmap="rocket_r", xticklabels=xt)
        ax.set_title(cls)
        ax.set_xlabel("training tokens at the revision")
        ax.set_ylabel("layer")
        ax.tick_params(axis="y", labelsize=7, rotation=0)
    for ax in list(axes.flat)[len(classes):]:
        ax.axis("off")
    fig.colorbar(image, ax=axes, shrink=0.6, label="heads in the layer", ticks=MaxNLocator(integer=True))
    figure_title(fig, title)
    return fig


_CONDITION_ORDER = ["baseline", "screen", "matched_random", "upper_bound", "other"]
_CONDITION_LABELS = {"baseline": "no ablation", "screen": "induction screen", "matched_random": "matched random",
                     "upper_bound": "whole layers (upper bound)", "other": "other"}
_CONDITION_COLORS = {"baseline": "#7f7f7f", "screen": "#d62728", "matched_random": "#1f77b4",
                     "upper_bound": "#2f2f2f", "other": "#bcbd22"}


def ablation_bars(ab: pd.DataFrame, *, title: str, metric: str = "acc_top1") -> Figure:
    """Group ablation at the final revision: top-1 accuracy (%) at the query for no ablation, the screened circuit,
    matched-random controls (bar = mean, dots = seeds) and the upper bound; bars labelled with heads ablated.
    `ab`: condition, n_ablated, acc_top1 (0-1) [, panel]."""
    if ab.empty:
        return placeholder("No ablation results.", title=title)
    ab = ab[ab["condition"] != "other"] if (ab["condition"] != "other").any() else ab
    ab = ab.assign(pct=100 * ab[metric].astype(float))
    order = [c for c in _CONDITION_ORDER if c in set(ab["condition"])]
    fig, ax = plt.subplots(figsize=(1.5 * len(order) + 2.5, 3.6), layout="constrained")
    means = ab.groupby("condition")["pct"].mean().reindex(order)
    n_abl = ab.groupby("condition")["n_ablated"].first().reindex(order)
    bars = ax.bar(range(len(order)), means.to_numpy(), color=[_CONDITION_COLORS[c] for c in order], alpha=0.85)
    for i, c in enumerate(order):
        pts = ab[ab["condition"] == c]["pct"]
        if len(pts) > 1:
            ax.scatter(np.full(len(pts), i) + np.linspace(-0.15, 0.15, len(pts)), pts, color="black", s=10, zorder=3)
    for rect, n, m in zip(bars, n_abl, means):
        ax.annotate(f"{m:.1f}%\n{int(n)} heads", (rect.get_x() + rect.get_width() / 2, rect.get_height()),
                    xytext=(0, 2), textcoords="offset points", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(order)), [_CONDITION_LABELS[c] for c in order], fontsize=8)
    ax.set_ylabel("top-1 accuracy at the query (%)")
    ax.set_ylim(0, max(5.0, float(np.nanmax(ab["pct"])) * 1.3))
    ax.set_title(title, fontsize=10)
    return fig
