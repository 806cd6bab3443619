"""The paper's published measurements -> the developmental table (method reference §6-§7).

A *published directory* is laid out as the authors' repository lays out its results (and as `circuitdev published
fetch` writes it, by default into data/published; `circuitdev.paths.published_dir`):

    per_revision/{pythia1b,olmo,olmoe}_mechinterp_{revision}.json   six-class selectivity of every head (ref. §7)
    pr_trajectory/{pythia_1b,olmo,olmoe}_phase1_trajectory.json     per-head participation ratio at each revision
    ablation/*.json                                                 final-checkpoint ablations (optional)

Each per-revision file also lists the authors' spectral top-K (`sources.published_topk`: `PublishedData.features`
and `PublishedData.topk`). The models, their file names and token rules are `sources.published_panels`; the
ablation files are read and reshaped by `sources.published_ablations`; the field checks every reader makes are
`sources.published_checks`: import their names from those modules.

`load_published(dir)` first checks the folder against the manifest (`check_copy`): a copy of the authors' files
that lacks some of them, or holds one with other content, is refused with one line naming them and the command
that completes it -- unless partial copies are allowed (`allow_partial=True`, `--allow-partial`, or
$CIRCUITDEV_PUBLISHED_PARTIAL=1, which reaches the pages), when the result is marked `partial` with its `missing`
files and a `PartialCopyWarning` says so wherever it is loaded. It then validates every file (a malformed or partial
file is a `DataError` naming the file and the field) and returns the developmental table (schema.py columns,
`source="published"`) plus the run metadata the audit needs. `circuitdev.sources.fetch` downloads the same files
from the authors' repository at the commits pinned in `data/published_manifest.tsv` (paths and sha256 only; the
data are never part of this repository).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from circuitdev.errors import DataError
from circuitdev.paths import PUBLISHED_ENV, published_dir, relative_to_repo
from circuitdev.measure.classify import with_classification
from circuitdev.schema import HEAD_CLASSES, sel_column
from circuitdev.sources.published_ablations import load_ablation
from circuitdev.sources.published_checks import as_list, check_grid, fail, head_key, number, read_json, require
from circuitdev.sources.published_panels import PANELS, PublishedPanel, parse_revision, published_panel, revision_tokens_b
from circuitdev.sources.published_topk import FEATURE_COLUMNS, TOPK_COLUMNS, class_breakdown, topk_features


# ------------------------------------------------------------------------------------------------------- the loader


@dataclass(frozen=True)
class PublishedData:
    table: pd.DataFrame  # the developmental table: one row per (panel, revision, layer, head)
    revisions: pd.DataFrame  # per (panel, revision): file, step, tokens_b, n_examples, n_examples_valid, top_k, ...
    trajectories: pd.DataFrame  # per panel: the PR run's settings (n_examples, dtype, seq_len, seed, head_dim, ...)
    features: pd.DataFrame  # the top-K `classifications` rows: panel, revision, layer, head, rank, integral, spread
    ablation: pd.DataFrame  # tidy final-checkpoint ablation metrics (empty when the folder is absent)
    directory: Path
    # the authors' class_breakdown_topK: panel, revision, tokens_b, class, count, top_k, ranking (the criterion,
    # "integral"); classes without heads are absent, as in their files
    topk: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=TOPK_COLUMNS))
    partial: bool = False  # True: an incomplete copy of the authors' files, read because it was allowed
    missing: tuple[str, ...] = ()  # then: the manifest files it lacks or holds with other content


PARTIAL_ENV = "CIRCUITDEV_PUBLISHED_PARTIAL"  # "1": every reader in this process (and its pages) allows partial


class PartialCopyWarning(UserWarning):
    """Numbers computed from an incomplete copy of the authors' files (allowed explicitly)."""


def partial_allowed(allow_partial: bool | None = None) -> bool:
    """An explicit `allow_partial`, else $CIRCUITDEV_PUBLISHED_PARTIAL (set by `--allow-partial`)."""
    if allow_partial is not None:
        return bool(allow_partial)
    return os.environ.get(PARTIAL_ENV, "").strip().lower() in ("1", "true", "yes")


def check_copy(root: Path, *, allow_partial: bool | None = None, manifest=None):
    """The check every reader of the authors' files makes before reading them: compare `root` with the manifest
    (`circuitdev.sources.fetch.copy_status`). An incomplete copy (files missing or with another sha256) raises a
    DataError naming them and the command that completes it; allowed, it warns and returns its status. Returns
    None for a complete copy and for a folder that holds none of the pinned files (read by the schema checks)."""
    from circuitdev.sources.fetch import copy_status

    status = copy_status(root, manifest=manifest)
    if not status.is_copy or status.complete:
        return None
    fetch = f"circuitdev published fetch --to {relative_to_repo(root)}"
    if not partial_allowed(allow_partial):
        raise DataError(f"{root}: an incomplete copy of the authors' files -- {status.describe()}; complete it with "
                        f"`{fetch}`, or read the subset, marked partial, with --allow-partial ({PARTIAL_ENV}=1)")
    warnings.warn(f"{root}: a PARTIAL copy of the authors' files ({status.describe()}); every number from it covers "
                  f"only the files present. Complete it with `{fetch}`", PartialCopyWarning, stacklevel=2)
    return status


