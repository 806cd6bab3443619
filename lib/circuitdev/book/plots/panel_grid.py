"""One axis per (tier, panel), at most COLUMNS per row: the layout of the F5, F6 and sink-measures figures.

Which helper to use: `panel_axes` for a figure of one token axis per (tier, panel) of a table, with each axis's rows
(`panel_rows`), and `finish_panel` to label each; `panel_keys` and `panel_grid` where a block holds more than one
axis; `figure_legend` for one legend below the panels (per-axis legends would cover the data).
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from circuitdev.book.plots.axes import TokenAxis, tier_title, token_counts

COLUMNS = 2  # panels per row: wider grids shrink below legibility at the page's width (~9 in)


def panel_keys(df: pd.DataFrame) -> list[tuple[str, str]]:
    return list(df[["tier", "panel"]].drop_duplicates().itertuples(index=False, name=None))


def panel_grid(n: int, *, width: float = 5.2, height: float = 3.4, rows_per: int = 1, sharex: str | bool = False):
    """A figure of n panel blocks, COLUMNS per row, each block `rows_per` axes high: (figure, axes[block][row])."""
    cols = min(COLUMNS, max(n, 1))
    block_rows = math.ceil(n / cols)
    fig, axes = plt.subplots(block_rows * rows_per, cols, figsize=(width * cols, height * block_rows * rows_per),
                             squeeze=False, layout="constrained", sharex=sharex)
    blocks = [[axes[(i // cols) * rows_per + r, i % cols] for r in range(rows_per)] for i in range(n)]
    for j in range(n, block_rows * cols):  # unused cells of the last row
        for r in range(rows_per):
            axes[(j // cols) * rows_per + r, j % cols].axis("off")
    return fig, blocks


def panel_rows(df: pd.DataFrame, tier: str, panel: str) -> tuple[pd.DataFrame, TokenAxis]:
    """The rows of one (tier, panel) with their training tokens (`tokens`), and the token axis they span."""
    g = df[(df["tier"] == tier) & (df["panel"] == panel)].assign(tokens=lambda d: token_counts(d))
    return g, TokenAxis.of(g["tokens"])


def panel_axes(df: pd.DataFrame, *, height: float, keys: list[tuple[str, str]] | None = None):
    """A figure of one axis per (tier, panel) of `df` (`keys`: those pairs instead, in this order), `height` inches
    each: (figure, [(axis, tier, panel, its rows with `tokens`, their TokenAxis), ...])."""
    keys = panel_keys(df) if keys is None else keys
    fig, blocks = panel_grid(len(keys), height=height)
    return fig, [(ax, tier, panel, *panel_rows(df, tier, panel)) for (ax,), (tier, panel) in zip(blocks, keys)]


def finish_panel(ax, axis: TokenAxis, tier: str, panel: str) -> None:
    """The token axis drawn and the panel named: "<panel> · <tier title>"."""
    axis.apply(ax)
    ax.set_title(f"{panel} · {tier_title(tier)}", fontsize=10)


def figure_legend(fig: Figure, axes, *, ncol: int | None = None) -> None:
    """One legend for the figure, below its panels: the first handle of every label over `axes`, `ncol` columns
    (default: one per label). None when no axis has a label."""
    seen: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="outside lower center", ncol=ncol or len(seen), fontsize=8)
