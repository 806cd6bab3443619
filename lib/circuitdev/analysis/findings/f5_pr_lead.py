"""F5: the participation ratio rises before a head passes its class threshold (method reference §3, §6).

Per-head PR and selectivity trajectories of a final-revision circuit (`head_trajectories`), the formation and PR
elevation revision of each head and the lead between them (`pr_lead`, over a grid of definitions of "elevated":
`pr_lead_sensitivity`), and the authors' static PR features (`pr_features`). Pure functions over a developmental
table that carries a `pr` column. What the lead is worth against heads at random (its base rate, a permutation null,
PR on random tokens) is `f5_control`.

Censoring (issue 21). Events at the first probed revision happened *at or before* it, and an elevation never seen
happened after the last one if at all, so a lead built from them is a bound (`lead_censoring`, LEAD_CENSORING):
    exact       formation and elevation both after the first revision
    lower       elevated at the first revision, formed later: the lead is at least formation_index
    upper       formed at the first revision and elevated later (lead at most -elevation_index), or never elevated
                (lead at most formation_index - the number of revisions)
    undefined   formed and elevated both at the first revision (their order cannot be read), or no PR
    not formed  the head never reaches the threshold (only heads passed in `heads=`)
Where the first revision is the initialisation itself (0 tokens: a toy panel's step0; issue 29), nothing came before
it: a formation there is exact, and an elevation there gives no lead (every head's PR is "elevated" against its own
start at random weights), so such a lead is undefined rather than a lower bound.
`lead_checkpoints` holds the value or the bound (NaN when undefined): a head formed at the first revision no longer
scores 0.
"""

from __future__ import annotations

from typing import Callable, Literal, Mapping, Sequence

import re

import numpy as np
import pandas as pd

from circuitdev.analysis.claims import paper_series
from circuitdev.analysis.devtable import final_circuit, index, panel_order, require, revisions
from circuitdev.analysis.findings.claim import CLASS_VARIED, claim_row
from circuitdev.errors import ConfigError
from circuitdev.measure.pr_integral import pr_integral
from circuitdev.schema import (BOS_THRESHOLD, INDUCTION_THRESHOLD, PREV_TOKEN_THRESHOLD, head_name, parse_head,
                               sel_column)

__all__ = ["ElevationRule", "head_trajectories", "pr_lead", "lead_summary", "lead_texts"]

ElevationRule = Literal["fraction-of-peak", "peak-to-date", "ratio-to-start", "above-level"]
LEAD_CENSORING: tuple[str, ...] = ("exact", "lower", "upper", "undefined", "not formed")
# Formation thresholds (method reference §6 `formation_idx`): induction 50, previous-token 100, first-token 30.
FORMATION_THRESHOLDS: dict[str, float] = {"induction": INDUCTION_THRESHOLD, "previous-token": PREV_TOKEN_THRESHOLD,
                                          "first-token": BOS_THRESHOLD}
PR_SIGNAL_FLOOR = 1e-3  # the plotted PR signal is max(PR - 1, 1e-3) (log axis)


# {panel: [heads]}, a head written "L4H4", "L4_H4" or (4, 4): the heads a trajectory follows
PanelHeads = Mapping[str, Sequence["str | tuple[int, int]"]]


def select_heads(dev: pd.DataFrame, heads: PanelHeads | None, head_class: str, threshold: float) -> pd.DataFrame:
    """panel, layer, head of the heads to follow: `heads` per panel, or the final-revision circuit."""
    if heads is None:
        return final_circuit(dev, head_class=head_class, threshold=threshold)[["panel", "layer", "head"]]
    rows = [(p, *parse_head(h)) for p, hs in heads.items() for h in hs]
    return pd.DataFrame(rows, columns=["panel", "layer", "head"])


