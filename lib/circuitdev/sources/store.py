"""The result store, one record at a time: per (panel, revision, probe configuration), written atomically, checked
before it is trusted, moved between configurations in one place.

Layout (DIR defaults to `<data>/results`, i.e. `data/results` of the repository)::

    DIR/<panel>/<revision>.parquet       per-head table, one row per (layer, head); columns: RECORD_COLUMNS
    DIR/<panel>/<revision>.json          sidecar: configuration + hash, the identity of the weights measured,
                                         versions, git commit, device, dtype, timings, the per-revision summary,
                                         the revision's behaviour (block "behaviour": sources.record_format), and
                                         the sha256, byte size and row count of every file of the record
    DIR/<panel>/<revision>.boot.parquet  the bootstrap replicates (n_boot > 0): BOOT_COLUMNS
    DIR/<panel>/<revision>.nulls.parquet the null induction selectivities (n_nulls > 0): NULL_COLUMNS
    DIR/<panel>/<revision>.behaviour.parquet  the behaviour's bootstrap replicates (n_boot > 0):
                                         BEHAVIOUR_BOOT_COLUMNS, one row per resample (the selectivities' draws)
    DIR/<panel>/<revision>.null_pr.parquet   the PR null measured in the same load (null_pr_draws > 0):
                                         NULL_PR_DRAW_COLUMNS; its sidecar block says with which draws, n and seed
    DIR/<panel>/by-config/<hash>/...     records of other configurations, kept when a different one is asked for
    DIR/<panel>/refined.yaml             revisions added by `circuitdev refine` (sources.refined)
    DIR/<panel>/ablation_over_training.parquet (+ .json)  the final circuit ablated at every revision
                                         (sources.ablate; not a record: one table per panel), and
                                         final_ablation.parquet (+ .json): its final revision's conditions

The sidecar's "behaviour" block and what each record format holds: `sources.record_format`, which also names the
columns of every file (RECORD_COLUMNS, BOOT_COLUMNS, NULL_COLUMNS, BEHAVIOUR_BOOT_COLUMNS) and builds them from a
probe's output (`record_table`, `boot_table`, `null_table`, `behaviour_boot_table`); import them from there.

Per revision: `sources.revision_table.load_revision_table(DIR, panel)` (the panel's records read together, not one
record: its own module) returns one row per probed revision (refined ones included, token order) with the columns
`records.REVISION_COLUMNS` -- the behaviour block flattened -- then the norms as norm_<value>_<stream>
(norm_ratio_embed, norm_ratio_l0, ...; `records.revision_norm_columns`), then the ablation-over-training columns
(`sources.ablate.ABLATION_COLUMNS`) where that table holds the revision; NaN where a record has no behaviour (format
1 and 2) or the ablation was not computed.

Which configuration a record holds: `DIR/<panel>/<revision>.parquet` is always the record of the configuration
asked for last. A run whose `ProbeConfig.config_hash()` differs from the stored sidecar's moves the stored record to
`by-config/<old hash>/` and then restores `by-config/<new hash>/` if a valid record is there, else recomputes
(`move_record` is that one move, both ways). Readers only ever look at the plain path. No record is replaced by
another: `write_record` first moves a stored record that is not the one being written aside, under a folder that
says why (`archive_reason`: by-config/<hash>/, by-weights/<sha12>/, by-model/<model>/<hash>/, newer-format/<format>/;
a record of a newer format is refused by readers as newer, never called corrupt). Every write and move holds the
panel folder's lock (`panel_lock`, `circuitdev.locks`), so two runs on one folder archive each other's records.

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
replicates, its null draws); `sources.revision_table.load_revision_table` for the per-revision values;
`record_status` / `read_record` for one record; `sources.run.probe_panel` computes what is missing.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from circuitdev import atomic
from circuitdev.atomic import write_atomic
from circuitdev.errors import DataError
from circuitdev.locks import folder_lock
from circuitdev.sources.panels import Panel
from circuitdev.sources.revision import Revision
from circuitdev.sources.record_format import (FORMAT, LEGACY_COLUMNS, READABLE_FORMATS, behaviour_boot_table,
                                             boot_table, null_pr_table, null_table, outdated_reason, record_table)
from circuitdev.sources.weights import weights_differ

ARCHIVE = "by-config"

# The files of a record beside its parquet: sidecar key -> file suffix. The sidecar lists each one it vouches for.
SIDE_FILES = {"boot": ".boot.parquet", "nulls": ".nulls.parquet", "behaviour_boot": ".behaviour.parquet",
              "null_pr": ".null_pr.parquet"}

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
    """Paths of a record; with `config_hash`, of its archived copy under by-config/<hash>/. A panel or revision
    name that is not one plain file name (`..`, a slash) is refused: it would reach outside the panel's folder."""
    for what, name in (("panel", panel), ("revision", revision), ("configuration hash", config_hash)):
        if name is not None and (not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name):
            raise DataError(f"{what} name {name!r} is not a plain file name; a record's files must stay in its "
                            "panel's folder: fix the name where it was read (panel file, refined.yaml, --revision)")
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
    newer: bool = False  # written by a newer circuitdev: refused by readers, archived (never replaced) by `probe`

    @property
    def complete(self) -> bool:
        return self.state == "complete"


