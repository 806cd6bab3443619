"""The PR null at every revision (issue 23 item 7): each head's participation ratio on random tokens.

PR measures how many directions a head's output at the query spreads over; a head with no structure still has a PR.
The authors calibrate PR once, at the final checkpoint, on 2000 sequences of uniform random ids (method reference
§3). Here every probed revision gets it, so that a head's PR can be read against its own null over training: per
revision `n_draws` independent batches (draw d: `RandomState(seed + d)`) of `n` random-id sequences of the records'
length (`n`: the records' n_pr, the sequences their PR averages over, so that both PRs see as many rows), position 0
holding the records' first token where they set one (the toy panels' BOS; `measure.probe.null_pr`). One checkpoint
is in memory at a time, and all draws of a revision go through the same forwards (`measure.probe.null_prs`).

A record probed with `null_pr_draws` (the pipeline's toy probes: config `null_pr_draws`) carries these draws already,
measured in the probe's own load with the same code (<revision>.null_pr.parquet, `sources.store`): a revision whose
record holds them with this run's settings is read, not loaded again -- the same numbers (tested), at the cost of
reading a file. The others are computed here.

File: <results>/<panel>/null_pr.parquet, one row per (revision, draw, layer, head): NULL_PR_COLUMNS, and its sidecar
null_pr.json (FORMAT): the settings, the records' config hash, per revision the identity of what was measured (the
record's parquet sha256 and its weights' identity, as `sources.ablate` keeps it) and the parquet's sha256.
Rewritten atomically after every revision, so an interrupted run resumes; a revision is recomputed when its record
changed (other weights, a re-probe) or the settings did. `read_null_pr` returns only what the sidecar vouches for.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from circuitdev.errors import ConfigError
from circuitdev.measure.config import ProbeConfig
from circuitdev.paths import results_dir as default_results_dir
from circuitdev.sources.panel_table import (PanelTablePaths, PanelTableRun, panel_table_paths, read_panel_table,
                                            record_identity, records_config, run_panel_table)
from circuitdev.sources.panels import Panel
from circuitdev.sources.records import PanelRecords

FORMAT = "circuitdev.null_pr/1"
STEM = "null_pr"
DEFAULT_DRAWS = 5  # random batches per revision: a per-head null distribution, not one value
DEFAULT_SEED = ProbeConfig.null_pr_seed  # the authors' RandomState seed of the null batch (2026)
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


_DTYPES = {"revision": "object", "draw": "int64", "layer": "int64", "head": "int64", "null_pr": "float64"}


def null_pr_over_training(panel: Panel, *, results_dir: str | os.PathLike | None = None,
                          n_draws: int = DEFAULT_DRAWS, n: int | None = None, seed: int = DEFAULT_SEED,
                          revisions: list[str] | None = None, batch_size: int | None = None,
                          device: str | None = None, force: bool = False, progress: bool = True,
                          log: Callable[[str], None] | None = None) -> PanelTableRun:
    """Compute (or resume) the PR null of every probed revision of `panel` (`revisions`: a subset) and store it
    (module docstring). The panel's records must exist (`circuitdev probe` first): their configuration gives the
    sequence length, n (default n_pr), the first token and the dtype."""
    if n_draws < 1:
        raise ConfigError(f"n_draws must be >= 1, got {n_draws}")
    if n is not None and n < 2:
        raise ConfigError(f"n (random sequences per draw) must be >= 2, got {n}")
    foreign = [r for r in revisions or () if r not in {rev.name for rev in panel.revisions}]
    if foreign:  # not a revision of this panel at all: probing will not help
        raise ConfigError(f"{panel.name} has no revision(s) {foreign}; its revisions: "
                          f"{', '.join(rev.name for rev in panel.revisions)} (`circuitdev panels` lists them)")
    say = log or (lambda msg: None)
    root = Path(results_dir) if results_dir is not None else default_results_dir()
    read = PanelRecords(root, panel.name, panel).read(on_missing="skip")
    cfg = records_config(read.config, batch_size=batch_size, device=device)
    n = int(cfg.n_pr if n is None else n)
    unknown = sorted(set(revisions or ()) - set(read.sidecars))
    if unknown:
        raise ConfigError(f"{panel.name}: no complete record for revision(s) {unknown}; probe them first "
                          f"(`circuitdev probe --panel {panel.name}`)")
    header = {"format": FORMAT, "panel": panel.name, "config_hash": read.config_hash, "n_draws": n_draws, "n": n,
              "seed": seed, "seq_len": cfg.seq_len, "first_token": cfg.first_token_id, "ids": "uniform [0, vocab)"}
    tokens = {rev: int(meta["tokens"]) for rev, meta in read.sidecars.items()}
    wanted = {"n_draws": n_draws, "n": n, "seed": seed, "seq_len": cfg.seq_len, "first_token": cfg.first_token_id}

    def evaluate(rev: str) -> pd.DataFrame:
        measured = _measured_in_probe(root, panel.name, rev, read.sidecars[rev], wanted)
        return measured if measured is not None else _evaluate_revision(panel, rev, cfg, n=n, n_draws=n_draws,
                                                                         seed=seed)

    run = run_panel_table(
        null_pr_paths(root, panel.name), header=header, sidecars=read.sidecars, columns=_DTYPES,
        evaluate=evaluate,
        revisions=revisions, extra=lambda done: {"tokens": {r: tokens[r] for r in done}}, force=force,
        progress=progress, desc=f"null PR {panel.name}")
    say(f"{panel.name}: null PR of {len(run.computed)} revision(s) computed, {len(run.kept)} kept -> "
        f"{run.paths.parquet}")
    return run


def _measured_in_probe(root: Path, panel: str, revision: str, sidecar: dict, wanted: dict) -> pd.DataFrame | None:
    """NULL_PR_COLUMNS rows of a revision from its record's PR-null file, when the record holds one drawn with the
    `wanted` settings (n_draws, n, seed, seq_len, first_token) and the file is the one its sidecar vouches for;
    else None."""
    import hashlib

    from circuitdev.sources.store import read_parquet, record_paths

    block = sidecar.get("null_pr") or {}
    if {k: block.get(k) for k in wanted} != wanted:
        return None
    path = record_paths(root, panel, revision).side("null_pr")
    try:
        if hashlib.sha256(path.read_bytes()).hexdigest() != block.get("sha256"):
            return None
    except OSError:
        return None
    rows = read_parquet(path)
    rows.insert(0, "revision", revision)
    return rows[list(NULL_PR_COLUMNS)]


def _evaluate_revision(panel: Panel, revision: str, cfg: ProbeConfig, *, n: int, n_draws: int,
                       seed: int) -> pd.DataFrame:
    """NULL_PR_COLUMNS rows of one revision: one load, the `n_draws` random batches in the same forwards."""
    from circuitdev.measure.probe import null_prs
    from circuitdev.sources.loading import loaded_revision, resolve_device

    # sdpa: no attention probabilities are read here, and it is 10-25% faster than eager on the toy panels
    with loaded_revision(panel, revision, dtype=cfg.dtype, device=resolve_device(cfg.device),
                         progress=False, attn_implementation="sdpa") as model:
        draws = null_prs(model, cfg, n=n, seeds=[seed + d for d in range(n_draws)],
                         first_token=cfg.first_token_id)  # (draws, L, H)
    d, layers, heads = draws.shape
    draw, layer, head = np.meshgrid(np.arange(d), np.arange(layers), np.arange(heads), indexing="ij")
    return pd.DataFrame({"revision": revision, "draw": draw.reshape(-1).astype("int64"),
                         "layer": layer.reshape(-1).astype("int64"), "head": head.reshape(-1).astype("int64"),
                         "null_pr": draws.reshape(-1).astype("float64")})
