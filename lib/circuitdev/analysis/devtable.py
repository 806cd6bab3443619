"""The developmental table's revisions and head counts: what every finding is built from.

A developmental table (schema.py) has one row per (panel, revision, layer, head) from any source. `revisions` lists
its (panel, revision) pairs in token order with `token_fraction` = tokens_b / the panel's final tokens_b (the paper's
training-fraction denominators, method reference §6); `head_counts` counts the heads of a class at a threshold per
revision under a counting rule (`measure.classify.is_class`); `final_circuit` is the circuit screen at one revision.
The revision index behind them is a bincount over row codes, built once per frame inside `reuse_indexes()`.
"""

from __future__ import annotations

import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterable

import numpy as np
import pandas as pd

from circuitdev.errors import ConfigError, DataError
from circuitdev.measure.classify import CountingRule, is_class
from circuitdev.schema import INDUCTION_THRESHOLD, check_head_class, head_name, sel_column


def require(dev: pd.DataFrame, columns: Iterable[str], what: str, *, allow_empty: bool = False) -> None:
    missing = [c for c in columns if c not in dev.columns]
    if missing:
        raise DataError(f"{what} needs developmental-table column(s) {missing}; the table has {list(dev.columns)}")
    if dev.empty and not allow_empty:
        raise DataError(f"{what}: the developmental table is empty")


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


def index(dev: pd.DataFrame) -> _Index:
    if _INDEX_CACHE is not None:
        hit = _INDEX_CACHE.get(id(dev))
        if hit is not None and hit[0]() is dev:
            return hit[1]
        ix = _build_index(dev)
        _INDEX_CACHE[id(dev)] = (weakref.ref(dev), ix)
        return ix
    return _build_index(dev)


def _build_index(dev: pd.DataFrame) -> _Index:
    require(dev, ["panel", "revision", "tokens_b", "layer", "head"], "revisions")
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
    return index(dev).frame()


def head_mask(dev: pd.DataFrame, head_class: str, *, threshold: float, rule: CountingRule = "per-class") -> np.ndarray:
    """True where a head counts for `head_class` at `threshold` under the counting rule (`measure.classify.is_class`)."""
    require(dev, [sel_column(check_head_class(head_class))], "head_mask", allow_empty=True)
    return is_class(dev, head_class, threshold, rule=rule).to_numpy(dtype=bool)


def head_counts(dev: pd.DataFrame, head_class: str, *, threshold: float,
                rule: CountingRule = "per-class") -> pd.DataFrame:
    """n_c(tau) per revision: revisions(dev) columns plus `n` and `fraction` = n / n_heads."""
    ix = index(dev)
    n = ix.count(head_mask(dev, head_class, threshold=threshold, rule=rule))
    return ix.frame(n=n, fraction=n / ix.cols["n_heads"])


def panel_order(dev: pd.DataFrame) -> dict[str, int]:
    """Panels keep their order of first appearance in the table."""
    return {p: i for i, p in enumerate(pd.unique(dev["panel"]))}


def final_circuit(dev: pd.DataFrame, *, head_class: str = "induction", threshold: float = INDUCTION_THRESHOLD,
                  revision: str | None = None, rule: CountingRule = "per-class") -> pd.DataFrame:
    """The circuit screen at one revision (default: each panel's final one): heads with sel_c >= threshold
    (the paper's all-head induction screen, no best-class requirement). Columns: panel, layer, head, name,
    selectivity."""
    ix = index(dev)
    at = dev[np.isin(ix.codes, ix.reference(revision)) & head_mask(dev, head_class, threshold=threshold, rule=rule)]
    out = pd.DataFrame({"panel": at["panel"].to_numpy(), "layer": at["layer"].to_numpy(),
                        "head": at["head"].to_numpy(),
                        "name": [head_name(l, h) for l, h in zip(at["layer"], at["head"])],
                        "selectivity": at[sel_column(head_class)].to_numpy()})
    return out.assign(_p=out["panel"].map(panel_order(dev))).sort_values(["_p", "layer", "head"], kind="stable") \
        .drop(columns="_p").reset_index(drop=True)


def revision_summary(records: pd.DataFrame) -> pd.DataFrame:
    """One row per revision of probe records (the store's columns): revision, tokens_b, heads, the heads of each
    classification (best class at the class threshold, as stored), the circuit sizes and the BOS count the probe
    recorded (ind_circuit, prev_circuit, bos), and the median PR. What `circuitdev show --panel P` prints."""
    from circuitdev.schema import HEAD_CLASSES, UNCLASSIFIED

    rows = []
    for rev, g in records.groupby("revision", sort=False):
        row = {"revision": rev, "tokens_b": g["tokens_b"].iloc[0], "heads": len(g)}
        counts = g["classification"].value_counts()
        row.update({c: int(counts.get(c, 0)) for c in (*HEAD_CLASSES, UNCLASSIFIED)})
        for col, name in (("in_induction_circuit", "ind_circuit"), ("in_prev_token_circuit", "prev_circuit"),
                          ("is_bos", "bos")):
            if col in g:
                row[name] = int(g[col].sum())
        row["pr_median"] = float(g["pr"].median())
        rows.append(row)
    return pd.DataFrame(rows)


def panel_summary(dev: pd.DataFrame) -> pd.DataFrame:
    """One row per panel: revisions, tokens of the first and last revision (billions), heads per model."""
    revs = revisions(dev)
    out = revs.groupby("panel", sort=False).agg(revisions=("revision", "size"), first_tokens_b=("tokens_b", "min"),
                                                 last_tokens_b=("tokens_b", "max"), heads=("n_heads", "first"))
    return out.reset_index()
