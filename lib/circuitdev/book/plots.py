"""The book's figures: seaborn / matplotlib, one message each, titled, axes labelled with units.

Every function takes a tidy table from `circuitdev.analysis` (plus a `tier` column, see `book.tiers.Tiers.apply`)
and returns a matplotlib Figure; none of them computes a finding. Conventions:

- tiers are drawn side by side (one column each), each on its own token axis (`TokenAxis`), because the toy panel
  trains on ~10^6 tokens and the published models on ~10^12: a log axis for log-spaced revisions, a linear one for
  the toy's dense grid, starting at the first non-zero revision, with step 0 (initialisation) marked "init" apart;
  tokens are labelled k / M / B / T;
- one colour per model family, the same in every figure (`panel_color`);
- an empty input gives `placeholder(message)`, a figure that says what is missing, never a blank axis;
- intervals: a figure whose input carries `<value>_lo` / `<value>_hi` (findings called with `boot=`, issue 14) draws
  them as a band or error bars; rows without them (the published tier) are drawn as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter, MaxNLocator

from circuitdev.book.display import fmt_tokens
from circuitdev.schema import HEAD_CLASSES

TIER_TITLES = {"published": "Published (authors' files)", "toy": "Toy panel (trained here)",
               "measured": "Measured (real models probed here)", "paper": "Paper (claimed)"}
TOKENS_LABEL = "training tokens (log scale)"  # a linear TokenAxis says so
_FAMILY_COLORS = {"olmoe": "#2ca02c", "olmo": "#ff7f0e", "pythia": "#1f77b4", "neox": "#1f77b4"}
_EXTRA_COLORS = ["#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#d62728"]


# ------------------------------------------------------------------------------------------------------- helpers


def panel_color(panel: str, index: int = 0) -> str:
    """The family colour of a panel name (pythia / gpt-neox blue, olmo orange, olmoe green), else a spare one."""
    name = panel.lower()
    for key, color in _FAMILY_COLORS.items():
        if key in name:
            return color
    return _EXTRA_COLORS[index % len(_EXTRA_COLORS)]


def palette(panels: Sequence[str]) -> dict[str, str]:
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
    labelled "init", behind a dotted line. Each tier gets its own, so the toy's range fills its axes."""

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
        ax.xaxis.set_major_formatter(FuncFormatter(token_tick))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: ""))
        if self.has_init:
            ticks = [t for t in ax.get_xticks() if self.lo * 0.999 <= t <= self.hi * 1.001 or
                     (self.scale == "log" and self.lo <= t <= self.hi)]
            ax.set_xticks([self.init_x, *ticks], ["init", *[token_tick(t) for t in ticks]])
            sep = np.sqrt(self.init_x * self.lo) if self.scale == "log" else (self.init_x + self.lo) / 2
            ax.axvline(sep, color="grey", lw=0.8, ls=":", zorder=0)
            label += "; init = step 0"
        ax.set_xlabel(label)


def plain_log_ticks(ax, axis: str = "y") -> None:
    """Log-axis tick labels as plain numbers (0.1, 1, 10, 100) instead of powers of ten."""
    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    target.set_minor_formatter(FuncFormatter(lambda v, _pos: ""))


def placeholder(message: str, *, title: str = "No data to plot", size: tuple[float, float] = (8, 2.2)) -> Figure:
    """A figure that says why there is nothing to draw (never an empty axis)."""
    fig, ax = plt.subplots(figsize=size)
    ax.axis("off")
    ax.set_title(title)
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True, fontsize=10, transform=ax.transAxes)
    return fig


def _tier_columns(df: pd.DataFrame, *, height: float = 3.6, width: float = 4.6, sharey: bool = True,
                  extra_rows: int = 1) -> tuple[Figure, np.ndarray, list[str]]:
    tiers = list(pd.unique(df["tier"]))
    fig, axes = plt.subplots(extra_rows, len(tiers), figsize=(width * len(tiers), height * extra_rows),
                             sharey=sharey, squeeze=False, layout="constrained")
    return fig, axes, tiers


