"""The one-model page's figures: heads per layer and class over training, the group ablation at the final revision
(induction and the authors' greater-than task), and the ablation over training."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from circuitdev.analysis.uncertainty import binomial_intervals
from circuitdev.sources.ablate import control_interval
from circuitdev.book.display import fmt_tokens
from circuitdev.book.plots.axes import TokenAxis, band, figure_title, heatmap, placeholder, token_counts
from circuitdev.schema import HEAD_CLASSES

# Reading sizes (inches at the book's 110 dpi, drawn at the page's full width of about 12 inches).
_PAGE_WIDTH = 12.5  # the width every multi-panel figure of this page is laid out for
_CELL_W, _CELL_H = 0.3, 0.24  # a heat-map cell: wide enough for its count and its rotated token label


def class_count_heatmaps(counts: pd.DataFrame, *, title: str, heads_per_layer: int | None = None) -> Figure:
    """Per-model screen: for each head class, heads per layer (rows) at each revision (columns).

    Laid out to be read at the page's width: as many panels side by side as fit with cells of a readable size
    (a long revision grid, like the toy's 31 revisions, gets one panel per row, stacked on one shared revision
    axis labelled under the last panel). `counts`: columns head_class, revision, revision_index, tokens_b, layer, n
    (findings.layer_counts per class)."""
    if counts.empty:
        return placeholder("No records to screen.", title=title)
    classes = [c for c in HEAD_CLASSES if c in set(counts["head_class"])]
    revs = counts.drop_duplicates("revision").sort_values("revision_index")
    n_layers = int(counts["layer"].max()) + 1
    panel_w = _CELL_W * len(revs) + 1.3
    ncols = int(max(1, min(3, len(classes), _PAGE_WIDTH // panel_w)))
    nrows = int(np.ceil(len(classes) / ncols))
    shared = ncols == 1  # one column: one revision axis, under the last panel
    panel_h = max(1.3, _CELL_H * n_layers + (0.45 if shared else 1.3))
    width = max(panel_w * ncols, 7.0) + 1.0
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, panel_h * nrows + (1.5 if shared else 0.6)),
                             squeeze=False, layout="constrained", sharex=shared)
    vmax = heads_per_layer or max(1, int(counts["n"].max()))
    xt = [fmt_tokens(t * 1e9) for t in revs["tokens_b"]]
    for k, (ax, cls) in enumerate(zip(axes.flat, classes)):
        grid = counts[counts["head_class"] == cls].pivot(index="layer", columns="revision_index", values="n")
        grid = grid.reindex(index=range(n_layers), columns=revs["revision_index"]).fillna(0)
        image = heatmap(ax, grid.to_numpy(dtype=float), vmax=vmax, cmap="rocket_r", xticklabels=xt)
        ax.set_title(f"{cls} heads", fontsize=11)
        ax.set_ylabel("layer", fontsize=10)
        ax.tick_params(axis="both", labelsize=9)
        last_row = k >= len(classes) - ncols
        if not shared or last_row:
            ax.set_xlabel("training tokens at the revision", fontsize=10)
        if shared and not last_row:
            ax.tick_params(axis="x", labelbottom=False)
    for ax in list(axes.flat)[len(classes):]:
        ax.axis("off")
    fig.colorbar(image, ax=axes, shrink=min(0.9, 2.5 / (panel_h * nrows)) if nrows > 1 else 0.9,
                 label="heads in the layer", aspect=25,
                 ticks=MaxNLocator(integer=True))
    figure_title(fig, title)
    return fig


# -------------------------------------------------------------------------------------------- group ablation

# Colours by what a row is: the circuit, the circuit's own controls, another head set and its controls.
_COLORS = {"baseline": "#7f7f7f", "screen": "#d62728", "matched_random": "#1f77b4", "random_any": "#6baed6",
           "upper_bound": "#2f2f2f", "other": "#9467bd", "other_control": "#c7c7c7"}


def _row_label(label: str, drawn_for: str, n_ablated: int, circuit: str | None, drawn: bool = True) -> str:
    """A bar's label: what was zeroed, for which set (a control of another set than the circuit), how many heads."""
    heads = f"{n_ablated} head{'s' if n_ablated != 1 else ''}" if n_ablated else \
        "nothing zeroed" if drawn else "none drawn"
    if drawn_for and drawn_for != circuit:
        return f"{label}\n{_wrap(f'drawn for the {drawn_for}')} · {heads}"
    return _wrap(f"{label} · {heads}")


