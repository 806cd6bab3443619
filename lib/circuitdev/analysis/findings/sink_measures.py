"""Three measures of an attention sink compared per head over training (issue 23 item 5).

Every probe record holds, per head (`measure.probe.head_table`):

    second_a   the paper's: first-token selectivity at the second A (`sel_first_token`) >= bos_threshold (30x)
    all_query  the all-query first-token score (`sel_first_token_allq`: attention on position 0 over every query
               from allq_skip on, over the same baseline, a ratio of means) >= allq_threshold (30x by default, the
               paper's bar; the paper has no all-query measure)
    mass       the all-query mass rule: the mean attention MASS on position 0 over the same queries, sequences
               averaged first (`mass_first_token_allq`), > epsilon (0.3), a mass, not a ratio -- after Gu et al.
               (2025)'s epsilon, but not their formula, which averages over every query (query 0 included) and
               thresholds each sequence before averaging: that is each record's `gu_sink_share`, and its mean over
               heads the revision's `gu_sink_rate` (`sink_rates` puts the two rates side by side)

The second-A query always has something to copy, so a head that parks on position 0 only when it has no match (a
"dormant" head) is invisible to it; the all-query measures see it. A ratio and a mass also move differently with
the context length (30x at T = 64 needs far more mass than at T = 256). The authors' files hold the first measure
only, so the comparison needs our records (toy and measured tiers).

- `sink_flags`: per (panel, revision, head) which measures call it a sink (<NA> where a record lacks the column).
- `measure_counts`: per revision, the heads each measure flags and the pairwise Jaccard overlap of those sets.
- `measure_agreement`: per panel and pair of measures, over every (revision, head): both / one only / Jaccard, and
  whether the two pick the same heads over the run.
- `sink_onsets`: per head any measure flags, the first revision under each measure (the same revision or not).
- `floor_by_measure`: F1's floor under each measure -- the lowest layer ever flagged and whether `layers` (0, 1)
  stay free of sinks at every revision; `lowest_layers`: the lowest flagged layer per revision.
"""

from __future__ import annotations

from itertools import combinations
from typing import Literal, Sequence

import numpy as np
import pandas as pd

from circuitdev.analysis.devtable import panel_order, revisions
from circuitdev.errors import ConfigError
from circuitdev.schema import BOS_THRESHOLD, head_name, parse_head

__all__ = ["SINK_MEASURES", "SINK_RATE_COLUMNS", "sink_rates", "sink_flags", "measured", "measure_counts", "AGREEMENT_COLUMNS", "measure_agreement",
           "sink_onsets", "lowest_layers", "FLOOR_COLUMNS", "floor_by_measure", "floor_texts", "mass_for_selectivity"]

SinkMeasure = Literal["second_a", "all_query", "mass"]
SINK_MEASURES: dict[str, str] = {
    "second_a": "first-token selectivity at the second A (the paper's)",
    "all_query": "all-query first-token score",
    "mass": "all-query attention mass on position 0 above epsilon",
}
MEASURE_COLUMNS: dict[str, str] = {"second_a": "sel_first_token", "all_query": "sel_first_token_allq",
                                   "mass": "mass_first_token_allq"}
GU_EPSILON = 0.3  # Gu et al. (2025); ProbeConfig.sink_rate_epsilon
FLOOR_LAYERS = (0, 1)  # F1's floor


