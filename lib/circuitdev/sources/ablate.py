"""Circuit ablation over training (issue 23, toy tier): when does the final induction circuit become necessary?

At every revision of a panel with a complete record, on the records' own induction batch (`probe.batch_for` of their
configuration) and scored as `ablation.metrics` does (top-1 and loss of B at the query, over all N sequences):

    baseline  nothing ablated (the record's own `top1`)
    circuit   the FINAL induction circuit zero-ablated: the heads with sel_induction >= threshold at the panel's last
              revision in token order (threshold: the records' induction_threshold, the paper's 50x)
    random    matched random groups (`ablation.matched_random_groups`): the circuit's layers and per-layer counts,
              heads drawn outside the circuit, one distinct group per seed from schema.MATCHED_RANDOM_SEED on. A
              circuit layer with no head outside the circuit gets no random head: the sidecar lists it
              (`random_full_layers`) and `n_random_heads` is the random groups' size (0, all random columns NaN,
              when the circuit fills every layer it touches -- as in the toy models, whose layers hold 4 heads).
    random_any  the same number of heads as the circuit, drawn outside it from ANY layer (scope "any"): the
              control that exists when the circuit fills its layers. Seeds and distinctness as above.

The same circuit and the same random groups at every revision, so the rows say when that set of heads becomes
necessary -- and whether it already is at the revision where the screen first finds it.

File: <results>/<panel>/ablation_over_training.parquet, one row per revision (ABLATION_COLUMNS), and its sidecar
ablation_over_training.json (FORMAT): the circuit, threshold, final revision, the records' config hash, the random
groups with their seeds, per revision the identity of what was measured (the record's parquet sha256 and the weights'
identity), and the parquet's sha256. Rewritten atomically after every revision, so an interrupted run resumes; rows
are recomputed when the circuit, the groups, the configuration or their revision's record changed. Intervals: Wilson
(`behaviour.wilson_interval`, n = the batch's N) for ablated_top1 and for the mean random_top1; random_top1_min / _max
give the spread over the groups. `store.load_revision_table` merges the rows that match the current records.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from circuitdev.errors import DataError
from circuitdev.measure.classify import heads_of, is_class
from circuitdev.measure.config import ProbeConfig
from circuitdev.paths import results_dir as default_results_dir
from circuitdev.sources.panel_table import (PanelTablePaths, panel_table_paths, read_panel_table,
                                            record_identity, records_config, remove_interrupted_writes,
                                            write_panel_table)
from circuitdev.sources.panels import Panel
from circuitdev.sources.records import PanelRecords, RecordSet

FORMAT = "circuitdev.ablation_over_training/1"
STEM = "ablation_over_training"
DEFAULT_RANDOM_GROUPS = 10  # matched random groups per revision (fewer when fewer distinct ones exist)

CONTROLS = {"random": "layer", "random_any": "any"}  # column prefix -> matched_random_groups scope


def _control_columns(prefix: str, what: str) -> dict[str, str]:
    return {
        f"n_{prefix}_heads": f"heads per {what} group",
        f"n_{prefix}": f"distinct {what} groups evaluated",
        f"{prefix}_top1": f"top-1 with a {what} group zero-ablated, mean over the groups",
        f"{prefix}_top1_lo": f"lower end of {prefix}_top1's 95% Wilson interval (n = the batch's N)",
        f"{prefix}_top1_hi": f"upper end of {prefix}_top1's 95% Wilson interval",
        f"{prefix}_top1_min": f"lowest top-1 over the {what} groups",
        f"{prefix}_top1_max": f"highest top-1 over the {what} groups",
        f"{prefix}_loss_b": f"loss of B with a {what} group zero-ablated, mean over the groups",
        f"{prefix}_drop": f"baseline_top1 - {prefix}_top1",
    }


ABLATION_COLUMNS: dict[str, str] = {
    "revision": "revision name",
    "n_circuit": "heads of the final induction circuit (0: none reaches the threshold, nothing ablated)",
    "baseline_top1": "top-1 at the query with nothing ablated (the record's top1)",
    "baseline_loss_b": "loss of B at the query with nothing ablated",
    "ablated_top1": "top-1 with the final circuit zero-ablated",
    "ablated_top1_lo": "lower end of ablated_top1's 95% Wilson interval (n = the batch's N)",
    "ablated_top1_hi": "upper end of ablated_top1's 95% Wilson interval",
    "ablated_loss_b": "loss of B with the final circuit zero-ablated",
    "top1_drop": "baseline_top1 - ablated_top1: how much top-1 needs the circuit",
    **_control_columns("random", "matched random (same layers and counts)"),
    **_control_columns("random_any", "random (same count, any layer)"),
}
_INT_COLUMNS = ("n_circuit", *(f"n_{p}{end}" for p in CONTROLS for end in ("", "_heads")))


AblationPaths = PanelTablePaths  # the table and its sidecar (sources.panel_table)


def ablation_paths(results_dir: str | os.PathLike, panel: str) -> AblationPaths:
    return panel_table_paths(results_dir, panel, STEM)


def labels(spec: dict[int, list[int]]) -> list[str]:
    """["L1H2", ...] in (layer, head) order."""
    return [f"L{layer}H{head}" for layer in sorted(spec) for head in sorted(spec[layer])]


def final_circuit(table: pd.DataFrame, threshold: float) -> tuple[str, dict[int, list[int]]]:
    """(the last revision in token order, its heads with sel_induction >= threshold) of a developmental table."""
    final = table.sort_values("tokens_b", kind="stable")["revision"].iloc[-1]
    at = table[table["revision"] == final]
    return str(final), heads_of(at, is_class(at, "induction", threshold))


def read_ablation_over_training(results_dir: str | os.PathLike | None, panel: str
                                ) -> tuple[pd.DataFrame, dict] | None:
    """The stored table and its sidecar, or None when absent or not vouched for (a crash mid-write, an edit)."""
    paths = ablation_paths(results_dir if results_dir is not None else default_results_dir(), panel)
    return read_panel_table(paths, fmt=FORMAT, panel=panel)


def with_ablation(revisions: pd.DataFrame, read: RecordSet) -> pd.DataFrame:
    """`revisions` (RecordSet.revision_table) with ABLATION_COLUMNS merged in: the stored rows whose circuit is the
    records' current final circuit and whose revision's record is the one measured; NaN elsewhere."""
    columns = list(ABLATION_COLUMNS)[1:]
    found = read_ablation_over_training(read.root, read.panel)
    rows = pd.DataFrame(columns=list(ABLATION_COLUMNS))
    if found is not None:
        table, meta = found
        final, spec = final_circuit(read.table, meta["threshold"])
        if meta["config_hash"] == read.config_hash and (final, labels(spec)) == (meta["final_revision"],
                                                                                  meta["circuit"]):
            current = {rev: record_identity(m) for rev, m in read.sidecars.items()}
            rows = table[[_same(meta["revisions"].get(rev), current.get(rev)) for rev in table["revision"]]]
    out = revisions.drop(columns=[c for c in columns if c in revisions.columns])
    out = out.merge(rows[["revision", *columns]], on="revision", how="left")
    for col in columns:
        out[col] = out[col].astype("Int64" if col in _INT_COLUMNS else "float64")
    return out


def _same(measured: dict | None, current: dict | None) -> bool:
    """A stored row still holds: it measured the record that is there now."""
    return current is not None and measured == current


@dataclass(frozen=True)
class AblationRun:
    table: pd.DataFrame  # ABLATION_COLUMNS, one row per revision in token order
    sidecar: dict
    paths: AblationPaths
    computed: tuple[str, ...]  # revisions evaluated by this call
    kept: tuple[str, ...]  # revisions whose stored row still held


def ablate_over_training(panel: Panel, *, results_dir: str | os.PathLike | None = None,
                         n_random: int = DEFAULT_RANDOM_GROUPS, threshold: float | None = None,
                         batch_size: int | None = None, device: str | None = None, force: bool = False,
                         progress: bool = True, log: Callable[[str], None] | None = None) -> AblationRun:
    """Evaluate the final induction circuit's ablation at every probed revision of `panel` (as `load_panel(NAME,
    results_dir=...)` returns it) and store the table (module docstring). Every revision must have a complete
    record (`circuitdev probe` first). Resumes: only rows that are missing or no longer match are computed, unless
    `force`. One checkpoint is in memory at a time."""
    from tqdm.auto import tqdm

    from circuitdev.measure.ablation import matched_random_groups
    from circuitdev.measure.probe import batch_for

    say = log or (lambda msg: None)
    root = Path(results_dir) if results_dir is not None else default_results_dir()
    read = PanelRecords(root, panel.name, panel).read(on_missing="raise")
    cfg = records_config(read.config, batch_size=batch_size, device=device)
    threshold = float(cfg.induction_threshold if threshold is None else threshold)
    batch = batch_for(cfg)
    final, spec = final_circuit(read.table, threshold)
    n_layers, n_heads = int(read.table["layer"].max()) + 1, int(read.table["head"].max()) + 1
    controls = {prefix: matched_random_groups(spec, n_heads, n_random, scope=scope, n_layers=n_layers)
                for prefix, scope in CONTROLS.items()} if spec else {}
    header = {"format": FORMAT, "panel": panel.name, "config_hash": read.config_hash, "threshold": threshold,
              "final_revision": final, "circuit": labels(spec), "n": cfg.n}
    for prefix, groups in controls.items():
        header.update({f"{prefix}_groups": [{"seed": s, "heads": labels(g)} for s, g in groups.groups],
                       f"{prefix}_possible": groups.possible})
    if "random" in controls:
        header["random_full_layers"] = controls["random"].full_layers
        header["random_short_layers"] = {str(k): list(v) for k, v in controls["random"].short_layers.items()}
    if not spec:
        say(f"{panel.name}: no head reaches induction selectivity >= {threshold:g}x at {final}: nothing to ablate; "
            "the table holds the baseline only")
    elif controls["random"].full_layers:
        say(f"{panel.name}: layer(s) {controls['random'].full_layers} hold no head outside the circuit: the matched "
            f"random groups have {controls['random'].n_heads} head(s), not {sum(len(h) for h in spec.values())} "
            "(random_any draws them from any layer)")
    identities = {rev: record_identity(meta) for rev, meta in read.sidecars.items()}
    rows: dict[str, dict] = {}
    stored = None if force else read_ablation_over_training(root, panel.name)
    if stored is not None and {k: stored[1].get(k) for k in header} == header:
        for row in stored[0].to_dict("records"):
            if _same(stored[1]["revisions"].get(row["revision"]), identities.get(row["revision"])):
                rows[row["revision"]] = row
    kept = tuple(rev for rev in read.sidecars if rev in rows)
    paths = ablation_paths(root, panel.name)
    todo = [rev for rev in read.sidecars if rev not in rows]
    remove_interrupted_writes(paths)
    table, meta = _write(paths, header, rows, identities, list(read.sidecars)) if not todo else (None, None)
    for rev in tqdm(todo, desc=f"ablate {panel.name}", unit="revision", disable=not progress):
        rows[rev] = _evaluate_revision(panel, rev, batch, cfg, spec, controls)
        table, meta = _write(paths, header, rows, identities, list(read.sidecars))
    return AblationRun(table, meta, paths, tuple(todo), kept)


def _evaluate_revision(panel: Panel, revision: str, batch, cfg: ProbeConfig, spec, controls: dict) -> dict:
    """One row of ABLATION_COLUMNS: load the checkpoint, score the baseline, the circuit and each control group."""
    import torch

    from circuitdev.measure.ablation import query_logits
    from circuitdev.measure.behaviour import query_outcome, wilson_interval
    from circuitdev.measure.families import family_of
    from circuitdev.sources.loading import free_memory, load_revision, resolve_device

    model = load_revision(panel, revision, dtype=cfg.dtype, device=resolve_device(cfg.device), progress=False)
    layout = family_of(model)
    target = torch.as_tensor(batch.target)
    n, nan = batch.n, float("nan")

    def score(heads) -> tuple[int, float]:  # (correct sequences, mean loss of B)
        out = query_outcome(query_logits(model, batch, heads, layout=layout, batch_size=cfg.batch_size), target)
        return int(out["correct"].sum()), float(out["loss"].double().mean())

    big = sum(p.numel() for p in model.parameters()) > 10_000_000
    try:
        k0, loss0 = score({})
        k1, loss1 = score(spec) if spec else (nan, nan)
        scored = {prefix: [score(g) for _, g in controls[prefix].groups] if prefix in controls else []
                  for prefix in CONTROLS}
    finally:
        del model
        if big:  # as probe_panel: a full collection only where a real model's memory is at stake
            free_memory()
    lo, hi = wilson_interval(k1, n)
    row = {"revision": revision, "n_circuit": sum(len(h) for h in spec.values()), "baseline_top1": k0 / n,
           "baseline_loss_b": loss0, "ablated_top1": k1 / n, "ablated_top1_lo": float(lo), "ablated_top1_hi": float(hi),
           "ablated_loss_b": loss1, "top1_drop": (k0 - k1) / n}
    for prefix, results in scored.items():
        ks = np.array([k for k, _ in results], dtype=np.float64)
        k_mean = float(ks.mean()) if len(ks) else nan
        lo, hi = wilson_interval(k_mean, n)
        row.update({f"n_{prefix}_heads": controls[prefix].n_heads if prefix in controls else 0,
                    f"n_{prefix}": len(results), f"{prefix}_top1": k_mean / n, f"{prefix}_top1_lo": float(lo),
                    f"{prefix}_top1_hi": float(hi), f"{prefix}_top1_min": float(ks.min()) / n if len(ks) else nan,
                    f"{prefix}_top1_max": float(ks.max()) / n if len(ks) else nan,
                    f"{prefix}_loss_b": float(np.mean([l for _, l in results])) if results else nan,
                    f"{prefix}_drop": (k0 - k_mean) / n})
    return row


def _write(paths: AblationPaths, header: dict, rows: dict[str, dict], identities: dict, order: list[str]
           ) -> tuple[pd.DataFrame, dict]:
    """The table (rows in token order) and its sidecar, parquet first, sidecar last (atomic each)."""
    table = pd.DataFrame([rows[r] for r in order if r in rows], columns=list(ABLATION_COLUMNS))
    for col in ABLATION_COLUMNS:
        if col != "revision":
            table[col] = table[col].astype("int64" if col in _INT_COLUMNS else "float64")
    meta = {**header, "complete": all(r in rows for r in order),
            "revisions": {r: identities[r] for r in order if r in rows}}
    return table, write_panel_table(paths, table, meta)
