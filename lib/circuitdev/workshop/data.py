"""What the sessions load, found through the library so that a session runs from any working directory.

    toy_model("toy-pythia")            a toy checkpoint (the final one by default), eager attention, fp32, CPU;
                                       the panel is trained first when its checkpoints are missing (~3 min on 1 core)
    toy_config("toy-pythia")           the panel's probe configuration (seq_len 64, the BOS at position 0, ...)
    toy_table("toy-pythia")            its developmental table from the probe records in `circuitdev.paths.results_dir()`,
                                       probing the revisions that have no record yet
    train_mini("gpt_neox")             the participant's own run: the `mini` toy preset, trained live (a progress bar,
                                       a live loss curve in a notebook) into the workshop's folder, or reused;
                                       `mini_table(run)` probes its checkpoints into <workshop>/results
    training_plan()                    this machine's torch thread count for training, measured (`workshop.machine`),
                                       and how long the mini run should take here
    windows("backcopy", n)             training windows of one kind from the toy corpus (text, periodic, repeat, backcopy)
    published()                        the authors' files (`circuitdev.paths.published_dir()`), or None
                                       (`published_note()` says why, naming the missing files of an incomplete copy)

The workshop's own folder, `workshop.paths.workshop_dir()` ($CIRCUITDEV_WORKSHOP, else <data>/toy/_workshop), holds
everything a session writes: the mini run (its checkpoints under toy/, its panel file under panels/, its loss log), the probe records
of the mini run (results/) and this machine's measured thread count (machine.json). The toy panels and their records
in the data folder are only read (or trained / probed when missing, as `circuitdev toy train` and `probe` would). A
mini run pre-trained in the data folder (`circuitdev toy train --preset mini`) is reused from there, read only.

Training and probing the same panel from two sessions at once (the book's pipeline runs sessions in parallel) is
serialised by a lock file next to the checkpoints.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from circuitdev import paths
from circuitdev.errors import ConfigError
from circuitdev.toy.recipe import ToyRecipe, recipe_of
from circuitdev.toy.train import panel_file, panel_ready
from circuitdev.workshop.paths import mini_recipe, workshop_dir, workshop_results_dir

DEFAULT_PANEL = "toy-pythia"  # the GPT-NeoX-like toy: induction heads and, in layers 2-3, attention sinks
WINDOW_KINDS = ToyRecipe().window_kinds  # what the default toy panels train on: text, periodic, repeat, backcopy
__all__ = ["DEFAULT_PANEL", "WINDOW_KINDS", "MiniRun", "attention_patterns", "ensure_toy", "final_revision", "is_mini",
           "mini_root", "mini_table", "prepare_sessions", "published", "published_note", "published_or_problem",
           "published_problem", "toy_config", "toy_model", "toy_table", "train_mini", "training_plan", "windows"]


@contextlib.contextmanager
def _lock(name: str) -> Iterator[None]:
    """An exclusive lock on <data>/toy/_workshop/.<name>.lock (POSIX); a no-op where fcntl is missing."""
    folder = workshop_dir()
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(folder / f".{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def is_mini(panel: str) -> bool:
    """A panel of the `mini` preset (the participant's run, which lives in the workshop's folder)."""
    try:
        return recipe_of(panel)[1] is mini_recipe()
    except ConfigError:
        return False


def mini_root(panel: str) -> Path:
    """The data root holding the mini run `panel` (its toy/ and panels/): the workshop's folder, where the sessions
    train it; else the data folder when it was pre-trained there (`circuitdev toy train --preset mini`: read only);
    else the workshop's folder, where it will be trained."""
    recipe = recipe_of(panel)[1]
    for root in (workshop_dir(), paths.data_dir()):
        if panel_ready(panel, recipe, data_dir=root):
            return root
    return workshop_dir()


def _panel(panel: str, results_dir: Path | None = None):
    """The Panel of a toy panel name: a mini run's panel file in its root (`mini_root`), else the data folder's."""
    from circuitdev.sources.panels import load_panel

    source = panel_file(panel, mini_root(panel)) if is_mini(panel) else panel
    return load_panel(source, results_dir=results_dir)