def _tokens(df: pd.DataFrame) -> pd.Series:
    return df["tokens_b"].astype(float) * 1e9


def _heatmap(ax, grid: np.ndarray, *, vmax: float, cmap: str, xticklabels: list[str]):
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
    _annotate_nonzero(ax, grid, vmax)
    return image


def _annotate_nonzero(ax, grid: np.ndarray, vmax: float, limit: int = 260) -> None:
    """Write the non-zero counts into a heat map (skipped when there are more than `limit` of them: text is slow
    to lay out and unreadable at that density)."""
    cells = np.argwhere(np.nan_to_num(grid) > 0)
    if len(cells) > limit:
        return
    for i, j in cells:
        v = grid[i, j]
        ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=6.5,
                color="white" if v > 0.6 * vmax else "black")


def _title(fig: Figure, text: str) -> None:
    fig.suptitle(text, fontweight="bold")


def _band(ax, x, g: pd.DataFrame, value: str, *, color: str, scale: float = 1.0, step: str | None = None) -> bool:
    """Shade the 95% interval of `value` (columns <value>_lo / _hi) behind a line; False when there is none."""
    lo, hi = f"{value}_lo", f"{value}_hi"
    if lo not in g.columns or not g[lo].notna().any():
        return False
    ax.fill_between(x, scale * g[lo].astype(float), scale * g[hi].astype(float), color=color, alpha=0.18, lw=0,
                    step=step, zorder=1)
    return True



# ---------------------------------------------------------------------------------------------- per-model screen


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
        image = _heatmap(ax, grid.to_numpy(dtype=float), vmax=vmax, cmap="rocket_r", xticklabels=xt)
        ax.set_title(cls)
        ax.set_xlabel("training tokens at the revision")
        ax.set_ylabel("layer")
        ax.tick_params(axis="y", labelsize=7, rotation=0)
    for ax in list(axes.flat)[len(classes):]:
        ax.axis("off")
    fig.colorbar(image, ax=axes, shrink=0.6, label="heads in the layer", ticks=MaxNLocator(integer=True))
    _title(fig, title)
    return fig


# --------------------------------------------------------------------------------------------------- F1 and F2


def bos_layer_heatmaps(layers: pd.DataFrame, *, threshold: float = 30.0, floor_layers: Sequence[int] = (0, 1),
                       heads_per_layer: dict[str, int] | None = None, col_wrap: int = 3) -> Figure:
    """F1: BOS-class heads (first-token ≥ threshold) per layer over revisions, one heatmap per (tier, panel); the
    floor layers are outlined. `layers`: findings.layer_counts + tier."""
    if layers.empty:
        return placeholder("No developmental table from any tier.", title="BOS heads per layer")
    keys = list(layers[["tier", "panel"]].drop_duplicates().itertuples(index=False, name=None))
    ncols = min(col_wrap, len(keys))
    nrows = int(np.ceil(len(keys) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 4.2 * nrows), squeeze=False, layout="constrained")
    for ax, (tier, panel) in zip(axes.flat, keys):
        g = layers[(layers["tier"] == tier) & (layers["panel"] == panel)]
        revs = g.drop_duplicates("revision").sort_values("revision_index")
        grid = g.pivot(index="layer", columns="revision_index", values="n").reindex(columns=revs["revision_index"])
        vmax = (heads_per_layer or {}).get(panel) or max(1, int(g["n"].max()))
        image = _heatmap(ax, grid.to_numpy(dtype=float), vmax=vmax, cmap="mako_r",
                         xticklabels=[fmt_tokens(t * 1e9) for t in revs["tokens_b"]])
        fig.colorbar(image, ax=ax, shrink=0.8, label="BOS-class heads", ticks=MaxNLocator(integer=True))
        floor = [layer for layer in floor_layers if layer < len(grid)]
        if floor:
            ax.add_patch(Rectangle((-0.5, min(floor) - 0.5), len(revs), max(floor) - min(floor) + 1, fill=False,
                                   edgecolor="#d62728", lw=1.8))
        ax.set_xlabel("training tokens at the revision")
        ax.set_ylabel("layer")
        ax.tick_params(axis="y", labelsize=7, rotation=0)
        ax.set_title(f"{panel} · {tier}", fontsize=10)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    _title(fig, f"Heads with first-token selectivity ≥ {threshold:g}× per layer (red outline: layers "
                f"{', '.join(map(str, floor_layers))})")
    return fig