def sink_flags(dev: pd.DataFrame, *, bos_threshold: float = BOS_THRESHOLD, allq_threshold: float = BOS_THRESHOLD,
               epsilon: float = GU_EPSILON) -> pd.DataFrame:
    """Per (panel, revision, layer, head): second_a, all_query, mass (pandas "boolean": <NA> where the record has no
    such column or value, e.g. every published row for the last two). Columns: panel, revision, revision_index,
    tokens_b, layer, head, name, second_a, all_query, mass; revisions in token order."""
    if not 0 < epsilon < 1:
        raise ConfigError(f"epsilon (a share of attention mass) must lie in (0, 1), got {epsilon!r}")
    if not (bos_threshold > 0 and allq_threshold > 0):
        raise ConfigError(f"thresholds must be positive selectivity ratios, got {bos_threshold!r}, {allq_threshold!r}")
    revs = revisions(dev)[["panel", "revision", "revision_index"]]
    out = dev[["panel", "revision", "tokens_b", "layer", "head"]].merge(revs, on=["panel", "revision"], how="left")
    out.insert(6, "name", [head_name(l, h) for l, h in zip(out["layer"], out["head"])])
    bars = {"second_a": (bos_threshold, np.greater_equal), "all_query": (allq_threshold, np.greater_equal),
            "mass": (epsilon, np.greater)}
    for measure, column in MEASURE_COLUMNS.items():
        values = dev[column].to_numpy(dtype=float) if column in dev.columns else np.full(len(dev), np.nan)
        bar, op = bars[measure]
        flag = pd.array(op(np.nan_to_num(values, nan=-np.inf), bar), dtype="boolean")
        flag[np.isnan(values)] = pd.NA
        out[measure] = flag
    out["_p"] = out["panel"].map(panel_order(dev))
    return out.sort_values(["_p", "revision_index", "layer", "head"], kind="stable").drop(
        columns="_p").reset_index(drop=True)


def measured(flags: pd.DataFrame) -> list[str]:
    """The measures with at least one value in `flags` (the published tier: second_a only)."""
    return [m for m in SINK_MEASURES if m in flags.columns and flags[m].notna().any()]


def _jaccard(a: np.ndarray, b: np.ndarray) -> float:
    union = int((a | b).sum())
    return float((a & b).sum()) / union if union else np.nan


def measure_counts(flags: pd.DataFrame) -> pd.DataFrame:
    """Per (panel, revision): n_<measure> (heads it flags; <NA> where unmeasured), n_all (flagged by every measured
    one), n_any, and jaccard_<a>_<b> per pair of measured measures (NaN when neither flags a head)."""
    rows = []
    for (panel, revision), g in flags.groupby(["panel", "revision"], sort=False):
        have = measured(g)
        row = {"panel": panel, "revision": revision, "revision_index": int(g["revision_index"].iloc[0]),
               "tokens_b": float(g["tokens_b"].iloc[0])}
        sets = {m: g[m].fillna(False).to_numpy(dtype=bool) for m in have}
        for m in SINK_MEASURES:
            row[f"n_{m}"] = int(sets[m].sum()) if m in sets else pd.NA
        stack = np.array(list(sets.values())) if sets else np.zeros((0, len(g)), bool)
        row["n_all"], row["n_any"] = int(stack.all(axis=0).sum()) if len(stack) else 0, int(stack.any(axis=0).sum())
        for a, b in combinations(SINK_MEASURES, 2):
            row[f"jaccard_{a}_{b}"] = _jaccard(sets[a], sets[b]) if a in sets and b in sets else np.nan
        rows.append(row)
    out = pd.DataFrame(rows)
    for m in SINK_MEASURES:
        if f"n_{m}" in out.columns:
            out[f"n_{m}"] = out[f"n_{m}"].astype("Int64")
    return out


AGREEMENT_COLUMNS = ["panel", "first", "second", "cells", "both", "only_first", "only_second", "jaccard",
                     "heads_first", "heads_second", "heads_both", "same_heads", "final_jaccard"]


def measure_agreement(flags: pd.DataFrame) -> pd.DataFrame:
    """Per panel and pair of measured measures: over every (revision, head) measured by both -- cells, both,
    only_first, only_second, jaccard; over the run -- the heads each flags at some revision (heads_first /
    heads_second, as "L1H0 L3H1"), heads_both (flagged by both, not necessarily at the same revision), same_heads
    (the two sets are equal); final_jaccard: the Jaccard overlap at the final revision."""
    rows = []
    for panel, g in flags.groupby("panel", sort=False):
        have = measured(g)
        last = g["revision_index"] == g["revision_index"].max()
        for a, b in combinations(have, 2):
            ok = g[a].notna().to_numpy() & g[b].notna().to_numpy()
            fa, fb = g[a].fillna(False).to_numpy(dtype=bool) & ok, g[b].fillna(False).to_numpy(dtype=bool) & ok
            ever_a = set(g.loc[fa, "name"])
            ever_b = set(g.loc[fb, "name"])
            rows.append({"panel": panel, "first": a, "second": b, "cells": int(ok.sum()), "both": int((fa & fb).sum()),
                         "only_first": int((fa & ~fb).sum()), "only_second": int((fb & ~fa).sum()),
                         "jaccard": _jaccard(fa, fb), "heads_first": " ".join(sorted(ever_a, key=parse_head)),
                         "heads_second": " ".join(sorted(ever_b, key=parse_head)),
                         "heads_both": " ".join(sorted(ever_a & ever_b, key=parse_head)),
                         "same_heads": ever_a == ever_b,
                         "final_jaccard": _jaccard(fa[last.to_numpy()], fb[last.to_numpy()])})
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)