def ensure_toy(panel: str = DEFAULT_PANEL, *, progress: bool = False) -> dict:
    """Train the toy panel's checkpoints when they are missing (or from another recipe); reuse them otherwise. A mini
    run is trained (without the live view) into the workshop's folder when it is missing."""
    from circuitdev.toy.train import train_family

    if is_mini(panel):
        run = train_mini(recipe_of(panel)[0], live=False)
        return {"panel": panel, "reused": run.reused, "seconds": run.seconds}
    family, recipe = recipe_of(panel)
    if panel_ready(panel, recipe):
        return {"panel": panel, "reused": True, "seconds": 0.0}
    with _lock(panel):
        if panel_ready(panel, recipe):  # trained meanwhile by another session
            return {"panel": panel, "reused": True, "seconds": 0.0}
        print(f"{panel}: its checkpoints are missing; training them now (a few minutes, once) ...", flush=True)
        t0 = time.time()
        # one thread, as `circuitdev toy train` does: the checkpoints (and so the book's numbers) depend on it
        summary = train_family(family, recipe, progress=progress)
        print(f"trained {panel} in {time.time() - t0:.0f} s")
    return summary


def prepare_sessions() -> None:
    """Everything the five sessions read, trained / probed when missing (before the day, or before timing them):
    toy-pythia and its records, and toy-olmo / toy-olmoe too when the authors' files are absent (session 5 then runs
    on the three toy panels)."""
    panels = [DEFAULT_PANEL] + (["toy-olmo", "toy-olmoe"] if published() is None else [])
    for panel in panels:
        ensure_toy(panel)
        toy_table(panel)


def toy_config(panel: str = DEFAULT_PANEL, **overrides):
    """The panel's probe configuration (its panel file's defaults), with `overrides`."""
    if is_mini(panel) or not panel_file(panel).is_file():
        ensure_toy(panel, progress=False)
    return _panel(panel).probe_config(**overrides)


def final_revision(panel: str = DEFAULT_PANEL) -> str:
    """The toy panel's last checkpoint ("step2500" for toy-pythia), from its recipe (no file read)."""
    return recipe_of(panel)[1].final_revision


def toy_model(panel: str = DEFAULT_PANEL, revision: str | None = None):
    """A toy checkpoint (default: the panel's final revision; a refined one too), eager attention, fp32, on the CPU,
    in eval mode."""
    from circuitdev.sources.loading import load_revision

    ensure_toy(panel)
    root = workshop_results_dir() if is_mini(panel) else paths.results_dir()
    pan = _panel(panel, results_dir=root)  # with the revisions `circuitdev refine` added
    return load_revision(pan, revision or final_revision(panel), device="cpu", progress=False)


def toy_table(panel: str = DEFAULT_PANEL, *, results_dir: Path | None = None):
    """The panel's developmental table (one row per revision x head) from its probe records; revisions without a
    usable record (missing, corrupt, or of other weights: the panel was retrained since) are probed first with the
    panel's defaults (~1.5 s each)."""
    from circuitdev.sources.records import load_panel_table, panel_status
    from circuitdev.sources.run import probe_panel

    default = workshop_results_dir() if is_mini(panel) else paths.results_dir()
    root = Path(results_dir) if results_dir is not None else default
    ensure_toy(panel)
    pan = _panel(panel, results_dir=root)
    status = panel_status(root, pan)
    todo = status.loc[status["state"] != "complete", "revision"].tolist()
    if todo:
        with _lock(f"probe-{panel}"):
            print(f"probing {len(todo)} revision(s) of {panel} without a usable record, into {root} ...", flush=True)
            probe_panel(pan, revisions=todo, results_dir=root, progress=False)
    return load_panel_table(root, pan, on_missing="skip")


# ------------------------------------------------------------------------------------------ the participant's run


