"""F4, convergence: how early the final induction circuit is already visible (recall of the final-revision screen
at every revision), how much else the screen catches on the way (precision, Jaccard overlap, the heads that rise and
fade) and the first revision reaching each recall level."""

from __future__ import annotations

from typing import Sequence

import math

import numpy as np
import pandas as pd

from circuitdev.analysis import uncertainty
from circuitdev.analysis.devtable import final_circuit, head_mask, index
from circuitdev.analysis.findings.basics import EPS
from circuitdev.analysis.findings.claim import (COUNTING_RULES, RobustClaim, claim_row, claimed, hangs_on_row, matches,
                                                tokens_text)
from circuitdev.analysis.findings.f3_milestones import first_hit_bound, milestone_text
from circuitdev.analysis.units import fmt_tokens_b
from circuitdev.measure.classify import CountingRule
from circuitdev.schema import INDUCTION_THRESHOLD, check_head_class, head_name, sel_column

__all__ = ["circuit_recall", "faded_heads", "recall_milestones"]


def circuit_recall(dev: pd.DataFrame, *, head_class: str = "induction", threshold: float = INDUCTION_THRESHOLD,
                   reference_revision: str | None = None, rule: CountingRule = "per-class",
                   boot: pd.DataFrame | None = None) -> pd.DataFrame:
    """F4: recall(r) = |S_ref and S_r| / |S_ref|, with S_r = {h : sel_c(h, r) >= threshold} the screen at revision r
    and S_ref the screen at the final revision (or `reference_revision`); beside it what the screen catches that is
    not the final circuit: precision(r) = |S_ref and S_r| / |S_r| (the share of screened heads that are in the final
    circuit) and the Jaccard overlap |S_ref and S_r| / |S_ref or S_r|. Columns: revisions(dev) + n_circuit,
    n_screened, n_found, recall, precision, jaccard, found (names); recall is NaN for a panel whose reference circuit
    is empty, precision where nothing is screened, Jaccard where both are empty. With `boot` (bootstrap replicates)
    also `<col>_lo` / `_hi` / `_boot_mean` / `_widened` of n_circuit, n_found, recall, precision and jaccard: the
    circuit itself is re-screened on every replicate."""
    if boot is not None:
        return uncertainty.with_intervals(dev, boot, lambda d: circuit_recall(
            d, head_class=head_class, threshold=threshold, reference_revision=reference_revision, rule=rule),
            columns=["n_circuit", "n_found", "recall", "precision", "jaccard"])
    ix = index(dev)
    mask = head_mask(dev, head_class, threshold=threshold, rule=rule)
    layer, head = dev["layer"].to_numpy(dtype=np.int64), dev["head"].to_numpy(dtype=np.int64)
    keys = _head_keys(ix, layer, head)
    in_circuit = np.isin(ix.codes, ix.reference(reference_revision)) & mask  # S_ref rows
    hit = np.isin(keys, keys[in_circuit]) & mask
    found: dict[int, list[tuple[int, int]]] = {}
    for i in np.flatnonzero(hit):  # few rows: the circuit heads, at the revisions where they pass
        found.setdefault(ix.codes[i], []).append((int(layer[i]), int(head[i])))
    n_revs = len(ix.cols["revision"])
    panel_of_row = np.searchsorted(ix.starts, ix.codes, side="right") - 1
    n_circuit = np.bincount(panel_of_row[in_circuit], minlength=len(ix.starts))[
        np.searchsorted(ix.starts, np.arange(n_revs), side="right") - 1]
    n_found, n_screened = ix.count(hit), ix.count(mask)
    union = n_circuit + n_screened - n_found
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = np.where(n_circuit > 0, n_found / np.maximum(n_circuit, 1), np.nan)
        precision = np.where(n_screened > 0, n_found / np.maximum(n_screened, 1), np.nan)
        jaccard = np.where(union > 0, n_found / np.maximum(union, 1), np.nan)
    return ix.frame(n_circuit=n_circuit, n_screened=n_screened, n_found=n_found, recall=recall, precision=precision,
                    jaccard=jaccard,
                    found=[" ".join(head_name(*h) for h in sorted(found.get(i, []))) for i in range(n_revs)])


