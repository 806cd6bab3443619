"""Adaptive revision refinement: probe more checkpoints where a per-revision metric changes most (issue 14).

A panel's revisions are a fixed grid, so an event (the sink appearing, the induction heads crossing 50x) is only
known to lie between two of them. `refine_panel` narrows that window:

1. on the probed grid, find the adjacent pair of revisions with the largest change of the metric M (ties: the
   earliest pair) -- the event window;
2. inside the window, take the adjacent pair of probed revisions with the largest change of M (ties: the one
   widest in log tokens) that has a candidate checkpoint strictly between its ends, probe the candidate nearest
   the pair's midpoint in log tokens (a pair starting at step 0 counts from its first candidate), and record it
   in the panel's refined list (`sources.refined.add_refined`);
3. repeat until `max_new` revisions are probed, or no changing pair inside the window has a candidate left.

So every new revision lies strictly inside the original window or one of its refined halves, and the window of the
event shrinks towards the spacing of the candidates. New revisions are probed with the configuration of the panel's
existing records and stored like any other record: every reader, `circuitdev show --panel` and every page include
them (`load_panel(NAME, results_dir=DIR)`).

Candidates (`candidate_revisions`): a folder panel offers its `candidates:` list (the toy trainer writes its dense
checkpoint grid there) and any `step<N>` checkpoint sub-folder on disk; a hub panel offers the repository's
`step<N>` branches (`list_repo_refs`, cached in DIR/<panel>/candidates.yaml for offline use), else offline Pythia's
published step grid. The metric is any function dev -> revisions + `value` (`analysis.findings.REVISION_METRICS`,
wired in by `circuitdev refine`): this stage does not import the findings.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from circuitdev.atomic import write_atomic
from circuitdev.errors import ConfigError, DataError, ModelUnavailableError
from circuitdev.paths import results_dir as default_results_dir
from circuitdev.sources.hub_revisions import list_hub_branches
from circuitdev.sources.panels import Panel, load_panel
from circuitdev.sources.revision import Revision
from circuitdev.sources.records import PanelRecords
from circuitdev.sources.refined import add_refined

CANDIDATES_FILE = "candidates.yaml"  # DIR/<panel>/: the hub's branch list, cached for offline refinement
_STEP_DIR = re.compile(r"^step(?P<step>\d+)(?:-tokens(?P<tokens_b>\d+)B)?$")
# Pythia's published checkpoints (Biderman et al. 2023): step0, log-spaced 1..512, then every 1000 to 143000.
PYTHIA_STEPS = (0, *(2 ** i for i in range(10)), *range(1000, 143001, 1000))

Metric = Callable[[pd.DataFrame], pd.DataFrame]  # dev -> one row per revision (token order) with `value`


@dataclass(frozen=True)
class RefineStep:
    """One step of a refinement: the pair it split, the metric's change across it, the revision probed."""

    left: Revision
    right: Revision
    change: float  # |M(right) - M(left)|
    chosen: Revision | None  # None: the refinement stopped here
    note: str = ""

    def describe(self, metric: str = "M") -> str:
        pair = f"{self.left.name} ({_tokens(self.left)}) -> {self.right.name} ({_tokens(self.right)})"
        if self.chosen is None:
            return f"stop: {self.note}"
        return (f"{metric} changes by {self.change:+.4g} across {pair}; probing {self.chosen.name} "
                f"({_tokens(self.chosen)}, nearest the log-midpoint)")


def _tokens(rev: Revision) -> str:
    t = rev.tokens
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if t >= size:
            return f"{t / size:.4g}{unit} tokens"
    return f"{t} tokens"


# ------------------------------------------------------------------------------------------------------ candidates


