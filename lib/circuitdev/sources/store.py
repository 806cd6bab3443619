"""The result store: one record per (panel, revision, probe configuration), written atomically, resumed safely.

Layout (DIR defaults to `<data>/results`, i.e. `data/results` of the repository)::

    DIR/<panel>/<revision>.parquet      per-head table, one row per (layer, head); columns: RECORD_COLUMNS
    DIR/<panel>/<revision>.json         sidecar: configuration + hash, versions, git commit, device, dtype, timings,
                                        and the parquet's sha256, byte size and row count
    DIR/<panel>/<revision>.boot.parquet the bootstrap replicates (n_boot > 0): one row per (replicate, layer, head),
                                        columns BOOT_COLUMNS; listed with its sha256 in the sidecar (`boot`)
    DIR/<panel>/by-config/<hash>/...    records of other configurations, kept when a different one is asked for
    DIR/<panel>/refined.yaml            revisions added by `circuitdev refine` (sources.refine): part of the panel

Which configuration a record holds: `DIR/<panel>/<revision>.parquet` is always the record of the configuration
asked for last. A run whose `ProbeConfig.config_hash()` differs from the stored sidecar's moves the stored record to
`by-config/<old hash>/` and then restores `by-config/<new hash>/` if a valid record is there, else recomputes. So
several configurations coexist, switching back is free, and readers only ever look at the plain path (the sidecar
says which configuration it is; `load_panel_table(..., config=...)` checks it).

Integrity: the parquet is written first (temp file + fsync + rename), then the replicate file, the sidecar last (same
way); the sidecar holds the sha256 and row count of both. A record is complete only if the sidecar parses, names this
panel / revision, and the bytes of the parquet (and of the replicate file it lists) hash to the recorded sha256 with
the recorded rows -- anything else (a crash mid-write, a
truncated or edited file, a parquet without sidecar) is reported as corrupt and recomputed, never used.
Which function to call: `load_panel_table` for the developmental table of a panel (findings, notebooks) and
`load_boot_replicates` for its bootstrap replicates (analysis.uncertainty); `read_record` / `record_status` for one
record; `circuitdev.sources.run.probe_panel` computes what is missing. A panel's revisions are those of its file
plus those `circuitdev refine` added (`with_refined`): every reader and the probe see both.
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
from circuitdev.errors import DataError
from circuitdev.atomic import write_atomic
from circuitdev.paths import results_dir as default_results_dir
from circuitdev.sources.panels import Panel, Revision, load_panel
from circuitdev.schema import DEV_KEY_COLUMNS, DEV_OPTIONAL_COLUMNS, SEL_COLUMNS

FORMAT = "circuitdev.record/1"
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
REFINED_FILE = "refined.yaml"
REFINED_FORMAT = "circuitdev.refined/1"
REQUIRED_PROBE_COLUMNS = ("layer", "head", *SEL_COLUMNS, "best_class", "classification", "pr")

RecordState = Literal["complete", "missing", "corrupt", "stale"]
MissingPolicy = Literal["raise", "skip"]


@dataclass(frozen=True)
class RecordPaths:
    parquet: Path
    sidecar: Path

    @property
    def folder(self) -> Path:
        return self.parquet.parent

    @property
    def boot(self) -> Path:
        """The bootstrap replicate file beside the record (present when the record was probed with n_boot > 0)."""
        return self.parquet.with_name(self.parquet.stem + ".boot.parquet")


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

    @property
    def complete(self) -> bool:
        return self.state == "complete"


def record_status(paths: RecordPaths, *, panel: str, revision: str, config_hash: str | None = None) -> RecordStatus:
    """Check a record without trusting it: missing / corrupt (with the reason) / stale (other config) / complete."""
    has_parquet, has_sidecar = paths.parquet.is_file(), paths.sidecar.is_file()
    if not has_parquet and not has_sidecar:
        return RecordStatus("missing", "no record")
    if not has_sidecar:
        return RecordStatus("corrupt", f"{paths.parquet.name} has no sidecar (interrupted before the sidecar was written)")
    try:
        meta = json.loads(paths.sidecar.read_text())
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            return RecordStatus("corrupt", f"{paths.sidecar.name} is not a {FORMAT} sidecar")
        info = meta["parquet"]
        expected = (info["sha256"], int(info["rows"]), int(info["bytes"]))
    except (OSError, ValueError, KeyError, TypeError) as err:
        return RecordStatus("corrupt", f"{paths.sidecar.name} is unreadable ({type(err).__name__}: {err})")
    if (meta.get("panel"), meta.get("revision")) != (panel, revision):
        return RecordStatus("corrupt", f"{paths.sidecar.name} belongs to {meta.get('panel')}/{meta.get('revision')}")
    if not has_parquet:
        return RecordStatus("corrupt", f"{paths.parquet.name} is missing but its sidecar exists", meta)
    data = paths.parquet.read_bytes()
    if len(data) != expected[2] or hashlib.sha256(data).hexdigest() != expected[0]:
        return RecordStatus("corrupt", f"{paths.parquet.name} does not match the sha256 in its sidecar", meta)
    if meta.get("boot"):  # the replicate file is part of the record once the sidecar vouches for it
        if not paths.boot.is_file():
            return RecordStatus("corrupt", f"{paths.boot.name} is missing but its sidecar lists it", meta)
        boot = paths.boot.read_bytes()
        if len(boot) != meta["boot"].get("bytes") or hashlib.sha256(boot).hexdigest() != meta["boot"].get("sha256"):
            return RecordStatus("corrupt", f"{paths.boot.name} does not match the sha256 in its sidecar", meta)
    if config_hash is not None and meta.get("config_hash") != config_hash:
        return RecordStatus("stale", f"holds configuration {meta.get('config_hash')}, not {config_hash}", meta)
    return RecordStatus("complete", "", meta)


def read_record(
    results_dir: str | os.PathLike, panel: str, revision: str, *, config_hash: str | None = None
) -> pd.DataFrame:
    """One verified record as a DataFrame (`attrs["record"]` = its sidecar). DataError if missing/corrupt/stale."""
    paths = record_paths(results_dir, panel, revision)
    status = record_status(paths, panel=panel, revision=revision, config_hash=config_hash)
    if not status.complete:
        raise DataError(
            f"record {paths.parquet} is {status.state}: {status.reason}. Compute it with "
            f"`circuitdev probe --panel {panel} --revision {revision} --out {results_dir}`"
        )
    table = pd.read_parquet(io.BytesIO(paths.parquet.read_bytes()))
    if len(table) != status.sidecar["parquet"]["rows"]:
        raise DataError(f"record {paths.parquet}: {len(table)} rows, sidecar says {status.sidecar['parquet']['rows']}")
    table.attrs["record"] = status.sidecar
    return table


def read_sidecar(results_dir: str | os.PathLike, panel: str, revision: str) -> dict:
    paths = record_paths(results_dir, panel, revision)
    status = record_status(paths, panel=panel, revision=revision)
    if not status.complete:
        raise DataError(f"record {paths.sidecar} is {status.state}: {status.reason}")
    return status.sidecar


# ---------------------------------------------------------------------------------------------------------- writing


def record_table(table: pd.DataFrame, panel: Panel, revision: Revision, config_hash: str) -> pd.DataFrame:
    """The stored form of a probe table: store columns first, rows sorted by (layer, head), no attrs."""
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
    out.attrs = {}
    return out


def parquet_bytes(table: pd.DataFrame) -> bytes:
    """Deterministic parquet bytes (no attrs, no index): the same table always gives the same bytes."""
    buf = io.BytesIO()
    clean = table.copy()
    clean.attrs = {}
    clean.to_parquet(buf, engine="pyarrow", index=False)
    return buf.getvalue()


def boot_table(replicates, table: pd.DataFrame) -> pd.DataFrame:
    """The stored form of bootstrap replicates (B, 6, L, H) (classes in HEAD_CLASSES order, as
    `schema.BOOT_ATTR` holds them): one row per (replicate, layer, head), columns BOOT_COLUMNS."""
    import numpy as np

    reps = np.asarray(replicates, dtype=np.float64)
    b, k, n_layers, n_heads = reps.shape
    if k != len(SEL_COLUMNS) or n_layers * n_heads != len(table):
        raise DataError(f"bootstrap replicates of shape {reps.shape} do not fit a table of {len(table)} heads and "
                        f"{len(SEL_COLUMNS)} classes")
    flat = reps.transpose(0, 2, 3, 1).reshape(b * n_layers * n_heads, k)  # (B * L * H, 6)
    layer, head = np.divmod(np.tile(np.arange(n_layers * n_heads), b), n_heads)
    out = pd.DataFrame({"replicate": np.repeat(np.arange(b, dtype=np.int32), n_layers * n_heads),
                        "layer": layer.astype("int64"), "head": head.astype("int64")})
    for i, col in enumerate(SEL_COLUMNS):
        out[col] = flat[:, i]
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
) -> RecordPaths:
    """Store one probe table: parquet first, then the bootstrap `replicates` (B, 6, L, H) if given, sidecar (with
    the sha256 and rows of both) last, all atomic."""
    paths = record_paths(results_dir, panel.name, revision.name)
    stored = record_table(table, panel, revision, config.config_hash())
    data = parquet_bytes(stored)
    if paths.sidecar.exists():  # an old sidecar must never vouch for the new parquet, even for a moment
        paths.sidecar.unlink()
    write_atomic(paths.parquet, data)
    boot_info = None
    if replicates is not None:
        reps = boot_table(replicates, stored)
        boot = parquet_bytes(reps)
        write_atomic(paths.boot, boot)
        boot_info = {"file": paths.boot.name, "sha256": hashlib.sha256(boot).hexdigest(), "bytes": len(boot),
                     "rows": len(reps), "n_boot": int(len(replicates))}
    else:
        paths.boot.unlink(missing_ok=True)  # a replicate file of an earlier run belongs to no record now
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
        **(meta or {}),
        "parquet": {
            "file": paths.parquet.name,
            "sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data),
            "rows": len(stored),
            "columns": list(stored.columns),
        },
        **({"boot": boot_info} if boot_info else {}),
    }
    write_atomic(paths.sidecar, json.dumps(sidecar, indent=2, sort_keys=False, default=_json_default) + "\n")
    return paths


def _json_default(value):
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


def archive_record(paths: RecordPaths, results_dir: Path, panel: str, revision: str, config_hash: str) -> None:
    """Move a complete record of another configuration to by-config/<hash>/ (sidecar first: never half-valid)."""
    dest = record_paths(results_dir, panel, revision, config_hash)
    dest.folder.mkdir(parents=True, exist_ok=True)
    dest.sidecar.unlink(missing_ok=True)
    atomic.publish(paths.parquet, dest.parquet)
    if paths.boot.is_file():
        atomic.publish(paths.boot, dest.boot)
    else:
        dest.boot.unlink(missing_ok=True)
    atomic.publish(paths.sidecar, dest.sidecar)


def restore_record(results_dir: Path, panel: str, revision: str, config_hash: str) -> bool:
    """Bring back an archived record of `config_hash` if it is valid; True if the plain path now holds it."""
    src = record_paths(results_dir, panel, revision, config_hash)
    if not record_status(src, panel=panel, revision=revision, config_hash=config_hash).complete:
        return False
    dst = record_paths(results_dir, panel, revision)
    dst.sidecar.unlink(missing_ok=True)
    atomic.publish(src.parquet, dst.parquet)
    if src.boot.is_file():
        atomic.publish(src.boot, dst.boot)
    else:
        dst.boot.unlink(missing_ok=True)
    atomic.publish(src.sidecar, dst.sidecar)
    return record_status(dst, panel=panel, revision=revision, config_hash=config_hash).complete


def clean_temp_files(folder: Path, revision: str) -> None:
    """Remove what an interrupted write of this revision's record left behind."""
    for name in (f"{revision}.parquet", f"{revision}.boot.parquet", f"{revision}.json"):
        atomic.remove_temp_files(folder, name)