def _matches(data: bytes, info: dict) -> bool:
    return len(data) == info.get("bytes") and hashlib.sha256(data).hexdigest() == info.get("sha256")


def newer_format(value) -> bool:
    """A record format this circuitdev does not know but a later one wrote ("circuitdev.record/<higher N>")."""
    prefix = FORMAT.rsplit("/", 1)[0] + "/"
    if not isinstance(value, str) or not value.startswith(prefix) or value in READABLE_FORMATS:
        return False
    try:
        return int(value[len(prefix):]) > int(FORMAT[len(prefix):])
    except ValueError:
        return False


def record_status(paths: RecordPaths, *, panel: str, revision: str, config_hash: str | None = None,
                  weights: dict | None = None, model: str | None = None) -> RecordStatus:
    """Check a record without trusting it: missing / corrupt (with the reason) / stale (another configuration, a
    newer record format, another hub `model`, or other weights than `weights`, the current identity of
    `sources.weights`) / complete."""
    has_parquet, has_sidecar = paths.parquet.is_file(), paths.sidecar.is_file()
    if not has_parquet and not has_sidecar:
        return RecordStatus("missing", "no record")
    if not has_sidecar:
        return RecordStatus("corrupt", f"{paths.parquet.name} has no sidecar (interrupted before the sidecar was written)")
    try:
        meta = json.loads(paths.sidecar.read_text())
        if isinstance(meta, dict) and newer_format(meta.get("format")):
            return RecordStatus("stale", f"{paths.sidecar.name} was written by a newer circuitdev (format "
                                f"{meta.get('format')}; this one reads up to {FORMAT}): upgrade circuitdev to read it",
                                meta, newer=True)
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
    if model is not None and meta.get("model") not in (None, model):
        return RecordStatus("stale", f"measured another model ({meta.get('model')}, now {model}: another panel file "
                            "of the same name)", meta)
    if config_hash is not None and meta.get("config_hash") != config_hash:
        return RecordStatus("stale", f"holds configuration {meta.get('config_hash')}, not {config_hash}", meta,
                            other_config=True)
    other = weights_differ(meta.get("weights"), weights)
    if other:
        return RecordStatus("stale", other, meta)
    return RecordStatus("complete", "", meta, outdated=outdated_reason(meta))


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
    table = read_parquet(paths.parquet).rename(columns=LEGACY_COLUMNS)
    if len(table) != status.sidecar["parquet"]["rows"]:
        raise DataError(f"record {paths.parquet}: {len(table)} rows, sidecar says {status.sidecar['parquet']['rows']}")
    return table, status.sidecar


# ---------------------------------------------------------------------------------------------------------- writing


def parquet_bytes(table: pd.DataFrame) -> bytes:
    """Deterministic parquet bytes (no attrs, no index): the same table always gives the same bytes."""
    buf = io.BytesIO()
    clean = table.copy()
    clean.attrs = {}
    clean.to_parquet(buf, engine="pyarrow", index=False)
    return buf.getvalue()


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
    null_pr=None,
) -> RecordPaths:
    """Store one probe table: parquet first, then the bootstrap `replicates` (B, 6, L, H), the `nulls` draws
    (n_nulls, L, H), the `behaviour`'s replicates (a `measure.behaviour.Behaviour`) and the PR null's draws
    `null_pr` (null_pr_draws, L, H; measured with config's n_pr, null_pr_seed, seq_len, first_token_id) if given, the
    sidecar (with the sha256 and rows of each, the `weights` identity and the behaviour block) last."""
    paths = record_paths(results_dir, panel.name, revision.name)
    with panel_lock(results_dir, panel.name):
        return _write_record(paths, panel, revision, table, config=config, meta=meta, replicates=replicates,
                             nulls=nulls, weights=weights, behaviour=behaviour, null_pr=null_pr)


def panel_lock(results_dir: str | os.PathLike, panel: str):
    """The lock of a panel's results folder (`circuitdev.locks`): held for every write and move of its records, so
    two runs on one folder archive each other's records instead of overwriting them."""
    return folder_lock(Path(results_dir) / panel, what=f"results folder of panel {panel}")