def candidate_revisions(panel: Panel, *, results_dir: str | os.PathLike | None = None) -> tuple[Revision, ...]:
    """Checkpoints of the panel that are not among its revisions (file + refined) and could be probed, in token
    order. Hub panels offline with no cached list and no known grid raise ModelUnavailableError."""
    root = Path(results_dir) if results_dir is not None else default_results_dir()
    have = load_panel(panel, results_dir=root)
    names, tokens = set(have.revision_names), {r.tokens for r in have.revisions}
    pool = _folder_candidates(panel) if panel.is_local else _hub_candidates(panel, root)
    out = {r.name: r for r in pool if r.name not in names and r.tokens not in tokens}
    return tuple(sorted(out.values(), key=lambda r: r.tokens))


def _folder_candidates(panel: Panel) -> list[Revision]:
    def complete(name: str) -> bool:
        folder = Path(panel.model) / name
        return (folder / "config.json").is_file() and any(
            (folder / f).is_file() for f in ("model.safetensors", "model.safetensors.index.json"))

    out = [r for r in panel.candidates if complete(r.name)]
    per_step = panel.tokens_per_step or _tokens_per_step(panel)
    if per_step and Path(panel.model).is_dir():
        listed = {r.name for r in out}
        for folder in Path(panel.model).iterdir():
            m = _STEP_DIR.match(folder.name)
            if m and folder.name not in listed and complete(folder.name):
                out.append(Revision(folder.name, int(m["step"]) * per_step, int(m["step"])))
    return out