# ---------------------------------------------------------------------------------------------------------- reading


def refined_revisions(results_dir: str | os.PathLike, panel: str) -> tuple[Revision, ...]:
    """The revisions `circuitdev refine` added to a panel (DIR/<panel>/refined.yaml), in token order; () if none."""
    import yaml

    path = Path(results_dir) / panel / REFINED_FILE
    if not path.is_file():
        return ()
    try:
        doc = yaml.safe_load(path.read_text()) or {}
        revs = [Revision(str(r["name"]), int(r["tokens"]), None if r.get("step") is None else int(r["step"]))
                for r in doc.get("revisions") or []]
    except (yaml.YAMLError, KeyError, TypeError, ValueError) as err:
        raise DataError(f"{path} is not a {REFINED_FORMAT} list of revisions ({err}); fix it or delete it (its "
                        "records stay, but the panel forgets them)") from None
    if doc.get("format") != REFINED_FORMAT or doc.get("panel") != panel:
        raise DataError(f"{path} is not the {REFINED_FORMAT} list of panel {panel}; delete it or restore it")
    return tuple(sorted(revs, key=lambda r: r.tokens))


def refined_log(results_dir: str | os.PathLike, panel: str) -> pd.DataFrame:
    """The refined list with why each revision was added: name, tokens, step, metric, between, change (empty when
    the panel has none)."""
    import yaml

    path = Path(results_dir) / panel / REFINED_FILE
    refined_revisions(results_dir, panel)  # validates the file
    rows = (yaml.safe_load(path.read_text()) or {}).get("revisions") or [] if path.is_file() else []
    out = pd.DataFrame(rows, columns=["name", "tokens", "step", "metric", "between", "change"])
    return out.assign(between=[" → ".join(b) if isinstance(b, list) else b for b in out["between"]])


