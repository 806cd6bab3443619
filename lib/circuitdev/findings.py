"""The paper's findings F1-F6 and a threshold sensitivity, as pure functions over a developmental table.

Input is the developmental table of schema.py (one row per panel, revision, layer, head) from any source: the
published files (`circuitdev.published`), our probe store, or the toy panel. Outputs are tidy DataFrames, one row per
(panel, revision, ...), with revisions in token order and `token_fraction` = tokens_b / the panel's final tokens_b
(the paper's training-fraction denominators, spec §6).

Defaults reproduce the paper exactly (method spec §2, §6):
- counting rule "per-class": a head counts for class c at threshold tau iff sel_c >= tau, WHATEVER its best class.
  This is what every developmental table and figure of the paper uses (Pythia step143000 layer 4 = 8/8 only because
  L4_H4, best class induction, has first-token 85.2). Use "best-class" (sel_c >= tau AND c is the head's argmax
  class) to ask how many heads are *primarily* of class c; it gives the README's lower final-checkpoint numbers.
- thresholds: 30x for BOS (first-token) counts, previous-token / self milestone counts; 50x for the induction
  circuit and induction milestones; 100x for previous-token formation in F5.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal, Mapping, Sequence

import numpy as np
import pandas as pd

from circuitdev.errors import ConfigError, DataError
from circuitdev.schema import HEAD_CLASSES, UNCLASSIFIED, HeadClass, check_head_class, sel_column

CountingRule = Literal["per-class", "best-class"]
ElevationRule = Literal["fraction-of-peak", "ratio-to-start", "above-level"]

BOS: HeadClass = "first-token"
# F5 formation thresholds (spec §6 `formation_idx`): induction 50, previous-token 100, first-token 30.
FORMATION_THRESHOLDS: dict[str, float] = {"induction": 50.0, "previous-token": 100.0, "first-token": 30.0}
PR_SIGNAL_FLOOR = 1e-3  # the plotted PR signal is max(PR - 1, 1e-3) (log axis)
_EPS = 1e-9  # slack for ">=" on fractions such as 2/3


# ------------------------------------------------------------------------------------------------------ table basics


def _require(dev: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    missing = [c for c in columns if c not in dev.columns]
    if missing:
        raise DataError(f"{what} needs developmental-table column(s) {missing}; the table has {list(dev.columns)}")
    if dev.empty:
        raise DataError(f"{what}: the developmental table is empty")


def with_best_class(dev: pd.DataFrame, *, class_threshold: float = 30.0) -> pd.DataFrame:
    """Add best_class, best_selectivity and classification (paper rule, spec §2).

    best_class = argmax over the six selectivities in schema order; an exact tie goes to the class listed first
    (the authors' stable descending sort; np.argmax returns the first maximum). classification = best_class if
    best_selectivity >= class_threshold, else "unclassified"."""
    _require(dev, [sel_column(c) for c in HEAD_CLASSES], "with_best_class")
    sels = dev[[sel_column(c) for c in HEAD_CLASSES]].to_numpy(dtype=float)
    best = sels.argmax(axis=1)
    out = dev.copy()
    out["best_class"] = np.asarray(HEAD_CLASSES, dtype=object)[best]
    out["best_selectivity"] = sels[np.arange(len(sels)), best]
    out["classification"] = np.where(out["best_selectivity"] >= class_threshold, out["best_class"], UNCLASSIFIED)
    return out


def revisions(dev: pd.DataFrame) -> pd.DataFrame:
    """One row per (panel, revision) in token order: panel, revision, revision_index, tokens_b, token_fraction,
    n_heads. Panels keep their order of first appearance."""
    _require(dev, ["panel", "revision", "tokens_b", "layer", "head"], "revisions")
    keys = ["panel", "revision"]
    revs = dev.groupby(keys, sort=False).agg(tokens_b=("tokens_b", "first"), n_heads=("head", "size")).reset_index()
    if "step" in dev.columns:
        revs = revs.merge(dev.groupby(keys, sort=False)["step"].first().reset_index(), on=keys)
    sort = ["_p", "tokens_b"] + (["step"] if "step" in revs.columns else [])
    revs = revs.assign(_p=revs["panel"].map(_panel_order(dev))).sort_values(sort, kind="stable").drop(columns="_p")
    revs["revision_index"] = revs.groupby("panel", sort=False).cumcount()
    revs["token_fraction"] = revs["tokens_b"] / revs.groupby("panel", sort=False)["tokens_b"].transform("max")
    columns = ["panel", "revision", "revision_index", "step", "tokens_b", "token_fraction", "n_heads"]
    return revs[[c for c in columns if c in revs.columns]].reset_index(drop=True)


def head_mask(dev: pd.DataFrame, head_class: str, *, threshold: float, rule: CountingRule = "per-class") -> pd.Series:
    """True where a head counts for `head_class` at `threshold` under the counting rule (see module docstring)."""
    check_head_class(head_class)
    if threshold <= 0:
        raise ConfigError(f"threshold must be a positive selectivity ratio, got {threshold!r}")
    _require(dev, [sel_column(head_class)], "head_mask")
    mask = dev[sel_column(head_class)] >= threshold
    if rule == "best-class":
        best = dev["best_class"] if "best_class" in dev.columns else with_best_class(dev)["best_class"]
        mask &= best == head_class
    elif rule != "per-class":
        raise ConfigError(f"counting rule must be 'per-class' (the paper's) or 'best-class', got {rule!r}")
    return mask


def head_counts(dev: pd.DataFrame, head_class: str, *, threshold: float,
                rule: CountingRule = "per-class") -> pd.DataFrame:
    """n_c(tau) per revision: revisions(dev) columns plus `n` and `fraction` = n / n_heads."""
    counted = dev.assign(_hit=head_mask(dev, head_class, threshold=threshold, rule=rule))
    n = counted.groupby(["panel", "revision"], sort=False)["_hit"].sum().rename("n").reset_index()
    out = revisions(dev).merge(n, on=["panel", "revision"])
    out["n"] = out["n"].astype(int)
    out["fraction"] = out["n"] / out["n_heads"]
    return out


def _panel_order(dev: pd.DataFrame) -> dict[str, int]:
    """Panels keep their order of first appearance in the table."""
    return {p: i for i, p in enumerate(dict.fromkeys(dev["panel"]))}


def head_name(layer: int, head: int) -> str:
    return f"L{int(layer)}H{int(head)}"


# ----------------------------------------------------------------------------------------------------- F1 per layer


def layer_counts(dev: pd.DataFrame, *, head_class: str = BOS, threshold: float = 30.0,
                 rule: CountingRule = "per-class") -> pd.DataFrame:
    """F1: heads of `head_class` per layer at every revision (the paper's tables 2-3 use first-token >= 30x).

    Columns: panel, revision, revision_index, tokens_b, layer, n (every layer listed, zeros included)."""
    counted = dev.assign(_hit=head_mask(dev, head_class, threshold=threshold, rule=rule))
    n = counted.groupby(["panel", "revision", "layer"], sort=False)["_hit"].sum().rename("n").reset_index()
    revs = revisions(dev)[["panel", "revision", "revision_index", "tokens_b"]]
    out = revs.assign(_order=np.arange(len(revs))).merge(n, on=["panel", "revision"])
    out["n"] = out["n"].astype(int)
    return out.sort_values(["_order", "layer"], kind="stable").drop(columns="_order").reset_index(drop=True)


def floor_check(dev: pd.DataFrame, *, layers: Sequence[int] = (0, 1), head_class: str = BOS,
                threshold: float = 30.0, rule: CountingRule = "per-class") -> pd.DataFrame:
    """F1 floor: does every run have zero `head_class` heads in `layers` (the paper: no BOS head in L0/L1 ever)?

    One row per (panel, revision): panel, revision, tokens_b, n_floor (heads counted in `layers`), holds.
    The runs that break the floor are `out[~out.holds]`."""
    counts = layer_counts(dev, head_class=head_class, threshold=threshold, rule=rule)
    in_floor = counts[counts["layer"].isin(list(layers))]
    out = in_floor.groupby(["panel", "revision"], sort=False).agg(
        revision_index=("revision_index", "first"), tokens_b=("tokens_b", "first"), n_floor=("n", "sum")
    ).reset_index()
    out["holds"] = out["n_floor"] == 0
    return out


# ------------------------------------------------------------------------------------------------- F2 BOS fraction


def bos_fraction(dev: pd.DataFrame, *, threshold: float = 30.0, rule: CountingRule = "per-class") -> pd.DataFrame:
    """F2: whole-model BOS fraction n_first(tau) / n_heads at every revision.

    Columns: panel, revision, revision_index, [step], tokens_b, token_fraction, n_heads, n_bos, bos_fraction."""
    out = head_counts(dev, BOS, threshold=threshold, rule=rule)
    return out.rename(columns={"n": "n_bos", "fraction": "bos_fraction"})


def trajectory_shape(fractions: pd.DataFrame, *, value: str = "bos_fraction", transition_share: float = 0.5,
                     saturation_share: float = 0.9) -> pd.DataFrame:
    """F2 shape descriptor per panel, so "ramp" vs "transition" is measured rather than asserted.

    total rise = final - first value; the largest jump is the biggest increase between adjacent revisions, reported
    in percentage points and as a share of the total rise; `shape` is "transition" when one step carries at least
    `transition_share` of the rise, else "ramp" (use a higher share for a stricter notion of a phase transition).
    Saturation: the final level, and the first revision reaching `saturation_share` of it. Adjacent revisions are
    unevenly spaced in tokens, so the jump's token ratio is given too (a big jump over a 10x token gap is slower
    than it looks)."""
    _require(fractions, ["panel", "revision", "tokens_b", value], "trajectory_shape")
    rows = []
    for panel, g in fractions.groupby("panel", sort=False):
        g = g.sort_values("tokens_b", kind="stable")
        v = g[value].to_numpy(dtype=float) * 100
        t = g["tokens_b"].to_numpy(dtype=float)
        steps = np.diff(v) if len(v) > 1 else np.array([0.0])
        j = int(np.argmax(steps))
        rise = v[-1] - v[0]
        share = steps[j] / rise if rise > 0 else np.nan
        reached = np.flatnonzero(v >= saturation_share * v[-1] - _EPS) if v[-1] > 0 else np.array([], int)
        rows.append({
            "panel": panel, "n_revisions": len(v), "start_pct": v[0], "final_pct": v[-1], "peak_pct": v.max(),
            "rise_pp": rise, "largest_jump_pp": steps[j] if len(v) > 1 else np.nan, "jump_share": share,
            "jump_from_revision": g["revision"].iloc[j], "jump_to_revision": g["revision"].iloc[min(j + 1, len(v) - 1)],
            "jump_from_tokens_b": t[j], "jump_to_tokens_b": t[min(j + 1, len(v) - 1)],
            "jump_token_ratio": t[min(j + 1, len(v) - 1)] / t[j] if t[j] > 0 else np.nan,
            "saturation_pct": v[-1],
            "saturation_revision": g["revision"].iloc[reached[0]] if len(reached) else None,
            "saturation_tokens_b": t[reached[0]] if len(reached) else np.nan,
            "shape": ("transition" if share >= transition_share else "ramp") if np.isfinite(share) else "flat",
        })
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------------- F3 milestones


@dataclass(frozen=True)
class Milestone:
    name: str  # column-safe id, e.g. "bos_50pct"
    head_class: HeadClass
    threshold: float  # selectivity ratio tau of the per-class count n_c(tau)
    min_heads: int | None = None  # reached when n_c(tau) >= min_heads ...
    min_fraction: float | None = None  # ... or when n_c(tau) / n_heads >= min_fraction

    def __post_init__(self) -> None:
        check_head_class(self.head_class)
        if (self.min_heads is None) == (self.min_fraction is None):
            raise ConfigError(f"milestone {self.name!r}: give exactly one of min_heads, min_fraction")


# The paper's F3 table (spec §6): induction >= k heads at 50x; BOS >= x% at 30x; >= 30 prev-token / self heads at 30x.
PAPER_MILESTONES: tuple[Milestone, ...] = (
    Milestone("induction_3_heads", "induction", 50.0, min_heads=3),
    Milestone("induction_5_heads", "induction", 50.0, min_heads=5),
    Milestone("bos_10pct", BOS, 30.0, min_fraction=0.10),
    Milestone("bos_30pct", BOS, 30.0, min_fraction=0.30),
    Milestone("bos_50pct", BOS, 30.0, min_fraction=0.50),
    Milestone("bos_70pct", BOS, 30.0, min_fraction=0.70),
    Milestone("previous_token_30_heads", "previous-token", 30.0, min_heads=30),
    Milestone("self_30_heads", "self", 30.0, min_heads=30),
)
# Headline Fig. 1B formation rules (spec §6): prev-token >= 10 heads at 100x without a best-class filter.
FIG1B_MILESTONES: tuple[Milestone, ...] = (
    Milestone("induction_3_heads", "induction", 50.0, min_heads=3),
    Milestone("previous_token_10_heads_100x", "previous-token", 100.0, min_heads=10),
    Milestone("bos_10pct", BOS, 30.0, min_fraction=0.10),
)


def milestones(dev: pd.DataFrame, *, specs: Sequence[Milestone] = PAPER_MILESTONES, rule: CountingRule = "per-class",
               sustained: bool = False) -> pd.DataFrame:
    """F3: the first revision at which each milestone holds (paper: first, even if it later fails again).

    sustained=True asks instead for the first revision from which it holds at every later revision (use it when
    counts are noisy, e.g. OLMo's single 10B BOS head). Columns: panel, milestone, revision (None if never),
    revision_index, tokens_b, token_fraction (NaN if never)."""
    rows = []
    for spec in specs:
        counts = head_counts(dev, spec.head_class, threshold=spec.threshold, rule=rule)
        hit = counts["n"] >= spec.min_heads if spec.min_heads is not None else \
            counts["fraction"] >= spec.min_fraction - _EPS
        counts = counts.assign(_hit=hit.to_numpy())
        for panel, g in counts.groupby("panel", sort=False):
            ok = g["_hit"].to_numpy()
            if sustained:
                ok = np.logical_and.accumulate(ok[::-1])[::-1]
            first = g[ok].head(1)
            rows.append({"panel": panel, "milestone": spec.name,
                         "revision": first["revision"].iloc[0] if len(first) else None,
                         "revision_index": int(first["revision_index"].iloc[0]) if len(first) else None,
                         "tokens_b": float(first["tokens_b"].iloc[0]) if len(first) else np.nan,
                         "token_fraction": float(first["token_fraction"].iloc[0]) if len(first) else np.nan})
    out = pd.DataFrame(rows)
    return out.sort_values("panel", key=lambda s: s.map(_panel_order(dev)), kind="stable").reset_index(drop=True)


def milestone_gap(table: pd.DataFrame, *, start: str = "induction_3_heads", end: str = "bos_50pct") -> pd.DataFrame:
    """F3 gap between two milestones as a token ratio end/start (paper: induction -> BOS-50%, e.g. OLMo 23 -> 264B
    = 11.5x) and in checkpoints. NaN where either milestone is never reached."""
    rows = []
    for panel, g in table.groupby("panel", sort=False):
        a, b = (g[g["milestone"] == m] for m in (start, end))
        if a.empty or b.empty:
            raise ConfigError(f"milestone_gap: {start!r} or {end!r} is not in the milestone table of {panel}")
        ta, tb = float(a["tokens_b"].iloc[0]), float(b["tokens_b"].iloc[0])
        rows.append({"panel": panel, "start": start, "end": end, "start_revision": a["revision"].iloc[0],
                     "end_revision": b["revision"].iloc[0], "start_tokens_b": ta, "end_tokens_b": tb,
                     "token_ratio": tb / ta if ta > 0 else np.nan,
                     "checkpoints": (b["revision_index"].iloc[0] - a["revision_index"].iloc[0])
                     if a["revision"].iloc[0] is not None and b["revision"].iloc[0] is not None else np.nan})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------------ F4 circuit recall


def final_circuit(dev: pd.DataFrame, *, head_class: str = "induction", threshold: float = 50.0,
                  revision: str | None = None, rule: CountingRule = "per-class") -> pd.DataFrame:
    """The circuit screen at one revision (default: each panel's final one): heads with sel_c >= threshold
    (the paper's all-head induction screen, no best-class requirement). Columns: panel, layer, head, name,
    selectivity."""
    revs = revisions(dev)
    ref = revs.groupby("panel", sort=False).tail(1) if revision is None else revs[revs["revision"] == revision]
    if ref.empty:
        raise ConfigError(f"final_circuit: revision {revision!r} is not in the table")
    at = dev.merge(ref[["panel", "revision"]], on=["panel", "revision"])
    at = at[head_mask(at, head_class, threshold=threshold, rule=rule)]
    out = at[["panel", "layer", "head"]].assign(
        name=[head_name(l, h) for l, h in zip(at["layer"], at["head"])], selectivity=at[sel_column(head_class)]
    )
    return out.assign(_p=out["panel"].map(_panel_order(dev))).sort_values(["_p", "layer", "head"], kind="stable") \
        .drop(columns="_p").reset_index(drop=True)


def circuit_recall(dev: pd.DataFrame, *, head_class: str = "induction", threshold: float = 50.0,
                   reference_revision: str | None = None, rule: CountingRule = "per-class") -> pd.DataFrame:
    """F4: recall(r) = |{h in S_ref : sel_c(h, r) >= threshold}| / |S_ref|, S_ref = the screen at the final
    revision (or `reference_revision`). Columns: revisions(dev) + n_circuit, n_found, recall, found (names)."""
    circuit = final_circuit(dev, head_class=head_class, threshold=threshold, revision=reference_revision, rule=rule)
    members = dev.merge(circuit[["panel", "layer", "head", "name"]], on=["panel", "layer", "head"])
    members = members.assign(_hit=head_mask(members, head_class, threshold=threshold, rule=rule).to_numpy())
    found = members[members["_hit"]].groupby(["panel", "revision"], sort=False)["name"].agg(" ".join)
    out = revisions(dev)
    out["n_circuit"] = out["panel"].map(circuit.groupby("panel").size()).fillna(0).astype(int)
    out["found"] = [found.get((p, r), "") for p, r in zip(out["panel"], out["revision"])]
    out["n_found"] = [len(f.split()) for f in out["found"]]
    out["recall"] = np.where(out["n_circuit"] > 0, out["n_found"] / out["n_circuit"].clip(lower=1), np.nan)
    return out


def recall_milestones(recall: pd.DataFrame, *, levels: Sequence[float] = (1 / 3, 2 / 3, 1.0)) -> pd.DataFrame:
    """F4: first revision whose recall reaches each level (paper: 33/67/100%, i.e. 1/3, 2/3, 3/3 of a 3-head
    circuit; use exact fractions, as 2/3 = 0.667 < 0.67). Columns: panel, level, level_pct, revision,
    revision_index, tokens_b, token_fraction (None / NaN where never reached)."""
    rows = []
    for panel, g in recall.groupby("panel", sort=False):
        for level in levels:
            first = g[g["recall"] >= level - _EPS].head(1)
            rows.append({"panel": panel, "level": level, "level_pct": round(100 * level),
                         "revision": first["revision"].iloc[0] if len(first) else None,
                         "revision_index": int(first["revision_index"].iloc[0]) if len(first) else None,
                         "tokens_b": float(first["tokens_b"].iloc[0]) if len(first) else np.nan,
                         "token_fraction": float(first["token_fraction"].iloc[0]) if len(first) else np.nan})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------- F5 PR trajectories


HeadSpec = Mapping[str, Sequence["str | tuple[int, int]"]]


def _parse_head(name) -> tuple[int, int]:
    if isinstance(name, (tuple, list)):
        return int(name[0]), int(name[1])
    text = str(name).upper().replace("_", "")
    try:
        layer, head = text.removeprefix("L").split("H")
        return int(layer), int(head)
    except ValueError as err:
        raise ConfigError(f"head {name!r}: write heads as 'L4H4', 'L4_H4' or (4, 4)") from err


def _select_heads(dev: pd.DataFrame, heads: HeadSpec | None, head_class: str, threshold: float) -> pd.DataFrame:
    """panel, layer, head of the heads to follow: `heads` per panel, or the final-revision circuit."""
    if heads is None:
        return final_circuit(dev, head_class=head_class, threshold=threshold)[["panel", "layer", "head"]]
    rows = [(p, *_parse_head(h)) for p, hs in heads.items() for h in hs]
    return pd.DataFrame(rows, columns=["panel", "layer", "head"])


def head_trajectories(dev: pd.DataFrame, *, head_class: str = "induction", threshold: float | None = None,
                      heads: HeadSpec | None = None) -> pd.DataFrame:
    """F5: per-head PR and selectivity at every revision for the final circuit heads (or `heads`).

    threshold defaults to the class's formation threshold (FORMATION_THRESHOLDS). Columns: panel, layer, head, name,
    revision, revision_index, tokens_b, token_fraction, pr, pr_signal = max(PR - 1, 1e-3) (the paper's plotted
    signal), selectivity, formed (selectivity >= threshold)."""
    threshold = FORMATION_THRESHOLDS.get(head_class, 30.0) if threshold is None else threshold
    _require(dev, ["pr", sel_column(head_class)], "head_trajectories")
    chosen = _select_heads(dev, heads, head_class, threshold)
    rows = dev.merge(chosen, on=["panel", "layer", "head"])
    rows = rows.merge(revisions(dev)[["panel", "revision", "revision_index", "token_fraction"]],
                      on=["panel", "revision"])
    out = rows[["panel", "layer", "head", "revision", "revision_index", "tokens_b", "token_fraction", "pr"]].copy()
    out.insert(3, "name", [head_name(l, h) for l, h in zip(out["layer"], out["head"])])
    out["pr_signal"] = np.maximum(out["pr"] - 1, PR_SIGNAL_FLOOR)
    out["selectivity"] = rows[sel_column(head_class)].to_numpy()
    out["formed"] = out["selectivity"] >= threshold
    return out.assign(_p=out["panel"].map(_panel_order(dev))) \
        .sort_values(["_p", "layer", "head", "revision_index"], kind="stable").drop(columns="_p").reset_index(drop=True)


def pr_elevated(pr: np.ndarray, *, rule: ElevationRule = "fraction-of-peak", level: float = 0.5) -> np.ndarray:
    """Where a head's PR counts as "elevated". The paper gives no definition, so it is a parameter:

    - "fraction-of-peak" (default): PR - 1 >= level * max_t(PR - 1). Scale-free and works whatever PR the first
      checkpoint starts at (OLMoE's panel starts at 20B); level=0.5 = "half-way up its own peak".
    - "ratio-to-start": PR >= level * PR at the first revision. Use for panels that start at initialisation
      (Pythia step1), where the first PR is a clean baseline; misleading when the first revision is already trained.
    - "above-level": PR >= level (absolute). Use with a null-PR calibration (e.g. the null p99 of random tokens).
    NaN PR never counts as elevated."""
    pr = np.asarray(pr, dtype=float)
    if rule == "fraction-of-peak":
        signal = np.maximum(pr - 1, 0)
        peak = np.nanmax(signal) if np.isfinite(signal).any() else np.nan
        return (signal >= level * peak) & (peak > 0) if np.isfinite(peak) else np.zeros(len(pr), bool)
    if rule == "ratio-to-start":
        return pr >= level * pr[0]
    if rule == "above-level":
        return pr >= level
    raise ConfigError(f"elevation rule must be one of fraction-of-peak, ratio-to-start, above-level; got {rule!r}")


def pr_lead(dev: pd.DataFrame, *, head_class: str = "induction", threshold: float | None = None,
            heads: HeadSpec | None = None, rule: ElevationRule = "fraction-of-peak",
            level: float = 0.5) -> pd.DataFrame:
    """F5 lead: how many checkpoints PR becomes elevated before the head forms.

    formation = first revision with selectivity >= threshold (class default: induction 50, previous-token 100,
    first-token 30). elevation = first revision where `pr_elevated(rule, level)` holds. lead_checkpoints =
    formation_index - elevation_index (positive: PR leads; 0: together; negative: PR lags); lead_token_ratio =
    formation tokens / elevation tokens. Heads that never form or never elevate get NaN leads.
    Columns: panel, layer, head, name, formation_revision, formation_index, formation_tokens_b, elevation_revision,
    elevation_index, elevation_tokens_b, lead_checkpoints, lead_token_ratio, rule, level."""
    traj = head_trajectories(dev, head_class=head_class, threshold=threshold, heads=heads)
    rows = []
    for (panel, layer, head, name), g in traj.groupby(["panel", "layer", "head", "name"], sort=False):
        formed = np.flatnonzero(g["formed"].to_numpy())
        elevated = np.flatnonzero(pr_elevated(g["pr"].to_numpy(), rule=rule, level=level))
        f = int(formed[0]) if len(formed) else None
        e = int(elevated[0]) if len(elevated) else None
        at = lambda i, col: g[col].iloc[i] if i is not None else None  # noqa: E731
        ft, et = at(f, "tokens_b"), at(e, "tokens_b")
        rows.append({"panel": panel, "layer": layer, "head": head, "name": name, "head_class": head_class,
                     "formation_revision": at(f, "revision"), "formation_index": f, "formation_tokens_b": ft,
                     "elevation_revision": at(e, "revision"), "elevation_index": e, "elevation_tokens_b": et,
                     "lead_checkpoints": f - e if f is not None and e is not None else np.nan,
                     "lead_token_ratio": ft / et if f is not None and e is not None and et > 0 else np.nan,
                     "rule": rule, "level": level})
    return pd.DataFrame(rows)


DEFAULT_ELEVATION_GRID: dict[str, tuple[float, ...]] = {
    "fraction-of-peak": (0.1, 0.25, 0.5, 0.75, 0.9),
    "ratio-to-start": (1.5, 2.0, 5.0, 10.0),
}


def pr_lead_sensitivity(dev: pd.DataFrame, *, head_class: str = "induction", threshold: float | None = None,
                        heads: HeadSpec | None = None,
                        grid: Mapping[str, Sequence[float]] = DEFAULT_ELEVATION_GRID) -> pd.DataFrame:
    """F5 sensitivity: `pr_lead` over every (rule, level) of `grid`, stacked (columns of pr_lead)."""
    return pd.concat([pr_lead(dev, head_class=head_class, threshold=threshold, heads=heads, rule=rule, level=lv)
                      for rule, levels in grid.items() for lv in levels], ignore_index=True)


def pr_features(dev: pd.DataFrame) -> pd.DataFrame:
    """The authors' static PR features per head (spec §3), over the revisions with a known PR:
    integral = trapezoid(max(PR - 1, 0), ln(max(tokens_b, 1))) (so revisions below 1B tokens add nothing),
    spread = max - min PR, final_pr, max_pr, min_pr."""
    _require(dev, ["pr"], "pr_features")
    known = dev.dropna(subset=["pr"]).merge(revisions(dev)[["panel", "revision", "revision_index"]],
                                            on=["panel", "revision"]).sort_values("revision_index", kind="stable")
    rows = []
    for (panel, layer, head), g in known.groupby(["panel", "layer", "head"], sort=False):
        pr = g["pr"].to_numpy(dtype=float)
        x = np.log(np.maximum(g["tokens_b"].to_numpy(dtype=float), 1.0))
        y = np.maximum(pr - 1, 0)
        integral = float(np.sum((y[1:] + y[:-1]) / 2 * np.diff(x))) if len(pr) > 1 else 0.0
        rows.append({"panel": panel, "layer": layer, "head": head, "name": head_name(layer, head),
                     "integral": integral, "spread": pr.max() - pr.min(), "final_pr": pr[-1],
                     "max_pr": pr.max(), "min_pr": pr.min()})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------- F6 the noise floor

NULL_COLUMNS = ("revision", "tokens_b", "null_p99", "null_max", "real_max", "k_above")


def noise_floor(nulls: pd.DataFrame | None, *, panels: Sequence[str] = (), stable_ratio: float = 2.0) -> pd.DataFrame:
    """F6: is the selectivity noise floor stable across training?

    `nulls` is tidy, one row per (panel, revision) of a null-selectivity calibration: revision, tokens_b,
    null_p99 (global 99th percentile of null selectivities), null_max, real_max (largest real induction
    selectivity), k_above (heads with real selectivity > null_p99); `panel` optional. The p99 (or max) counts as
    stable when max/min over revisions <= stable_ratio (2.0 = "within a factor of two").
    Returns one row per panel: status ("ok" / "no data"), n_revisions, p99_min, p99_max, p99_ratio, p99_stable,
    max_min, max_max, max_ratio, max_stable, k_above_min, k_above_max, reason. With no null data (None / empty),
    each of `panels` gets status "no data" and NaN values, never an exception."""
    columns = ["panel", "status", "n_revisions", "p99_min", "p99_max", "p99_ratio", "p99_stable", "max_min",
               "max_max", "max_ratio", "max_stable", "k_above_min", "k_above_max", "reason"]
    if nulls is None or len(nulls) == 0:
        return pd.DataFrame([{"panel": p, "status": "no data", "n_revisions": 0,
                              "reason": "no null-selectivity draws for this panel (run the null calibration)"}
                             for p in panels], columns=columns)
    missing = [c for c in NULL_COLUMNS if c not in nulls.columns]
    if missing:
        raise DataError(f"noise_floor: null table lacks column(s) {missing}; expected {list(NULL_COLUMNS)} "
                        "(+ optional panel)")
    nulls = nulls if "panel" in nulls.columns else nulls.assign(panel="")
    rows = []
    for panel, g in nulls.groupby("panel", sort=False):
        p99, mx = g["null_p99"].to_numpy(dtype=float), g["null_max"].to_numpy(dtype=float)
        p99_ratio, max_ratio = p99.max() / p99.min(), mx.max() / mx.min()
        rows.append({"panel": panel, "status": "ok", "n_revisions": len(g), "p99_min": p99.min(),
                     "p99_max": p99.max(), "p99_ratio": p99_ratio, "p99_stable": p99_ratio <= stable_ratio,
                     "max_min": mx.min(), "max_max": mx.max(), "max_ratio": max_ratio,
                     "max_stable": max_ratio <= stable_ratio, "k_above_min": int(g["k_above"].min()),
                     "k_above_max": int(g["k_above"].max()), "reason": ""})
    for p in panels:
        if p not in set(nulls["panel"]):
            rows.append({"panel": p, "status": "no data", "n_revisions": 0,
                         "reason": "no null-selectivity draws for this panel (run the null calibration)"})
    return pd.DataFrame(rows, columns=columns)


# ------------------------------------------------------------------------------------------ threshold sensitivity

# A log grid over [2, 1000]x that contains the paper's thresholds (30x, 50x, 100x) exactly.
SENSITIVITY_THRESHOLDS: tuple[float, ...] = tuple(sorted(
    set(np.round(np.geomspace(2, 1000, 25), 2).tolist()) | {2.0, 5.0, 10.0, 20.0, 30.0, 50.0, 100.0, 300.0, 1000.0}
))


def threshold_sensitivity(dev: pd.DataFrame, *, head_classes: Sequence[str] = (BOS, "induction"),
                          thresholds: Sequence[float] = SENSITIVITY_THRESHOLDS,
                          rule: CountingRule = "per-class", final_only: bool = False) -> pd.DataFrame:
    """Beyond the paper: n_c(tau) and n_c(tau)/n_heads as functions of tau, for every revision (or only each
    panel's final one). For first-token the fraction is the BOS fraction, for induction `n` is the circuit size; a
    reader sees how much each finding rests on 30x and 50x. Columns: panel, revision, revision_index, tokens_b,
    head_class, threshold, n_heads, n, fraction."""
    frames = []
    for head_class in head_classes:
        for tau in thresholds:
            c = head_counts(dev, head_class, threshold=float(tau), rule=rule)
            frames.append(c.assign(head_class=head_class, threshold=float(tau)))
    out = pd.concat(frames, ignore_index=True)
    if final_only:
        last = out.groupby("panel", sort=False)["revision_index"].transform("max")
        out = out[out["revision_index"] == last]
    cols = ["panel", "revision", "revision_index", "tokens_b", "head_class", "threshold", "n_heads", "n", "fraction"]
    return out[cols].reset_index(drop=True)


def shape_sensitivity(dev: pd.DataFrame, *, thresholds: Sequence[float] = SENSITIVITY_THRESHOLDS,
                      rule: CountingRule = "per-class", transition_share: float = 0.5) -> pd.DataFrame:
    """Beyond the paper: the F2 shape descriptor (largest jump, its share, ramp/transition) at every BOS threshold,
    to see whether a "transition" survives other thresholds. Columns: threshold + trajectory_shape columns."""
    return pd.concat([trajectory_shape(bos_fraction(dev, threshold=float(t), rule=rule),
                                       transition_share=transition_share).assign(threshold=float(t))
                      for t in thresholds], ignore_index=True)
