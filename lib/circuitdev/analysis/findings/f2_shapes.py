"""F2, the shape of the sink trajectory: the whole-model BOS fraction at every revision, a measured shape descriptor
per panel (ramp, transition or flat: by the largest jump between revisions, and by the steepest rise per e-fold of
tokens, which does not depend on where the revisions fall), and what differs between the runs being compared."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from circuitdev.analysis import uncertainty
from circuitdev.analysis.bars import bar_runs, runs_text
from circuitdev.analysis.devtable import head_counts, index, require
from circuitdev.analysis.findings.basics import BOS, EPS
from circuitdev.analysis.findings.claim import ALL, COUNTING_RULES, RobustClaim, claim_row, hangs_on_row, tokens_text
from circuitdev.measure.classify import CountingRule
from circuitdev.schema import BOS_THRESHOLD

__all__ = ["bos_fraction", "steepest_rise", "trajectory_shape", "run_differences", "shape_ranges"]

MIN_RISE_PP = 10.0  # no shape is called for a rise smaller than this many percentage points ...
MIN_RISE_HEADS = 3  # ... or than this many heads of the model (one or two heads crossing a bar are no shape)
MIN_SPAN_EFOLDS = 1.0  # the steepest rise is measured over at least this many e-folds of tokens


def bos_fraction(dev: pd.DataFrame, *, threshold: float = BOS_THRESHOLD, rule: CountingRule = "per-class",
                 boot: pd.DataFrame | None = None) -> pd.DataFrame:
    """F2: whole-model BOS fraction n_first(tau) / n_heads at every revision.

    Columns: panel, revision, revision_index, [step], tokens_b, token_fraction, n_heads, n_bos, bos_fraction; with
    `boot` (bootstrap replicates) also n_bos_lo / _hi and bos_fraction_lo / _hi, with their `_boot_mean` and
    `_widened` (`uncertainty.with_intervals`)."""
    if boot is not None:
        return uncertainty.with_intervals(dev, boot, lambda d: bos_fraction(d, threshold=threshold, rule=rule),
                                          columns=["n_bos", "bos_fraction"])
    out = head_counts(dev, BOS, threshold=threshold, rule=rule)
    return out.rename(columns={"n": "n_bos", "fraction": "bos_fraction"})


def steepest_rise(tokens_b: np.ndarray, pct: np.ndarray, *, min_span_efolds: float = MIN_SPAN_EFOLDS
                  ) -> tuple[float, int, int]:
    """The steepest rise of `pct` (percentage points) per e-fold of tokens, and the revisions (i, j) it runs between:
    max over revisions i < j of (pct_j - pct_i) / max(ln(tokens_j / tokens_i), min_span_efolds). Revisions at zero
    tokens have no logarithm and are left out; (NaN, -1, -1) when fewer than two remain.

    With min_span_efolds = 0 this is the largest Delta pp / Delta ln(tokens) between adjacent revisions (a chord is
    never steeper than the steepest of the steps it spans). The floor (default one e-fold) keeps one head crossing
    the bar between two close revisions of a refined grid from reading as a steep rise: the measure is then "the most
    the fraction rises within one e-fold of training", unchanged by revisions added where nothing changes or where
    the trajectory is straight in log tokens."""
    ok = np.flatnonzero(np.asarray(tokens_b, dtype=float) > 0)
    if len(ok) < 2:
        return np.nan, -1, -1
    t, v = np.log(np.asarray(tokens_b, dtype=float)[ok]), np.asarray(pct, dtype=float)[ok]
    i, j = np.triu_indices(len(ok), k=1)
    span = t[j] - t[i]
    keep = span > 0  # two revisions at the same tokens have no slope
    rate = np.full(len(i), -np.inf)
    rate[keep] = (v[j] - v[i])[keep] / np.maximum(span[keep], min_span_efolds)
    if not keep.any():
        return np.nan, -1, -1
    k = int(np.argmax(rate))
    return float(rate[k]), int(ok[i[k]]), int(ok[j[k]])


def trajectory_shape(fractions: pd.DataFrame, *, value: str = "bos_fraction", transition_share: float = 0.5,
                     saturation_share: float = 0.9, min_rise_pp: float = MIN_RISE_PP,
                     min_rise_heads: int = MIN_RISE_HEADS, min_span_efolds: float = MIN_SPAN_EFOLDS) -> pd.DataFrame:
    """F2 shape descriptor per panel, so "ramp" vs "transition" is measured rather than asserted.

    total rise = final - first value (percentage points). Two measures of how concentrated it is:
    - the largest jump: the biggest increase between adjacent revisions, in pp and as a share of the total rise
      (`jump_share`); `shape` is "transition" when one step carries at least `transition_share` of the rise, else
      "ramp". It depends on the grid: one step across a 10x token gap lumps what a finer grid would spread;
    - the steepest rise per e-fold of tokens (`steepest_pp_per_efold`, `steepest_rise`), in pp, and as a share of
      the total rise (`efold_share`: the share of the whole rise that happens within one e-fold of training at the
      steepest pace); `shape_efold` is "transition" when that share is at least `transition_share`. It does not move
      when revisions are added where nothing changes.
    The minimum rise (the rule): no shape is called -- both shapes read "flat" -- when the total rise is below
    `min_rise_pp` percentage points or below `min_rise_heads` heads of the model (100 * min_rise_heads / n_heads
    pp, where the table has n_heads): one head appearing in a 16-head toy (6.25 pp) is not a transition.
    Saturation: the final level, and the first revision reaching `saturation_share` of it. The jump's token ratio
    is given too (a big jump over a 10x token gap is slower than it looks)."""
    require(fractions, ["panel", "revision", "tokens_b", value], "trajectory_shape")
    rows = []
    panels, labels = fractions["panel"].to_numpy(), fractions["revision"].to_numpy()
    values, tokens = fractions[value].to_numpy(dtype=float), fractions["tokens_b"].to_numpy(dtype=float)
    heads = fractions["n_heads"].to_numpy(dtype=float) if "n_heads" in fractions.columns else None
    for panel in pd.unique(panels):
        idx = np.flatnonzero(panels == panel)
        idx = idx[np.argsort(tokens[idx], kind="stable")]
        min_rise = max(min_rise_pp, 100 * min_rise_heads / heads[idx].max() if heads is not None else 0.0)
        rows.append({"panel": panel, **_shape_of(values[idx] * 100, tokens[idx], labels[idx], min_rise=min_rise,
                                                 transition_share=transition_share,
                                                 saturation_share=saturation_share,
                                                 min_span_efolds=min_span_efolds)})
    return pd.DataFrame(rows)


def _shape_of(v: np.ndarray, t: np.ndarray, revision: np.ndarray, *, min_rise: float, transition_share: float,
              saturation_share: float, min_span_efolds: float) -> dict:
    """One panel's shape (`trajectory_shape`'s columns after `panel`) from its values `v` (percent), tokens `t` and
    revision names, in token order."""
    steps = np.diff(v) if len(v) > 1 else np.array([0.0])
    j = int(np.argmax(steps))
    rise = v[-1] - v[0]
    share = steps[j] / rise if rise > 0 else np.nan
    steep, a, b = steepest_rise(t, v, min_span_efolds=min_span_efolds)
    efold_share = steep / rise if rise > 0 and np.isfinite(steep) else np.nan
    called = rise >= min_rise - EPS
    reached = np.flatnonzero(v >= saturation_share * v[-1] - EPS) if v[-1] > 0 else np.array([], int)
    return {
        "n_revisions": len(v), "start_pct": v[0], "final_pct": v[-1], "peak_pct": v.max(),
        "rise_pp": rise, "min_rise_pp": min_rise,
        "largest_jump_pp": steps[j] if len(v) > 1 else np.nan, "jump_share": share,
        "jump_from_revision": revision[j], "jump_to_revision": revision[min(j + 1, len(v) - 1)],
        "jump_from_tokens_b": t[j], "jump_to_tokens_b": t[min(j + 1, len(v) - 1)],
        "jump_token_ratio": t[min(j + 1, len(v) - 1)] / t[j] if t[j] > 0 else np.nan,
        "steepest_pp_per_efold": steep, "efold_share": efold_share,
        "steepest_from_revision": revision[a] if a >= 0 else None,
        "steepest_to_revision": revision[b] if b >= 0 else None,
        "steepest_from_tokens_b": t[a] if a >= 0 else np.nan, "steepest_to_tokens_b": t[b] if b >= 0 else np.nan,
        "saturation_pct": v[-1],
        "saturation_revision": revision[reached[0]] if len(reached) else None,
        "saturation_tokens_b": t[reached[0]] if len(reached) else np.nan,
        "shape": _label(share, transition_share, called),
        "shape_efold": _label(efold_share, transition_share, called),
    }


def _label(share: float, transition_share: float, called: bool) -> str:
    if not called or not np.isfinite(share):
        return "flat"
    return "transition" if share >= transition_share else "ramp"


RUN_COLUMNS = ["panel", "architecture", "layers", "heads_per_layer", "heads", "dtype", "tokens_per_step",
               "final_tokens_b", "revisions", "description"]


def run_differences(dev: pd.DataFrame, panels: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """What differs between the runs a comparison of shapes sets side by side: one architecture per training run
    confounds architecture with training data and tokens per step. Per panel of `dev`: architecture (the panel
    file's family), layers and heads per layer (from the table), dtype, tokens per step, final tokens (B) and the
    number of revisions (from the table), and the panel file's description (its training data, where it says).
    `panels`: panel name -> the panel as `sources.panels.load_panel` reads it (or anything with `family`, `dtype`,
    `tokens_per_step`, `description`, `revisions`); a panel missing from it gets None there. None (default): each
    panel's file, read by name (`panel_files`). Tokens per step: the panel's own, else tokens / step where every
    revision with a step gives the same. Columns: RUN_COLUMNS."""
    require(dev, ["panel", "revision", "tokens_b", "layer", "head"], "run_differences")
    panels = panel_files(pd.unique(dev["panel"])) if panels is None else panels
    ix = index(dev)
    rows = []
    for panel, at in ix.panels():
        g = dev[dev["panel"] == panel]
        info = panels.get(panel)
        layers, per_layer = int(g["layer"].max()) + 1, int(g["head"].max()) + 1
        rows.append({"panel": panel, "architecture": getattr(info, "family", None), "layers": layers,
                     "heads_per_layer": per_layer, "heads": int(ix.cols["n_heads"][at].max()),
                     "dtype": getattr(info, "dtype", None), "tokens_per_step": _tokens_per_step(info),
                     "final_tokens_b": float(ix.cols["tokens_b"][at].max()), "revisions": len(at),
                     "description": " ".join(str(getattr(info, "description", "") or "").split()) or None})
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def panel_files(names) -> dict[str, Any]:
    """The panel file of each name that has one (`sources.panels.load_panel`, hub ids left unresolved), with the
    published run's tokens per step (`sources.published_panels.PUBLISHED_PANELS`) where the file states none (OLMo's
    revisions are labelled by tokens)."""
    from dataclasses import replace

    from circuitdev.errors import ConfigError
    from circuitdev.sources.panels import load_panel
    from circuitdev.sources.published_panels import PUBLISHED_PANELS

    out = {}
    for name in names:
        try:
            panel = load_panel(name, resolve_hub=False)
        except ConfigError:
            continue
        if not panel.tokens_per_step and name in PUBLISHED_PANELS:
            panel = replace(panel, tokens_per_step=PUBLISHED_PANELS[name].tokens_per_step)
        out[name] = panel
    return out


def shape_ranges(shapes: pd.DataFrame, *, shape: str = "transition", column: str = "shape",
                 thresholds: Sequence[float] | None = None) -> pd.DataFrame:
    """Where across a grid of thresholds a model has a shape (a `findings.shape_sensitivity` table, with a tier
    column or not): the thresholds at which `column` equals `shape`, as the set of runs of consecutive grid points
    they really are -- "2×, 5–300×, 1000×", never "from 2× to 1000×" when the shape breaks in between -- and how
    many. `thresholds`: the grid (default: the thresholds in the table). Columns: [tier], panel, count, ranges."""
    require(shapes, ["panel", "threshold", column], "shape_ranges", allow_empty=True)
    keys = [c for c in ("tier", "panel") if c in shapes.columns]
    grid = sorted(thresholds if thresholds is not None else pd.unique(shapes["threshold"]))
    rows = []
    for key, g in shapes.groupby(keys, sort=False):
        hit = set(g.loc[g[column] == shape, "threshold"])
        rows.append({**dict(zip(keys, key if isinstance(key, tuple) else (key,))), "count": len(hit),
                     "ranges": runs_text(bar_runs(hit, grid)) or "none"})
    return pd.DataFrame(rows, columns=[*keys, "count", "ranges"])


def _tokens_per_step(panel: Any) -> int | None:
    """The panel's tokens per optimizer step, else the one ratio tokens / step its revisions share (None if not)."""
    if getattr(panel, "tokens_per_step", None):
        return int(panel.tokens_per_step)
    ratios = {r.tokens / r.step for r in getattr(panel, "revisions", ()) if getattr(r, "step", None)}
    if len(ratios) != 1:
        return None
    ratio = float(ratios.pop())
    return int(ratio) if ratio.is_integer() else None


