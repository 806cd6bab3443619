"""The paper's findings F1-F6 and a threshold sensitivity, as pure functions over a developmental table.

Input is the developmental table of schema.py (one row per panel, revision, layer, head) from any source: the
published files (`circuitdev.published`), our probe store, or the toy panel. Outputs are tidy DataFrames, one row per
(panel, revision, ...), with revisions in token order and `token_fraction` = tokens_b / the panel's final tokens_b
(the paper's training-fraction denominators, spec §6).

Defaults reproduce the paper exactly (method spec §2, §6):
- counting rule "per-class": a head counts for class c at threshold tau iff sel_c >= tau, WHATEVER its best class.
  This is what every developmental table and figure of the paper uses (spec §2: a head whose best class is
  induction still counts as BOS-class when its first-token selectivity passes 30x). Use "best-class" (sel_c >= tau
  AND c is the head's argmax class) to ask how many heads are *primarily* of class c, as the repository README does.
- thresholds: 30x for BOS (first-token) counts, previous-token / self milestone counts; 50x for the induction
  circuit and induction milestones; 100x for previous-token formation in F5.
"""

from __future__ import annotations

import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterable, Literal, Mapping, Sequence

import numpy as np
import pandas as pd

from circuitdev.errors import ConfigError, DataError
from circuitdev.schema import HEAD_CLASSES, HeadClass, check_head_class, sel_column
from circuitdev.classify import CountingRule, classify, is_class

ElevationRule = Literal["fraction-of-peak", "ratio-to-start", "above-level"]

BOS: HeadClass = "first-token"
# F5 formation thresholds (spec §6 `formation_idx`): induction 50, previous-token 100, first-token 30.
FORMATION_THRESHOLDS: dict[str, float] = {"induction": 50.0, "previous-token": 100.0, "first-token": 30.0}
PR_SIGNAL_FLOOR = 1e-3  # the plotted PR signal is max(PR - 1, 1e-3) (log axis)
_EPS = 1e-9  # slack for ">=" on fractions such as 2/3


# ------------------------------------------------------------------------------------------------------ table basics


def _require(dev: pd.DataFrame, columns: Iterable[str], what: str, *, allow_empty: bool = False) -> None:
    missing = [c for c in columns if c not in dev.columns]
    if missing:
        raise DataError(f"{what} needs developmental-table column(s) {missing}; the table has {list(dev.columns)}")
    if dev.empty and not allow_empty:
        raise DataError(f"{what}: the developmental table is empty")


def with_best_class(dev: pd.DataFrame, *, class_threshold: float = 30.0) -> pd.DataFrame:
    """Add best_class, best_selectivity, second_class, second_selectivity and classification (paper rule, spec §2;
    see `circuitdev.screen.classify`: stable descending sort, exact ties go to the class listed first)."""
    _require(dev, [sel_column(c) for c in HEAD_CLASSES], "with_best_class")
    labels = classify(dev, threshold=class_threshold)
    return dev.drop(columns=[c for c in labels.columns if c in dev.columns]).join(labels)


@dataclass(frozen=True)
class _Index:
    """revisions(dev) as arrays (token order), and for every row of dev the position of its revision.

    Everything that counts heads per revision is a bincount over `codes` (no groupby per call)."""

    cols: dict[str, np.ndarray]  # panel, revision, revision_index, [step], tokens_b, token_fraction, n_heads
    codes: np.ndarray  # per dev row: position of its revision in `cols`
    starts: np.ndarray  # position in `cols` where each panel begins

    def count(self, mask: np.ndarray) -> np.ndarray:
        return np.bincount(self.codes, weights=mask, minlength=len(self.cols["revision"])).astype(int)

    def frame(self, **extra) -> pd.DataFrame:
        return pd.DataFrame({**self.cols, **extra})

    def panels(self):
        """(panel, positions of its revisions in `cols`), in panel order."""
        ends = np.r_[self.starts[1:], len(self.cols["revision"])]
        for a, b in zip(self.starts, ends):
            yield self.cols["panel"][a], np.arange(a, b)

    def reference(self, revision: str | None) -> np.ndarray:
        """Positions of the reference revision: each panel's final one, or the named one."""
        if revision is None:
            return np.r_[self.starts[1:], len(self.cols["revision"])] - 1
        ref = np.flatnonzero(self.cols["revision"] == revision)
        if len(ref) == 0:
            raise ConfigError(f"reference revision {revision!r} is not in the table")
        return ref