def _head_keys(ix, layer: np.ndarray, head: np.ndarray) -> np.ndarray:
    """One integer per (panel, layer, head), the same at every revision."""
    panel_of_row = np.searchsorted(ix.starts, ix.codes, side="right") - 1
    return panel_of_row * 10**8 + layer * 10**4 + head


def faded_heads(dev: pd.DataFrame, *, head_class: str = "induction", threshold: float = INDUCTION_THRESHOLD,
                reference_revision: str | None = None, rule: CountingRule = "per-class") -> pd.DataFrame:
    """F4, the heads that rise and fade: screened (sel_c >= threshold) at some revision but not in the final circuit
    (the screen at the final revision, or `reference_revision`). An early screen that catches them is imprecise,
    whatever its recall. One row per such head: panel, name, layer, head, passes (revisions at which it is
    screened), first_revision, last_revision, last_tokens_b, peak (its largest selectivity), peak_revision, final
    (its selectivity at the reference revision)."""
    col = sel_column(check_head_class(head_class))
    ix = index(dev)
    mask = head_mask(dev, head_class, threshold=threshold, rule=rule)
    layer, head = dev["layer"].to_numpy(dtype=np.int64), dev["head"].to_numpy(dtype=np.int64)
    keys = _head_keys(ix, layer, head)
    at_ref = np.isin(ix.codes, ix.reference(reference_revision))
    faded = np.isin(keys, keys[mask]) & ~np.isin(keys, keys[at_ref & mask])
    value, order = dev[col].to_numpy(dtype=float), ix.cols["revision_index"]
    rows = []
    for key in pd.unique(keys[faded]):
        own = np.flatnonzero(keys == key)
        own = own[np.argsort(order[ix.codes[own]], kind="stable")]
        passed = own[mask[own]]
        peak = own[np.argmax(value[own])]
        final = own[at_ref[own]]
        rows.append({"panel": dev["panel"].iloc[own[0]], "name": head_name(layer[own[0]], head[own[0]]),
                     "layer": int(layer[own[0]]), "head": int(head[own[0]]), "passes": len(passed),
                     "first_revision": ix.cols["revision"][ix.codes[passed[0]]],
                     "last_revision": ix.cols["revision"][ix.codes[passed[-1]]],
                     "last_tokens_b": float(ix.cols["tokens_b"][ix.codes[passed[-1]]]),
                     "peak": value[peak], "peak_revision": ix.cols["revision"][ix.codes[peak]],
                     "final": value[final[0]] if len(final) else np.nan})
    out = pd.DataFrame(rows, columns=["panel", "name", "layer", "head", "passes", "first_revision", "last_revision",
                                      "last_tokens_b", "peak", "peak_revision", "final"])
    panel_rank = {p: i for i, p in enumerate(pd.unique(dev["panel"]))}
    return out.assign(_p=out["panel"].map(panel_rank)).sort_values(["_p", "layer", "head"], kind="stable") \
        .drop(columns="_p").reset_index(drop=True)