def archive_reason(meta: dict, panel: Panel, config_hash: str, weights: dict | None) -> Path | None:
    """Where a stored record that is not the one being written goes (relative to the panel's folder), or None when
    it may be replaced (the same configuration, model and weights: the record being computed, or its older format):
    by-config/<hash>/ (another configuration), newer-format/<format>/ (a newer circuitdev's), by-model/<model>/<hash>/
    (another panel file's hub model), by-weights/<sha12>/ (other weights)."""
    fmt = meta.get("format")
    if newer_format(fmt):
        return Path("newer-format") / _slug(fmt)
    if not panel.is_local and meta.get("model") not in (None, panel.model):
        return Path("by-model") / _slug(meta["model"]) / _slug(meta.get("config_hash") or "unknown")
    if meta.get("config_hash") and meta["config_hash"] != config_hash:
        return Path(ARCHIVE) / _slug(meta["config_hash"])
    if isinstance(meta.get("weights"), dict) and weights_differ(meta["weights"], weights):
        return Path("by-weights") / _slug(str(meta["weights"].get("id"))[:12])
    return None


def _slug(value) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in str(value)).strip(".") or "unknown"


def _archive_existing(paths: RecordPaths, panel: Panel, config_hash: str, weights: dict | None) -> Path | None:
    """Move the stored record aside when it is not the one being written (`archive_reason`); returns where."""
    if not paths.sidecar.is_file():
        return None  # missing, or a parquet without sidecar: corrupt, nothing vouches for it
    try:
        meta = json.loads(paths.sidecar.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict):
        return None
    where = archive_reason(meta, panel, config_hash, weights)
    if where is None:
        return None
    folder = paths.folder / where
    _move_files(paths, RecordPaths(folder / paths.parquet.name, folder / paths.sidecar.name))
    return folder


def _write_record(paths: RecordPaths, panel: Panel, revision: Revision, table: pd.DataFrame, *, config, meta,
                  replicates, nulls, weights, behaviour, null_pr=None) -> RecordPaths:
    stored = record_table(table, panel, revision, config.config_hash())
    data = parquet_bytes(stored)
    _archive_existing(paths, panel, config.config_hash(), weights)  # never replace another run's record
    if paths.sidecar.exists():  # an old sidecar must never vouch for the new files, even for a moment
        paths.sidecar.unlink()
    write_atomic(paths.parquet, data)
    sides: dict[str, dict] = {}
    behaviour_reps = behaviour.replicates if behaviour is not None else None
    for key, values, to_table, count in (("boot", replicates, boot_table, "n_boot"),
                                         ("nulls", nulls, null_table, "n_nulls"),
                                         ("behaviour_boot", behaviour_reps, lambda v, _: behaviour_boot_table(v),
                                          "n_boot"),
                                         ("null_pr", null_pr, null_pr_table, "n_draws")):
        if values is None:
            paths.side(key).unlink(missing_ok=True)  # a side file of an earlier run belongs to no record now
            continue
        rows = to_table(values, stored)
        blob = parquet_bytes(rows)
        write_atomic(paths.side(key), blob)
        sides[key] = {"file": paths.side(key).name, "sha256": hashlib.sha256(blob).hexdigest(), "bytes": len(blob),
                      "rows": len(rows), count: int(len(values))}
        if key == "null_pr":  # what `sources.null_pr` must ask for to use them
            sides[key].update(null_pr_settings(config))
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


def null_pr_settings(config) -> dict:
    """How a probe of `config` draws the PR null (besides the draws): the settings `sources.null_pr` matches."""
    return {"n": int(config.n_pr), "seed": int(config.null_pr_seed), "seq_len": int(config.seq_len),
            "first_token": config.first_token_id}


def _json_default(value):
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


def move_record(src: RecordPaths, dst: RecordPaths) -> bool:
    """Move a record with all its files: the destination's sidecar goes first and the source's sidecar last, so
    neither place ever holds a sidecar vouching for files that are not its own. Archiving (plain path ->
    by-config/<hash>/) and restoring (back) are this one move. Under the panel's lock (another run may be
    writing): a source that another run moved meanwhile is left alone (returns False)."""
    with folder_lock(_panel_folder(src.folder), what="results folder of a panel"):
        if not src.sidecar.is_file():
            return False
        _move_files(src, dst)
        return True


def _panel_folder(folder: Path) -> Path:
    """The panel's folder of a record's folder (an archived record lies in <panel>/<kind>/<name>[/<hash>])."""
    parts = folder.parts
    if len(parts) > 3 and parts[-3] == "by-model":
        return Path(*parts[:-3])
    if len(parts) > 2 and parts[-2] in (ARCHIVE, "newer-format", "by-weights"):
        return Path(*parts[:-2])
    return folder


def _move_files(src: RecordPaths, dst: RecordPaths) -> None:
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
