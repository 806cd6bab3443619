"""What a record's columns are: the record format's version, the columns of its per-head table and of its side
files, how a probe table and its draws become those columns, and what the older formats lack.

The store (`sources.store`) writes and reads the files; this module says what is in them.

Formats: 1 the per-head table and its bootstrap replicates; 2 the null draws in their own file and the weights'
identity in the sidecar; 3 the revision's behaviour (the sidecar's "behaviour" block, `measure.behaviour`); 4 the
null draws divided by the selectivities' own baseline; 5 Gu et al.'s per-head sink share (`gu_sink_share`) and the
all-query mass rule under its own name (`is_sink_mass`, was `is_sink_gu`). Every format stays readable (`READABLE_FORMATS`);
`outdated_reason` says why `probe` refreshes an older record, `null_baseline` which baseline a record's null draws
divide by.

The sidecar's "behaviour" block (format 3; `measure.behaviour` defines every value): n, n_prefix, n_boot, boot_seed;
top1, loss_b, icl_score, each with _lo / _hi (95% percentile intervals over the resamples; null when n_boot = 0 or,
for icl_score, n_prefix = 0); norm_streams ["embed", "l0", ...] and, one value per stream, norm_pos0, norm_median,
norm_ratio. New outputs, not configuration: config hashes do not change.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from circuitdev.errors import DataError
from circuitdev.schema import SEL_COLUMNS
from circuitdev.sources.panels import Panel
from circuitdev.sources.revision import Revision

# 2: null draws in their own file, the weights' identity in the sidecar; 3: the revision's behaviour; 4: the null
# draws divide by the selectivities' own baseline (format 3 and older used the paper's even where the record's
# selectivities exclude each sequence's A and B from it: `baseline_excludes_ab`, the toy panels)
FORMAT = "circuitdev.record/5"
READABLE_FORMATS = ("circuitdev.record/1", "circuitdev.record/2", "circuitdev.record/3", "circuitdev.record/4", FORMAT)
LEGACY_COLUMNS = {"is_sink_gu": "is_sink_mass"}  # older formats' names of a column -> its name now (read_record)
_NULLS_ON_ONE_SCALE = "the null draws on the selectivities' own baseline"
_GU = "Gu et al.'s per-head sink share"
_ADDED_BY = {"circuitdev.record/1": f"the null draws, the weights' identity, the behaviour, {_NULLS_ON_ONE_SCALE} "
                                   f"and {_GU}",
             "circuitdev.record/2": f"the behaviour (top-1, loss at B, ICL score, first-position norms), "
                                    f"{_NULLS_ON_ONE_SCALE} and {_GU}"}

# Columns of a record, in order. The first block is added by the store; the rest come from `probe_model`.
RECORD_COLUMNS: dict[str, str] = {
    "panel": "panel name (results sub-folder)",
    "revision": "revision name (hub branch or checkpoint sub-folder)",
    "step": "training step (nullable integer)",
    "tokens": "training tokens seen (integer)",
    "tokens_b": "tokens / 1e9, exact (the authors' files truncate or floor it)",
    "source": '"probe" for trained models, "toy" for the toy panel',
    "config_hash": "ProbeConfig.config_hash() of the run",
    "layer": "layer index, from 0",
    "head": "head index within the layer, from 0",
    "sel_induction": "induction selectivity: attention at B (ab+1) / baseline (ratio of batch means)",
    "sel_previous_token": "previous-token selectivity: attention at q-1 / baseline",
    "sel_duplicate_token": "duplicate-token selectivity: attention at the first A / baseline",
    "sel_first_token": "first-token (BOS, sink) selectivity: attention at position 0 / baseline",
    "sel_self": "self selectivity: attention at q / baseline",
    "sel_local": "local selectivity: mean attention at q-2..q-5 / baseline",
    **{f"sel_{c}_{end}": f"{c.replace('_', '-')} selectivity: {'lower' if end == 'lo' else 'upper'} end of its 95% "
                         "bootstrap interval over the batch's sequences (percentile interval, widened to contain the "
                         "value; absent when n_boot = 0)"
       for c in ("induction", "previous_token", "duplicate_token", "first_token", "self", "local") for end in ("lo", "hi")},
    "best_class": "argmax class (stable sort: ties go to the class listed first)",
    "best_selectivity": "selectivity of best_class",
    "second_class": "runner-up class",
    "second_selectivity": "selectivity of second_class",
    "classification": "best_class if best_selectivity >= class_threshold, else unclassified",
    "in_induction_circuit": "sel_induction >= induction_threshold",
    "in_prev_token_circuit": "sel_previous_token >= prev_token_threshold and best class previous-token",
    "is_bos": "sel_first_token >= bos_threshold (the paper's per-class counting rule)",
    "pr": "participation ratio of the head's output at the query over the first n_pr sequences",
    "mass_first_token": "mean attention mass on position 0 from the query (second A)",
    "sel_first_token_allq": "all-query first-token score (ratio of means over queries >= allq_skip)",
    "mass_first_token_allq": "mean attention mass on position 0 over the same queries",
    "is_sink_mass": "mass_first_token_allq > sink_rate_epsilon: the mean mass on position 0 over queries >= allq_skip "
                    "(sequences averaged first) above the bar (named is_sink_gu before format 5)",
    "gu_sink_share": "Gu et al. (2025)'s sink indicator averaged over the batch's sequences: the share of sequences "
                     "whose attention to position 0, averaged over every query (query 0 included), exceeds "
                     "sink_rate_epsilon (format 5; NaN in older records)",
    "prefix_matching": "prefix-matching score on repeated random sequences (NaN when n_prefix = 0)",
    "null_induction_p99": "99th percentile of the head's null induction selectivity (NaN when n_nulls = 0)",
}
STORE_COLUMNS = ("panel", "revision", "step", "tokens", "tokens_b", "source", "config_hash")
BOOT_COLUMNS = ("replicate", "layer", "head", *SEL_COLUMNS)  # the replicate file, sorted by (replicate, layer, head)
NULL_COLUMNS = ("draw", "layer", "head", "sel_null_induction")  # the null file, sorted by (draw, layer, head)
BEHAVIOUR_BOOT_COLUMNS = ("replicate", "top1", "loss_b", "icl_score")  # the behaviour's replicate file
# the PR null measured in the probe's load (null_pr_draws > 0): each head's PR on random batch `draw`
NULL_PR_DRAW_COLUMNS = ("draw", "layer", "head", "null_pr")
REQUIRED_PROBE_COLUMNS = ("layer", "head", *SEL_COLUMNS, "best_class", "classification", "pr")


def _version(meta: dict) -> int:
    return int(str(meta.get("format", "/0")).rsplit("/", 1)[-1])


def outdated_reason(meta: dict) -> str:
    """Why `probe` refreshes a complete record written by an older format ("" when it need not). A format-3 record
    is outdated only where its null draws and its selectivities sit on two scales: probed with
    `baseline_excludes_ab` (the toy panels) and with null draws, which format 3 divided by the paper's baseline.
    Every other format-3 record already holds what format 4 would write, and is left as it is."""
    fmt = meta.get("format")
    if fmt in (FORMAT, "circuitdev.record/4"):  # a format-4 record lacks gu_sink_share only (NaN): not re-probed for
        return ""  # that alone (a real model's revision costs GPU time); `probe --force` adds it
    if fmt == "circuitdev.record/3":
        if not (meta.get("nulls") and (meta.get("config") or {}).get("baseline_excludes_ab")):
            return ""
        return (f"written by {fmt}, whose null draws divide by the paper's baseline while its selectivities exclude "
                f"each sequence's A and B (baseline_excludes_ab); {FORMAT} draws them on the selectivities' baseline")
    return f"written by {fmt}; {FORMAT} adds {_ADDED_BY[fmt]}"


def null_baseline(meta: dict) -> str | None:
    """The baseline a record's null draws divide by: "A/B excluded" (format 4 and later, probed with
    `baseline_excludes_ab`), "paper" (the paper's fixed positions), None when it holds no draws. The record's
    selectivities use "A/B excluded" exactly when its config says `baseline_excludes_ab`."""
    if not meta.get("nulls"):
        return None
    excludes = bool((meta.get("config") or {}).get("baseline_excludes_ab"))
    return "A/B excluded" if excludes and _version(meta) >= 4 else "paper"


# ----------------------------------------------------------------------------------- a probe table -> its columns


def record_table(table: pd.DataFrame, panel: Panel, revision: Revision, config_hash: str) -> pd.DataFrame:
    """The stored form of a probe table: store columns first, rows sorted by (layer, head)."""
    missing = [c for c in REQUIRED_PROBE_COLUMNS if c not in table.columns]
    if missing:
        raise DataError(f"probe table for {panel.name}/{revision.name} lacks column(s) {missing}; cannot store it")
    if table.duplicated(["layer", "head"]).any():
        raise DataError(f"probe table for {panel.name}/{revision.name} has duplicate (layer, head) rows")
    body = table.drop(columns=[c for c in STORE_COLUMNS if c in table.columns])
    body = body.sort_values(["layer", "head"], kind="stable").reset_index(drop=True)
    n = len(body)
    front = pd.DataFrame(
        {
            "panel": pd.Series([panel.name] * n, dtype=object),
            "revision": pd.Series([revision.name] * n, dtype=object),
            "step": pd.array([revision.step] * n, dtype="Int64"),
            "tokens": pd.Series([revision.tokens] * n, dtype="int64"),
            "tokens_b": pd.Series([revision.tokens_b] * n, dtype="float64"),
            "source": pd.Series([panel.source] * n, dtype=object),
            "config_hash": pd.Series([config_hash] * n, dtype=object),
        }
    )
    out = pd.concat([front, body], axis=1)
    out["layer"] = out["layer"].astype("int64")
    out["head"] = out["head"].astype("int64")
    return out


def _per_head(values, n_heads_total: int, what: str, first: str, value_columns: tuple[str, ...]) -> pd.DataFrame:
    """(K, C, L, H) or (K, L, H) per-head draws -> one row per (k, layer, head): `first`, layer, head, values."""
    arr = np.asarray(values, dtype=np.float64)
    arr = arr[:, None] if arr.ndim == 3 else arr  # (K, C, L, H)
    k, c, n_layers, n_heads = arr.shape
    if c != len(value_columns) or n_layers * n_heads != n_heads_total:
        raise DataError(f"{what} of shape {np.shape(values)} do not fit a table of {n_heads_total} heads and "
                        f"{len(value_columns)} value(s) per head")
    flat = arr.transpose(0, 2, 3, 1).reshape(k * n_layers * n_heads, c)  # (K * L * H, C)
    layer, head = np.divmod(np.tile(np.arange(n_layers * n_heads), k), n_heads)
    out = pd.DataFrame({first: np.repeat(np.arange(k, dtype=np.int32), n_layers * n_heads),
                        "layer": layer.astype("int64"), "head": head.astype("int64")})
    for i, col in enumerate(value_columns):
        out[col] = flat[:, i]
    return out


def boot_table(replicates, table: pd.DataFrame) -> pd.DataFrame:
    """The stored form of bootstrap replicates (B, 6, L, H) (classes in HEAD_CLASSES order): one row per
    (replicate, layer, head), columns BOOT_COLUMNS."""
    return _per_head(replicates, len(table), "bootstrap replicates", "replicate", SEL_COLUMNS)


def null_table(nulls, table: pd.DataFrame) -> pd.DataFrame:
    """The stored form of null induction selectivities (n_nulls, L, H): one row per (draw, layer, head), columns
    NULL_COLUMNS."""
    return _per_head(nulls, len(table), "null draws", "draw", NULL_COLUMNS[3:])


def null_pr_table(draws, table: pd.DataFrame) -> pd.DataFrame:
    """The stored form of the PR null's draws (null_pr_draws, L, H): one row per (draw, layer, head), columns
    NULL_PR_DRAW_COLUMNS (`sources.null_pr` reads them instead of loading the revision again)."""
    return _per_head(draws, len(table), "PR null draws", "draw", NULL_PR_DRAW_COLUMNS[3:])


def behaviour_boot_table(replicates) -> pd.DataFrame:
    """The stored form of the behaviour's replicates (B, 3): one row per resample, BEHAVIOUR_BOOT_COLUMNS."""
    arr = np.asarray(replicates, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != len(BEHAVIOUR_BOOT_COLUMNS) - 1:
        raise DataError(f"behaviour replicates of shape {arr.shape} are not "
                        f"(n_boot, {len(BEHAVIOUR_BOOT_COLUMNS) - 1})")
    out = pd.DataFrame({"replicate": np.arange(len(arr), dtype=np.int32)})
    for i, col in enumerate(BEHAVIOUR_BOOT_COLUMNS[1:]):
        out[col] = arr[:, i]
    return out