def head_trajectories(dev: pd.DataFrame, *, head_class: str = "induction", threshold: float | None = None,
                      heads: PanelHeads | None = None) -> pd.DataFrame:
    """F5: per-head PR and selectivity at every revision for the final circuit heads (or `heads`).

    threshold defaults to the class's formation threshold (FORMATION_THRESHOLDS). Columns: panel, layer, head, name,
    revision, revision_index, tokens_b, token_fraction, pr, pr_signal = max(PR - 1, 1e-3) (the paper's plotted
    signal), selectivity, formed (selectivity >= threshold)."""
    threshold = FORMATION_THRESHOLDS.get(head_class, BOS_THRESHOLD) if threshold is None else threshold
    require(dev, ["pr", sel_column(head_class)], "head_trajectories")
    chosen = select_heads(dev, heads, head_class, threshold)
    rows = dev.merge(chosen, on=["panel", "layer", "head"])
    rows = rows.merge(revisions(dev)[["panel", "revision", "revision_index", "token_fraction"]],
                      on=["panel", "revision"])
    out = rows[["panel", "layer", "head", "revision", "revision_index", "tokens_b", "token_fraction", "pr"]].copy()
    out.insert(3, "name", [head_name(l, h) for l, h in zip(out["layer"], out["head"])])
    out["pr_signal"] = np.maximum(out["pr"] - 1, PR_SIGNAL_FLOOR)
    out["selectivity"] = rows[sel_column(head_class)].to_numpy()
    out["formed"] = out["selectivity"] >= threshold
    return out.assign(_p=out["panel"].map(panel_order(dev))) \
        .sort_values(["_p", "layer", "head", "revision_index"], kind="stable").drop(columns="_p").reset_index(drop=True)


def pr_elevated(pr: np.ndarray, *, rule: ElevationRule = "fraction-of-peak", level: float = 0.5) -> np.ndarray:
    """Where a head's PR counts as "elevated" (along the last axis = revisions in token order). The paper gives no
    definition, so it is a parameter:

    - "fraction-of-peak" (default): PR - 1 >= level * max_t(PR - 1). Scale-free and works whatever PR the first
      checkpoint starts at (OLMoE's panel starts at 20B); level=0.5 = "half-way up its own peak". It uses the
      future (the peak over the whole run), and a head whose PR is highest early is elevated at the first revision.
    - "peak-to-date" (no future): PR_t - min_{s<=t} PR_s >= level * (max_{s<=t} PR_s - 1) and PR_t above that
      minimum: PR has climbed from its lowest value so far by `level` of its highest PR - 1 so far. Only what was
      measured up to t decides, and a first revision (or a plateau) is never elevated: use it to ask whether PR
      *rose* before formation. Where PR has sat near 1 (min ~ 1) it reads "PR - 1 reaches `level` of its maximum
      so far".
    - "ratio-to-start": PR >= level * PR at the first revision. Use for panels that start at initialisation
      (Pythia step1), where the first PR is a clean baseline; misleading when the first revision is already trained.
    - "above-level": PR >= level (absolute). Use with a null-PR calibration (e.g. the null p99 of random tokens).
    NaN PR never counts as elevated."""
    pr = np.asarray(pr, dtype=float)
    with np.errstate(invalid="ignore"):
        if rule == "fraction-of-peak":
            signal = np.maximum(pr - 1, 0)
            peak = np.nanmax(np.where(np.isnan(signal), -np.inf, signal), axis=-1, keepdims=True)
            return (signal >= level * peak) & (peak > 0)
        if rule == "peak-to-date":
            low, high = np.fmin.accumulate(pr, axis=-1), np.fmax.accumulate(pr, axis=-1)  # NaN-skipping, to date
            return (pr - low >= level * (high - 1)) & (pr > low)
        if rule == "ratio-to-start":
            return pr >= level * pr[..., :1]
        if rule == "above-level":
            return pr >= level
    raise ConfigError(f"elevation rule must be one of fraction-of-peak, peak-to-date, ratio-to-start, above-level; "
                      f"got {rule!r}")


def panel_matrices(dev: pd.DataFrame, columns: Sequence[str]):
    """Per panel: (panel, its revisions in token order, layer and head of each of its heads, {column: heads x
    revisions matrix}), NaN where a head has no row. The vectorised form of per-head trajectories."""
    ix = index(dev)
    layer, head = dev["layer"].to_numpy(dtype=np.int64), dev["head"].to_numpy(dtype=np.int64)
    values = {c: dev[c].to_numpy(dtype=float) for c in columns}
    for panel, idx in ix.panels():
        rows = np.flatnonzero((ix.codes >= idx[0]) & (ix.codes <= idx[-1]))  # a panel's revisions are contiguous
        keys, row_head = np.unique(layer[rows] * 10**4 + head[rows], return_inverse=True)
        mats = {}
        for c in columns:
            m = np.full((len(keys), len(idx)), np.nan)
            m[row_head, ix.codes[rows] - idx[0]] = values[c][rows]
            mats[c] = m
        revs = {c: v[idx] for c, v in ix.cols.items()}
        yield panel, revs, keys // 10**4, keys % 10**4, mats