def recall_milestones(recall: pd.DataFrame, *, levels: Sequence[float] = (1 / 3, 2 / 3, 1.0)) -> pd.DataFrame:
    """F4: first revision whose recall reaches each level (paper: 33/67/100%, i.e. 1/3, 2/3, 3/3 of a 3-head
    circuit; use exact fractions, as 2/3 = 0.667 < 0.67). Columns: panel, level, level_pct, revision,
    revision_index, tokens_b, token_fraction (None / NaN where never reached), the censoring (`bound`: "upper" at
    the first probed revision after initialisation, "lower" never reached -- `f3_milestones.first_hit_bound` --;
    bound_tokens_b, the last revision's tokens where never reached; `reached`: "23B", "≤ 20B", "> 3.05T";
    `share`: the share of training as the prose gives it, "0.3%", "≤ 0.2%" at the first revision, None never), and
    where `recall` has them (a `circuit_recall` table) the screen there: n_screened, n_found, precision, jaccard."""
    rows = []
    panels, value = recall["panel"].to_numpy(), recall["recall"].to_numpy(dtype=float)
    screen = [c for c in ("n_screened", "n_found", "precision", "jaccard") if c in recall.columns]
    for panel in pd.unique(panels):
        idx = np.flatnonzero(panels == panel)
        for level in levels:
            hit = idx[value[idx] >= level - EPS][:1]
            first = recall.iloc[hit[0]] if len(hit) else None
            bound = first_hit_bound(hit[0] - idx[0] if len(hit) else None, float(recall["tokens_b"].iloc[idx[0]]))
            row = {"tokens_b": float(first["tokens_b"]) if first is not None else np.nan, "bound": bound,
                   "bound_tokens_b": float(recall["tokens_b"].iloc[hit[0] if len(hit) else idx[-1]])}
            rows.append({"panel": panel, "level": level, "level_pct": round(100 * level),
                         "revision": first["revision"] if first is not None else None,
                         "revision_index": int(first["revision_index"]) if first is not None else None,
                         "tokens_b": float(first["tokens_b"]) if first is not None else np.nan,
                         "token_fraction": float(first["token_fraction"]) if first is not None else np.nan,
                         "bound": bound, "bound_tokens_b": row["bound_tokens_b"],
                         "reached": milestone_text(row, fmt_tokens_b, never=""),
                         "share": None if first is None else
                         f"{'≤ ' if bound == 'upper' else ''}{100 * float(first['token_fraction']):.2g}%",
                         **{c: float(first[c]) if first is not None else np.nan for c in screen}})
    return pd.DataFrame(rows, columns=["panel", "level", "level_pct", "revision", "revision_index", "tokens_b",
                                       "token_fraction", "bound", "bound_tokens_b", "reached", "share", *screen])


# ------------------------------------------------------------------------------------ F4 as a robustness claim
def _recall_over_bars(dev: pd.DataFrame, taus: Sequence[float], rule: CountingRule) -> list[dict]:
    dev, claims = claimed(dev, "F4.recall.")
    if dev.empty:
        return []
    rows = []
    for tau in taus:
        recall = circuit_recall(dev, threshold=tau, rule=rule)
        last = recall.groupby("panel", sort=False)["tokens_b"].last()
        for m in recall_milestones(recall).to_dict("records"):
            claim = claims.get((m["panel"], str(m["level_pct"])))
            if claim is None:
                continue
            never = pd.isna(m["revision"])
            rows.append(claim_row(m["panel"], f"{m['level_pct']}%", "induction", tau, rule,
                                  last[m["panel"]] if never else m["tokens_b"], matches(claim, m["tokens_b"], never),
                                  m["bound"], INDUCTION_THRESHOLD, "per-class"))
    return rows


def _recall_hangs_on(dev: pd.DataFrame, rule: CountingRule) -> list[dict]:
    """Each recall level: the circuit head whose rise completes it, and its margin to the bar."""
    recall = circuit_recall(dev, rule=rule)
    circuit = final_circuit(dev, rule=rule)
    col = sel_column("induction")
    rows = []
    for m in recall_milestones(recall).to_dict("records"):
        heads = circuit[circuit["panel"] == m["panel"]]
        if pd.isna(m["revision"]) or heads.empty:
            continue
        at = dev[(dev["panel"] == m["panel"]) & (dev["revision"] == m["revision"])].merge(
            heads[["layer", "head"]], on=["layer", "head"]).sort_values(col, ascending=False)
        k = max(1, math.ceil(m["level"] * len(heads) - EPS))
        r = at.iloc[k - 1]
        name, value = head_name(r["layer"], r["head"]), float(r[col])
        bound = m["bound"] == "upper"
        rows.append(hangs_on_row(m["panel"], f"{m['level_pct']}%", "induction", INDUCTION_THRESHOLD, name,
                                 m["revision"], m["tokens_b"], value,
                                 f"{m['level_pct']}% at {'≤ ' if bound else ''}{tokens_text(m['tokens_b'])}"
                                 f"{' (the first probed revision)' if bound else ''}: {name} reads "
                                 f"{value:.3g}× ({value / INDUCTION_THRESHOLD:.2f}× the bar)"))
    return rows


RECALL_CLAIM = RobustClaim(
    "F4.recall", "F4", "recall of the final circuit reaches each level at the revision the paper gives",
    "tokens (B) of the first revision reaching the level", COUNTING_RULES, _recall_over_bars, _recall_hangs_on,
    unit=fmt_tokens_b, axis=("first revision reaching the level (tokens, B)", "log", None))
