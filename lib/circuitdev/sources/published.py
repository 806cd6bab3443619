"""The paper's published measurements -> the developmental table (method reference §6-§7).

A *published directory* is laid out as the authors' repository lays out its results (and as `circuitdev published
fetch` writes it, by default into data/published; `circuitdev.paths.published_dir`):

    per_revision/{pythia1b,olmo,olmoe}_mechinterp_{revision}.json   six-class selectivity of every head (ref. §7)
    pr_trajectory/{pythia_1b,olmo,olmoe}_phase1_trajectory.json     per-head participation ratio at each revision
    ablation/*.json                                                 final-checkpoint ablations (optional)

Each per-revision file also lists the authors' spectral top-K (`classifications`: the K = `top_k` heads of highest
PR integral, ranked by `ranking`, with their class at that revision -> `PublishedData.features`) and its class
counts (`class_breakdown_topK` -> `PublishedData.topk`, checked to count exactly the listed heads).

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

import ast
import json
import math
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from circuitdev.errors import DataError
from circuitdev.paths import PUBLISHED_ENV, published_dir, relative_to_repo
from circuitdev.measure.classify import with_classification
from circuitdev.schema import HEAD_CLASSES, sel_column

TokensRule = Literal["per-step-truncated", "label", "per-step-floor"]
TOPK_LABELS: tuple[str, ...] = (*HEAD_CLASSES, "unclassified")  # what class_breakdown_topK counts
TOPK_COLUMNS = ["panel", "revision", "tokens_b", "class", "count", "top_k", "ranking"]


@dataclass(frozen=True)
class PublishedPanel:
    name: str  # our panel / model name, used in every output table
    short: str  # what the book's prose calls it (and its glue keys): pythia, olmo, olmoe
    hf_id: str  # the `model` field of the authors' JSON files
    file_prefix: str  # per_revision/{file_prefix}_mechinterp_{revision}.json
    trajectory_file: str  # pr_trajectory/{trajectory_file}
    tokens_rule: TokensRule  # how tokens_b follows from the revision (method reference §6)
    tokens_per_step: int


# Token rules (method reference §6): Pythia 2,097,152 tok/step truncated to 0.001 B; OLMo the branch label
# "stepN-tokensTB" (the label wins over 2^21/step, §8.2); OLMoE floor(step * 4,194,304 / 1e9), which equals its label.
PUBLISHED_PANELS: dict[str, PublishedPanel] = {
    p.name: p
    for p in (
        PublishedPanel("pythia-1b", "pythia", "EleutherAI/pythia-1b", "pythia1b", "pythia_1b_phase1_trajectory.json",
                       "per-step-truncated", 2_097_152),
        PublishedPanel("olmo-1b-0724", "olmo", "allenai/OLMo-1B-0724-hf", "olmo", "olmo_phase1_trajectory.json",
                       "label", 2_097_152),
        PublishedPanel("olmoe-1b-7b-0924", "olmoe", "allenai/OLMoE-1B-7B-0924", "olmoe", "olmoe_phase1_trajectory.json",
                       "per-step-floor", 4_194_304),
    )
}
PANELS: tuple[str, ...] = tuple(PUBLISHED_PANELS)

_REVISION_RE = re.compile(r"^step(\d+)(?:-tokens(\d+)B)?$")
_HEAD_RE = re.compile(r"^L(\d+)_H(\d+)$")


# ----------------------------------------------------------------------------------------------------------- tokens


def parse_revision(revision: str) -> tuple[int, int | None]:
    """"step56000-tokens117B" -> (56000, 117); "step3000" -> (3000, None)."""
    m = _REVISION_RE.match(revision)
    if not m:
        raise DataError(f"revision {revision!r} is not of the form 'stepN' or 'stepN-tokensTB'")
    return int(m.group(1)), (int(m.group(2)) if m.group(2) else None)


def tokens_b_for_step(panel: str, step: int) -> float:
    """Tokens (billions) seen at `step` by the panel's tokens-per-step rule (the label is not consulted)."""
    info = _panel(panel)
    tokens = step * info.tokens_per_step
    if info.tokens_rule == "per-step-floor":
        return float(tokens // 10**9)
    if info.tokens_rule == "per-step-truncated":
        return tokens // 10**6 / 1000
    return round(tokens / 1e9, 3)  # label panels without a label: the unrounded estimate


def revision_tokens_b(panel: str, revision: str) -> float:
    """Tokens (billions) of a published revision, by the panel's rule (method reference §6)."""
    step, label = parse_revision(revision)
    info = _panel(panel)
    if info.tokens_rule == "label":
        if label is None:
            raise DataError(f"{panel} revision {revision!r} has no '-tokensTB' label, which its token count comes from")
        return float(label)
    tokens = tokens_b_for_step(panel, step)
    if label is not None and info.tokens_rule == "per-step-floor" and label != tokens:
        raise DataError(f"{panel} revision {revision!r}: label says {label}B but the rule gives {tokens:g}B")
    return tokens


def _panel(panel: str) -> PublishedPanel:
    if panel not in PUBLISHED_PANELS:
        raise DataError(f"unknown published model {panel!r}; the published panels are {', '.join(PANELS)}")
    return PUBLISHED_PANELS[panel]


# ------------------------------------------------------------------------------------------------------- validation


def _fail(path: Path, field: str, problem: str,
          fix: str = "re-fetch it with `circuitdev published fetch`") -> DataError:
    return DataError(f"{path}: field {field!r}: {problem}; {fix}")


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: not valid JSON ({err}); the file is truncated or corrupt, re-fetch it") from err
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err})") from err
    if not isinstance(data, dict):
        raise _fail(path, "<top level>", f"expected a JSON object, got {type(data).__name__}")
    return data


