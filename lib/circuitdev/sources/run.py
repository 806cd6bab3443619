"""Compute records: probe a panel's revisions into the store, and ablate a panel's final-revision circuit.

The orchestration around the measuring core: load one revision at a time (`loading`), run `measure.probe` on it,
time it, free its memory, and hand the table with its provenance (device, versions, git commit) to `store`.
`probe_panel` is what `circuitdev probe` and the pipeline's probe jobs call; `ablate_final_circuit` is the group
ablation a model page runs on the final checkpoint.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal, Sequence

import pandas as pd

from circuitdev.errors import ConfigError, ModelUnavailableError
from circuitdev.measure.classify import heads_of, is_class
from circuitdev.measure.config import ProbeConfig
from circuitdev.paths import results_dir as default_results_dir
from circuitdev.runinfo import git_state, package_versions
from circuitdev.schema import BOOT_ATTR, INDUCTION_THRESHOLD
from circuitdev.sources.loading import free_memory, load_revision, resolve_device
from circuitdev.sources.panels import Panel, load_panel
from circuitdev.sources.store import (RecordPaths, archive_record, clean_temp_files, record_paths, record_status,
                                      restore_record, with_refined, write_record)



@dataclass(frozen=True)
class RunResult:
    revision: str
    action: Literal["computed", "skipped", "restored"]
    paths: RecordPaths
    reason: str = ""  # why it was (re)computed: missing / corrupt: ... / stale: ... / forced
    seconds: float = 0.0


def probe_panel(
    panel: Panel | str,
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
    """Probe the panel's revisions (all -- the refined ones `circuitdev refine` added included --, or `revisions`)
    and store one record each (with its bootstrap replicate file when config.n_boot > 0); skip complete records.

    config: a ProbeConfig, or None for the panel's defaults (`Panel.probe_config`); `device` / `dtype` override
    it. Resume-safe: an interrupted run keeps every record it finished; re-running computes only what is missing,
    corrupt or of another configuration. One revision is in memory at a time. `probe_fn(model, config, progress=)`
    defaults to `circuitdev.measure.probe.probe_model` (tests pass a stand-in).
    """
    from tqdm.auto import tqdm

    import transformers  # noqa: F401  (imported here so that load_s times the load, not the import)

    root = Path(results_dir) if results_dir is not None else default_results_dir()
    panel = with_refined(load_panel(panel), root)
    fields = {} if config is None else ProbeConfig.to_dict(config)
    fields.update({k: v for k, v in {"device": device, "dtype": dtype}.items() if v is not None})
    cfg = panel.probe_config(**fields)  # panel defaults <- config <- device/dtype; dtype resolved before hashing
    key = cfg.config_hash()
    say = log or (lambda msg: None)
    results: list[RunResult] = []
    revs = panel.select(revisions)
    bar = tqdm(revs, desc=f"probe {panel.name}", unit="revision", disable=not progress)
    for rev in bar:
        bar.set_postfix_str(rev.name)
        paths = record_paths(root, panel.name, rev.name)
        status = record_status(paths, panel=panel.name, revision=rev.name, config_hash=key)
        if status.complete and not force:
            results.append(RunResult(rev.name, "skipped", paths, "complete"))
            continue
        if status.state == "stale":
            archive_record(paths, root, panel.name, rev.name, status.sidecar["config_hash"])
            if not force and restore_record(root, panel.name, rev.name, key):
                say(f"{panel.name}/{rev.name}: restored the stored record of configuration {key}")
                results.append(RunResult(rev.name, "restored", paths, status.reason))
                continue
        reason = "forced" if force and status.complete else f"{status.state}" + (f": {status.reason}" if status.reason else "")
        if status.state == "corrupt":
            say(f"{panel.name}/{rev.name}: stored record is corrupt ({status.reason}); recomputing")
        clean_temp_files(paths.folder, rev.name)
        t0 = time.perf_counter()
        dev = resolve_device(cfg.device)
        model = load_revision(panel, rev, dtype=cfg.dtype, device=dev, progress=progress)
        t_load = time.perf_counter() - t0
        fn = probe_fn or _default_probe_fn()
        table = fn(model, cfg, progress=progress)
        big = sum(p.numel() for p in model.parameters()) > 10_000_000
        del model
        if big:  # a full collection costs ~0.5 s; only worth it when a real model's memory is at stake
            free_memory()
        t_probe = time.perf_counter() - t0 - t_load
        replicates = table.attrs.pop(BOOT_ATTR, None)  # (B, 6, L, H) -> the record's replicate file
        attrs = dict(table.attrs)
        meta = {
            "device": str(dev),
            "device_name": _device_name(dev),
            "timings": {"load_s": t_load, "probe_s": t_probe, **{f"probe.{k}": v for k, v in attrs.pop("timings", {}).items()}},
            "probe_attrs": attrs,
            "versions": package_versions(),
            "git": git_state(),
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(),
        }
        paths = write_record(root, panel, rev, table, config=cfg, meta=meta, replicates=replicates)
        results.append(RunResult(rev.name, "computed", paths, reason, time.perf_counter() - t0))
    return results


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


def ablate_final_circuit(panel: Panel | str, table: pd.DataFrame, *, config: dict | None = None,
                         threshold: float = INDUCTION_THRESHOLD, seeds: Sequence[int] = (123,),
                         mode: str = "zero", batch_size: int = 8, device: str | None = None
                         ) -> tuple[pd.DataFrame | None, str]:
    """Group ablation of the final-revision induction screen (sel_induction >= threshold in `table`, the panel's
    developmental table) with matched-random (one per seed) and upper-bound controls, on the records' own batch
    (`config`: their ProbeConfig fields). Loads the final checkpoint: cheap for toy and folder panels, a GPU job for
    the 1B models. Returns (table, "") or (None, why it could not run)."""
    final = table.sort_values("tokens_b", kind="stable")["revision"].iloc[-1]
    at = table[table["revision"] == final]
    spec = heads_of(at, is_class(at, "induction", threshold))
    if not spec:
        return None, (f"no head reaches induction selectivity ≥ {threshold:g}× at the final revision, so there is "
                      "no circuit to ablate")
    from circuitdev.measure.ablation import ablation_suite  # torch and nnsight: imported only when there is work
    from circuitdev.measure.probe import batch_for

    try:
        pan = load_panel(panel)
    except ConfigError as err:
        return None, f"the panel file of `{panel}` is not available here ({err})"
    cfg = pan.probe_config(**{k: v for k, v in (config or {}).items() if k not in ("device", "batch_size")})
    cfg = cfg.replace(batch_size=batch_size)
    try:
        model = load_revision(pan, final, dtype=cfg.dtype, device=None if device in (None, "auto") else device,
                              progress=False)
    except (ModelUnavailableError, ConfigError) as err:
        return None, f"the final checkpoint could not be loaded here: {err}"
    try:
        out = ablation_suite(model, batch_for(cfg), spec, random_seeds=tuple(seeds), mode=mode, batch_size=batch_size)
    finally:
        del model
        free_memory()
    out["heads"] = [" ".join(f"L{l}H{h}" for l, hs in sorted(s.items()) for h in hs) for s in out["spec"]]
    out["label"] = out["condition"]
    out.loc[out["condition"] == "screen", "label"] = f"induction screen ≥{threshold:g}×"
    return out[["condition", "label", "seed", "n_ablated", "heads", "acc_top1", "acc_top5", "loss",
                "mean_logit_B"]], ""