def ablation_bars(ab: pd.DataFrame, *, title: str, metric: str = "acc_top1",
                  xlabel: str | None = None,
                  reported: dict[str, float] | None = None) -> Figure:
    """Group ablation at the final revision, one horizontal bar per condition in the table's order: top-1 (%) with
    its 95% interval (`<metric>_lo` / `_hi`); random groups as their mean with one dot per group; a control that
    could not be drawn as a sentence where its bar would be. The circuit is red, its own controls blue, other head
    sets purple and the controls drawn for them grey: never the circuit's colour. A dashed line marks no ablation.
    `ab`: book.model_ablation.ABLATION_TABLE_COLUMNS (condition, label, drawn_for, n_ablated, <metric>[, _lo, _hi],
    note); a bare table of condition, n_ablated and <metric> (the workshop's) is labelled by its conditions. `reported`: {label: top-1 in %} values that are not in the data (the paper's number for a control the
    files lack), drawn as open diamonds on their own rows right after the circuit."""
    if ab.empty:
        return placeholder("No ablation results.", title=title)
    ab = ab.assign(label=ab["label"] if "label" in ab else ab["condition"].str.replace("_", " "),  # a bare table
                   drawn_for=ab["drawn_for"].fillna("") if "drawn_for" in ab else "",
                   note=ab["note"].fillna("") if "note" in ab else "")
    circuit = ab.loc[ab["condition"] == "screen", "label"].iloc[0] if (ab["condition"] == "screen").any() else None
    rows = list(ab.groupby(["condition", "label", "drawn_for"], sort=False, dropna=False))
    after = next((i + 1 for i, ((cond, *_), _g) in enumerate(rows) if cond == "screen"), len(rows))
    rows[after:after] = [(("reported", label, ""), value) for label, value in (reported or {}).items()]
    fig, ax = plt.subplots(figsize=(10, 0.6 * len(rows) + 1.6), layout="constrained")
    top = max(5.0, 100 * float(np.nanmax(ab[[c for c in (f"{metric}_hi", metric) if c in ab]].to_numpy(float))),
              *(reported or {}).values())
    labels, drawn = [], False
    for y, ((cond, label, drawn_for), g) in enumerate(rows):
        if cond == "reported":  # a number without data behind it: a marker, no bar, no interval
            ax.scatter([g], [y], marker="D", s=60, facecolor="white", edgecolor=_COLORS["matched_random"], zorder=3,
                       linewidth=1.8)
            ax.text(g + top * 0.015, y, f"{g:.2f}%", va="center", fontsize=10)
            labels.append(_wrap(label))
            continue
        values = 100 * g[metric].astype(float)
        labels.append(_row_label(label, drawn_for, int(g["n_ablated"].iloc[0]), circuit, values.notna().any()))
        key = cond if not drawn_for or drawn_for == circuit else "other_control"
        if values.isna().all():
            note = g["note"].iloc[0] or "not run"
            ax.text(0.5, y, note[:1].upper() + note[1:], va="center", ha="left", fontsize=10, color="#444",
                    style="italic")
            continue
        mean = float(values.mean())
        lo, hi = (100 * float(g[f"{metric}_{e}"].mean()) if f"{metric}_{e}" in g else np.nan for e in ("lo", "hi"))
        if len(g) > 1:  # random groups: the interval over the groups (their spread dominates), as the page's table
            n = int(g["n"].iloc[0]) if "n" in g and pd.notna(g["n"].iloc[0]) else None
            lo, hi = (100 * v for v in control_interval((values.to_numpy() / 100 * n).round(), n, None)) \
                if n else (np.nan, np.nan)
        elif not (np.isfinite(lo) and np.isfinite(hi)) and "n" in g:  # one head set, a table without intervals
            m = binomial_intervals(pd.DataFrame({"p": [mean / 100], "n": [g["n"].iloc[0]]}), "p", "n")
            lo, hi = (100 * float(m[f"p_{e}"].iloc[0]) for e in ("lo", "hi"))
        drawn |= bool(np.isfinite(lo) and np.isfinite(hi))
        ax.barh(y, mean, color=_COLORS.get(key, _COLORS["other"]), alpha=0.9, height=0.62,
                hatch="//" if key == "other_control" else None, edgecolor="white")
        if np.isfinite(lo) and np.isfinite(hi):
            ax.errorbar(mean, y, xerr=[[mean - lo], [hi - mean]], fmt="none", ecolor="black", capsize=3, lw=1)
        if len(g) > 1:
            ax.scatter(values, np.full(len(values), y) + np.linspace(-0.18, 0.18, len(values)), s=10,
                       color="black", zorder=3)
        text = f"{mean:.2f}%" if mean < 10 else f"{mean:.1f}%"
        ax.text((hi if np.isfinite(hi) else mean) + top * 0.01, y, text, va="center", fontsize=10)
    base = ab.loc[ab["condition"] == "baseline", metric]
    if len(base) and base.notna().any():
        ax.axvline(100 * float(base.iloc[0]), color="#7f7f7f", ls="--", lw=1, zorder=0)
    ax.set_yticks(range(len(rows)), labels, fontsize=10)
    ax.invert_yaxis()
    ax.set_xlim(0, top * 1.15)
    ax.set_xlabel(xlabel or ("top-1 accuracy at the query (%; 95% intervals: Wilson for one head set, over the groups "
                             "for random groups)" if drawn else "top-1 accuracy at the query (%)"))
    ax.set_title(title, fontsize=12)
    return fig