def floor_margin(margin: pd.DataFrame, *, threshold: float = 30.0, floor_layers: Sequence[int] = (0, 1)) -> Figure:
    """F1, how close the floor comes to the bar: the largest first-token selectivity in the floor layers at every
    revision, one line per model, one column per tier, with its 95% bootstrap interval as error bars where the
    tier has one. `margin`: findings.floor_margin + tier."""
    margin = margin[margin["value"].notna()] if len(margin) else margin
    if margin.empty:
        return placeholder("No floor-layer heads in any tier.", title="The floor's largest sink score")
    fig, axes, tiers = _tier_columns(margin, height=3.6, width=5.0, sharey=False)
    colors = palette(list(pd.unique(margin["panel"])))
    for ax, tier in zip(axes[0], tiers):
        g = margin[margin["tier"] == tier].assign(tokens=lambda d: _tokens(d))
        axis = TokenAxis.of(g["tokens"])
        for panel, gp in g.groupby("panel", sort=False):
            x, v = axis.x(gp["tokens"]), gp["value"].clip(lower=1e-2)
            ax.plot(x, v, color=colors[panel], marker="o", ms=3, lw=1.4, label=panel)
            if gp["value_lo"].notna().any():
                err = np.vstack([(v - gp["value_lo"].clip(lower=1e-2)).clip(lower=0), (gp["value_hi"] - v).clip(lower=0)])
                ax.errorbar(x, v, yerr=err, fmt="none", ecolor=colors[panel], elinewidth=1, capsize=2, alpha=0.8)
        ax.axhline(threshold, color="#d62728", lw=1, ls=":")
        ax.annotate(f"{threshold:g}× bar", (0.99, threshold), xycoords=("axes fraction", "data"), fontsize=7,
                    color="#d62728", va="bottom", ha="right")
        ax.set_yscale("log")
        plain_log_ticks(ax)
        axis.apply(ax)
        ax.set_ylabel(f"top first-token sel., layers {', '.join(map(str, floor_layers))} (×)")
        ax.set_title(TIER_TITLES.get(tier, tier), fontsize=10)
        ax.legend(fontsize=7, loc="upper left")
    _title(fig, "How close the floor layers come to the sink bar (error bars: 95% bootstrap interval)")
    return fig


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
    for ax, sel in zip(axes, (None, (zoom[0] - pad, zoom[1] + pad))):
        part = refined if sel is None else refined[refined["tokens_b"].between(*sel)]
        base = grid if sel is None else grid[grid["tokens_b"].between(*sel)]
        axis = TokenAxis.of(_tokens(part))
        x = axis.x(_tokens(part))
        ax.plot(axis.x(_tokens(base)), scale * base[value], color="#7f7f7f", ls="--", marker="o", ms=4, lw=1,
                label="default grid", zorder=2)
        ax.plot(x, scale * part[value], color="#1f77b4", lw=1.6, label="refined grid", zorder=3)
        new = part["refined"].to_numpy(dtype=bool)
        ax.scatter(x[new], scale * part.loc[new, value], marker="D", s=30, color="#d62728", zorder=4,
                   label="added by refinement")
        _band(ax, x, part, value, color="#1f77b4", scale=scale)
        for win, shade in ((window, 0.12), (refined_window, 0.3)):
            if win is not None:
                ax.axvspan(*axis.x([win[0] * 1e9, win[1] * 1e9]), color="#ff7f0e", alpha=shade, lw=0, zorder=0)
        axis.apply(ax)
        ax.set_ylabel(ylabel)
        ax.set_title("all of training" if sel is None else "zoomed on the event (shaded: its window, before → "
                     "after)", fontsize=9)
    axes[0].legend(fontsize=7, loc="upper left")
    _title(fig, title)
    return fig