def add_refined(results_dir: str | os.PathLike, panel: str, revision: Revision, **why: Any) -> Path:
    """Add one revision to the panel's refined list (atomically; `why`: the refinement step that chose it)."""
    import yaml

    path = Path(results_dir) / panel / REFINED_FILE
    known = [] if not path.is_file() else (yaml.safe_load(path.read_text()) or {}).get("revisions") or []
    if any(r["name"] == revision.name for r in known):
        return path
    known.append({"name": revision.name, "tokens": revision.tokens,
                  **({"step": revision.step} if revision.step is not None else {}), **why})
    known.sort(key=lambda r: r["tokens"])
    doc = {"format": REFINED_FORMAT, "panel": panel, "revisions": known}
    return write_atomic(path, yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=120))


def with_refined(panel: Panel, results_dir: str | os.PathLike | None) -> Panel:
    """The panel with the revisions `circuitdev refine` added in `results_dir` (its own list when there are none)."""
    root = Path(results_dir) if results_dir is not None else default_results_dir()
    extra = refined_revisions(root, panel.name)
    return panel.with_revisions(extra) if extra else panel


def panel_status(results_dir: str | os.PathLike, panel: Panel | str, *, config=None) -> pd.DataFrame:
    """One row per revision of the panel (its refined ones included): state (complete / missing / corrupt / stale),
    reason, config hash."""
    panel = with_refined(load_panel(panel), results_dir)
    key = panel.probe_config(**config.to_dict()).config_hash() if config is not None else None
    rows = []
    for rev in panel.revisions:
        st = record_status(record_paths(results_dir, panel.name, rev.name), panel=panel.name, revision=rev.name,
                           config_hash=key)
        rows.append({"revision": rev.name, "step": rev.step, "tokens_b": rev.tokens_b, "state": st.state,
                     "config_hash": (st.sidecar or {}).get("config_hash"), "reason": st.reason})
    return pd.DataFrame(rows)