_INDEX_CACHE: dict[int, tuple[weakref.ref, _Index]] | None = None


@contextmanager
def reuse_indexes():
    """Inside this block each DataFrame's revision index is built once and reused (callers that evaluate many
    findings on the same, unchanged frames, e.g. the audit's threshold sweeps). Do not mutate frames inside it."""
    global _INDEX_CACHE
    outer, _INDEX_CACHE = _INDEX_CACHE, ({} if _INDEX_CACHE is None else _INDEX_CACHE)
    try:
        yield
    finally:
        _INDEX_CACHE = outer


def _index(dev: pd.DataFrame) -> _Index:
    if _INDEX_CACHE is not None:
        hit = _INDEX_CACHE.get(id(dev))
        if hit is not None and hit[0]() is dev:
            return hit[1]
        ix = _build_index(dev)
        _INDEX_CACHE[id(dev)] = (weakref.ref(dev), ix)
        return ix
    return _build_index(dev)


def _build_index(dev: pd.DataFrame) -> _Index:
    _require(dev, ["panel", "revision", "tokens_b", "layer", "head"], "revisions")
    panel_codes, _ = pd.factorize(dev["panel"])  # order of first appearance
    revision_codes, _ = pd.factorize(dev["revision"])
    codes, _ = pd.factorize(panel_codes.astype(np.int64) * (len(dev) + 1) + revision_codes)
    first = np.unique(codes, return_index=True)[1]
    has_step = "step" in dev.columns
    tokens = dev["tokens_b"].to_numpy(dtype=float)[first]
    steps = dev["step"].to_numpy(dtype=float)[first] if has_step else np.zeros(len(first))
    order = np.lexsort((steps, tokens, panel_codes[first]))  # panel, then tokens, then step
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    p = panel_codes[first][order]
    starts = np.r_[0, np.flatnonzero(np.diff(p)) + 1]
    group = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(p)]))
    cols = {"panel": dev["panel"].to_numpy()[first][order], "revision": dev["revision"].to_numpy()[first][order],
            "revision_index": np.arange(len(p)) - starts[group]}
    if has_step:
        cols["step"] = dev["step"].to_numpy()[first][order]
    cols["tokens_b"] = tokens[order]
    cols["token_fraction"] = tokens[order] / np.maximum.reduceat(tokens[order], starts)[group]
    cols["n_heads"] = np.bincount(rank[codes], minlength=len(order))
    return _Index(cols, rank[codes], starts)


def revisions(dev: pd.DataFrame) -> pd.DataFrame:
    """One row per (panel, revision) in token order: panel, revision, revision_index, [step], tokens_b,
    token_fraction, n_heads. Panels keep their order of first appearance."""
    return _index(dev).frame()


def head_mask(dev: pd.DataFrame, head_class: str, *, threshold: float, rule: CountingRule = "per-class") -> np.ndarray:
    """True where a head counts for `head_class` at `threshold` under the counting rule (`circuitdev.screen.is_class`)."""
    _require(dev, [sel_column(check_head_class(head_class))], "head_mask", allow_empty=True)
    return is_class(dev, head_class, threshold, rule=rule).to_numpy(dtype=bool)


def head_counts(dev: pd.DataFrame, head_class: str, *, threshold: float,
                rule: CountingRule = "per-class") -> pd.DataFrame:
    """n_c(tau) per revision: revisions(dev) columns plus `n` and `fraction` = n / n_heads."""
    ix = _index(dev)
    n = ix.count(head_mask(dev, head_class, threshold=threshold, rule=rule))
    return ix.frame(n=n, fraction=n / ix.cols["n_heads"])


def _panel_order(dev: pd.DataFrame) -> dict[str, int]:
    """Panels keep their order of first appearance in the table."""
    return {p: i for i, p in enumerate(pd.unique(dev["panel"]))}


def head_name(layer: int, head: int) -> str:
    return f"L{int(layer)}H{int(head)}"


# ----------------------------------------------------------------------------------------------------- F1 per layer


