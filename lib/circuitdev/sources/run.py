"""Compute records: probe a panel's revisions into the store, and ablate a panel's final-revision circuit.

The orchestration around the measuring core: load one revision at a time (`loading`), run `measure.probe` on it,
time it, free its memory, and hand the table with its provenance (device, versions, git commit) to `store`.
`probe_panel` is what `circuitdev probe` and the pipeline's probe jobs call; `ablate_final_circuit` is the group
ablation of the final checkpoint that `circuitdev ablate` prints and a model page shows (the same controls).
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal

import pandas as pd

from circuitdev.errors import ConfigError, ModelUnavailableError
from circuitdev.measure.config import ProbeConfig
from circuitdev.paths import results_dir as default_results_dir
from circuitdev.runinfo import git_state, package_versions
from circuitdev.schema import INDUCTION_THRESHOLD, MATCHED_RANDOM_SEED
from circuitdev.sources.loading import loaded_revision, resolve_device
from circuitdev.sources.panels import Panel
from circuitdev.sources.records import PanelRecords
from circuitdev.sources.store import RecordPaths, clean_temp_files, move_record, record_paths, write_record
from circuitdev.sources.weights import loaded_identity


@dataclass(frozen=True)
class RunResult:
    revision: str
    action: Literal["computed", "skipped", "restored"]
    paths: RecordPaths
    reason: str = ""  # why it was (re)computed: missing / corrupt: ... / stale: ... / forced
    seconds: float = 0.0


def probe_panel(
    panel: Panel,
    *,
    revisions: list[str] | None = None,
    config=None,
    results_dir: str | os.PathLike | None = None,
    force: bool = False,
    device: str | None = None,
    dtype: str | None = None,
    progress: bool = True,
    probe_fn: Callable | None = None,
    log: Callable[[str], None] | None = None,
) -> list[RunResult]:
    """Probe the panel's revisions (all, or `revisions`) and store one record each (with its bootstrap replicate
    and null files when config.n_boot / n_nulls > 0); skip complete records. `panel` as `load_panel(NAME,
    results_dir=...)` returns it: with the revisions `circuitdev refine` added.

    config: a ProbeConfig, or None for the panel's defaults (`Panel.probe_config`); `device` / `dtype` override
    it. Resume-safe: an interrupted run keeps every record it finished; re-running computes only what is missing,
    corrupt or of another configuration. One revision is in memory at a time. `probe_fn(model, config, progress=)`
    defaults to `circuitdev.measure.probe.probe_model` (tests pass a stand-in).
    """
    from tqdm.auto import tqdm

    import transformers  # noqa: F401  (imported here so that load_s times the load, not the import)

    if not isinstance(panel, Panel):
        raise TypeError(f"probe_panel takes a Panel, got {panel!r}: load it with "
                        "`load_panel(NAME, results_dir=...)` (sources.panels)")
    root = Path(results_dir) if results_dir is not None else default_results_dir()
    cfg = _run_config(panel, config, device=device, dtype=dtype)
    key = cfg.config_hash()
    say = log or (lambda msg: None)
    records = PanelRecords(root, panel.name, panel)
    results: list[RunResult] = []
    revs = panel.select(revisions)
    bar = tqdm(revs, desc=f"probe {panel.name}", unit="revision", disable=not progress)
    for rev in bar:
        bar.set_postfix_str(rev.name)
        status = records.status_of(rev.name, config_hash=key)
        kept = _keep_stored(records, root, panel, rev.name, status, key, force, say)
        if kept is not None:
            results.append(kept)
            continue
        reason = _why_recompute(status, force, say, f"{panel.name}/{rev.name}")
        paths, seconds = _probe_and_write(root, panel, rev, cfg, progress=progress, probe_fn=probe_fn)
        results.append(RunResult(rev.name, "computed", paths, reason, seconds))
    return results


def _run_config(panel: Panel, config, *, device: str | None, dtype: str | None) -> ProbeConfig:
    """The configuration of a run: panel defaults <- config <- device/dtype; dtype resolved before hashing."""
    fields = {} if config is None else ProbeConfig.to_dict(config)
    fields.update({k: v for k, v in {"device": device, "dtype": dtype}.items() if v is not None})
    return panel.probe_config(**fields)


def _why_recompute(status, force: bool, say: Callable[[str], None], label: str) -> str:
    """Why a record is (re)computed, for its RunResult; a corrupt or stale stored one is also logged."""
    reason = ("forced" if force and status.complete else f"outdated: {status.outdated}" if status.complete
              else status.state + (f": {status.reason}" if status.reason else ""))
    if status.state == "corrupt":
        say(f"{label}: stored record is corrupt ({status.reason}); recomputing")
    elif status.state == "stale" and not status.other_config:
        say(f"{label}: stored record {status.reason}; recomputing")
    return reason


def _keep_stored(records: PanelRecords, root: Path, panel: Panel, rev: str, status, key: str, force: bool,
                 say: Callable[[str], None]) -> RunResult | None:
    """The stored record to keep for `rev`, or None when it must be computed: a complete one of this
    configuration is skipped; one of another configuration is moved under by-config/<its hash>/, and a stored one
    of this configuration is brought back from there ("restored")."""
    paths = record_paths(root, panel.name, rev)
    if status.complete and not status.outdated and not force:
        return RunResult(rev, "skipped", paths, "complete")
    if status.other_config:
        move_record(paths, record_paths(root, panel.name, rev, status.sidecar["config_hash"]))
        archived = record_paths(root, panel.name, rev, key)
        if not force and records.status_of(rev, config_hash=key, paths=archived).complete:
            move_record(archived, paths)
            say(f"{panel.name}/{rev}: restored the stored record of configuration {key}")
            return RunResult(rev, "restored", paths, status.reason)
    return None


def _probe_and_write(root: Path, panel: Panel, rev, cfg: ProbeConfig, *, progress: bool,
                     probe_fn: Callable | None) -> tuple[RecordPaths, float]:
    """Load one revision, probe it, free it and write its record with the run's metadata (leftover temporary files
    of an interrupted run removed first). Returns the record's paths and the seconds it took."""
    clean_temp_files(record_paths(root, panel.name, rev.name).folder, rev.name)
    t0 = time.perf_counter()
    dev = resolve_device(cfg.device)
    with loaded_revision(panel, rev, dtype=cfg.dtype, device=dev, progress=progress) as model:
        weights = loaded_identity(panel, rev, model)
        t_load = time.perf_counter() - t0
        result = (probe_fn or _default_probe_fn())(model, cfg, progress=progress)
    t_probe = time.perf_counter() - t0 - t_load
    meta = {
        "device": str(dev),
        "device_name": _device_name(dev),
        "timings": {"load_s": t_load, "probe_s": t_probe, **{f"probe.{k}": v for k, v in result.timings.items()}},
        "probe_summary": result.summary(),
        "versions": package_versions(),
        "git": git_state(),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
    }
    paths = write_record(root, panel, rev, result.table, config=cfg, meta=meta, replicates=result.replicates,
                         nulls=result.nulls, weights=weights, behaviour=getattr(result, "behaviour", None),
                         null_pr=getattr(result, "null_pr", None))
    return paths, time.perf_counter() - t0