def load_panel_table(
    results_dir: str | os.PathLike | None,
    panel: Panel | str,
    *,
    revisions: list[str] | None = None,
    config=None,
    on_missing: MissingPolicy = "raise",
) -> pd.DataFrame:
    """All stored records of a panel as one developmental table (schema.py columns first), in revision order.

    `panel`: a Panel, a panel name / file, or just the name of a results sub-folder (its records are then ordered
    by tokens). `config`: a ProbeConfig every record must have been computed with (default: any one configuration,
    but the same for all revisions). on_missing="skip" leaves out revisions without a complete record; "raise"
    (default) reports them. `attrs["config"]` / `attrs["config_hash"]` say which configuration the table holds.
    """

    root = Path(results_dir) if results_dir is not None else default_results_dir()
    name, rev_names, key = _panel_revisions(root, panel, revisions, config)
    tables, problems, hashes = [], [], {}
    for rev in rev_names:
        paths = record_paths(root, name, rev)
        st = record_status(paths, panel=name, revision=rev, config_hash=key)
        if not st.complete:
            problems.append(f"{rev} ({st.state}{': ' + st.reason if st.reason else ''})")
            continue
        table = pd.read_parquet(io.BytesIO(paths.parquet.read_bytes()))
        hashes[rev] = st.sidecar["config_hash"]
        table.attrs = {}
        tables.append((st.sidecar, table))
    if problems and on_missing == "raise":
        raise DataError(
            f"panel {name}: no usable record for {len(problems)} revision(s) in {root / name}: {'; '.join(problems)}. "
            f"Run `circuitdev probe --panel {name} --out {root}`, or pass on_missing='skip'"
        )
    if len(set(hashes.values())) > 1:
        raise DataError(
            f"panel {name}: records in {root / name} come from different probe configurations {hashes}; re-probe "
            "the odd ones with one configuration (`circuitdev probe ... --force`) or pass config= to pick one"
        )
    if not tables:
        raise DataError(f"panel {name}: no complete record in {root / name}; run `circuitdev probe --panel {name}`")
    tables.sort(key=lambda st: st[0]["tokens"])
    out = pd.concat([t for _, t in tables], ignore_index=True)
    first = [c for c in (*DEV_KEY_COLUMNS, *SEL_COLUMNS, *DEV_OPTIONAL_COLUMNS) if c in out.columns]
    out = out[first + [c for c in out.columns if c not in first]]
    out.attrs["config_hash"] = next(iter(hashes.values()))
    out.attrs["config"] = tables[0][0]["config"]
    out.attrs["missing"] = problems
    return out