# ------------------------------------------------------------------------------------ F2 as a robustness claim
# F2's three shapes (the paper's words: a steady ramp in Pythia, a sudden transition in dense OLMo, an early gradual
# rise in OLMoE) as trajectory_shape labels; a panel's family is read from its name.
PAPER_SHAPES: dict[str, str] = {"pythia": "ramp", "olmo": "transition", "olmoe": "ramp"}


def paper_family(panel: str) -> str | None:
    """The paper model family a panel is a probe of -- pythia / olmo / olmoe -- from its name (olmoe before olmo), None
    when it names none (not `measure.families.family_of`, a model's module layout)."""
    name = panel.lower()
    return next((f for f in ("olmoe", "olmo", "pythia") if f in name), None)


def _shapes_over_bars(dev: pd.DataFrame, taus: Sequence[float], rule: CountingRule) -> list[dict]:
    rows = []
    for tau in taus:
        shape = trajectory_shape(bos_fraction(dev, threshold=tau, rule=rule))
        fams = {p: paper_family(p) for p in shape["panel"]}
        got = []
        for r in shape.itertuples():
            if fams[r.panel] in PAPER_SHAPES:
                ok = r.shape == PAPER_SHAPES[fams[r.panel]]
                got.append((fams[r.panel], ok))
                rows.append(claim_row(r.panel, PAPER_SHAPES[fams[r.panel]], "first_token", tau, rule, r.jump_share,
                                      ok, "exact", BOS_THRESHOLD, "per-class"))
        if sorted(f for f, _ in got) == sorted(PAPER_SHAPES):  # one model of each family: the contrast itself
            rows.append(claim_row(ALL, "three shapes", "first_token", tau, rule, sum(ok for _, ok in got),
                                  all(ok for _, ok in got), "exact", BOS_THRESHOLD, "per-class"))
    return rows