def load_published(directory: str | os.PathLike | None = None, *, panels: tuple[str, ...] = PANELS,
                   require_pr: bool = False, allow_partial: bool | None = None, manifest=None) -> PublishedData:
    """Read and validate a published directory. `require_pr=True` makes a missing PR trajectory an error
    (use it for F5, which needs PR); by default the table's `pr` is NaN where no trajectory covers a head.
    An incomplete copy of the authors' files is refused unless `allow_partial` (default: $CIRCUITDEV_PUBLISHED_PARTIAL;
    see `check_copy`); `manifest`: the entries to check against (default: `circuitdev.sources.fetch.read_manifest`)."""
    root = Path(directory) if directory is not None else published_dir()
    if not root.is_dir():
        raise DataError(f"published directory {root} does not exist; run `circuitdev published fetch --to {root}` "
                        f"or pass the folder holding per_revision/ and pr_trajectory/ (env {PUBLISHED_ENV})")
    partial = check_copy(root, allow_partial=allow_partial, manifest=manifest)
    frames, revisions, trajectories, features, topk = [], [], [], [], []
    if partial is not None:  # a partial copy may lack whole panels: read the others
        panels = tuple(p for p in panels if _has_revisions(root, published_panel(p))) or panels
    for panel in panels:
        table, rev_meta, feats, breakdown = _load_panel_revisions(root, published_panel(panel))
        topk.append(breakdown)
        traj = root / "pr_trajectory" / published_panel(panel).trajectory_file
        if traj.exists():
            pr, meta = _load_trajectory(traj, published_panel(panel), table)
            table = table.merge(pr, on=["revision", "layer", "head"], how="left")
            trajectories.append(meta)
        elif require_pr:
            raise DataError(f"{traj}: missing; F5 needs the PR trajectory, re-fetch with `circuitdev published fetch`")
        else:
            table["pr"] = float("nan")
        frames.append(table)
        revisions.append(rev_meta)
        features.append(feats)
    table = pd.concat(frames, ignore_index=True)
    table["source"] = "published"
    return PublishedData(
        table=table,
        revisions=pd.concat(revisions, ignore_index=True),
        trajectories=pd.DataFrame(trajectories),
        features=pd.concat(features, ignore_index=True),
        ablation=load_ablation(root),
        directory=root,
        topk=pd.concat(topk, ignore_index=True) if topk else pd.DataFrame(columns=TOPK_COLUMNS),
        partial=partial is not None,
        missing=(*partial.missing, *partial.changed) if partial is not None else (),
    )


def developmental_table(directory: str | os.PathLike | None = None, **kwargs) -> pd.DataFrame:
    """Just the developmental table of a published directory (see `load_published`)."""
    return load_published(directory, **kwargs).table


def _has_revisions(root: Path, info: PublishedPanel) -> bool:
    return any((root / "per_revision").glob(f"{info.file_prefix}_mechinterp_*.json"))