def _require(path: Path, data: dict, field: str):
    if field not in data:
        raise _fail(path, field, "missing (partial file?)")
    return data[field]


def _number(path: Path, field: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(path, field, f"expected a number, got {value!r}")
    if not math.isfinite(value):
        raise _fail(path, field, f"non-finite value {value!r}")
    return float(value)


def _as_list(path: Path, field: str, value) -> list:
    """Lists may be stored as real JSON lists or as Python-repr strings ("['step1', ...]"); accept both, safely."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError) as err:
            raise _fail(path, field, f"a string that is not a Python list literal ({err})") from err
    if not isinstance(value, (list, tuple)):
        raise _fail(path, field, f"expected a list, got {type(value).__name__}")
    return list(value)


def _head_key(path: Path, field: str, key: str) -> tuple[int, int]:
    m = _HEAD_RE.match(key)
    if not m:
        raise _fail(path, f"{field}.{key}", "head keys must look like 'L{layer}_H{head}'")
    return int(m.group(1)), int(m.group(2))


def _check_grid(path: Path, field: str, heads: set[tuple[int, int]]) -> tuple[int, int]:
    """All heads of an n_layers x n_heads grid must be present: a missing head means a partial file."""
    n_layers = max(h[0] for h in heads) + 1
    n_heads = max(h[1] for h in heads) + 1
    missing = [f"L{l}_H{h}" for l in range(n_layers) for h in range(n_heads) if (l, h) not in heads]
    if missing:
        raise _fail(path, field, f"{len(missing)} head(s) missing from the {n_layers}x{n_heads} grid, "
                                 f"e.g. {', '.join(missing[:3])} (partial file?)")
    return n_layers, n_heads


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
        panels = tuple(p for p in panels if _has_revisions(root, _panel(p))) or panels
    for panel in panels:
        table, rev_meta, feats, breakdown = _load_panel_revisions(root, _panel(panel))
        topk.append(breakdown)
        traj = root / "pr_trajectory" / _panel(panel).trajectory_file
        if traj.exists():
            pr, meta = _load_trajectory(traj, _panel(panel), table)
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
        data = _read_json(path)
        revision = path.stem.removeprefix(f"{info.file_prefix}_mechinterp_")
        if _require(path, data, "model") != info.hf_id:
            raise _fail(path, "model", f"{data['model']!r}, but {info.file_prefix}_* files hold {info.hf_id!r}")
        if _require(path, data, "revision") != revision:
            raise _fail(path, "revision", f"{data['revision']!r} disagrees with the file name ({revision!r})")
        step, _ = parse_revision(revision)
        tokens_b = revision_tokens_b(info.name, revision)
        sels = _require(path, data, "all_head_selectivity")
        if not isinstance(sels, dict) or not sels:
            raise _fail(path, "all_head_selectivity", "expected a non-empty object of 'L{l}_H{h}' -> selectivities")
        heads = {}
        for key, per_class in sels.items():
            layer, head = _head_key(path, "all_head_selectivity", key)
            if not isinstance(per_class, dict):
                raise _fail(path, f"all_head_selectivity.{key}", "expected an object of class -> selectivity")
            heads[layer, head] = [
                _number(path, f"all_head_selectivity.{key}.{c}", _require_class(path, key, per_class, c))
                for c in HEAD_CLASSES
            ]
        this_grid = _check_grid(path, "all_head_selectivity", set(heads))
        if grid is not None and this_grid != grid:
            raise _fail(path, "all_head_selectivity", f"{this_grid[0]}x{this_grid[1]} heads, but other {info.name} "
                                                      f"revisions have {grid[0]}x{grid[1]}")
        grid = this_grid
        threshold = _number(path, "selectivity_threshold", data.get("selectivity_threshold", 30.0))
        for (layer, head), values in heads.items():
            rows.append({"panel": info.name, "revision": revision, "tokens_b": tokens_b, "layer": layer,
                         "head": head, **dict(zip([sel_column(c) for c in HEAD_CLASSES], values)), "step": step})
        meta.append({"panel": info.name, "revision": revision, "file": str(path), "step": step,
                     "tokens_b": tokens_b, "n_heads": len(heads), "selectivity_threshold": threshold,
                     **{k: data.get(k) for k in ("n_examples", "n_examples_valid", "top_k", "ranking")}})
        listed = _as_list(path, "classifications", data.get("classifications", []))
        for i, c in enumerate(listed):
            if not isinstance(c, dict) or not {"layer", "head", "integral", "spread"} <= set(c):
                raise _fail(path, f"classifications[{i}]", "expected an object with layer, head, integral, spread")
            feats.append({"panel": info.name, "revision": revision, "layer": c["layer"], "head": c["head"],
                          "rank": c.get("rank"), "integral": c["integral"], "spread": c["spread"],
                          "best_class": c.get("best_class"), "classification": c.get("classification")})
        topk += _class_breakdown(path, data, info.name, revision, tokens_b, len(listed))
    table = pd.DataFrame(rows).sort_values(["step", "layer", "head"], ignore_index=True)
    table = with_classification(table, threshold=float(meta[0]["selectivity_threshold"]))
    table = table.drop(columns="best_selectivity")  # keep to the schema's columns
    meta = pd.DataFrame(meta).sort_values("step", ignore_index=True)
    feats = pd.DataFrame(feats, columns=["panel", "revision", "layer", "head", "rank", "integral", "spread",
                                         "best_class", "classification"])
    topk = pd.DataFrame(topk, columns=TOPK_COLUMNS)
    topk["count"] = topk["count"].astype("int64")
    return table, meta, feats, topk


def _class_breakdown(path: Path, data: dict, panel: str, revision: str, tokens_b: float, listed: int) -> list[dict]:
    """The rows of a file's `class_breakdown_topK` (absent or empty: none). Each count a whole number >= 0 of a
    known class, and together exactly the heads the file's `classifications` lists."""
    breakdown = data.get("class_breakdown_topK")
    if not breakdown:
        return []
    if not isinstance(breakdown, dict):
        raise _fail(path, "class_breakdown_topK",
                    f"expected an object of class -> count, got {type(breakdown).__name__}")
    rows = []
    for cls, value in breakdown.items():
        field_name = f"class_breakdown_topK.{cls}"
        if cls not in TOPK_LABELS:
            raise _fail(path, field_name, f"unknown class {cls!r}; known: {', '.join(TOPK_LABELS)}")
        count = _number(path, field_name, value)
        if count < 0 or count != int(count):
            raise _fail(path, field_name, f"expected a whole number of heads >= 0, got {value!r}")
        rows.append({"panel": panel, "revision": revision, "tokens_b": tokens_b, "class": cls, "count": int(count),
                     "top_k": data.get("top_k"), "ranking": data.get("ranking")})
    total = sum(r["count"] for r in rows)
    if total != listed:
        raise _fail(path, "class_breakdown_topK", f"counts {total} heads, but `classifications` lists {listed}")
    return rows


def _require_class(path: Path, key: str, per_class: dict, head_class: str):
    if head_class not in per_class:
        raise _fail(path, f"all_head_selectivity.{key}.{head_class}", "missing (partial file?)")
    return per_class[head_class]


def _load_trajectory(path: Path, info: PublishedPanel, table: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    data = _read_json(path)
    if _require(path, data, "model") != info.hf_id:
        raise _fail(path, "model", f"{data['model']!r}, expected {info.hf_id!r}")
    revisions = [str(r) for r in _as_list(path, "revisions", _require(path, data, "revisions"))]
    n = len(revisions)
    for field in ("ckpt_step", "ckpt_tokens_B"):
        if field in data and len(_as_list(path, field, data[field])) != n:
            raise _fail(path, field, f"{len(_as_list(path, field, data[field]))} entries for {n} revisions")
    steps = _as_list(path, "ckpt_step", data.get("ckpt_step", [parse_revision(r)[0] for r in revisions]))
    for r, s in zip(revisions, steps):
        if parse_revision(r)[0] != int(s):
            raise _fail(path, "ckpt_step", f"step {s} does not match revision {r!r}")
    for r, t in zip(revisions, _as_list(path, "ckpt_tokens_B", data.get("ckpt_tokens_B", []))):
        if abs(_number(path, "ckpt_tokens_B", t) - revision_tokens_b(info.name, r)) > 1e-6:
            raise _fail(path, "ckpt_tokens_B", f"{t} for {r!r}, but the {info.tokens_rule} rule gives "
                                               f"{revision_tokens_b(info.name, r)}")
    pr = _require(path, data, "pr")
    if not isinstance(pr, dict) or not pr:
        raise _fail(path, "pr", "expected a non-empty object of 'L{l}_H{h}' -> list of PR values")
    rows = []
    for key, values in pr.items():
        layer, head = _head_key(path, "pr", key)
        values = _as_list(path, f"pr.{key}", values)
        if len(values) != n:
            raise _fail(path, f"pr.{key}", f"{len(values)} values for {n} revisions (partial file?)")
        rows += [{"revision": r, "layer": layer, "head": head, "pr": _number(path, f"pr.{key}", v)}
                 for r, v in zip(revisions, values)]
    heads = {(r["layer"], r["head"]) for r in rows}
    grid = _check_grid(path, "pr", heads)
    table_grid = (int(table["layer"].max()) + 1, int(table["head"].max()) + 1)
    if grid != table_grid:
        raise _fail(path, "pr", f"{grid[0]}x{grid[1]} heads, but the per-revision files have "
                                f"{table_grid[0]}x{table_grid[1]}")
    meta = {"panel": info.name, "file": str(path), "n_revisions": n,
            **{k: data.get(k) for k in ("n_examples", "seq_len", "seed", "dtype", "n_layer", "num_heads", "head_dim")}}
    return pd.DataFrame(rows), meta


# ------------------------------------------------------------------------------------------------------- ablations

_PANEL_BY_HF_ID = {p.hf_id: p.name for p in PUBLISHED_PANELS.values()}


def load_ablation(directory: str | os.PathLike) -> pd.DataFrame:
    """Final-checkpoint ablation files -> one row per (file, condition, metric).

    Columns: model, file, task ("induction" for the synthetic batch, "greater-than"), condition, n_ablated,
    heads ("L4H4 L7H0 ..."), metric (acc_top1, loss, top1_above, ...), value, n_examples (the file's batch size:
    the denominator of its accuracies; NaN when the file does not give it). Empty when `ablation/` is absent.
    """
    columns = ["model", "file", "task", "condition", "n_ablated", "heads", "metric", "value", "n_examples"]
    rows = []
    for path in sorted((Path(directory) / "ablation").glob("*.json")):
        data = _read_json(path)
        model = _PANEL_BY_HF_ID.get(_require(path, data, "model"))
        if model is None:
            raise _fail(path, "model", f"unknown model {data['model']!r}; known: {', '.join(_PANEL_BY_HF_ID)}")
        task, entries, name_key = ("induction", data["results"], "name") if "results" in data else \
            ("greater-than", _require(path, data, "conditions"), "condition")
        list_field = "results" if task == "induction" else "conditions"
        n_examples = _number(path, "n_examples", data["n_examples"]) if "n_examples" in data else np.nan
        for i, entry in enumerate(_as_list(path, list_field, entries)):
            field = f"{list_field}[{i}]"
            if not isinstance(entry, dict) or name_key not in entry:
                raise _fail(path, field, f"expected an object with {name_key!r}")
            spec = entry.get("spec", {}) or {}
            heads = " ".join(f"L{int(l)}H{int(h)}" for l, hs in sorted(spec.items(), key=lambda kv: int(kv[0]))
                             for h in sorted(hs))
            for metric, value in entry.items():
                if metric in (name_key, "spec", "n_ablated", "wall_s") or isinstance(value, (dict, list, str)):
                    continue
                rows.append({"model": model, "file": path.name, "task": task, "condition": entry[name_key],
                             "n_ablated": entry.get("n_ablated"), "heads": heads, "metric": metric,
                             "value": _number(path, f"{field}.{metric}", value), "n_examples": n_examples})
    return pd.DataFrame(rows, columns=columns)


def authors_ablation(ablation: pd.DataFrame, model: str, *, task: str = "induction") -> pd.DataFrame:
    """The authors' final-checkpoint ablations of one model and task, one row per condition: condition (baseline /
    screen / matched_random / upper_bound / other), label (the authors' name), seed, n_ablated, heads, drawn_for,
    n_examples, then the task's metrics (induction: acc_top1, loss, acc_top5, mean_logit_B; greater-than:
    top1_above, prob_above, prob_below, logit_diff_above_below). `ablation` is `load_ablation(...)`
    (`PublishedData.ablation`). Empty when absent.

    drawn_for names, on a control row, the condition whose head set the control was drawn for, found from the
    heads themselves (`control_target`): the authors' matched random and upper bound belong to the set they were
    drawn for (e.g. the spectral top-6), which need not be the induction circuit."""
    from circuitdev.schema import MATCHED_RANDOM_SEED

    cols = ["condition", "label", "seed", "n_ablated", "heads", "drawn_for", "n_examples"]
    ab = ablation[(ablation["model"] == model) & (ablation["task"] == task)] if len(ablation) else ablation
    if ab.empty:
        return pd.DataFrame(columns=cols + ["acc_top1", "loss"])
    ab = ab.assign(n_examples=ab["n_examples"] if "n_examples" in ab.columns else np.nan)
    wide = ab.pivot_table(index=["condition", "n_ablated", "heads"], columns="metric", values="value").reset_index()
    sizes = ab.groupby("condition")["n_examples"].first()
    metrics = [m for m in ("acc_top1", "loss", "acc_top5", "mean_logit_B", "top1_above", "prob_above", "prob_below",
                           "logit_diff_above_below") if m in wide.columns]
    metrics += sorted(c for c in wide.columns if c not in metrics and c not in ("condition", "n_ablated", "heads"))

    def kind(label: str) -> str:
        for key, name in (("baseline", "baseline"), ("induction_screen", "screen"),
                          ("matched_random", "matched_random"), ("upper bound", "upper_bound")):
            if (label == key) if key == "baseline" else (key in label):
                return name
        return "other"

    wide = wide.set_index("condition").reindex(pd.unique(ab["condition"])).reset_index()  # the file's order
    wide["label"] = wide["condition"]
    wide["n_examples"] = wide["label"].map(sizes).astype("Int64")
    wide.columns.name = None
    wide["condition"] = wide["label"].map(kind)
    wide["seed"] = np.where(wide["condition"] == "matched_random", MATCHED_RANDOM_SEED, np.nan)  # their one seed
    sets = {label: _spec_of(heads) for label, heads in zip(wide["label"], wide["heads"])}
    wide["drawn_for"] = [control_target(kind_, sets[label], {k: v for k, v in sets.items() if k != label
                                                             and kind(k) not in ("baseline", "matched_random",
                                                                                 "upper_bound")})
                         for kind_, label in zip(wide["condition"], wide["label"])]
    return wide.reindex(columns=cols + metrics)


def _spec_of(heads: str) -> dict[int, set[int]]:
    """"L4H4 L7H0 L7H1" -> {4: {4}, 7: {0, 1}}."""
    spec: dict[int, set[int]] = {}
    for name in str(heads or "").split():
        layer, head = name.removeprefix("L").split("H")
        spec.setdefault(int(layer), set()).add(int(head))
    return spec


def control_target(condition: str, spec: dict[int, set[int]], candidates: dict[str, dict[int, set[int]]]) -> str:
    """The candidate head set (label -> spec) a control row was drawn for, from the heads alone; "" for a row that
    is not a control or matches no candidate. A matched random set has the candidate's layers and per-layer counts
    and none of its heads; an upper bound holds every head of exactly the candidate's layers (it contains the
    candidate). The first candidate that fits, in the given order."""
    if condition == "matched_random":
        profile = {layer: len(heads) for layer, heads in spec.items()}
        for label, other in candidates.items():
            if other and {l: len(h) for l, h in other.items()} == profile and \
                    not any(spec[l] & other.get(l, set()) for l in spec):
                return label
    elif condition == "upper_bound":
        for label, other in candidates.items():
            if other and set(other) == set(spec) and all(other[l] <= spec[l] for l in other):
                return label
    return ""
