"""The PR null at every revision (issue 23 item 7): each head's participation ratio on random tokens.

PR measures how many directions a head's output at the query spreads over; a head with no structure still has a PR.
The authors calibrate PR once, at the final checkpoint, on 2000 sequences of uniform random ids (method reference
§3). Here every probed revision gets it, so that a head's PR can be read against its own null over training: per
revision `n_draws` independent batches (draw d: `RandomState(seed + d)`) of `n` random-id sequences of the records'
length (`n`: the records' n_pr, the sequences their PR averages over, so that both PRs see as many rows), position 0
holding the records' first token where they set one (the toy panels' BOS; `measure.probe.null_pr`). One checkpoint
is in memory at a time; a 16-head toy revision takes well under a second per draw on a CPU.

File: <results>/<panel>/null_pr.parquet, one row per (revision, draw, layer, head): NULL_PR_COLUMNS, and its sidecar
null_pr.json (FORMAT): the settings, the records' config hash, per revision the identity of what was measured (the
record's parquet sha256 and its weights' identity, as `sources.ablate` keeps it) and the parquet's sha256.
Rewritten atomically after every revision, so an interrupted run resumes; a revision is recomputed when its record
changed (other weights, a re-probe) or the settings did. `read_null_pr` returns only what the sidecar vouches for.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from circuitdev.errors import ConfigError
from circuitdev.measure.config import ProbeConfig
from circuitdev.paths import results_dir as default_results_dir
from circuitdev.sources.panel_table import (PanelTablePaths, panel_table_paths, read_panel_table,
                                            record_identity, records_config, remove_interrupted_writes,
                                            write_panel_table)
from circuitdev.sources.panels import Panel
from circuitdev.sources.records import PanelRecords

FORMAT = "circuitdev.null_pr/1"
STEM = "null_pr"
DEFAULT_DRAWS = 5  # random batches per revision: a per-head null distribution, not one value
DEFAULT_SEED = 2026  # the authors' RandomState seed of the null batch
NULL_PR_COLUMNS: dict[str, str] = {
    "revision": "revision name",
    "draw": "random batch d, drawn with RandomState(seed + d)",
    "layer": "layer index, from 0",
    "head": "head index within the layer",
    "null_pr": "the head's participation ratio at the last position of the random batch",
}


NullPrPaths = PanelTablePaths  # the table and its sidecar (sources.panel_table)


def null_pr_paths(results_dir: str | os.PathLike, panel: str) -> NullPrPaths:
    return panel_table_paths(results_dir, panel, STEM)


def read_null_pr(results_dir: str | os.PathLike | None, panel: str) -> tuple[pd.DataFrame, dict] | None:
    """The stored table (NULL_PR_COLUMNS plus `panel` and `tokens_b` first) and its sidecar, or None when absent
    or not vouched for (a crash mid-write, an edit, another format)."""
    paths = null_pr_paths(results_dir if results_dir is not None else default_results_dir(), panel)
    found = read_panel_table(paths, fmt=FORMAT, panel=panel)
    if found is None:
        return None
    table, meta = found
    tokens = {rev: t / 1e9 for rev, t in (meta.get("tokens") or {}).items()}
    table.insert(0, "panel", panel)
    table.insert(2, "tokens_b", table["revision"].map(tokens).astype("float64"))
    return table, meta


def current_null_pr(results_dir: str | os.PathLike | None, panel: str) -> pd.DataFrame | None:
    """The stored rows whose revision's record is the one there now (`read_null_pr`, checked against the
    records); None when nothing is stored. What a page reads."""
    found = read_null_pr(results_dir, panel)
    if found is None:
        return None
    table, meta = found
    read = PanelRecords.open(results_dir, panel).read(on_missing="skip")
    if meta.get("config_hash") != read.config_hash:
        return table.iloc[:0]
    current = {rev: record_identity(m) for rev, m in read.sidecars.items()}
    ok = [meta["revisions"].get(rev) == current.get(rev) for rev in table["revision"]]
    return table[ok].reset_index(drop=True)


@dataclass(frozen=True)
class NullPrRun:
    table: pd.DataFrame  # NULL_PR_COLUMNS, revisions in token order
    sidecar: dict
    paths: NullPrPaths
    computed: tuple[str, ...]  # revisions evaluated by this call
    kept: tuple[str, ...]  # revisions whose stored rows still held


def null_pr_over_training(panel: Panel, *, results_dir: str | os.PathLike | None = None,
                          n_draws: int = DEFAULT_DRAWS, n: int | None = None, seed: int = DEFAULT_SEED,
                          revisions: list[str] | None = None, batch_size: int | None = None,
                          device: str | None = None, force: bool = False, progress: bool = True,
                          log: Callable[[str], None] | None = None) -> NullPrRun:
    """Compute (or resume) the PR null of every probed revision of `panel` (`revisions`: a subset) and store it
    (module docstring). The panel's records must exist (`circuitdev probe` first): their configuration gives the
    sequence length, n (default n_pr), the first token and the dtype."""
    from tqdm.auto import tqdm

    if n_draws < 1:
        raise ConfigError(f"n_draws must be >= 1, got {n_draws}")
    say = log or (lambda msg: None)
    root = Path(results_dir) if results_dir is not None else default_results_dir()
    read = PanelRecords(root, panel.name, panel).read(on_missing="skip")
    cfg = records_config(read.config, batch_size=batch_size, device=device)
    n = int(cfg.n_pr if n is None else n)
    if n < 1:
        raise ConfigError(f"n (random sequences per draw) must be >= 1, got {n}")
    order = [r for r in read.sidecars if revisions is None or r in revisions]
    unknown = sorted(set(revisions or ()) - set(read.sidecars))
    if unknown:
        raise ConfigError(f"{panel.name}: no complete record for revision(s) {unknown}; probe them first")
    header = {"format": FORMAT, "panel": panel.name, "config_hash": read.config_hash, "n_draws": n_draws, "n": n,
              "seed": seed, "seq_len": cfg.seq_len, "first_token": cfg.first_token_id, "ids": "uniform [0, vocab)"}
    identities = {rev: record_identity(meta) for rev, meta in read.sidecars.items()}
    tokens = {rev: int(meta["tokens"]) for rev, meta in read.sidecars.items()}
    rows: dict[str, pd.DataFrame] = {}
    stored = None if force else read_null_pr(root, panel.name)
    if stored is not None and {k: stored[1].get(k) for k in header} == header:
        for rev, g in stored[0].groupby("revision", sort=False):
            if rev in identities and stored[1]["revisions"].get(rev) == identities[rev]:
                rows[rev] = g[list(NULL_PR_COLUMNS)].reset_index(drop=True)
    paths = null_pr_paths(root, panel.name)
    remove_interrupted_writes(paths)
    kept = tuple(r for r in order if r in rows)
    todo = [r for r in order if r not in rows]
    table, meta = _write(paths, header, rows, identities, tokens, list(read.sidecars))
    for rev in tqdm(todo, desc=f"null PR {panel.name}", unit="revision", disable=not progress):
        rows[rev] = _evaluate_revision(panel, rev, cfg, n=n, n_draws=n_draws, seed=seed)
        table, meta = _write(paths, header, rows, identities, tokens, list(read.sidecars))
    say(f"{panel.name}: null PR of {len(todo)} revision(s) computed, {len(kept)} kept -> {paths.parquet}")
    return NullPrRun(table, meta, paths, tuple(todo), kept)


def _evaluate_revision(panel: Panel, revision: str, cfg: ProbeConfig, *, n: int, n_draws: int,
                       seed: int) -> pd.DataFrame:
    """NULL_PR_COLUMNS rows of one revision: load the checkpoint, `n_draws` random batches."""
    from circuitdev.measure.probe import null_pr
    from circuitdev.sources.loading import free_memory, load_revision, resolve_device

    model = load_revision(panel, revision, dtype=cfg.dtype, device=resolve_device(cfg.device), progress=False)
    try:
        draws = np.stack([null_pr(model, cfg, n=n, seed=seed + d, first_token=cfg.first_token_id)
                          for d in range(n_draws)])  # (draws, L, H)
    finally:
        big = sum(p.numel() for p in model.parameters()) > 10_000_000
        del model
        if big:
            free_memory()
    d, layers, heads = draws.shape
    draw, layer, head = np.meshgrid(np.arange(d), np.arange(layers), np.arange(heads), indexing="ij")
    return pd.DataFrame({"revision": revision, "draw": draw.reshape(-1).astype("int64"),
                         "layer": layer.reshape(-1).astype("int64"), "head": head.reshape(-1).astype("int64"),
                         "null_pr": draws.reshape(-1).astype("float64")})


def _write(paths: NullPrPaths, header: dict, rows: dict[str, pd.DataFrame], identities: dict, tokens: dict,
           order: list[str]) -> tuple[pd.DataFrame, dict]:
    """The table (revisions in token order) and its sidecar: parquet first, sidecar last (atomic each)."""
    frames = [rows[r] for r in order if r in rows]
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        {c: pd.Series(dtype="object" if c == "revision" else "float64" if c == "null_pr" else "int64")
         for c in NULL_PR_COLUMNS})
    done = [r for r in order if r in rows]
    meta = {**header, "complete": len(done) == len(order), "revisions": {r: identities[r] for r in done},
            "tokens": {r: tokens[r] for r in done}}
    return table, write_panel_table(paths, table, meta)