def _wrap(text: str, width: int = 48) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width))


def ablation_over_training(over: pd.DataFrame, *, title: str, marks: dict[str, float] | None = None) -> Figure:
    """Top-1 at the query over training with the final induction circuit zeroed, beside the intact model and the
    circuit's controls, each with its 95% Wilson band (random groups: the band of their mean): intact
    (baseline_top1), circuit ablated (ablated_top1), matched random groups (random_top1, where the circuit's layers
    leave heads to draw) and random groups from any layer (random_any_top1). `marks`: {label: tokens} vertical
    lines (e.g. when the circuit becomes necessary, when the screen finds it). `over`:
    `ModelPage.over_training()`."""
    if over.empty:
        return placeholder("No ablation over training.", title=title)
    fig, ax = plt.subplots(figsize=(10, 4.4), layout="constrained")
    tokens = token_counts(over)
    axis = TokenAxis.of(tokens)
    x = axis.x(tokens)
    lines = [("baseline_top1", "intact model", "#2f2f2f", "-"),
             ("ablated_top1", "final induction circuit zeroed", "#d62728", "-"),
             ("random_top1", "matched random groups zeroed (same layers; mean)", "#1f77b4", "--"),
             ("random_any_top1", "random groups from any layer zeroed (mean)", "#6baed6", "--")]
    for col, label, color, style in lines:
        if col not in over or not over[col].notna().any():
            continue
        ax.plot(x, 100 * over[col].astype(float), color=color, ls=style, marker="o", ms=3, lw=1.6, label=label,
                zorder=3)
        band(ax, x, over, col, color=color, scale=100)
    for (label, at), color in zip((marks or {}).items(), ("#ff7f0e", "#2ca02c", "#9467bd")):
        if at is not None and np.isfinite(at):
            ax.axvline(float(axis.x([at * 1e9])[0]), color=color, ls=":", lw=1.5, label=label, zorder=2)
    axis.apply(ax)
    ax.set_ylabel("top-1 at the query (%)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=9, loc="upper left", frameon=True)
    ax.set_title(title, fontsize=12)
    return fig