def _load_panel_revisions(root: Path, info: PublishedPanel
                          ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    pattern = f"{info.file_prefix}_mechinterp_*.json"
    paths = sorted((root / "per_revision").glob(pattern))
    if not paths:
        raise DataError(f"{root / 'per_revision'}: no {pattern} files for {info.name}; run "
                        f"`circuitdev published fetch --to {root}` or point at the right folder")
    rows, meta, feats, topk, grid = [], [], [], [], None
    for path in paths:
        data = read_json(path)
        revision = path.stem.removeprefix(f"{info.file_prefix}_mechinterp_")
        if require(path, data, "model") != info.hf_id:
            raise fail(path, "model", f"{data['model']!r}, but {info.file_prefix}_* files hold {info.hf_id!r}")
        if require(path, data, "revision") != revision:
            raise fail(path, "revision", f"{data['revision']!r} disagrees with the file name ({revision!r})")
        step, _ = parse_revision(revision)
        tokens_b = revision_tokens_b(info.name, revision)
        sels = require(path, data, "all_head_selectivity")
        if not isinstance(sels, dict) or not sels:
            raise fail(path, "all_head_selectivity", "expected a non-empty object of 'L{l}_H{h}' -> selectivities")
        heads = {}
        for key, per_class in sels.items():
            layer, head = head_key(path, "all_head_selectivity", key)
            if not isinstance(per_class, dict):
                raise fail(path, f"all_head_selectivity.{key}", "expected an object of class -> selectivity")
            heads[layer, head] = [
                number(path, f"all_head_selectivity.{key}.{c}", _require_class(path, key, per_class, c))
                for c in HEAD_CLASSES
            ]
        this_grid = check_grid(path, "all_head_selectivity", set(heads))
        if grid is not None and this_grid != grid:
            raise fail(path, "all_head_selectivity", f"{this_grid[0]}x{this_grid[1]} heads, but other {info.name} "
                                                     f"revisions have {grid[0]}x{grid[1]}")
        grid = this_grid
        threshold = number(path, "selectivity_threshold", data.get("selectivity_threshold", 30.0))
        for (layer, head), values in heads.items():
            rows.append({"panel": info.name, "revision": revision, "tokens_b": tokens_b, "layer": layer,
                         "head": head, **dict(zip([sel_column(c) for c in HEAD_CLASSES], values)), "step": step})
        meta.append({"panel": info.name, "revision": revision, "file": str(path), "step": step,
                     "tokens_b": tokens_b, "n_heads": len(heads), "selectivity_threshold": threshold,
                     **{k: data.get(k) for k in ("n_examples", "n_examples_valid", "top_k", "ranking")}})
        listed = topk_features(path, data, info.name, revision)
        feats += listed
        topk += class_breakdown(path, data, info.name, revision, tokens_b, len(listed))
    table = pd.DataFrame(rows).sort_values(["step", "layer", "head"], ignore_index=True)
    table = with_classification(table, threshold=float(meta[0]["selectivity_threshold"]))
    table = table.drop(columns="best_selectivity")  # keep to the schema's columns
    meta = pd.DataFrame(meta).sort_values("step", ignore_index=True)
    feats = pd.DataFrame(feats, columns=FEATURE_COLUMNS)
    topk = pd.DataFrame(topk, columns=TOPK_COLUMNS)
    topk["count"] = topk["count"].astype("int64")
    return table, meta, feats, topk

def _require_class(path: Path, key: str, per_class: dict, head_class: str):
    if head_class not in per_class:
        raise fail(path, f"all_head_selectivity.{key}.{head_class}", "missing (partial file?)")
    return per_class[head_class]


def _load_trajectory(path: Path, info: PublishedPanel, table: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    data = read_json(path)
    if require(path, data, "model") != info.hf_id:
        raise fail(path, "model", f"{data['model']!r}, expected {info.hf_id!r}")
    revisions = [str(r) for r in as_list(path, "revisions", require(path, data, "revisions"))]
    n = len(revisions)
    for field in ("ckpt_step", "ckpt_tokens_B"):
        if field in data and len(as_list(path, field, data[field])) != n:
            raise fail(path, field, f"{len(as_list(path, field, data[field]))} entries for {n} revisions")
    steps = as_list(path, "ckpt_step", data.get("ckpt_step", [parse_revision(r)[0] for r in revisions]))
    for r, s in zip(revisions, steps):
        if parse_revision(r)[0] != int(s):
            raise fail(path, "ckpt_step", f"step {s} does not match revision {r!r}")
    for r, t in zip(revisions, as_list(path, "ckpt_tokens_B", data.get("ckpt_tokens_B", []))):
        if abs(number(path, "ckpt_tokens_B", t) - revision_tokens_b(info.name, r)) > 1e-6:
            raise fail(path, "ckpt_tokens_B", f"{t} for {r!r}, but the {info.tokens_rule} rule gives "
                                              f"{revision_tokens_b(info.name, r)}")
    pr = require(path, data, "pr")
    if not isinstance(pr, dict) or not pr:
        raise fail(path, "pr", "expected a non-empty object of 'L{l}_H{h}' -> list of PR values")
    rows = []
    for key, values in pr.items():
        layer, head = head_key(path, "pr", key)
        values = as_list(path, f"pr.{key}", values)
        if len(values) != n:
            raise fail(path, f"pr.{key}", f"{len(values)} values for {n} revisions (partial file?)")
        rows += [{"revision": r, "layer": layer, "head": head, "pr": number(path, f"pr.{key}", v)}
                 for r, v in zip(revisions, values)]
    heads = {(r["layer"], r["head"]) for r in rows}
    grid = check_grid(path, "pr", heads)
    table_grid = (int(table["layer"].max()) + 1, int(table["head"].max()) + 1)
    if grid != table_grid:
        raise fail(path, "pr", f"{grid[0]}x{grid[1]} heads, but the per-revision files have "
                               f"{table_grid[0]}x{table_grid[1]}")
    meta = {"panel": info.name, "file": str(path), "n_revisions": n,
            **{k: data.get(k) for k in ("n_examples", "seq_len", "seed", "dtype", "n_layer", "num_heads", "head_dim")}}
    return pd.DataFrame(rows), meta
