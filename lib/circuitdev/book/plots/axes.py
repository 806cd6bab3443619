"""What every figure of the book shares: token axes, model colours, placeholders, interval bands, one column per
tier, titles and heat maps. The figures themselves are one module per page (`book.plots.f1_floor` ...).

Conventions:
- tiers are drawn side by side (one column each: `tier_columns`, `tier_lines`), each on its own token axis
  (`TokenAxis`), because the toy panel trains on ~10^6 tokens and the published models on ~10^12: a log axis for
  log-spaced revisions, a linear one for the toy's dense grid, starting at the first non-zero revision, with step 0
  (initialisation) marked "init" apart; tokens are labelled k / M / B / T (`token_tick`);
- one colour per model family, the same in every figure (`panel_color`, `palette`);
- an empty input gives `placeholder(message)`, a figure that says what is missing, never a blank axis;
- intervals: a figure whose input carries `<value>_lo` / `<value>_hi` (findings called with `boot=`, issue 14) draws
  them as a band (`band`) or error bars; rows without them (the published tier) are drawn as before.
"""

from __future__ import annotations

import textwrap

from dataclasses import dataclass
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, MaxNLocator

from circuitdev.book.display import fmt_tokens
from circuitdev.book.tiers import TIER_LABELS

# A tier's column title: its label in book.tiers, capitalised; "paper" is the paper's claimed values (F6's figure).
TIER_TITLES = {**{tier: label[:1].upper() + label[1:] for tier, label in TIER_LABELS.items()},
               "paper": "Paper (claimed)"}
TOKENS_LABEL = "training tokens (log scale)"  # a linear TokenAxis says so
_FAMILY_COLORS = {"olmoe": "#2ca02c", "olmo": "#ff7f0e", "pythia": "#1f77b4", "neox": "#1f77b4"}
_EXTRA_COLORS = ["#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#d62728"]


def panel_color(panel: str, index: int = 0) -> str:
    """The family colour of a panel name (pythia / gpt-neox blue, olmo orange, olmoe green), else a spare one."""
    name = panel.lower()
    for key, color in _FAMILY_COLORS.items():
        if key in name:
            return color
    return _EXTRA_COLORS[index % len(_EXTRA_COLORS)]


def palette(panels: Sequence[str]) -> dict[str, str]:
    """{panel: colour} for the panels of one figure: family colours, and a different spare one per other panel."""
    out, spare = {}, 0
    for p in panels:
        c = panel_color(p, spare)
        if c in _EXTRA_COLORS:
            spare += 1
        out[p] = c
    return out


def token_tick(x: float, _pos=None) -> str:
    """Tick label for a token count: 500, 2k, 6M, 300B, 3T."""
    return "" if x < 0 else fmt_tokens(x)