def bos_fraction_lines(frac: pd.DataFrame, *, threshold: float = 30.0) -> Figure:
    """F2: whole-model BOS fraction (%) against training tokens, one line per model, one column per tier.
    `frac`: findings.bos_fraction + tier."""
    if frac.empty:
        return placeholder("No developmental table from any tier.", title="BOS fraction over training")
    fig, axes, tiers = _tier_columns(frac, height=3.8, width=5.0)
    colors = palette(list(pd.unique(frac["panel"])))
    for ax, tier in zip(axes[0], tiers):
        g = frac[frac["tier"] == tier].assign(tokens=lambda d: _tokens(d), pct=lambda d: 100 * d["bos_fraction"])
        axis = TokenAxis.of(g["tokens"])
        sns.lineplot(g.assign(x=axis.x(g["tokens"])), x="x", y="pct", hue="panel", palette=colors, marker="o", ax=ax)
        for p, gp in g.groupby("panel", sort=False):  # 95% bootstrap bands where the tier has them (the caption says)
            _band(ax, axis.x(gp["tokens"]), gp, "bos_fraction", color=colors[p], scale=100)
        axis.apply(ax)
        ax.set_ylabel(f"heads with first-token ≥ {threshold:g}× (%)")
        ax.set_ylim(-2, 100)
        ax.set_title(TIER_TITLES.get(tier, tier), fontsize=10)
        ax.legend(title="model", fontsize=8, title_fontsize=8, loc="upper left")
    _title(fig, "Attention-sink (BOS) heads as a share of all heads over training")
    return fig


# --------------------------------------------------------------------------------------------------------- F3


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
    fig, axes, tiers = _tier_columns(ms, height=0.9 + 0.75 * ms.groupby("tier")["panel"].nunique().max(),
                                     width=5.4, sharey=False)
    for ax, tier in zip(axes[0], tiers):
        g = ms[ms["tier"] == tier].assign(tokens=lambda d: _tokens(d))
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
        ax.set_title(TIER_TITLES.get(tier, tier), fontsize=10)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=4, fontsize=8, frameon=False)
    _title(fig, "First revision reaching each milestone (grey bar: induction ≥3 heads → BOS ≥50%)")
    return fig


# --------------------------------------------------------------------------------------------------------- F4


def recall_curves(recall: pd.DataFrame, *, threshold: float = 50.0) -> Figure:
    """F4: recall (%) of the final induction circuit over training, one line per model, one column per tier.
    `recall`: findings.circuit_recall + tier."""
    recall = recall[recall["recall"].notna()] if len(recall) else recall
    if recall.empty:
        return placeholder("No panel has an induction circuit at its final revision.", title="Circuit recall")
    fig, axes, tiers = _tier_columns(recall, height=3.6, width=5.0)
    colors = palette(list(pd.unique(recall["panel"])))
    for ax, tier in zip(axes[0], tiers):
        g = recall[recall["tier"] == tier].assign(tokens=lambda d: _tokens(d), pct=lambda d: 100 * d["recall"])
        axis = TokenAxis.of(g["tokens"])
        for panel, gp in g.groupby("panel", sort=False):
            n = int(gp["n_circuit"].iloc[0])
            x = axis.x(gp["tokens"])
            ax.step(x, gp["pct"], where="post", color=colors[panel], lw=2, label=f"{panel} ({n} heads)")
            ax.scatter(x, gp["pct"], color=colors[panel], s=16, zorder=3)
            _band(ax, x, gp, "recall", color=colors[panel], scale=100, step="post")
        for level in (100 / 3, 200 / 3, 100):
            ax.axhline(level, color="grey", lw=0.7, ls=":")
        axis.apply(ax)
        ax.set_ylim(-5, 105)
        ax.set_ylabel(f"final circuit heads already ≥ {threshold:g}× (%)")
        ax.set_title(TIER_TITLES.get(tier, tier), fontsize=10)
        ax.legend(fontsize=8, loc="upper left")
    _title(fig, "How early the final induction circuit is already visible to the screen")
    return fig