def layer_counts(dev: pd.DataFrame, *, head_class: str = BOS, threshold: float = 30.0,
                 rule: CountingRule = "per-class") -> pd.DataFrame:
    """F1: heads of `head_class` per layer at every revision (the paper's tables 2-3 use first-token >= 30x).

    Columns: panel, revision, revision_index, tokens_b, layer, n (every layer listed, zeros included)."""
    ix = _index(dev)
    n_revs = len(ix.cols["revision"])
    layers = dev["layer"].to_numpy(dtype=int)
    n_layers = int(layers.max()) + 1
    hits = np.bincount(ix.codes * n_layers + layers, weights=head_mask(dev, head_class, threshold=threshold, rule=rule),
                       minlength=n_revs * n_layers).astype(int)
    top_layer = np.full(n_revs, -1)
    np.maximum.at(top_layer, ix.codes, layers)  # a panel with fewer layers lists only its own
    keep = np.tile(np.arange(n_layers), n_revs) <= np.repeat(top_layer, n_layers)
    rows = np.repeat(np.arange(n_revs), n_layers)[keep]
    return pd.DataFrame({**{c: ix.cols[c][rows] for c in ("panel", "revision", "revision_index", "tokens_b")},
                         "layer": np.tile(np.arange(n_layers), n_revs)[keep], "n": hits[keep]})


def floor_check(dev: pd.DataFrame, *, layers: Sequence[int] = (0, 1), head_class: str = BOS,
                threshold: float = 30.0, rule: CountingRule = "per-class") -> pd.DataFrame:
    """F1 floor: does every run have zero `head_class` heads in `layers` (the paper: no BOS head in L0/L1 ever)?

    One row per (panel, revision): panel, revision, tokens_b, n_floor (heads counted in `layers`), holds.
    The runs that break the floor are `out[~out.holds]`."""
    ix = _index(dev)
    n_floor = ix.count(head_mask(dev, head_class, threshold=threshold, rule=rule)
                       & np.isin(dev["layer"].to_numpy(), list(layers)))
    return pd.DataFrame({**{c: ix.cols[c] for c in ("panel", "revision", "revision_index", "tokens_b")},
                         "n_floor": n_floor, "holds": n_floor == 0})


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
    panels, labels = fractions["panel"].to_numpy(), fractions["revision"].to_numpy()
    values, tokens = fractions[value].to_numpy(dtype=float), fractions["tokens_b"].to_numpy(dtype=float)
    for panel in pd.unique(panels):
        idx = np.flatnonzero(panels == panel)
        idx = idx[np.argsort(tokens[idx], kind="stable")]
        v, t, revision = values[idx] * 100, tokens[idx], labels[idx]
        steps = np.diff(v) if len(v) > 1 else np.array([0.0])
        j = int(np.argmax(steps))
        rise = v[-1] - v[0]
        share = steps[j] / rise if rise > 0 else np.nan
        reached = np.flatnonzero(v >= saturation_share * v[-1] - _EPS) if v[-1] > 0 else np.array([], int)
        rows.append({
            "panel": panel, "n_revisions": len(v), "start_pct": v[0], "final_pct": v[-1], "peak_pct": v.max(),
            "rise_pp": rise, "largest_jump_pp": steps[j] if len(v) > 1 else np.nan, "jump_share": share,
            "jump_from_revision": revision[j], "jump_to_revision": revision[min(j + 1, len(v) - 1)],
            "jump_from_tokens_b": t[j], "jump_to_tokens_b": t[min(j + 1, len(v) - 1)],
            "jump_token_ratio": t[min(j + 1, len(v) - 1)] / t[j] if t[j] > 0 else np.nan,
            "saturation_pct": v[-1],
            "saturation_revision": revision[reached[0]] if len(reached) else None,
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
    ix = _index(dev)
    hits = []
    for spec in specs:
        n = ix.count(head_mask(dev, spec.head_class, threshold=spec.threshold, rule=rule))
        hits.append(n >= spec.min_heads if spec.min_heads is not None else
                    n / ix.cols["n_heads"] >= spec.min_fraction - _EPS)
    rows = []
    for panel, idx in ix.panels():
        for spec, hit in zip(specs, hits):
            ok = hit[idx]
            if sustained:
                ok = np.logical_and.accumulate(ok[::-1])[::-1]
            i = idx[ok][0] if ok.any() else None
            rows.append({"panel": panel, "milestone": spec.name,
                         "revision": ix.cols["revision"][i] if i is not None else None,
                         "revision_index": int(ix.cols["revision_index"][i]) if i is not None else None,
                         "tokens_b": float(ix.cols["tokens_b"][i]) if i is not None else np.nan,
                         "token_fraction": float(ix.cols["token_fraction"][i]) if i is not None else np.nan})
    return pd.DataFrame(rows, columns=["panel", "milestone", "revision", "revision_index", "tokens_b",
                                       "token_fraction"])


def milestone_gap(table: pd.DataFrame, *, start: str = "induction_3_heads", end: str = "bos_50pct") -> pd.DataFrame:
    """F3 gap between two milestones as a token ratio end/start (the paper's: induction >= 3 heads -> BOS-50%) and
    in checkpoints. NaN where either milestone is never reached."""
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
                     if pd.notna(a["revision"].iloc[0]) and pd.notna(b["revision"].iloc[0]) else np.nan})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------------ F4 circuit recall