@dataclass(frozen=True)
class TokenAxis:
    """How one tier's training tokens map to x: a log or a linear scale over its non-zero revisions, whichever puts
    the median revision nearer the middle of the axis (log for the real models' log-spaced revisions, linear for the
    toy's dense grid), starting at the first non-zero revision; step 0 (initialisation) sits apart at the left,
    labelled "init". Each tier gets its own, so the toy's range fills its axes."""

    scale: str  # "log" | "linear"
    lo: float  # first non-zero token count
    hi: float  # last token count
    has_init: bool  # a revision at 0 tokens is drawn

    @classmethod
    def of(cls, tokens) -> "TokenAxis":
        t = np.asarray(tokens, dtype=float)
        t = t[np.isfinite(t)]
        pos = np.unique(t[t > 0])
        if len(pos) == 0:
            return cls("linear", 0.0, 1.0, bool((t == 0).any()))
        lo, hi = float(pos.min()), float(pos.max())
        if hi <= lo:
            return cls("log", lo / 2, lo * 2, bool((t == 0).any()))
        med = float(np.median(pos))
        log_mid = np.log(med / lo) / np.log(hi / lo)
        lin_mid = (med - lo) / (hi - lo)
        scale = "log" if abs(log_mid - 0.5) <= abs(lin_mid - 0.5) else "linear"
        return cls(scale, lo, hi, bool((t == 0).any()))

    @property
    def init_x(self) -> float:
        """Where step 0 is drawn: a little left of the first non-zero revision."""
        return self.lo / (self.hi / self.lo) ** 0.08 if self.scale == "log" else self.lo - 0.08 * (self.hi - self.lo)

    def x(self, tokens) -> np.ndarray:
        t = np.asarray(tokens, dtype=float)
        return np.where(t == 0, self.init_x, t)

    def mid(self, a: float, b: float) -> float:
        """The middle of [a, b] as the axis shows it (geometric on a log axis)."""
        a, b = self.x([a, b])
        return float(np.sqrt(a * b)) if self.scale == "log" else float((a + b) / 2)

    def apply(self, ax, *, label: str = TOKENS_LABEL) -> None:
        left = self.init_x if self.has_init else self.lo
        if self.scale == "log":
            ax.set_xscale("log")
            pad = (self.hi / left) ** 0.04
            ax.set_xlim(left / pad, self.hi * pad)
        else:
            pad = 0.03 * (self.hi - left)
            ax.set_xlim(left - pad, self.hi + pad)
            label = label.replace("(log scale)", "(linear scale)")
        if self.scale == "log" and self.hi / left < 30:  # under 1.5 decades (a zoom): label 1, 2, 5 of each decade
            ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(token_tick))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: ""))
        if self.has_init:
            ticks = [t for t in ax.get_xticks() if self.lo * 0.999 <= t <= self.hi * 1.001 or
                     (self.scale == "log" and self.lo <= t <= self.hi)]
            ax.set_xticks([self.init_x, *ticks], ["init", *[token_tick(t) for t in ticks]])
            label += "; init = step 0"  # (no dotted line after it: readers took it for a marked event)
        ax.set_xlabel(label)


def short_log_locator(lo: float, hi: float):
    """Major ticks for a log axis over [lo, hi] that labels at least two values: 1, 2, 5 of each decade, or, where
    fewer than two of those fall inside (a range under about 2x, e.g. norms from 0.9 to 1.8: only "1"), evenly
    spaced round values, which on so short a range a log axis spaces almost evenly too."""
    locator = LogLocator(subs=(1.0, 2.0, 5.0))
    if sum(lo <= t <= hi for t in locator.tick_values(lo, hi)) >= 2:
        return locator
    ticks = [t for t in MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi) if lo <= t <= hi and t > 0]
    return FixedLocator(ticks)


def plain_log_ticks(ax, axis: str = "y") -> None:
    """Log-axis tick labels as plain numbers (0.1, 1, 10, 100) instead of powers of ten; at least two labelled ticks
    on a short axis (`short_log_locator`)."""
    target = ax.yaxis if axis == "y" else ax.xaxis
    lo, hi = sorted(ax.get_ylim() if axis == "y" else ax.get_xlim())
    if target.get_scale() == "log" and lo > 0 and hi / lo < 30:  # under 1.5 decades: one tick or none; 1, 2, 5 too
        target.set_major_locator(short_log_locator(lo, hi))
    target.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    target.set_minor_formatter(FuncFormatter(lambda v, _pos: ""))


def placeholder(message: str, *, title: str = "No data to plot", size: tuple[float, float] = (8, 2.2)) -> Figure:
    """A figure that says why there is nothing to draw (never an empty axis)."""
    fig, ax = plt.subplots(figsize=size)
    ax.axis("off")
    ax.set_title(title)
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True, fontsize=10, transform=ax.transAxes)
    return fig


# The width a full-width figure is shown at, in inches at the book's 110 dpi (about 1100-1200 px; see
# display.MAX_FIGURE_PX): figures lay their panels out for it
PAGE_WIDTH_IN = 11.0


def tier_columns(df: pd.DataFrame, *, height: float = 3.6, width: float = 4.6, sharey: bool = True,
                 extra_rows: int = 1) -> tuple[Figure, np.ndarray, list[str]]:
    """A figure with one column per tier of `df` (in the order they appear) and `extra_rows` rows: (figure, axes
    (rows x tiers), tiers)."""
    tiers = list(pd.unique(df["tier"]))
    fig, axes = plt.subplots(extra_rows, len(tiers), figsize=(width * len(tiers), height * extra_rows),
                             sharey=sharey, squeeze=False, layout="constrained")
    return fig, axes, tiers