def _nullable(values: np.ndarray, ok: np.ndarray) -> pd.array:
    """Integers with <NA> where `ok` is False (a head that never forms / never elevates)."""
    return pd.array([int(v) if k else None for v, k in zip(values, ok)], dtype="Int64")


def first_true(mask: np.ndarray) -> np.ndarray:
    """Index of the first True along the last axis, -1 where there is none."""
    return np.where(mask.any(axis=-1), mask.argmax(axis=-1), -1)


def lead_value(formation: np.ndarray, elevation: np.ndarray, n_revisions: int,
               has_pr: np.ndarray | bool = True, *, at_init: bool = False) -> np.ndarray:
    """Lead in checkpoints (formation - elevation index; -1 = never) with the censoring rules of the module
    docstring: the value or the bound, NaN where undefined or not formed. `at_init`: the first revision is the
    initialisation (0 tokens; the toy panels' step0), where an elevation gives no lead and a formation is exact.
    Broadcasts (the permutation null calls it on (permutations, heads) arrays)."""
    f, e = np.broadcast_arrays(np.asarray(formation), np.asarray(elevation))
    value = np.where(e >= 0, f - e, f - n_revisions).astype(float)
    bad = (f < 0) | ((f == 0) & (e == 0)) | ~np.broadcast_to(np.asarray(has_pr, dtype=bool), f.shape)
    if at_init:
        bad = bad | (e == 0)
    return np.where(bad, np.nan, value)


def lead_censoring(formation: np.ndarray, elevation: np.ndarray, has_pr: np.ndarray | bool = True, *,
                   at_init: bool = False) -> np.ndarray:
    """The censoring label (LEAD_CENSORING) of each lead `lead_value` gives (with the same `at_init`)."""
    f, e = np.broadcast_arrays(np.asarray(formation), np.asarray(elevation))
    kind = np.full(f.shape, "exact", dtype=object)
    kind[(e == 0) & (f > 0)] = "undefined" if at_init else "lower"
    kind[((f == 0) & (e > 0) & (not at_init)) | ((e < 0) & (f >= 0))] = "upper"
    kind[((f == 0) & (e == 0)) | ~np.broadcast_to(np.asarray(has_pr, dtype=bool), f.shape)] = "undefined"
    kind[f < 0] = "not formed"
    return kind


def pr_lead(dev: pd.DataFrame, *, head_class: str = "induction", threshold: float | None = None,
            heads: PanelHeads | None = None, rule: ElevationRule = "fraction-of-peak",
            level: float = 0.5, boot: pd.DataFrame | None = None) -> pd.DataFrame:
    """F5 lead: how many checkpoints PR becomes elevated before the head forms.

    With `boot` (the records' bootstrap replicates) also formation_index_lo / _hi and lead_checkpoints_lo / _hi:
    the heads are fixed to those the data select, their formation is re-decided on every replicate (PR is not
    resampled); replicates in which a head never forms are left out of its interval.

    formation = first revision with selectivity >= threshold (class default: induction 50, previous-token 100,
    first-token 30). elevation = first revision where `pr_elevated(rule, level)` holds. lead_checkpoints =
    formation_index - elevation_index (positive: PR leads; 0: together; negative: PR lags), or a bound, as
    `lead_censoring` says (module docstring: exact / lower / upper / undefined / not formed); lead_token_ratio =
    formation tokens / elevation tokens (exact leads only). Heads default to the final-revision circuit of the
    class at the threshold.
    Columns: panel, layer, head, name, head_class, formation_revision, formation_index, formation_tokens_b,
    elevation_revision, elevation_index, elevation_tokens_b, lead_checkpoints, lead_censoring, lead_token_ratio,
    rule, level."""
    if boot is not None:
        from circuitdev.analysis import uncertainty

        tau = FORMATION_THRESHOLDS.get(head_class, BOS_THRESHOLD) if threshold is None else threshold
        chosen = select_heads(dev, heads, head_class, tau)
        fixed = {p: [(int(l), int(h)) for l, h in zip(g["layer"], g["head"])] for p, g in chosen.groupby("panel")}
        return uncertainty.with_intervals(dev, boot, lambda d: pr_lead(
            d, head_class=head_class, threshold=tau, heads=fixed, rule=rule, level=level),
            columns=["formation_index", "lead_checkpoints"])
    return _leads(dev, head_class=head_class, threshold=threshold, heads=heads, settings=[(rule, level)])