def _shapes_hangs_on(dev: pd.DataFrame, rule: CountingRule) -> list[dict]:
    """The largest jump's share of the rise against the 50% a transition needs."""
    rows = []
    for r in trajectory_shape(bos_fraction(dev, rule=rule)).itertuples():
        rows.append(hangs_on_row(r.panel, r.shape, "first_token", BOS_THRESHOLD, None, r.jump_to_revision,
                                 r.jump_to_tokens_b, r.jump_share, against=0.5, text=(
                                     f"its largest jump ({tokens_text(r.jump_from_tokens_b)} → "
                                     f"{tokens_text(r.jump_to_tokens_b)}) carries {r.jump_share:.0%} of the total "
                                     f"rise ({r.jump_share / 0.5:.2f}× the 50% a transition needs)")
                                 if np.isfinite(r.jump_share) else "its share of sink heads never rises: no shape to call"))
    return rows


SHAPES_CLAIM = RobustClaim(
    "F2.shapes", "F2", "each model has the paper's shape (Pythia ramp, OLMo transition, OLMoE ramp)",
    "share of the total rise in the largest jump (\"all\": models with their paper shape)", COUNTING_RULES,
    _shapes_over_bars, _shapes_hangs_on, unit=lambda v: f"{100 * v:.0f}% in the largest jump",
    axis=("share of the rise in the largest jump", "linear", 0.5), all_label="models with the paper's shape (of 3)",
    kind="share")