def token_counts(df: pd.DataFrame) -> pd.Series:
    """Training tokens of each row (the tables carry billions: tokens_b)."""
    return df["tokens_b"].astype(float) * 1e9


def heatmap(ax, grid: np.ndarray, *, vmax: float, cmap: str, xticklabels: list[str]):
    """Rows = layers (layer 0 on top), columns = revisions; non-zero counts written in. Plain imshow: seaborn's
    heatmap redraws the whole figure on every call, which is slow for a grid of them."""
    image = ax.imshow(grid, aspect="auto", cmap=sns.color_palette(cmap, as_cmap=True), vmin=0, vmax=vmax,
                      interpolation="nearest")
    ax.set_xticks(np.arange(grid.shape[1]), xticklabels, rotation=90, fontsize=7)
    ax.set_yticks(np.arange(grid.shape[0]), [str(i) for i in range(grid.shape[0])], fontsize=7)
    ax.set_xticks(np.arange(grid.shape[1] + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(grid.shape[0] + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", linewidth=0.4)
    ax.grid(which="major", visible=False)
    ax.tick_params(which="minor", length=0)
    annotate_nonzero(ax, grid, vmax)
    return image


def annotate_nonzero(ax, grid: np.ndarray, vmax: float, limit: int = 260) -> None:
    """Write the non-zero counts into a heat map (skipped when there are more than `limit` of them: text is slow
    to lay out and unreadable at that density)."""
    cells = np.argwhere(np.nan_to_num(grid) > 0)
    if len(cells) > limit:
        return
    for i, j in cells:
        v = grid[i, j]
        ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=6.5,
                color="white" if v > 0.6 * vmax else "black")


def figure_title(fig: Figure, text: str) -> None:
    """The figure's message, above all its panels, wrapped to the figure's width (a title wider than its panels
    would widen the saved image and shrink the panels on the page)."""
    fig.suptitle(textwrap.fill(text, width=max(40, int(fig.get_figwidth() * 9.5))), fontweight="bold")


def band(ax, x, g: pd.DataFrame, value: str, *, color: str, scale: float = 1.0, step: str | None = None) -> bool:
    """Shade the 95% interval of `value` (columns <value>_lo / _hi) behind a line; False when there is none."""
    lo, hi = f"{value}_lo", f"{value}_hi"
    if lo not in g.columns or not g[lo].notna().any():
        return False
    ax.fill_between(x, scale * g[lo].astype(float), scale * g[hi].astype(float), color=color, alpha=0.18, lw=0,
                    step=step, zorder=1)
    return True


def tier_title(tier: str) -> str:
    """The title of a tier's column (TIER_TITLES; an unknown tier by its name)."""
    return TIER_TITLES.get(tier, tier)


def tier_lines(df: pd.DataFrame, *, height: float, width: float, sharey: bool = True, **columns):
    """The start of a line figure with one panel per tier (`df`: a findings table + tier; as many a row as
    PAGE_WIDTH_IN holds): the figure, one colour per panel, and per tier (axes, tier, its rows with `tokens` and `columns` added (DataFrame.assign), its
    TokenAxis)."""
    tiers = list(pd.unique(df["tier"]))
    # as many tiers a row as the page's width holds (PAGE_WIDTH_IN), the rest below: drawn at the width it is shown
    ncols = min(len(tiers), max(1, int(PAGE_WIDTH_IN // width)))
    nrows = -(-len(tiers) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), sharey=sharey, squeeze=False,
                             layout="constrained")
    for ax in axes.flat[len(tiers):]:
        ax.axis("off")
    colors = palette(list(pd.unique(df["panel"])))
    per_tier = []
    for ax, tier in zip(axes.flat, tiers):
        g = df[df["tier"] == tier].assign(tokens=lambda d: token_counts(d), **columns)
        per_tier.append((ax, tier, g, TokenAxis.of(g["tokens"])))
    return fig, colors, per_tier
