"""The result store, one record at a time: per (panel, revision, probe configuration), written atomically, checked
before it is trusted, moved between configurations in one place.

Layout (DIR defaults to `<data>/results`, i.e. `data/results` of the repository)::

    DIR/<panel>/<revision>.parquet       per-head table, one row per (layer, head); columns: RECORD_COLUMNS
    DIR/<panel>/<revision>.json          sidecar: configuration + hash, the identity of the weights measured,
                                         versions, git commit, device, dtype, timings, the per-revision summary,
                                         the revision's behaviour (block "behaviour", below), and the sha256, byte
                                         size and row count of every file of the record
    DIR/<panel>/<revision>.boot.parquet  the bootstrap replicates (n_boot > 0): BOOT_COLUMNS
    DIR/<panel>/<revision>.nulls.parquet the null induction selectivities (n_nulls > 0): NULL_COLUMNS
    DIR/<panel>/<revision>.behaviour.parquet  the behaviour's bootstrap replicates (n_boot > 0):
                                         BEHAVIOUR_BOOT_COLUMNS, one row per resample (the selectivities' draws)
    DIR/<panel>/by-config/<hash>/...     records of other configurations, kept when a different one is asked for
    DIR/<panel>/refined.yaml             revisions added by `circuitdev refine` (sources.refined)
    DIR/<panel>/ablation_over_training.parquet (+ .json)  the final circuit ablated at every revision
                                         (sources.ablate; not a record: one table per panel)

The sidecar's "behaviour" block (format 3; `measure.behaviour` defines every value): n, n_prefix, n_boot, boot_seed;
top1, loss_b, icl_score, each with _lo / _hi (95% percentile intervals over the resamples; null when n_boot = 0 or,
for icl_score, n_prefix = 0); norm_streams ["embed", "l0", ...] and, one value per stream, norm_pos0, norm_median,
norm_ratio. New outputs, not configuration: config hashes do not change.

Per revision: `load_revision_table(DIR, panel)` returns one row per probed revision (refined ones included, token
order) with the columns `records.REVISION_COLUMNS` -- the behaviour block flattened -- then the norms as
norm_<value>_<stream> (norm_ratio_embed, norm_ratio_l0, ...; `records.revision_norm_columns`), then the
ablation-over-training columns (`sources.ablate.ABLATION_COLUMNS`) where that table holds the revision; NaN where a
record has no behaviour (format 1 and 2) or the ablation was not computed.

Which configuration a record holds: `DIR/<panel>/<revision>.parquet` is always the record of the configuration
asked for last. A run whose `ProbeConfig.config_hash()` differs from the stored sidecar's moves the stored record to
`by-config/<old hash>/` and then restores `by-config/<new hash>/` if a valid record is there, else recomputes
(`move_record` is that one move, both ways). Readers only ever look at the plain path.

Integrity: the parquet and the side files are written first (temp file + fsync + rename), the sidecar last; the
sidecar holds the sha256 and row count of each. A record is complete only if the sidecar parses, names this panel /
revision, and every file it lists hashes to the recorded sha256 -- anything else (a crash mid-write, a truncated or
edited file, a parquet without sidecar) is corrupt and recomputed, never used. A record of other weights than the
panel's current ones (`sources.weights`) is stale. A record of format 1 (before the null draws were stored) or 2
(before the behaviour) stays readable; `probe` refreshes it (`RecordStatus.outdated`), its per-head files
byte-identical where its null draws do not change. Format 3 divided the null draws by the paper's baseline even
where the selectivities exclude A and B (`baseline_excludes_ab`): those records (the toy panels') are outdated and
re-probed with the draws on the selectivities' scale (`outdated_reason`, `null_baseline`); the other format-3
records are current.

Which function to call: `sources.records.PanelRecords` to read a panel's records (the developmental table, its
replicates, its null draws); `load_revision_table` for the per-revision values; `record_status` / `read_record` for
one record; `sources.run.probe_panel` computes what is missing.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from circuitdev import atomic
from circuitdev.atomic import write_atomic
from circuitdev.errors import DataError
from circuitdev.schema import SEL_COLUMNS
from circuitdev.sources.panels import Panel, Revision
from circuitdev.sources.weights import weights_differ

# 2: null draws in their own file, the weights' identity in the sidecar; 3: the revision's behaviour; 4: the null
# draws divide by the selectivities' own baseline (format 3 and older used the paper's even where the record's
# selectivities exclude each sequence's A and B from it: `baseline_excludes_ab`, the toy panels)
FORMAT = "circuitdev.record/4"
READABLE_FORMATS = ("circuitdev.record/1", "circuitdev.record/2", "circuitdev.record/3", FORMAT)
_NULLS_ON_ONE_SCALE = "the null draws on the selectivities' own baseline"
_ADDED_BY = {"circuitdev.record/1": f"the null draws, the weights' identity, the behaviour and {_NULLS_ON_ONE_SCALE}",
             "circuitdev.record/2": f"the behaviour (top-1, loss at B, ICL score, first-position norms) and "
                                    f"{_NULLS_ON_ONE_SCALE}"}
ARCHIVE = "by-config"

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
    "is_sink_gu": "mass_first_token_allq > sink_rate_epsilon (Gu et al. 2025)",
    "prefix_matching": "prefix-matching score on repeated random sequences (NaN when n_prefix = 0)",
    "null_induction_p99": "99th percentile of the head's null induction selectivity (NaN when n_nulls = 0)",
}
STORE_COLUMNS = ("panel", "revision", "step", "tokens", "tokens_b", "source", "config_hash")
BOOT_COLUMNS = ("replicate", "layer", "head", *SEL_COLUMNS)  # the replicate file, sorted by (replicate, layer, head)
NULL_COLUMNS = ("draw", "layer", "head", "sel_null_induction")  # the null file, sorted by (draw, layer, head)
BEHAVIOUR_BOOT_COLUMNS = ("replicate", "top1", "loss_b", "icl_score")  # the behaviour's replicate file
REQUIRED_PROBE_COLUMNS = ("layer", "head", *SEL_COLUMNS, "best_class", "classification", "pr")
# The files of a record beside its parquet: sidecar key -> file suffix. The sidecar lists each one it vouches for.
SIDE_FILES = {"boot": ".boot.parquet", "nulls": ".nulls.parquet", "behaviour_boot": ".behaviour.parquet"}

RecordState = Literal["complete", "missing", "corrupt", "stale"]


@dataclass(frozen=True)
class RecordPaths:
    parquet: Path
    sidecar: Path

    @property
    def folder(self) -> Path:
        return self.parquet.parent

    def side(self, key: str) -> Path:
        """A side file of the record (`SIDE_FILES`: "boot" the bootstrap replicates, "nulls" the null draws)."""
        return self.parquet.with_name(self.parquet.stem + SIDE_FILES[key])

    @property
    def boot(self) -> Path:
        return self.side("boot")

    @property
    def nulls(self) -> Path:
        return self.side("nulls")

    @property
    def files(self) -> list[Path]:
        return [self.parquet, *(self.side(k) for k in SIDE_FILES), self.sidecar]


def record_paths(results_dir: str | os.PathLike, panel: str, revision: str, config_hash: str | None = None) -> RecordPaths:
    """Paths of a record; with `config_hash`, of its archived copy under by-config/<hash>/."""
    folder = Path(results_dir) / panel
    if config_hash is not None:
        folder = folder / ARCHIVE / config_hash
    return RecordPaths(folder / f"{revision}.parquet", folder / f"{revision}.json")


@dataclass(frozen=True)
class RecordStatus:
    state: RecordState
    reason: str = ""
    sidecar: dict | None = None
    other_config: bool = False  # stale because it holds another configuration (archive it, maybe restore)
    outdated: str = ""  # complete and readable, but written by an older format: why `probe` refreshes it

    @property
    def complete(self) -> bool:
        return self.state == "complete"


def _matches(data: bytes, info: dict) -> bool:
    return len(data) == info.get("bytes") and hashlib.sha256(data).hexdigest() == info.get("sha256")


def record_status(paths: RecordPaths, *, panel: str, revision: str, config_hash: str | None = None,
                  weights: dict | None = None) -> RecordStatus:
    """Check a record without trusting it: missing / corrupt (with the reason) / stale (another configuration, or
    other weights than `weights`, the current identity of `sources.weights`) / complete."""
    has_parquet, has_sidecar = paths.parquet.is_file(), paths.sidecar.is_file()
    if not has_parquet and not has_sidecar:
        return RecordStatus("missing", "no record")
    if not has_sidecar:
        return RecordStatus("corrupt", f"{paths.parquet.name} has no sidecar (interrupted before the sidecar was written)")
    try:
        meta = json.loads(paths.sidecar.read_text())
        if not isinstance(meta, dict) or meta.get("format") not in READABLE_FORMATS:
            return RecordStatus("corrupt", f"{paths.sidecar.name} is not a {FORMAT} sidecar")
        info = meta["parquet"]
        int(info["rows"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        return RecordStatus("corrupt", f"{paths.sidecar.name} is unreadable ({type(err).__name__}: {err})")
    if (meta.get("panel"), meta.get("revision")) != (panel, revision):
        return RecordStatus("corrupt", f"{paths.sidecar.name} belongs to {meta.get('panel')}/{meta.get('revision')}")
    if not has_parquet:
        return RecordStatus("corrupt", f"{paths.parquet.name} is missing but its sidecar exists", meta)
    if not _matches(paths.parquet.read_bytes(), info):
        return RecordStatus("corrupt", f"{paths.parquet.name} does not match the sha256 in its sidecar", meta)
    for key in SIDE_FILES:  # a side file is part of the record once the sidecar vouches for it
        if meta.get(key):
            side = paths.side(key)
            if not side.is_file():
                return RecordStatus("corrupt", f"{side.name} is missing but its sidecar lists it", meta)
            if not _matches(side.read_bytes(), meta[key]):
                return RecordStatus("corrupt", f"{side.name} does not match the sha256 in its sidecar", meta)
    if config_hash is not None and meta.get("config_hash") != config_hash:
        return RecordStatus("stale", f"holds configuration {meta.get('config_hash')}, not {config_hash}", meta,
                            other_config=True)
    other = weights_differ(meta.get("weights"), weights)
    if other:
        return RecordStatus("stale", other, meta)
    return RecordStatus("complete", "", meta, outdated=outdated_reason(meta))


def _version(meta: dict) -> int:
    return int(str(meta.get("format", "/0")).rsplit("/", 1)[-1])


def outdated_reason(meta: dict) -> str:
    """Why `probe` refreshes a complete record written by an older format ("" when it need not). A format-3 record
    is outdated only where its null draws and its selectivities sit on two scales: probed with
    `baseline_excludes_ab` (the toy panels) and with null draws, which format 3 divided by the paper's baseline.
    Every other format-3 record already holds what format 4 would write, and is left as it is."""
    fmt = meta.get("format")
    if fmt == FORMAT:
        return ""
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


def read_parquet(path: Path) -> pd.DataFrame:
    table = pd.read_parquet(io.BytesIO(path.read_bytes()))
    table.attrs = {}
    return table


def read_record(results_dir: str | os.PathLike, panel: str, revision: str, *,
                config_hash: str | None = None) -> tuple[pd.DataFrame, dict]:
    """One verified record: (its per-head table, its sidecar). DataError if missing, corrupt or stale."""
    paths = record_paths(results_dir, panel, revision)
    status = record_status(paths, panel=panel, revision=revision, config_hash=config_hash)
    if not status.complete:
        raise DataError(
            f"record {paths.parquet} is {status.state}: {status.reason}. Compute it with "
            f"`circuitdev probe --panel {panel} --revision {revision} --out {results_dir}`"
        )
    table = read_parquet(paths.parquet)
    if len(table) != status.sidecar["parquet"]["rows"]:
        raise DataError(f"record {paths.parquet}: {len(table)} rows, sidecar says {status.sidecar['parquet']['rows']}")
    return table, status.sidecar


def read_sidecar(results_dir: str | os.PathLike, panel: str, revision: str) -> dict:
    paths = record_paths(results_dir, panel, revision)
    status = record_status(paths, panel=panel, revision=revision)
    if not status.complete:
        raise DataError(f"record {paths.sidecar} is {status.state}: {status.reason}")
    return status.sidecar


# ---------------------------------------------------------------------------------------------------------- writing


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


def parquet_bytes(table: pd.DataFrame) -> bytes:
    """Deterministic parquet bytes (no attrs, no index): the same table always gives the same bytes."""
    buf = io.BytesIO()
    clean = table.copy()
    clean.attrs = {}
    clean.to_parquet(buf, engine="pyarrow", index=False)
    return buf.getvalue()


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


def write_record(
    results_dir: str | os.PathLike,
    panel: Panel,
    revision: Revision,
    table: pd.DataFrame,
    *,
    config,
    meta: dict[str, Any] | None = None,
    replicates=None,
    nulls=None,
    weights: dict | None = None,
    behaviour=None,
) -> RecordPaths:
    """Store one probe table: parquet first, then the bootstrap `replicates` (B, 6, L, H), the `nulls` draws
    (n_nulls, L, H) and the `behaviour`'s replicates (a `measure.behaviour.Behaviour`) if given, the sidecar (with
    the sha256 and rows of each, the `weights` identity and the behaviour block) last."""
    paths = record_paths(results_dir, panel.name, revision.name)
    stored = record_table(table, panel, revision, config.config_hash())
    data = parquet_bytes(stored)
    if paths.sidecar.exists():  # an old sidecar must never vouch for the new files, even for a moment
        paths.sidecar.unlink()
    write_atomic(paths.parquet, data)
    sides: dict[str, dict] = {}
    behaviour_reps = behaviour.replicates if behaviour is not None else None
    for key, values, to_table, count in (("boot", replicates, boot_table, "n_boot"),
                                         ("nulls", nulls, null_table, "n_nulls"),
                                         ("behaviour_boot", behaviour_reps, lambda v, _: behaviour_boot_table(v),
                                          "n_boot")):
        if values is None:
            paths.side(key).unlink(missing_ok=True)  # a side file of an earlier run belongs to no record now
            continue
        rows = to_table(values, stored)
        blob = parquet_bytes(rows)
        write_atomic(paths.side(key), blob)
        sides[key] = {"file": paths.side(key).name, "sha256": hashlib.sha256(blob).hexdigest(), "bytes": len(blob),
                      "rows": len(rows), count: int(len(values))}
    sidecar = {
        "format": FORMAT,
        "panel": panel.name,
        "revision": revision.name,
        "step": revision.step,
        "tokens": revision.tokens,
        "tokens_b": revision.tokens_b,
        "model": panel.model,
        "family": panel.family,
        "source": panel.source,
        "config": config.to_dict(),
        "config_hash": config.config_hash(),
        "dtype": config.dtype or panel.dtype,
        "weights": weights,
        **(meta or {}),
        **({"behaviour": behaviour.summary()} if behaviour is not None else {}),
        "parquet": {
            "file": paths.parquet.name,
            "sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data),
            "rows": len(stored),
            "columns": list(stored.columns),
        },
        **sides,
    }
    write_atomic(paths.sidecar, json.dumps(sidecar, indent=2, sort_keys=False, default=_json_default) + "\n")
    return paths


def load_revision_table(results_dir: str | os.PathLike | None, panel) -> pd.DataFrame:
    """One row per probed revision of `panel` (a name, file or Panel; refined revisions included, token order):
    `records.REVISION_COLUMNS`, the norm columns (`records.revision_norm_columns`) and the ablation-over-training
    columns (sources.ablate.ABLATION_COLUMNS; NaN where not computed). Revisions without a complete record are left out;
    a record without behaviour (format 1 / 2) gives NaN.

    Implemented over `sources.records.PanelRecords` (`RecordSet.revision_table`) and `sources.ablate`; imported
    here at call time because records imports this module (a function-level import keeps a real signature and
    docstring here, unlike a module `__getattr__`)."""
    from circuitdev.sources.ablate import with_ablation
    from circuitdev.sources.records import PanelRecords

    read = PanelRecords.open(results_dir, panel).read(on_missing="skip")
    return with_ablation(read.revision_table(), read)


def _json_default(value):
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


def move_record(src: RecordPaths, dst: RecordPaths) -> None:
    """Move a record with all its files: the destination's sidecar goes first and the source's sidecar last, so
    neither place ever holds a sidecar vouching for files that are not its own. Archiving (plain path ->
    by-config/<hash>/) and restoring (back) are this one move."""
    dst.folder.mkdir(parents=True, exist_ok=True)
    dst.sidecar.unlink(missing_ok=True)
    for a, b in zip(src.files[:-1], dst.files[:-1]):
        if a.is_file():
            atomic.publish(a, b)
        else:
            b.unlink(missing_ok=True)
    atomic.publish(src.sidecar, dst.sidecar)


def clean_temp_files(folder: Path, revision: str) -> None:
    """Remove what an interrupted write of this revision's record left behind."""
    for path in record_paths(folder.parent, folder.name, revision).files:
        atomic.remove_temp_files(folder, path.name)
