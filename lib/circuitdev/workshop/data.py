"""What the sessions load, found through the library so that a session runs from any working directory.

    toy_model("toy-pythia")            a toy checkpoint (the final one by default), eager attention, fp32, CPU;
                                       the panel is trained first when its checkpoints are missing (~3 min on 1 core)
    toy_config("toy-pythia")           the panel's probe configuration (seq_len 64, the BOS at position 0, ...)
    toy_table("toy-pythia")            its developmental table from the probe records in `circuitdev.paths.results_dir()`,
                                       probing the revisions that have no record yet
    train_mini("gpt_neox")             the participant's own run: the `mini` toy preset, trained live (a progress bar and
                                       a live loss curve in a notebook) or reused; `mini_table(run)` probes its checkpoints
                                       into <data>/toy/_workshop/results (apart from the book's records)
    windows("backcopy", n)             training windows of one kind from the toy corpus (text, periodic, repeat, backcopy)
    published()                        the authors' files (`circuitdev.paths.published_dir()`), or None

Training and probing the same panel from two sessions at once (the book's pipeline runs sessions in parallel) is
serialised by a lock file next to the checkpoints.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from circuitdev import paths
from circuitdev.errors import ConfigError
from circuitdev.toy.recipe import ToyRecipe, preset, preset_threads, recipe_of
from circuitdev.toy.train import panel_file, panel_ready

DEFAULT_PANEL = "toy-pythia"  # the GPT-NeoX-like toy: induction heads and, in layers 2-3, attention sinks
MINI_PRESET = "mini"
WINDOW_KINDS = ToyRecipe().window_kinds  # what the default toy panels train on: text, periodic, repeat, backcopy
__all__ = ["DEFAULT_PANEL", "MINI_PRESET", "WINDOW_KINDS", "MiniRun", "attention_patterns", "ensure_toy",
           "final_revision", "mini_recipe", "mini_table", "panel_ready", "prepare_sessions", "published",
           "published_note", "recipe_of", "toy_config", "toy_model", "toy_table", "train_mini", "training_threads",
           "windows", "workshop_dir", "workshop_results_dir"]


def workshop_dir() -> Path:
    """<data>/toy/_workshop: the participant's own run's loss log and probe records (git-ignored with data/toy)."""
    return paths.toy_dir() / "_workshop"


def workshop_results_dir() -> Path:
    return workshop_dir() / "results"


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


# recipe_of (panel name -> family, recipe) and panel_ready (its panel file and probed checkpoints on disk) are the
# toy package's (circuitdev.toy.recipe / circuitdev.toy.train), imported above under the names the sessions use.


def ensure_toy(panel: str = DEFAULT_PANEL, *, progress: bool = False) -> dict:
    """Train the toy panel's checkpoints when they are missing (or from another recipe); reuse them otherwise."""
    from circuitdev.toy.train import train_family

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
    from circuitdev.sources.panels import load_panel

    if not panel_file(panel).is_file():
        ensure_toy(panel, progress=False)
    return load_panel(panel).probe_config(**overrides)


def final_revision(panel: str = DEFAULT_PANEL) -> str:
    """The toy panel's last checkpoint ("step2500" for toy-pythia), from its recipe (no file read)."""
    return recipe_of(panel)[1].final_revision


def toy_model(panel: str = DEFAULT_PANEL, revision: str | None = None):
    """A toy checkpoint (default: the panel's final revision; a refined one too), eager attention, fp32, on the CPU,
    in eval mode."""
    from circuitdev.sources.loading import load_revision
    from circuitdev.sources.panels import load_panel

    ensure_toy(panel)
    pan = load_panel(panel, results_dir=paths.results_dir())  # with the revisions `circuitdev refine` added
    return load_revision(pan, revision or final_revision(panel), device="cpu", progress=False)