def final_circuit(dev: pd.DataFrame, *, head_class: str = "induction", threshold: float = 50.0,
                  revision: str | None = None, rule: CountingRule = "per-class") -> pd.DataFrame:
    """The circuit screen at one revision (default: each panel's final one): heads with sel_c >= threshold
    (the paper's all-head induction screen, no best-class requirement). Columns: panel, layer, head, name,
    selectivity."""
    ix = _index(dev)
    at = dev[np.isin(ix.codes, ix.reference(revision)) & head_mask(dev, head_class, threshold=threshold, rule=rule)]
    out = pd.DataFrame({"panel": at["panel"].to_numpy(), "layer": at["layer"].to_numpy(),
                        "head": at["head"].to_numpy(),
                        "name": [head_name(l, h) for l, h in zip(at["layer"], at["head"])],
                        "selectivity": at[sel_column(head_class)].to_numpy()})
    return out.assign(_p=out["panel"].map(_panel_order(dev))).sort_values(["_p", "layer", "head"], kind="stable") \
        .drop(columns="_p").reset_index(drop=True)


def circuit_recall(dev: pd.DataFrame, *, head_class: str = "induction", threshold: float = 50.0,
                   reference_revision: str | None = None, rule: CountingRule = "per-class") -> pd.DataFrame:
    """F4: recall(r) = |{h in S_ref : sel_c(h, r) >= threshold}| / |S_ref|, S_ref = the screen at the final
    revision (or `reference_revision`). Columns: revisions(dev) + n_circuit, n_found, recall, found (names);
    recall is NaN for a panel whose reference circuit is empty."""
    ix = _index(dev)
    mask = head_mask(dev, head_class, threshold=threshold, rule=rule)
    layer, head = dev["layer"].to_numpy(dtype=np.int64), dev["head"].to_numpy(dtype=np.int64)
    panel_of_row = np.searchsorted(ix.starts, ix.codes, side="right") - 1
    keys = panel_of_row * 10**8 + layer * 10**4 + head
    in_circuit = np.isin(ix.codes, ix.reference(reference_revision)) & mask  # S_ref rows
    hit = np.isin(keys, keys[in_circuit]) & mask
    found: dict[int, list[tuple[int, int]]] = {}
    for i in np.flatnonzero(hit):  # few rows: the circuit heads, at the revisions where they pass
        found.setdefault(ix.codes[i], []).append((int(layer[i]), int(head[i])))
    n_revs = len(ix.cols["revision"])
    n_circuit = np.bincount(panel_of_row[in_circuit], minlength=len(ix.starts))[
        np.searchsorted(ix.starts, np.arange(n_revs), side="right") - 1]
    n_found = ix.count(hit)
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = np.where(n_circuit > 0, n_found / np.maximum(n_circuit, 1), np.nan)
    return ix.frame(n_circuit=n_circuit, n_found=n_found, recall=recall,
                    found=[" ".join(head_name(*h) for h in sorted(found.get(i, []))) for i in range(n_revs)])