def _panel_revisions(root: Path, panel: Panel | str, revisions: list[str] | None, config
                     ) -> tuple[str, list[str], str | None]:
    """(panel name, the revisions to read, the configuration hash asked for) -- the panel file's revisions plus the
    refined ones, or the records on disk when there is no panel file."""
    from circuitdev.errors import ConfigError

    try:
        pan = load_panel(panel, resolve_hub=False) if not isinstance(panel, Panel) else panel
    except ConfigError:
        if not isinstance(panel, str) or not (root / panel).is_dir():
            raise
        pan = None  # no panel file: read whatever records the results folder holds
    if pan is not None and pan.revisions:
        pan = with_refined(pan, root)
        key = pan.probe_config(**config.to_dict()).config_hash() if config is not None else None
        return pan.name, [r.name for r in pan.select(revisions)], key
    name = pan.name if pan is not None else str(panel)
    key = config.config_hash() if config is not None else None
    return name, list(revisions or _revisions_on_disk(root / name)), key


def load_boot_replicates(
    results_dir: str | os.PathLike | None,
    panel: Panel | str,
    *,
    revisions: list[str] | None = None,
    config=None,
) -> pd.DataFrame:
    """The bootstrap replicates of a panel's records, long over replicates and wide over classes: one row per
    (revision, replicate, layer, head) with columns panel, revision, tokens_b, replicate, layer, head, sel_<class>
    x6 -- the same revisions `load_panel_table` reads (records without a replicate file are left out; empty when
    none has one). Pass it to the findings functions (`boot=`) for intervals of derived quantities
    (analysis.uncertainty)."""
    root = Path(results_dir) if results_dir is not None else default_results_dir()
    name, rev_names, key = _panel_revisions(root, panel, revisions, config)
    frames = []
    for rev in rev_names:
        paths = record_paths(root, name, rev)
        st = record_status(paths, panel=name, revision=rev, config_hash=key)
        if not st.complete or not st.sidecar.get("boot"):
            continue
        reps = pd.read_parquet(io.BytesIO(paths.boot.read_bytes()))
        reps.attrs = {}
        frames.append(reps.assign(panel=name, revision=rev, tokens_b=st.sidecar["tokens"] / 1e9))
    if not frames:
        return pd.DataFrame(columns=["panel", "revision", "tokens_b", *BOOT_COLUMNS])
    out = pd.concat(frames, ignore_index=True)
    return out[["panel", "revision", "tokens_b", *BOOT_COLUMNS]]


def _revisions_on_disk(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.json") if not p.name.startswith("."))
