"""A per-panel table computed revision by revision from a panel's records, and the sidecar that vouches for it.

Files: <results>/<panel>/<stem>.parquet and <stem>.json. The sidecar holds the job's settings (its header: format,
panel, the records' config hash, ...), whether every revision is in, per revision the identity of the record it
measured (`record_identity`), and last the parquet's sha256, size, rows and columns. Written parquet first and
sidecar last (each atomically, the old sidecar removed before the new parquet lands), after every revision, so an
interrupted run resumes; read back only when the sidecar vouches for the parquet (`read_panel_table`).

`run_panel_table` is the per-revision job both jobs over a panel run -- `sources.ablate` (the final circuit ablated
at every revision) and `sources.null_pr` (each head's PR on random tokens at every revision): read what is stored,
keep the rows whose record (the weights' identity) and settings still hold, compute the others one revision at a
time and write after each. Each job keeps its own columns, header and per-revision computation.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from circuitdev.atomic import remove_temp_files, write_atomic
from circuitdev.errors import ConfigError
from circuitdev.measure.config import ProbeConfig
from circuitdev.sources.store import parquet_bytes, read_parquet


@dataclass(frozen=True)
class PanelTablePaths:
    parquet: Path
    sidecar: Path


def panel_table_paths(results_dir: str | os.PathLike, panel: str, stem: str) -> PanelTablePaths:
    folder = Path(results_dir) / panel
    return PanelTablePaths(folder / f"{stem}.parquet", folder / f"{stem}.json")


def record_identity(meta: dict | None) -> dict | None:
    """What a row measured: the record's per-head parquet (its sha256) and the weights' identity."""
    return None if not meta else {"record": meta["parquet"]["sha256"], "weights": meta.get("weights")}


def records_config(config: dict, *, batch_size: int | None, device: str | None) -> ProbeConfig:
    """The records' ProbeConfig (`RecordSet.config`), with the run's batch size and device where given."""
    if batch_size is not None and batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1 sequences per forward pass, got {batch_size}")
    cfg = ProbeConfig.from_dict(config)
    return cfg.replace(**{k: v for k, v in {"batch_size": batch_size, "device": device}.items() if v is not None})


def read_panel_table(paths: PanelTablePaths, *, fmt: str, panel: str) -> tuple[pd.DataFrame, dict] | None:
    """The stored table and its sidecar, or None when absent or not vouched for (a crash mid-write, an edit,
    another format or panel)."""
    try:
        meta = json.loads(paths.sidecar.read_text())
        data = paths.parquet.read_bytes()
    except (OSError, ValueError):
        return None
    info = meta.get("parquet") if isinstance(meta, dict) else None
    if not isinstance(info, dict) or meta.get("format") != fmt or meta.get("panel") != panel \
            or hashlib.sha256(data).hexdigest() != info.get("sha256"):
        return None
    return read_parquet(paths.parquet), meta


def remove_interrupted_writes(paths: PanelTablePaths) -> None:
    """Remove the temporary files an interrupted write of the table or its sidecar left behind."""
    for name in (paths.parquet.name, paths.sidecar.name):
        remove_temp_files(paths.parquet.parent, name)


def write_panel_table(paths: PanelTablePaths, table: pd.DataFrame, meta: dict) -> dict:
    """Store `table` and its sidecar (`meta`, then the parquet's block): parquet first, sidecar last, atomic each.
    Returns the sidecar written."""
    data = parquet_bytes(table)
    paths.parquet.parent.mkdir(parents=True, exist_ok=True)
    paths.sidecar.unlink(missing_ok=True)  # the old sidecar never vouches for the new table
    write_atomic(paths.parquet, data)
    meta = {**meta, "parquet": {"file": paths.parquet.name, "sha256": hashlib.sha256(data).hexdigest(),
                                "bytes": len(data), "rows": len(table), "columns": list(table.columns)}}
    write_atomic(paths.sidecar, json.dumps(meta, indent=2) + "\n")
    return meta


@dataclass(frozen=True)
class PanelTableRun:
    table: pd.DataFrame  # the job's columns, revisions in token order
    sidecar: dict
    paths: PanelTablePaths
    computed: tuple[str, ...]  # revisions evaluated by this call
    kept: tuple[str, ...]  # revisions whose stored rows still held


def run_panel_table(paths: PanelTablePaths, *, header: dict, sidecars: dict[str, dict], columns: dict[str, str],
                    evaluate: Callable[[str], pd.DataFrame], revisions: list[str] | None = None,
                    extra: Callable[[list[str]], dict] | None = None, force: bool = False, progress: bool = True,
                    desc: str = "") -> PanelTableRun:
    """Compute (or resume) a per-revision table: `sidecars` (RecordSet.sidecars: revision -> record sidecar, in token
    order) are the revisions there are; `revisions` (default all) those to have; `evaluate(revision)` returns a
    revision's rows (`columns`: name -> dtype). Stored rows are kept when the stored header equals `header`
    (format and panel included) and their revision's record identity (`record_identity`) is the current one,
    unless `force`. The table (all revisions with rows, in token order) is written after every revision
    (`write_panel_table`; `extra(done revisions)` adds fields to the sidecar), so an interrupted run resumes."""
    from tqdm.auto import tqdm

    identities = {rev: record_identity(meta) for rev, meta in sidecars.items()}
    order = list(sidecars)
    wanted = [r for r in order if revisions is None or r in revisions]
    rows: dict[str, pd.DataFrame] = {}
    stored = None if force else read_panel_table(paths, fmt=header["format"], panel=header["panel"])
    if stored is not None and {k: stored[1].get(k) for k in header} == header:
        for rev, g in stored[0].groupby("revision", sort=False):
            if rev in identities and stored[1].get("revisions", {}).get(rev) == identities[rev]:
                rows[rev] = g[list(columns)].reset_index(drop=True)
    remove_interrupted_writes(paths)
    kept = tuple(r for r in wanted if r in rows)
    todo = [r for r in wanted if r not in rows]

    def write() -> tuple[pd.DataFrame, dict]:
        done = [r for r in order if r in rows]
        table = pd.concat([rows[r] for r in done], ignore_index=True) if done else pd.DataFrame(columns=list(columns))
        table = table[list(columns)].astype(columns)
        meta = {**header, "complete": len(done) == len(order), "revisions": {r: identities[r] for r in done},
                **(extra(done) if extra else {})}
        return table, write_panel_table(paths, table, meta)

    table, meta = write()
    for rev in tqdm(todo, desc=desc, unit="revision", disable=not progress):
        rows[rev] = evaluate(rev)
        table, meta = write()
    return PanelTableRun(table, meta, paths, tuple(todo), kept)