def sink_onsets(flags: pd.DataFrame) -> pd.DataFrame:
    """Per head that some measure flags at some revision: onset_<measure> (the first revision it flags the head;
    None: never, or unmeasured), onset_index_<measure>, and same_onset (every measured measure flags it, at one
    revision). Columns: panel, layer, head, name, then those."""
    rows = []
    for panel, g in flags.groupby("panel", sort=False):
        have = measured(g)
        any_flag = np.zeros(len(g), bool)
        for m in have:
            any_flag |= g[m].fillna(False).to_numpy(dtype=bool)
        for (layer, head), gh in g[any_flag].groupby(["layer", "head"], sort=True):
            gh = g[(g["layer"] == layer) & (g["head"] == head)].sort_values("revision_index")
            row = {"panel": panel, "layer": int(layer), "head": int(head), "name": head_name(layer, head)}
            for m in SINK_MEASURES:
                hit = gh[gh[m].fillna(False).to_numpy(dtype=bool)] if m in have else gh.iloc[:0]
                row[f"onset_{m}"] = hit["revision"].iloc[0] if len(hit) else None
                row[f"onset_index_{m}"] = int(hit["revision_index"].iloc[0]) if len(hit) else pd.NA
            idx = [row[f"onset_index_{m}"] for m in have]
            row["same_onset"] = len(have) > 1 and all(i is not pd.NA for i in idx) and len(set(idx)) == 1
            rows.append(row)
    columns = ["panel", "layer", "head", "name", *[f"onset_{m}" for m in SINK_MEASURES],
               *[f"onset_index_{m}" for m in SINK_MEASURES], "same_onset"]
    out = pd.DataFrame(rows, columns=columns)
    for m in SINK_MEASURES:
        out[f"onset_index_{m}"] = out[f"onset_index_{m}"].astype("Int64")
        out[f"onset_{m}"] = out[f"onset_{m}"].astype(object).where(out[f"onset_{m}"].notna(), None)
    return out


def lowest_layers(flags: pd.DataFrame) -> pd.DataFrame:
    """Per (panel, revision, measured measure): the lowest layer holding a head the measure flags (NaN: none),
    how many heads it flags and the panel's layer count. Columns: panel, revision, revision_index, tokens_b,
    measure, lowest_layer, n_flagged, n_layers."""
    rows = []
    for panel, g in flags.groupby("panel", sort=False):
        n_layers = int(g["layer"].max()) + 1
        for m in measured(g):
            hit = g[m].fillna(False).to_numpy(dtype=bool)
            per = g.assign(_hit=hit, _layer=np.where(hit, g["layer"], np.nan)).groupby(
                ["revision", "revision_index", "tokens_b"], sort=False).agg(
                lowest_layer=("_layer", "min"), n_flagged=("_hit", "sum")).reset_index()
            rows.append(per.assign(panel=panel, measure=m, n_layers=n_layers))
    columns = ["panel", "revision", "revision_index", "tokens_b", "measure", "lowest_layer", "n_flagged", "n_layers"]
    return pd.concat(rows, ignore_index=True)[columns] if rows else pd.DataFrame(columns=columns)


FLOOR_COLUMNS = ["panel", "measure", "heads_ever", "lowest_layer", "floor_heads", "floor_holds", "first_break"]