@dataclass
class MiniRun:
    panel: str
    family: str
    steps: list[int] = field(default_factory=list)  # logged steps
    losses: list[float] = field(default_factory=list)  # training loss at those steps
    seconds: float = 0.0  # training time (of the run that made the checkpoints, when reused; 0: not known)
    reused: bool = False
    threads: int | None = None  # torch threads it trained with (None: not known)
    root: Path | None = None  # the data root of its checkpoints and panel file (`mini_root`)

    @property
    def tokens_per_step(self) -> int:
        return recipe_of(self.panel)[1].tokens_per_step


def training_plan(*, log=print):
    """This machine's torch thread count for training and how long the mini run should take with it
    (`circuitdev.workshop.machine.ThreadChoice`): the one `circuitdev workshop doctor` measured and stored, else
    measured now (a few seconds) and stored. Print `.summary()` before training."""
    from circuitdev.workshop import machine

    return machine.current(log=log)


def _loss_logs(panel: str) -> list[Path]:
    """Where a run's loss log may be: the workshop's folder, then the data folder's default workshop folder (a run
    pre-trained there)."""
    name = f"{panel}-loss.json"
    return list(dict.fromkeys([workshop_dir() / name, paths.toy_dir() / "_workshop" / name]))


def train_mini(family: str = "gpt_neox", *, retrain: bool = False, live: bool = True, log_every: int = 10,
               threads: int | None = None) -> MiniRun:
    """Train the `mini` preset of one family into the workshop's folder (or reuse its checkpoints), showing a progress
    bar and a live loss curve in a notebook. `retrain=True` trains again from scratch (the recipe is seeded: the same
    heads). `threads`: torch threads (default: this machine's measured choice, `training_plan()`). The loss log is
    kept in the workshop's folder, so a reused run still shows its curve and the time it took."""
    from circuitdev.toy.train import train_family

    recipe = mini_recipe()
    panel = recipe.panel_name(family)
    run = MiniRun(panel, family)
    view = None
    with _lock(panel):
        root = workshop_dir() if retrain else mini_root(panel)
        if not retrain and panel_ready(panel, recipe, data_dir=root):
            run.reused, run.root = True, root
        else:
            run.threads = threads or training_plan().threads
            if live:
                from circuitdev.workshop.plots import LiveTraining

                view = LiveTraining(panel, recipe.steps)

            def on_log(step: int, loss: float) -> None:
                run.steps.append(int(step))
                run.losses.append(float(loss))
                if view is not None:
                    view.update(step, loss)

            t0 = time.time()
            summary = train_family(family, recipe, workshop_dir(), progress=False, force=retrain, on_log=on_log,
                                   log_every=log_every, threads=run.threads)
            run.seconds, run.reused, run.root = time.time() - t0, bool(summary.get("reused")), workshop_dir()
            if not run.reused:
                from circuitdev.atomic import write_atomic

                write_atomic(_loss_logs(panel)[0], json.dumps(
                    {"recipe_hash": recipe.recipe_hash(), "steps": run.steps, "losses": run.losses,
                     "seconds": run.seconds, "threads": run.threads}))
        if run.reused:
            for log in _loss_logs(panel):
                try:
                    stored = json.loads(log.read_text())
                except (OSError, ValueError):
                    continue
                if stored.get("recipe_hash") == recipe.recipe_hash():
                    run.steps, run.losses, run.seconds = stored["steps"], stored["losses"], stored["seconds"]
                    run.threads = stored.get("threads")
                    break
            else:  # trained outside the workshop: the time training recorded with the checkpoints, if any
                run.seconds = trained_seconds(panel, run.root)
    if live:
        if view is None:
            from circuitdev.workshop.plots import LiveTraining

            view = LiveTraining(panel, recipe.steps)
        view.finish(run)
    return run