# --------------------------------------------------------------------------------------------------------- F5


def pr_selectivity(traj: pd.DataFrame, *, threshold: float = 50.0, class_label: str = "induction",
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
        g = traj[(traj["tier"] == tier) & (traj["panel"] == panel)].assign(tokens=lambda d: _tokens(d))
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
    _title(fig, "Participation ratio and selectivity of each circuit head on one time axis")
    return fig


# --------------------------------------------------------------------------------------------------------- F6


def noise_floor(nulls: pd.DataFrame, *, thresholds: Sequence[float] = (30.0, 50.0)) -> Figure:
    """F6: null-selectivity p99 and max against the largest real induction selectivity, over training; one column
    per (tier, panel). `nulls`: tier, panel, tokens_b, null_p99, null_max, real_max (tier "paper" = claimed)."""
    if nulls.empty:
        return placeholder("No null-selectivity draws in any tier: probe with n_nulls > 0.",
                           title="Selectivity noise floor")
    keys = list(nulls[["tier", "panel"]].drop_duplicates().itertuples(index=False, name=None))
    fig, axes = plt.subplots(1, len(keys), figsize=(4.4 * len(keys), 3.8), squeeze=False, layout="constrained")
    styles = {"real_max": ("real max (induction)", "-", "#1f77b4"), "null_max": ("null max", "--", "#ff7f0e"),
              "null_p99": ("null p99", "-", "#2ca02c")}
    for ax, (tier, panel) in zip(axes[0], keys):
        g = nulls[(nulls["tier"] == tier) & (nulls["panel"] == panel)].sort_values("tokens_b")
        axis = TokenAxis.of(_tokens(g))
        for col, (label, ls, color) in styles.items():
            ax.plot(axis.x(_tokens(g)), g[col], ls=ls, color=color, marker="o", ms=3, label=label)
        for t in thresholds:
            ax.axhline(t, color="grey", lw=0.7, ls=":")
            ax.annotate(f"{t:g}×", (1, t), xycoords=("axes fraction", "data"), fontsize=7, color="grey",
                        ha="right", va="bottom")
        ax.set_yscale("log")
        plain_log_ticks(ax)
        axis.apply(ax)
        ax.set_ylabel("selectivity (×, log)")
        ax.set_title(f"{panel} · {TIER_TITLES.get(tier, tier)}", fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
    _title(fig, "The selectivity noise floor (null p99) against the real signal over training")
    return fig


# ------------------------------------------------------------------------------------------ sensitivity, ablation


def threshold_sensitivity(sens: pd.DataFrame, *, paper_thresholds: dict[str, float] | None = None) -> Figure:
    """Counts at each panel's final revision as a function of the selectivity threshold: BOS fraction (%) for
    first-token, number of heads for the other classes; one column per class, one line per (tier, panel).
    `sens`: findings.threshold_sensitivity(final_only=True) + tier."""
    if sens.empty:
        return placeholder("No developmental table from any tier.", title="Threshold sensitivity")
    paper_thresholds = paper_thresholds or {"first-token": 30.0, "induction": 50.0, "previous-token": 100.0}
    classes = list(pd.unique(sens["head_class"]))
    fig, axes = plt.subplots(1, len(classes), figsize=(5.2 * len(classes), 3.9), squeeze=False,
                             layout="constrained")
    sens = sens.assign(label=sens["panel"] + " · " + sens["tier"])
    colors = {lab: panel_color(p, i) for i, (lab, p) in enumerate(zip(sens["label"], sens["panel"]))}
    dashes = {"published": "", "toy": (4, 2), "measured": (1, 1)}
    for ax, cls in zip(axes[0], classes):
        g = sens[sens["head_class"] == cls]
        bos = cls == "first-token"
        y = 100 * g["fraction"] if bos else g["n"]
        for lab, gl in g.assign(y=y).groupby("label", sort=False):
            ax.plot(gl["threshold"], gl["y"], color=colors[lab], dashes=dashes.get(gl["tier"].iloc[0], ""),
                    label=lab)
        if cls in paper_thresholds:
            ax.axvline(paper_thresholds[cls], color="#d62728", lw=1, ls=":")
            ax.annotate(f"paper {paper_thresholds[cls]:g}×", (paper_thresholds[cls], 1), fontsize=8,
                        xycoords=("data", "axes fraction"), ha="left", va="top", color="#d62728")
        ax.set_xscale("log")
        plain_log_ticks(ax, "x")
        ax.set_xlabel("selectivity threshold τ (×, log scale)")
        ax.set_ylabel("heads at the final revision (%)" if bos else "heads at the final revision (log)")
        ax.set_title(cls, fontsize=10)
        if not bos:
            ax.set_yscale("symlog", linthresh=1)
            plain_log_ticks(ax)
        ax.set_ylim(bottom=0)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(4, len(labels)), fontsize=8, frameon=False)
    _title(fig, "How the final-revision counts depend on the selectivity threshold")
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


def audit_status(audit: pd.DataFrame) -> Figure:
    """The audit at a glance: claims per finding that the data match, contradict, or cannot decide."""
    if audit.empty:
        return placeholder("No audit: the published tier is absent.", title="Audit")
    counts = audit.groupby(["finding", "status"]).size().unstack(fill_value=0)
    counts = counts.reindex(columns=[c for c in ("match", "differs", "unverified") if c in counts.columns])
    colors = {"match": "#2ca02c", "differs": "#d62728", "unverified": "#bdbdbd"}
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(counts) + 1.4), layout="constrained")
    left = np.zeros(len(counts))
    for status in counts.columns:
        ax.barh(counts.index, counts[status], left=left, color=colors[status], label=status)
        for y, (l, v) in enumerate(zip(left, counts[status])):
            if v:
                ax.text(l + v / 2, y, str(int(v)), ha="center", va="center", fontsize=8, color="white")
        left += counts[status].to_numpy()
    ax.invert_yaxis()
    ax.set_xlabel("claims (count)")
    ax.set_ylabel("finding")
    ax.legend(ncol=3, fontsize=8, loc="lower right")
    ax.set_title("The paper's numeric claims against its own published data", fontsize=10)
    return fig