def _default_probe_fn() -> Callable:
    from circuitdev.measure.probe import probe_model

    return probe_model


def _device_name(dev) -> str:
    try:
        import torch

        if dev.type == "cuda":
            return torch.cuda.get_device_name(dev)
    except Exception:  # pragma: no cover - informational only
        pass
    return platform.processor() or platform.machine()


@dataclass(frozen=True)
class FinalCircuit:
    """What an ablation of the final circuit starts from: the last revision, its induction circuit and the records'
    ProbeConfig (their batch)."""
    revision: str
    spec: dict[int, list[int]]  # layer -> heads with sel_induction >= the bar at `revision`
    cfg: ProbeConfig


def final_circuit_of(panel: Panel, table: pd.DataFrame, *, config: dict | None, threshold: float,
                     batch_size: int | None) -> FinalCircuit | None:
    """The final revision's induction circuit of `table` (a panel's developmental table; sources.ablate.final_induction_spec)
    with the records' ProbeConfig (`config`, batch size `batch_size`, None: the records' own, else the panel's
    default); None when no head reaches the bar."""
    from circuitdev.sources.ablate import final_induction_spec

    final, spec = final_induction_spec(table, threshold)
    if not spec:
        return None
    cfg = panel.probe_config(**{k: v for k, v in (config or {}).items() if k not in ("device", "batch_size")})
    return FinalCircuit(final, spec, cfg.replace(batch_size=batch_size or (config or {}).get("batch_size")
                                                 or cfg.batch_size))


def ablate_final_circuit(panel: Panel, table: pd.DataFrame, *, config: dict | None = None,
                         threshold: float = INDUCTION_THRESHOLD, groups: int = 5, seed: int = MATCHED_RANDOM_SEED,
                         mode: str = "zero", batch_size: int | None = None, device: str | None = None,
                         strict: bool = False) -> tuple[pd.DataFrame | None, str]:
    """The final-revision induction circuit (sel_induction >= threshold in `table`, the panel's developmental table)
    ablated on the records' own batch (`config`: their ProbeConfig fields) beside its controls: the conditions of
    `measure.ablation.circuit_conditions` (up to `groups` distinct matched random groups and as many any-layer
    groups, seeds from `seed`; the whole layers), `measure.ablation.ablation_suite`'s columns. What `circuitdev
    ablate` prints and the model pages show. Loads the final checkpoint: cheap for toy and folder panels, a GPU job
    for the 1B models. Returns (table, "") or (None, why): no circuit, or (unless `strict`, which raises instead)
    no checkpoint here."""
    found = final_circuit_of(panel, table, config=config, threshold=threshold, batch_size=batch_size)
    if found is None:
        return None, (f"no head reaches induction selectivity ≥ {threshold:g}× at the final revision, so there is "
                      "no circuit to ablate")
    from circuitdev.measure.ablation import ablation_suite  # torch and nnsight: imported only when there is work
    from circuitdev.measure.probe import batch_for

    from contextlib import ExitStack

    dev = None if device in (None, "auto") else device
    with ExitStack() as stack:
        try:
            model = stack.enter_context(loaded_revision(panel, found.revision, dtype=found.cfg.dtype, device=dev,
                                                        progress=False))
        except (ModelUnavailableError, ConfigError) as err:
            if strict:
                raise
            return None, f"the final checkpoint could not be loaded here: {err}"
        return ablation_suite(model, batch_for(found.cfg), found.spec, label=f"induction circuit (≥ {threshold:g}×)",
                              n_groups=groups, seed=seed, mode=mode, batch_size=found.cfg.batch_size), ""