def trained_seconds(panel: str, root: Path | None = None) -> float:
    """The training time `circuitdev toy train` recorded with a toy panel's checkpoints (recipe.json), else 0."""
    try:
        recipe_file = Path(root or mini_root(panel)) / "toy" / panel / "recipe.json"
        return float(json.loads(recipe_file.read_text())["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


def timing_note(run: MiniRun, plan=None) -> str:
    """One line on the run's training time as measured here, beside the range this machine's plan expected."""
    from circuitdev.workshop.machine import duration

    where = "" if run.root is None or run.root == workshop_dir() else f" (pre-trained in {run.root})"
    if run.reused:
        took = f"trained earlier in {duration(run.seconds)}" if run.seconds else "trained earlier (time not recorded)"
        return f"{run.panel}: reused{where}, {took}; `retrain = True` trains it again, live"
    threads = f" with {run.threads} torch thread{'s' * ((run.threads or 1) > 1)}" if run.threads else ""
    line = f"{run.panel}: trained in {duration(run.seconds)}{threads} on this machine"
    if plan is not None:
        lo, hi = plan.expected_range()
        verdict = "as expected" if lo <= run.seconds <= hi else \
            "faster than expected" if run.seconds < lo else "slower than expected: is something else running?"
        line += f" -- expected {duration(lo)} to {duration(hi)} here, {verdict}"
    return line


def mini_table(run: MiniRun | str, *, n_nulls: int = 0):
    """Probe every checkpoint of the participant's run (resumable, ~1 s each) into the workshop's own results folder
    and return its developmental table."""
    from circuitdev.sources.records import load_panel_table
    from circuitdev.sources.run import probe_panel

    root = workshop_results_dir()
    pan = _panel(run.panel if isinstance(run, MiniRun) else run, results_dir=root)
    cfg = pan.probe_config(n_nulls=n_nulls)
    with _lock(f"probe-{pan.name}"):
        probe_panel(pan, config=cfg, results_dir=root, progress=False)
    return load_panel_table(root, pan, config=cfg)


# -------------------------------------------------------------------------------------------------- inputs


def windows(kind: str, n: int = 64, *, seed: int = 1):
    """(n, T) int64 training windows of one kind (`WINDOW_KINDS`: "text", "periodic", "repeat", "backcopy") from the
    default toy recipe's corpus, with the BOS at position 0 as in training."""
    from circuitdev.toy.train import sample_windows

    if kind not in WINDOW_KINDS:
        raise ConfigError(f"unknown window kind {kind!r}; the kinds are {', '.join(WINDOW_KINDS)}")
    return sample_windows(kind, n, ToyRecipe(), seed=seed)


def attention_patterns(model, tokens, *, layers=None):
    """Full attention patterns {layer: (N, H, T, T) float32} of an eager toy model on `tokens` (small inputs only:
    N x L x H x T x T floats)."""
    import numpy as np
    import torch

    ids = torch.as_tensor(np.asarray(tokens), dtype=torch.long)
    with torch.no_grad():
        out = model(input_ids=ids, output_attentions=True)
    chosen = range(len(out.attentions)) if layers is None else layers
    return {layer: out.attentions[layer].float() for layer in chosen}


def published():
    """The authors' published files (`circuitdev.paths.published_dir()`: $CIRCUITDEV_PUBLISHED, else
    <data>/published) as `PublishedData`, or None when the folder is absent, incomplete or unreadable
    (`published_problem()` says which)."""
    return published_or_problem()[0]


def published_problem() -> str | None:
    """Why `published()` is None: the folder is absent, or the reader's one line (an incomplete copy: the files it
    lacks and the command that completes it); None when the files are there."""
    return published_or_problem()[1]


def published_or_problem():
    """(`PublishedData`, None) when the authors' files are usable, else (None, why not): `published()` and
    `published_problem()` in one read."""
    from circuitdev.errors import DataError
    from circuitdev.sources.published import load_published

    folder = paths.published_dir()
    if not folder.is_dir():
        return None, f"there is no folder {paths.relative_to_repo(folder)}"
    try:
        return load_published(folder), None
    except DataError as err:
        return None, str(err)


def published_note() -> str:
    folder = paths.relative_to_repo(paths.published_dir())
    problem = published_problem()
    why = f" ({problem})" if problem else ""
    return (f"The authors' published files are not usable in `{folder}`{why}, so this session runs on the toy panels "
            "instead (the same functions, other numbers). To use them: `circuitdev published fetch` once online, or "
            "copy the folder from a colleague and set `CIRCUITDEV_PUBLISHED=/path/to/published` before starting "
            "Jupyter.")