def _tokens_per_step(panel: Panel) -> int | None:
    """The panel's tokens per step when every revision with a step > 0 agrees on it, else None."""
    ratios = {r.tokens // r.step for r in panel.revisions if r.step and r.tokens % r.step == 0}
    exact = all(r.tokens == r.step * next(iter(ratios)) for r in panel.revisions if r.step) if ratios else False
    return next(iter(ratios)) if len(ratios) == 1 and exact else None


def _hub_candidates(panel: Panel, root: Path) -> list[Revision]:
    import yaml

    cache = root / panel.name / CANDIDATES_FILE
    try:
        branches = list_hub_branches(panel.model)
    except ModelUnavailableError as err:
        if cache.is_file():
            return [Revision(r["name"], int(r["tokens"]), r.get("step"))
                    for r in (yaml.safe_load(cache.read_text()) or {}).get("revisions") or []]
        if panel.model.lower().startswith("eleutherai/pythia") and panel.tokens_per_step:
            return [Revision(f"step{s}", s * panel.tokens_per_step, s) for s in PYTHIA_STEPS]
        raise ModelUnavailableError(
            f"panel {panel.name}: no candidate revisions of {panel.model} are known offline ({err}). Run "
            f"`circuitdev refine` once online (it caches the repository's branches in {cache}), or list the "
            "checkpoints to draw from under `candidates:` in the panel file") from None
    out = []
    for name in branches:
        m = _STEP_DIR.match(name)
        if not m:
            continue
        step = int(m["step"])
        tokens = int(m["tokens_b"]) * 10**9 if m["tokens_b"] else (step * panel.tokens_per_step
                                                                     if panel.tokens_per_step else None)
        if tokens is not None:
            out.append(Revision(name, tokens, step))
    out.sort(key=lambda r: r.tokens)
    write_atomic(cache, yaml.safe_dump({"model": panel.model, "revisions": [
        {"name": r.name, "tokens": r.tokens, "step": r.step} for r in out]}, sort_keys=False))
    return out


# ------------------------------------------------------------------------------------------------------ the loop


def _log(tokens: float) -> float:
    return math.log(max(float(tokens), 1.0))


def _values(table: pd.DataFrame, panel: Panel, metric: Metric) -> tuple[list[Revision], list[float]]:
    m = metric(table)
    if "value" not in m.columns or "revision" not in m.columns:
        raise ConfigError("a refinement metric must return one row per revision with `revision` and `value`")
    by_name = {r.name: r for r in panel.revisions}
    revs = [by_name[r] for r in m["revision"]]
    order = sorted(range(len(revs)), key=lambda i: revs[i].tokens)
    return [revs[i] for i in order], [float(m["value"].iloc[i]) for i in order]


def refine_panel(
    panel: Panel,
    *,
    metric: Metric,
    max_new: int,
    metric_name: str = "M",
    results_dir: str | os.PathLike | None = None,
    probe: Callable | None = None,
    batch_size: int | None = None,
    device: str | None = None,
    log: Callable[[str], None] | None = None,
) -> list[RefineStep]:
    """Probe up to `max_new` candidate revisions inside the window of the largest change of `metric` (module
    docstring). Every revision of the panel must have a record. `probe` defaults to `sources.run.probe_panel`
    (tests pass a stand-in); `batch_size` / `device` only change speed. Returns the steps, the last one a stop
    when the candidates ran out first."""
    if max_new < 1:
        raise ConfigError(f"--max-new must be >= 1, got {max_new}")
    root = Path(results_dir) if results_dir is not None else default_results_dir()
    say = log or (lambda msg: None)
    base = panel
    if probe is None:
        from circuitdev.sources.run import probe_panel as probe

    cands = candidate_revisions(base, results_dir=root)
    if not cands:
        raise DataError(
            f"panel {base.name}: no candidate checkpoint to add (every known one is probed, or none is available). "
            + ("A toy panel lists its dense grid under `candidates:` in its panel file: retrain it with "
               "`circuitdev toy train` if that list or its checkpoint folders are missing"
               if base.is_local else "Hub panels draw from the repository's branches"))
    steps: list[RefineStep] = []
    window: tuple[int, int] | None = None
    while len(steps) < max_new:
        pan = load_panel(base, results_dir=root)
        read = PanelRecords(root, pan.name, pan).read()  # raises when a revision has no record: probe it first
        table, config = read.table, read.config
        revs, values = _values(table, pan, metric)
        pairs = [(i, abs(values[i + 1] - values[i])) for i in range(len(revs) - 1)]
        if window is None:
            if not pairs or max(c for _, c in pairs) <= 0:
                steps.append(RefineStep(revs[0], revs[-1], 0.0, None, f"{metric_name} does not change between "
                                        "any two revisions: there is no event to refine"))
                break
            i = max(pairs, key=lambda p: (p[1], -p[0]))[0]  # the largest change; ties: the earliest pair
            window = (revs[i].tokens, revs[i + 1].tokens)
            say(f"{base.name}: event window of {metric_name}: {revs[i].name} -> {revs[i + 1].name} "
                f"(change {values[i + 1] - values[i]:+.4g})")
        inside = [(i, c) for i, c in pairs if window[0] <= revs[i].tokens and revs[i + 1].tokens <= window[1]]
        options = []
        for i, change in inside:
            between = [r for r in cands if revs[i].tokens < r.tokens < revs[i + 1].tokens]
            if change > 0 and between:
                span = _log(revs[i + 1].tokens) - _log(revs[i].tokens)
                options.append((change, span, -i, i, between))
        if not options:
            steps.append(RefineStep(revs[0], revs[-1], 0.0, None, "no candidate checkpoint lies between the ends of "
                                    "any pair inside the event window across which the metric changes"))
            say(f"{base.name}: {steps[-1].describe(metric_name)}")
            break
        change, _, _, i, between = max(options, key=lambda o: o[:3])
        # from 0 tokens (initialisation) log has no midpoint: start the pair at its first candidate instead
        mid = (_log(revs[i].tokens or between[0].tokens) + _log(revs[i + 1].tokens)) / 2
        chosen = min(between, key=lambda r: (abs(_log(r.tokens) - mid), r.tokens))
        step = RefineStep(revs[i], revs[i + 1], change, chosen)
        say(f"{base.name}: {step.describe(metric_name)}")
        fields = {k: v for k, v in config.items() if k not in ("batch_size", "device")}
        if batch_size is not None:
            fields["batch_size"] = batch_size
        probe(pan.with_revisions([chosen]), revisions=[chosen.name], config=pan.probe_config(**fields),
              results_dir=root, device=device, progress=False)
        add_refined(root, base.name, chosen, metric=metric_name, between=[revs[i].name, revs[i + 1].name],
                    change=round(float(change), 6))
        cands = tuple(r for r in cands if r.name != chosen.name)
        steps.append(step)
    return steps