def recall_milestones(recall: pd.DataFrame, *, levels: Sequence[float] = (1 / 3, 2 / 3, 1.0)) -> pd.DataFrame:
    """F4: first revision whose recall reaches each level (paper: 33/67/100%, i.e. 1/3, 2/3, 3/3 of a 3-head
    circuit; use exact fractions, as 2/3 = 0.667 < 0.67). Columns: panel, level, level_pct, revision,
    revision_index, tokens_b, token_fraction (None / NaN where never reached)."""
    rows = []
    panels, value = recall["panel"].to_numpy(), recall["recall"].to_numpy(dtype=float)
    for panel in pd.unique(panels):
        idx = np.flatnonzero(panels == panel)
        for level in levels:
            hit = idx[value[idx] >= level - _EPS][:1]
            first = recall.iloc[hit[0]] if len(hit) else None
            rows.append({"panel": panel, "level": level, "level_pct": round(100 * level),
                         "revision": first["revision"] if first is not None else None,
                         "revision_index": int(first["revision_index"]) if first is not None else None,
                         "tokens_b": float(first["tokens_b"]) if first is not None else np.nan,
                         "token_fraction": float(first["token_fraction"]) if first is not None else np.nan})
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
    """Where a head's PR counts as "elevated" (along the last axis = revisions in token order). The paper gives no
    definition, so it is a parameter:

    - "fraction-of-peak" (default): PR - 1 >= level * max_t(PR - 1). Scale-free and works whatever PR the first
      checkpoint starts at (OLMoE's panel starts at 20B); level=0.5 = "half-way up its own peak".
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
        if rule == "ratio-to-start":
            return pr >= level * pr[..., :1]
        if rule == "above-level":
            return pr >= level
    raise ConfigError(f"elevation rule must be one of fraction-of-peak, ratio-to-start, above-level; got {rule!r}")


def _panel_matrices(dev: pd.DataFrame, columns: Sequence[str]):
    """Per panel: (panel, its revisions in token order, layer and head of each of its heads, {column: heads x
    revisions matrix}), NaN where a head has no row. The vectorised form of per-head trajectories."""
    ix = _index(dev)
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


def _first_true(mask: np.ndarray) -> np.ndarray:
    """Index of the first True along the last axis, -1 where there is none."""
    return np.where(mask.any(axis=-1), mask.argmax(axis=-1), -1)


def pr_lead(dev: pd.DataFrame, *, head_class: str = "induction", threshold: float | None = None,
            heads: HeadSpec | None = None, rule: ElevationRule = "fraction-of-peak",
            level: float = 0.5) -> pd.DataFrame:
    """F5 lead: how many checkpoints PR becomes elevated before the head forms.

    formation = first revision with selectivity >= threshold (class default: induction 50, previous-token 100,
    first-token 30). elevation = first revision where `pr_elevated(rule, level)` holds. lead_checkpoints =
    formation_index - elevation_index (positive: PR leads; 0: together; negative: PR lags); lead_token_ratio =
    formation tokens / elevation tokens. Heads that never form or never elevate get NaN leads. Heads default to
    the final-revision circuit of the class at the threshold.
    Columns: panel, layer, head, name, head_class, formation_revision, formation_index, formation_tokens_b,
    elevation_revision, elevation_index, elevation_tokens_b, lead_checkpoints, lead_token_ratio, rule, level."""
    return _leads(dev, head_class=head_class, threshold=threshold, heads=heads, settings=[(rule, level)])


_LEAD_COLUMNS = ["panel", "layer", "head", "name", "head_class", "formation_revision", "formation_index",
                 "formation_tokens_b", "elevation_revision", "elevation_index", "elevation_tokens_b",
                 "lead_checkpoints", "lead_token_ratio", "rule", "level"]


def _leads(dev: pd.DataFrame, *, head_class: str, threshold: float | None, heads: HeadSpec | None,
           settings: Sequence[tuple[str, float]]) -> pd.DataFrame:
    """pr_lead for several (rule, level) settings, building the per-panel matrices once."""
    threshold = FORMATION_THRESHOLDS.get(head_class, 30.0) if threshold is None else threshold
    _require(dev, ["pr", sel_column(head_class)], "pr_lead")
    chosen = _select_heads(dev, heads, head_class, threshold)
    frames = []
    for panel, revs, layers, hs, mats in _panel_matrices(dev, [sel_column(head_class), "pr"]):
        want = chosen[chosen["panel"] == panel]
        keep = np.isin(layers * 10**4 + hs, want["layer"].to_numpy() * 10**4 + want["head"].to_numpy())
        if not keep.any():
            continue
        tokens, labels = revs["tokens_b"], revs["revision"]
        pick = lambda arr, i: np.where(i >= 0, arr[np.maximum(i, 0)], None)  # noqa: E731
        f = _first_true(mats[sel_column(head_class)][keep] >= threshold)
        ft = np.where(f >= 0, tokens[np.maximum(f, 0)], np.nan)
        base = {"panel": panel, "layer": layers[keep], "head": hs[keep],
                "name": [head_name(l, h) for l, h in zip(layers[keep], hs[keep])], "head_class": head_class,
                "formation_revision": pick(labels, f), "formation_index": _nullable(f, f >= 0),
                "formation_tokens_b": ft}
        for rule, level in settings:
            e = _first_true(pr_elevated(mats["pr"][keep], rule=rule, level=level))
            et = np.where(e >= 0, tokens[np.maximum(e, 0)], np.nan)
            both = (f >= 0) & (e >= 0)
            frames.append(pd.DataFrame({
                **base, "elevation_revision": pick(labels, e), "elevation_index": _nullable(e, e >= 0),
                "elevation_tokens_b": et, "lead_checkpoints": _nullable(f - e, both),
                "lead_token_ratio": np.where(both & (et > 0), ft / np.where(et > 0, et, 1), np.nan),
                "rule": rule, "level": level}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=_LEAD_COLUMNS)


DEFAULT_ELEVATION_GRID: dict[str, tuple[float, ...]] = {
    "fraction-of-peak": (0.1, 0.25, 0.5, 0.75, 0.9),
    "ratio-to-start": (1.5, 2.0, 5.0, 10.0),
}


def pr_lead_sensitivity(dev: pd.DataFrame, *, head_class: str = "induction", threshold: float | None = None,
                        heads: HeadSpec | None = None,
                        grid: Mapping[str, Sequence[float]] = DEFAULT_ELEVATION_GRID) -> pd.DataFrame:
    """F5 sensitivity: `pr_lead` over every (rule, level) of `grid`, stacked (columns of pr_lead)."""
    settings = [(rule, float(lv)) for rule, levels in grid.items() for lv in levels]
    out = _leads(dev, head_class=head_class, threshold=threshold, heads=heads, settings=settings)
    order = {s: i for i, s in enumerate(settings)}
    return out.assign(_s=[order[s] for s in zip(out["rule"], out["level"])]).sort_values(
        "_s", kind="stable").drop(columns="_s").reset_index(drop=True)


def pr_features(dev: pd.DataFrame) -> pd.DataFrame:
    """The authors' static PR features per head (spec §3), over the revisions with a known PR:
    integral = trapezoid(max(PR - 1, 0), ln(max(tokens_b, 1))) (so revisions below 1B tokens add nothing),
    spread = max - min PR, final_pr, max_pr, min_pr. Heads without any PR are left out."""
    _require(dev, ["pr"], "pr_features")
    frames = []
    for panel, revs, layers, hs, mats in _panel_matrices(dev, ["pr"]):
        known = ~np.isnan(mats["pr"]).all(axis=1)
        if not known.any():
            continue
        pr, layers, hs = mats["pr"][known], layers[known], hs[known]
        x = np.log(np.maximum(revs["tokens_b"], 1.0))
        integral, last = np.empty(len(pr)), np.empty(len(pr))
        for i, row in enumerate(pr):  # per head: skip revisions without a PR
            ok = ~np.isnan(row)
            y = np.maximum(row[ok] - 1, 0)
            integral[i] = float(np.sum((y[1:] + y[:-1]) / 2 * np.diff(x[ok])))
            last[i] = row[ok][-1]
        frames.append(pd.DataFrame({
            "panel": panel, "layer": layers, "head": hs, "name": [head_name(l, h) for l, h in zip(layers, hs)],
            "integral": integral, "spread": np.nanmax(pr, axis=1) - np.nanmin(pr, axis=1), "final_pr": last,
            "max_pr": np.nanmax(pr, axis=1), "min_pr": np.nanmin(pr, axis=1)}))
    columns = ["panel", "layer", "head", "name", "integral", "spread", "final_pr", "max_pr", "min_pr"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


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
        if p not in set(pd.unique(nulls["panel"])):
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
    ix = _index(dev)
    frames = []
    for head_class in head_classes:
        sel = dev[sel_column(check_head_class(head_class))].to_numpy(dtype=float)
        best = head_mask(dev, head_class, threshold=np.finfo(float).tiny, rule=rule)  # best-class filter only
        for tau in thresholds:
            n = ix.count((sel >= tau) & best)
            frames.append(ix.frame(head_class=head_class, threshold=float(tau), n=n, fraction=n / ix.cols["n_heads"]))
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
    counts = threshold_sensitivity(dev, head_classes=[BOS], thresholds=thresholds, rule=rule)
    return pd.concat([trajectory_shape(g.rename(columns={"fraction": "bos_fraction"}),
                                       transition_share=transition_share).assign(threshold=tau)
                      for tau, g in counts.groupby("threshold", sort=True)], ignore_index=True)