def toy_table(panel: str = DEFAULT_PANEL, *, results_dir: Path | None = None):
    """The panel's developmental table (one row per revision x head) from its probe records; revisions without a
    usable record (missing, corrupt, or of other weights: the panel was retrained since) are probed first with the
    panel's defaults (~1.5 s each)."""
    from circuitdev.sources.panels import load_panel
    from circuitdev.sources.records import load_panel_table, panel_status
    from circuitdev.sources.run import probe_panel

    root = Path(results_dir) if results_dir is not None else paths.results_dir()
    ensure_toy(panel)
    pan = load_panel(panel, results_dir=root)
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
    seconds: float = 0.0  # training time (of the run that made the checkpoints, when reused)
    reused: bool = False

    @property
    def tokens_per_step(self) -> int:
        return recipe_of(self.panel)[1].tokens_per_step


def mini_recipe() -> ToyRecipe:
    """Session 2's recipe: the `mini` toy preset (a ConfigError naming the presets where it is missing)."""
    return preset(MINI_PRESET)


def training_threads(name: str) -> int:
    """torch threads preset `name` trains with, as `circuitdev toy train --preset NAME --family F` does: the
    checkpoints depend on it, so the workshop's are the CLI's (`circuitdev.toy.recipe.preset_threads`)."""
    return preset_threads(name)


def _loss_log(panel: str) -> Path:
    return workshop_dir() / f"{panel}-loss.json"


def train_mini(family: str = "gpt_neox", *, retrain: bool = False, live: bool = True, log_every: int = 10) -> MiniRun:
    """Train the `mini` preset of one family (or reuse its checkpoints), showing a progress bar and a live loss curve
    in a notebook. `retrain=True` trains again from scratch (the recipe is seeded: the same run). The loss log is kept
    next to the checkpoints, so a reused run still shows its curve."""
    from circuitdev.toy.train import train_family

    recipe = mini_recipe()
    panel = recipe.panel_name(family)
    run = MiniRun(panel, family)
    view = None
    if live:
        from circuitdev.workshop.plots import LiveTraining

        view = LiveTraining(panel, recipe.steps)

    def on_log(step: int, loss: float) -> None:
        run.steps.append(int(step))
        run.losses.append(float(loss))
        if view is not None:
            view.update(step, loss)

    with _lock(panel):
        if not retrain and panel_ready(panel, recipe):
            run.reused = True
        else:
            t0 = time.time()
            summary = train_family(family, recipe, progress=False, force=retrain, on_log=on_log,
                                   log_every=log_every, threads=training_threads(MINI_PRESET))  # as the CLI trains it
            run.seconds = time.time() - t0
            run.reused = bool(summary.get("reused"))
        log = _loss_log(panel)
        if run.reused and log.is_file():
            stored = json.loads(log.read_text())
            if stored.get("recipe_hash") == recipe.recipe_hash():
                run.steps, run.losses, run.seconds = stored["steps"], stored["losses"], stored["seconds"]
        elif not run.reused:
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(json.dumps({"recipe_hash": recipe.recipe_hash(), "steps": run.steps,
                                       "losses": run.losses, "seconds": run.seconds}))
    if view is not None:
        view.finish(run)
    return run


def mini_table(run: MiniRun | str, *, n_nulls: int = 0):
    """Probe every checkpoint of the participant's run (resumable, ~1 s each) into the workshop's own results folder
    and return its developmental table."""
    from circuitdev.sources.panels import load_panel
    from circuitdev.sources.records import load_panel_table
    from circuitdev.sources.run import probe_panel

    root = workshop_results_dir()
    pan = load_panel(run.panel if isinstance(run, MiniRun) else run, results_dir=root)
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
    <data>/published) as `PublishedData`, or None when the folder is absent or unreadable."""
    from circuitdev.errors import DataError
    from circuitdev.sources.published import load_published

    folder = paths.published_dir()
    if not folder.is_dir():
        return None
    try:
        return load_published(folder)
    except DataError:
        return None


def published_note() -> str:
    folder = paths.relative_to_repo(paths.published_dir())
    return (f"The authors' published files are not in `{folder}`, so this session runs on the toy panels instead "
            "(the same functions, other numbers). To use them: `circuitdev published fetch` once online, or copy the "
            "folder from a colleague and set `CIRCUITDEV_PUBLISHED=/path/to/published` before starting Jupyter.")