_LEAD_COLUMNS = ["panel", "layer", "head", "name", "head_class", "formation_revision", "formation_index",
                 "formation_tokens_b", "elevation_revision", "elevation_index", "elevation_tokens_b",
                 "lead_checkpoints", "lead_token_ratio", "rule", "level"]


def _leads(dev: pd.DataFrame, *, head_class: str, threshold: float | None, heads: PanelHeads | None,
           settings: Sequence[tuple[str, float]]) -> pd.DataFrame:
    """pr_lead for several (rule, level) settings, building the per-panel matrices once."""
    threshold = FORMATION_THRESHOLDS.get(head_class, BOS_THRESHOLD) if threshold is None else threshold
    require(dev, ["pr", sel_column(head_class)], "pr_lead")
    chosen = select_heads(dev, heads, head_class, threshold)
    frames = []
    for panel, revs, layers, hs, mats in panel_matrices(dev, [sel_column(head_class), "pr"]):
        want = chosen[chosen["panel"] == panel]
        keep = np.isin(layers * 10**4 + hs, want["layer"].to_numpy() * 10**4 + want["head"].to_numpy())
        if not keep.any():
            continue
        tokens, labels = revs["tokens_b"], revs["revision"]
        pick = lambda arr, i: np.where(i >= 0, arr[np.maximum(i, 0)], None)  # noqa: E731
        f = first_true(mats[sel_column(head_class)][keep] >= threshold)
        ft = np.where(f >= 0, tokens[np.maximum(f, 0)], np.nan)
        base = {"panel": panel, "layer": layers[keep], "head": hs[keep],
                "name": [head_name(l, h) for l, h in zip(layers[keep], hs[keep])], "head_class": head_class,
                "formation_revision": pick(labels, f), "formation_index": _nullable(f, f >= 0),
                "formation_tokens_b": ft}
        has_pr = ~np.isnan(mats["pr"][keep]).all(axis=1)
        for rule, level in settings:
            e = first_true(pr_elevated(mats["pr"][keep], rule=rule, level=level))
            et = np.where(e >= 0, tokens[np.maximum(e, 0)], np.nan)
            init = bool(tokens[0] == 0)  # a toy panel's step0: no lead from an elevation there, no bound
            value, kind = (lead_value(f, e, len(labels), has_pr, at_init=init),
                           lead_censoring(f, e, has_pr, at_init=init))
            exact = (kind == "exact") & (et > 0)
            frames.append(pd.DataFrame({
                **base, "elevation_revision": pick(labels, e), "elevation_index": _nullable(e, e >= 0),
                "elevation_tokens_b": et, "lead_checkpoints": _nullable(value, ~np.isnan(value)),
                "lead_censoring": kind, "lead_token_ratio": np.where(exact, ft / np.where(et > 0, et, 1), np.nan),
                "rule": rule, "level": level}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=_LEAD_COLUMNS)


def lead_summary(leads: pd.DataFrame) -> pd.DataFrame:
    """Per model and class (and tier, rule and level, when the rows carry them): heads followed, heads that formed,
    how many leads are exact / lower / upper bounds / undefined, the median / min / max lead in checkpoints over
    the defined ones (bounds at their value) and median_exact over the exact ones only (NaN when none is)."""
    keys = [c for c in ("tier", "panel", "head_class", "rule", "level") if c in leads.columns]
    if "level" in keys and leads[["rule", "level"]].drop_duplicates().shape[0] == 1:
        keys = [k for k in keys if k not in ("rule", "level")]  # one setting: no need to say it per row
    columns = [*keys, "heads", "formed", "exact", "lower", "upper", "undefined", "median_lead", "min_lead",
               "max_lead", "median_exact"]
    if leads.empty or "lead_checkpoints" not in leads.columns:  # no head followed: the keys a page selects on
        return pd.DataFrame(columns=[*dict.fromkeys([*keys, "panel", "head_class"]), *columns[len(keys):]])
    kind = leads["lead_censoring"] if "lead_censoring" in leads.columns else pd.Series("exact", index=leads.index)
    lead = leads["lead_checkpoints"].astype("float64")
    frame = leads[keys].assign(_lead=lead, _exact=lead.where(kind == "exact"), _formed=leads["formation_index"].notna(),
                               **{f"_{k}": kind == k for k in ("lower", "upper", "undefined")})
    out = frame.groupby(keys, sort=False).agg(
        heads=("_lead", "size"), formed=("_formed", "sum"), exact=("_exact", "count"), lower=("_lower", "sum"),
        upper=("_upper", "sum"), undefined=("_undefined", "sum"), median_lead=("_lead", "median"),
        min_lead=("_lead", "min"), max_lead=("_lead", "max"), median_exact=("_exact", "median")).reset_index()
    return out[columns]


def lead_bound_text(value, defined: int, lower: int, upper: int) -> str:
    """A median lead as prose, marked as a bound where its leads are: "≥ +4" (every defined lead a lower bound),
    "≤ -3" (every one an upper bound), "+2 (1 of 3 bounds)" (some), "n/a" (none defined)."""
    if pd.isna(value) or not defined:
        return "n/a"
    mark = "≥ " if lower == defined else "≤ " if upper == defined else ""
    some = lower + upper
    return f"{mark}{value:+g}" + (f" ({some} of {defined} bounds)" if 0 < some < defined else "")


def lead_texts(summary: pd.DataFrame) -> pd.DataFrame:
    """`lead_summary` with `text`: its median lead as prose, marked as a bound (`lead_bound_text`)."""
    return summary.assign(text=[lead_bound_text(r["median_lead"], r["exact"] + r["lower"] + r["upper"], r["lower"],
                                           r["upper"]) for _, r in summary.iterrows()] if len(summary) else [])


DEFAULT_ELEVATION_GRID: dict[str, tuple[float, ...]] = {
    "fraction-of-peak": (0.1, 0.25, 0.5, 0.75, 0.9),
    "peak-to-date": (0.25, 0.5, 0.75),
    "ratio-to-start": (1.5, 2.0, 5.0, 10.0),
}


def pr_lead_sensitivity(dev: pd.DataFrame, *, head_class: str = "induction", threshold: float | None = None,
                        heads: PanelHeads | None = None,
                        grid: Mapping[str, Sequence[float]] = DEFAULT_ELEVATION_GRID) -> pd.DataFrame:
    """F5 sensitivity: `pr_lead` over every (rule, level) of `grid`, stacked (columns of pr_lead)."""
    settings = [(rule, float(lv)) for rule, levels in grid.items() for lv in levels]
    out = _leads(dev, head_class=head_class, threshold=threshold, heads=heads, settings=settings)
    order = {s: i for i, s in enumerate(settings)}
    return out.assign(_s=[order[s] for s in zip(out["rule"], out["level"])]).sort_values(
        "_s", kind="stable").drop(columns="_s").reset_index(drop=True)


def sensitivity_medians(grid: pd.DataFrame) -> pd.DataFrame:
    """The median lead of a `pr_lead_sensitivity` table (+ tier) per model (rows) and (rule, level) (columns
    "fraction-of-peak 0.5", ...), models and settings in the table's order."""
    if grid.empty:
        return pd.DataFrame(columns=["tier", "panel"])
    keys = [c for c in ("tier", "panel") if c in grid.columns]
    wide = grid.assign(setting=[f"{r} {lv:g}" for r, lv in zip(grid["rule"], grid["level"])],
                       lead=grid["lead_checkpoints"].astype("float64"))
    return wide.pivot_table(index=keys, columns="setting", values="lead", aggfunc="median", sort=False).reset_index()


def pr_features(dev: pd.DataFrame) -> pd.DataFrame:
    """The authors' static PR features per head (method reference §3), over the revisions with a known PR:
    integral = measure.pr_integral (the trapezoid of max(PR - 1, 0) over ln(max(tokens_b, 1)): revisions below 1B
    tokens add nothing),
    spread = max - min PR, final_pr, max_pr, min_pr. Heads without any PR are left out."""
    require(dev, ["pr"], "pr_features")
    frames = []
    for panel, revs, layers, hs, mats in panel_matrices(dev, ["pr"]):
        known = ~np.isnan(mats["pr"]).all(axis=1)
        if not known.any():
            continue
        pr, layers, hs = mats["pr"][known], layers[known], hs[known]
        integral = pr_integral(pr, np.asarray(revs["tokens_b"], dtype=float))  # skips revisions without a PR
        last = np.array([row[~np.isnan(row)][-1] for row in pr])
        frames.append(pd.DataFrame({
            "panel": panel, "layer": layers, "head": hs, "name": [head_name(l, h) for l, h in zip(layers, hs)],
            "integral": integral, "spread": np.nanmax(pr, axis=1) - np.nanmin(pr, axis=1), "final_pr": last,
            "max_pr": np.nanmax(pr, axis=1), "min_pr": np.nanmin(pr, axis=1)}))
    columns = ["panel", "layer", "head", "name", "integral", "spread", "final_pr", "max_pr", "min_pr"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


# ------------------------------------------------------------------------------------ F5 as a robustness claim
def _lead_statement(paper) -> Callable[[float], bool]:
    """The paper's F5 value ("1-2", "0", "2-4") as a statement about the median lead: > 0, or = 0 when it says 0."""
    low = float(re.split(r"\s*[-–]\s*", str(paper).strip())[0])
    return (lambda v: v > 0) if low > 0 else (lambda v: v == 0)


def lead_over_bars(dev: pd.DataFrame, taus: Sequence[float], rule: str) -> list[dict]:
    if "pr" not in dev.columns or dev["pr"].isna().all():
        return []
    statements = {c.params["head_class"]: _lead_statement(c.paper) for c in paper_series("F5.lead@")}
    first = dev.groupby("panel", sort=False)["tokens_b"].min()
    rows = []
    for head_class, holds in statements.items():
        for tau in taus:
            leads = pr_lead(dev, head_class=head_class, threshold=tau)
            for panel in pd.unique(dev["panel"]):
                g = leads[leads["panel"] == panel] if len(leads) else leads
                lead = pd.to_numeric(g["lead_checkpoints"], errors="coerce").astype(float) if len(g) else \
                    pd.Series(dtype=float)
                median = float(lead.median()) if lead.notna().any() else np.nan
                early = first.loc[panel] > 0
                f0 = bool(early and (g["formation_index"] == 0).fillna(False).any()) if len(g) else False
                e0 = bool(early and (g["elevation_index"] == 0).fillna(False).any()) if len(g) else False
                bound = "none" if f0 and e0 else "upper" if f0 else "lower" if e0 else "exact"
                rows.append(claim_row(panel, head_class, CLASS_VARIED[head_class], tau, rule, median,
                                      bool(np.isfinite(median) and holds(median)), bound,
                                      FORMATION_THRESHOLDS[head_class], "per-class"))
    return rows


def lead_hangs_on(dev: pd.DataFrame, rule: str) -> list[dict]:
    """The median lead per class and panel, each head's lead, and how many are bounds (formed or elevated at the
    first probed revision)."""
    rows = []
    for head_class in ("induction", "previous-token", "first-token"):
        leads = pr_lead(dev, head_class=head_class) if "pr" in dev.columns and dev["pr"].notna().any() \
            else pd.DataFrame()
        for panel, g in (leads.groupby("panel", sort=False) if len(leads) else []):
            lead = pd.to_numeric(g["lead_checkpoints"], errors="coerce").astype(float)
            listed = ", ".join(f"{n} {v:g}" if np.isfinite(v) else f"{n} undefined"
                               for n, v in list(zip(g["name"], lead))[:6]) + \
                (f" and {len(g) - 6} more" if len(g) > 6 else "")
            at_first = int(((g["formation_index"] == 0) | (g["elevation_index"] == 0)).fillna(False).sum())
            median = float(lead.median()) if lead.notna().any() else np.nan
            said = f"the median lead is {median:g} checkpoint{'' if median == 1 else 's'}" if np.isfinite(median) \
                else "no lead (no head both forms and has an elevated PR)"
            rows.append({"panel": panel, "item": head_class, "varied": CLASS_VARIED[head_class], "head": None,
                         "bar": FORMATION_THRESHOLDS[head_class], "head_value": median, "margin": np.nan,
                         "text": f"{said} over the {lead.count()} of {len(g)} {head_class} heads with a lead "
                                 f"(each head's: {listed}); {at_first} of the {len(g)} formed or were elevated at "
                                 "the first probed revision, where a lead is a bound"})
    return rows