def batch_layout(first_a: int, seq_len: int, baseline: Sequence[int], *, n_local: int = 4) -> Figure:
    """Method: where each head class looks from the query (the second A at T − 1) in one sequence of the batch,
    with the fixed baseline positions the selectivities are divided by."""
    q = seq_len - 1
    targets = [("first-token (BOS)", [0], "#8c564b"), ("induction (B)", [first_a + 1], "#d62728"),
               ("duplicate-token (first A)", [first_a], "#ff7f0e"),
               ("local", list(range(q - 1 - n_local, q - 1)), "#bcbd22"), ("previous-token", [q - 1], "#9467bd"),
               ("self (query)", [q], "#1f77b4")]
    fig, ax = plt.subplots(figsize=(8, 2.8), layout="constrained")
    ax.hlines(0, 0, q, color="#cccccc", lw=6, zorder=0)
    ax.scatter(list(baseline), np.zeros(len(baseline)) - 0.35, marker="|", s=120, color="#7f7f7f",
               label=f"baseline positions ({len(baseline)})")
    for i, (label, pos, color) in enumerate(targets):
        ax.scatter(pos, np.zeros(len(pos)) + 0.35, s=46, color=color, edgecolor="black", linewidth=0.4,
                   label=label, zorder=3)
    ax.annotate("query = second A", (q, 0), xytext=(q - 40, 0.75), fontsize=8,
                arrowprops={"arrowstyle": "->", "color": "#444"})
    ax.set_xlim(-4, q + 4)
    ax.set_ylim(-0.8, 1.0)
    ax.set_yticks([])
    ax.set_xlabel("position in the sequence (token index)")
    ax.legend(ncol=4, fontsize=8, loc="upper left", bbox_to_anchor=(0, -0.3), frameon=False)
    ax.set_title("Where each class looks from the query, in one sequence of the induction batch", fontsize=10)
    return fig