def floor_by_measure(flags: pd.DataFrame, *, layers: Sequence[int] = FLOOR_LAYERS) -> pd.DataFrame:
    """F1's floor under each measured measure, per panel: heads_ever (heads it flags at some revision),
    lowest_layer (the lowest layer of any of them; <NA>: none), floor_heads (those in `layers`, "L1H0 ..."),
    floor_holds (no head of `layers` flagged at any revision), first_break (the first revision one is)."""
    rows = []
    for panel, g in flags.groupby("panel", sort=False):
        for m in measured(g):
            hit = g[g[m].fillna(False).to_numpy(dtype=bool)]
            floor = hit[hit["layer"].isin(list(layers))].sort_values(["revision_index", "layer", "head"])
            names = list(dict.fromkeys(hit.sort_values(["layer", "head"])["name"]))
            rows.append({"panel": panel, "measure": m, "heads_ever": len(names),
                         "lowest_layer": int(hit["layer"].min()) if len(hit) else pd.NA,
                         "floor_heads": " ".join(dict.fromkeys(floor.sort_values(["layer", "head"])["name"])),
                         "floor_holds": floor.empty, "first_break": floor["revision"].iloc[0] if len(floor) else None})
    out = pd.DataFrame(rows, columns=FLOOR_COLUMNS)
    out["lowest_layer"] = out["lowest_layer"].astype("Int64")
    return out


def floor_texts(floor: pd.DataFrame) -> pd.DataFrame:
    """`floor_by_measure` with `text`: "holds (lowest sink layer 3)", "holds (no sink at all)" or "breaks (L1H0, from
    step2500)"."""
    def text(r) -> str:
        if r["floor_holds"]:
            return f"holds (lowest sink layer {r['lowest_layer']})" if pd.notna(r["lowest_layer"]) else \
                "holds (no sink at all)"
        return f"breaks ({r['floor_heads']}, from {r['first_break']})"
    return floor.assign(text=[text(r) for _, r in floor.iterrows()] if len(floor) else [])


def mass_for_selectivity(selectivity: float, seq_len: int) -> float:
    """The attention mass m on position 0 that gives `selectivity` when the rest is spread evenly over the other
    seq_len - 1 positions: selectivity = m (T - 1) / (1 - m), so m = s / (T - 1 + s). 30x: 0.105 at T = 256, 0.32
    at T = 64."""
    return selectivity / (seq_len - 1 + selectivity)




SINK_RATE_COLUMNS = ["panel", "revision", "tokens_b", "gu_sink_rate", "mass_sink_rate", "heads"]


def sink_rates(dev: pd.DataFrame, *, epsilon: float = GU_EPSILON) -> pd.DataFrame:
    """Per (panel, revision), two sink rates over every head: `gu_sink_rate`, Gu et al.'s exactly (the mean of the
    records' `gu_sink_share`, measured at the probe's `sink_rate_epsilon`; NaN where a record lacks it: the published
    tier, records older than format 5), and `mass_sink_rate`, the share of heads the all-query mass rule flags at
    `epsilon` (NaN where the column is absent); `heads`: heads per revision. Revisions in token order."""
    if not 0 < epsilon < 1:
        raise ConfigError(f"epsilon (a share of attention mass) must lie in (0, 1), got {epsilon!r}")
    revs = revisions(dev)[["panel", "revision", "tokens_b"]]
    cols = {c: dev[c].astype(float) if c in dev.columns else pd.Series(np.nan, index=dev.index)
            for c in ("gu_sink_share", "mass_first_token_allq")}
    work = dev[["panel", "revision"]].assign(gu=cols["gu_sink_share"],
                                             mass=(cols["mass_first_token_allq"] > epsilon).astype(float).where(
                                                 cols["mass_first_token_allq"].notna()))
    rates = work.groupby(["panel", "revision"], sort=False).agg(gu_sink_rate=("gu", "mean"),
                                                              mass_sink_rate=("mass", "mean"),
                                                              heads=("gu", "size")).reset_index()
    return revs.merge(rates, on=["panel", "revision"], how="left")[SINK_RATE_COLUMNS]
