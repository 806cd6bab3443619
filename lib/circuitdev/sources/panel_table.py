"""A per-panel table computed revision by revision from a panel's records, and the sidecar that vouches for it.

Files: <results>/<panel>/<stem>.parquet and <stem>.json. The sidecar holds the job's settings (its header: format,
panel, the records' config hash, ...), whether every revision is in, per revision the identity of the record it
measured (`record_identity`), and last the parquet's sha256, size, rows and columns. Written parquet first and
sidecar last (each atomically, the old sidecar removed before the new parquet lands), after every revision, so an
interrupted run resumes; read back only when the sidecar vouches for the parquet (`read_panel_table`).

Used by the per-revision jobs over a panel: `sources.ablate` (the final circuit ablated at every revision) and
`sources.null_pr` (each head's PR on random tokens at every revision); each keeps its own columns and header.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from circuitdev.atomic import remove_temp_files, write_atomic
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
