"""The workshop's machine checks, run after the base checks of `circuitdev.doctor` by `circuitdev workshop doctor`
(= `circuitdev doctor --workshop`): can this laptop do the five sessions on the day, offline?

    toy checkpoints   toy-pythia's checkpoints present, or how long training them would take here (a few timed steps)
    mini run          how long session 2's live training of the `mini` preset takes here (or its checkpoints, reused)
    probe             a 10-second probe: the full screen of one toy checkpoint, timed
    toy records       toy-pythia's probe records present (the sessions probe the missing ones)
    published         the authors' files present (session 5 falls back to the toy panels without them)
    front end         JupyterLab or Notebook installed (the `workshop` extra)
    sessions          the session sources parse: exercises, solutions, checks

Each is a `circuitdev.doctor.Result`; a check that raises is turned into a "fail" by `doctor.run_checks`.
"""

from __future__ import annotations

import importlib.util
import time
from typing import Callable

from circuitdev.doctor import Result
from circuitdev.workshop.data import DEFAULT_PANEL

TOY_PANEL = DEFAULT_PANEL  # the panel the sessions run on
TOY_BUDGET_S = 600.0  # training toy-pythia before the day: fine up to ~10 min, said as a warning
MINI_BUDGET_S = 120.0  # session 2's live training: its slot assumes <= 2 minutes
PROBE_BUDGET_S = 10.0
TIMED_STEPS = 8


def training_seconds(recipe, family: str, *, steps: int = TIMED_STEPS, threads: int = 1,
                     clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds the whole recipe would take here, from `steps` timed optimiser steps (after one warm-up step) of its
    model on random windows of its shape, with `threads` torch threads (what it trains with), read on `clock`."""
    import torch

    from circuitdev.toy.train import build_model

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = build_model(family, recipe)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr)
    lo, hi = recipe.probe_vocab_range
    x = torch.randint(lo, hi, (recipe.batch_size, recipe.seq_len))

    def step() -> None:
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step()
    t0 = clock()
    for _ in range(steps):
        step()
    return (clock() - t0) / steps * recipe.steps


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def check_toy_checkpoints() -> Result:
    from circuitdev.toy.recipe import recipe_of
    from circuitdev.toy.train import panel_ready

    family, recipe = recipe_of(TOY_PANEL)
    if panel_ready(TOY_PANEL, recipe):
        return Result("toy checkpoints", "ok", f"{TOY_PANEL}: {len(recipe.grid())} checkpoints present "
                                               f"(recipe {recipe.recipe_hash()})")
    est = training_seconds(recipe, family)
    fix = (f"train them before the day: `circuitdev toy train --family {family}` (or copy data/toy/ from a machine "
           "that has them)")
    if est <= TOY_BUDGET_S:
        return Result("toy checkpoints", "warn", f"{TOY_PANEL}: checkpoints missing; training them here takes about "
                                                 f"{_minutes(est)} (session 1 would do it first)", fix)
    return Result("toy checkpoints", "fail", f"{TOY_PANEL}: checkpoints missing, and training them here would take "
                                             f"about {_minutes(est)}", fix)


def check_mini_run() -> Result:
    from circuitdev.errors import ConfigError
    from circuitdev.toy.recipe import preset_threads
    from circuitdev.toy.train import panel_ready
    from circuitdev.workshop.data import MINI_PRESET, mini_recipe

    try:
        recipe = mini_recipe()
    except ConfigError as err:
        return Result("mini run", "fail", f"session 2 cannot train its run: {err}",
                      "update the checkout (the `mini` preset comes with circuitdev.toy.recipe)")
    family = "gpt_neox"
    panel = recipe.panel_name(family)
    est = training_seconds(recipe, family, threads=preset_threads(MINI_PRESET))
    there = " (its checkpoints are present: reused unless retrained)" if panel_ready(panel, recipe) else ""
    message = f"session 2 trains {panel} live: about {_minutes(est)} here{there}"
    if est <= MINI_BUDGET_S:
        return Result("mini run", "ok", message)
    fix = f"pre-train it: `circuitdev toy train --preset mini --family {family}` (session 2 then reuses it)"
    return Result("mini run", "warn" if est <= 3 * MINI_BUDGET_S else "fail",
                  f"{message}, more than the {MINI_BUDGET_S:.0f} s its slot allows", fix)


def check_probe() -> Result:
    """The 10-second probe: the paper's screen (toy scale) of one toy checkpoint, timed."""
    from circuitdev.measure.probe import probe_model
    from circuitdev.sources.loading import load_revision
    from circuitdev.sources.panels import load_panel
    from circuitdev.toy.recipe import recipe_of
    from circuitdev.toy.train import build_model, panel_ready

    family, recipe = recipe_of(TOY_PANEL)
    if panel_ready(TOY_PANEL, recipe):
        panel = load_panel(TOY_PANEL)
        rev = panel.revisions[-1].name
        model = load_revision(panel, rev, device="cpu", progress=False)
        cfg, what = panel.probe_config(), f"{TOY_PANEL} {rev}"
    else:
        from circuitdev.measure.config import ProbeConfig

        model = build_model(family, recipe, attn_implementation="eager").eval()
        cfg = ProbeConfig.from_dict(recipe.probe_defaults())
        what = f"an untrained {TOY_PANEL}-shaped model"
    t0 = time.perf_counter()
    table = probe_model(model, cfg, progress=False).table
    seconds = time.perf_counter() - t0
    message = (f"screened {what} ({cfg.n} sequences x {cfg.seq_len} tokens, {len(table)} heads, PR, prefix "
               f"matching, nulls) in {seconds:.1f} s")
    if seconds <= PROBE_BUDGET_S:
        return Result("probe", "ok", message)
    return Result("probe", "warn" if seconds <= 3 * PROBE_BUDGET_S else "fail",
                  f"{message}; the sessions assume <= {PROBE_BUDGET_S:.0f} s",
                  "close other programs; on a slow laptop, pair up with a neighbour")


def check_toy_records() -> Result:
    from circuitdev.paths import relative_to_repo, results_dir
    from circuitdev.sources.records import panel_status

    root = results_dir()
    try:
        status = panel_status(root, TOY_PANEL)
    except Exception as err:  # noqa: BLE001 - no panel file yet: the checkpoints check says what to do
        return Result("toy records", "warn", f"{TOY_PANEL}: no panel file yet ({type(err).__name__})",
                      f"`circuitdev toy train --family gpt_neox && circuitdev probe --panel {TOY_PANEL}`")
    done = int((status["state"] == "complete").sum())
    where = relative_to_repo(root)
    if done == len(status):
        return Result("toy records", "ok", f"{TOY_PANEL}: {done} probe records in {where}")
    return Result("toy records", "warn", f"{TOY_PANEL}: {done} of {len(status)} probe records in {where}; the "
                                         "sessions probe the others first (~1.5 s each)",
                  f"before the day: `circuitdev probe --panel {TOY_PANEL}`")


def check_published() -> Result:
    from circuitdev.paths import published_dir, relative_to_repo
    from circuitdev.workshop.data import published

    folder = relative_to_repo(published_dir())
    data = published()
    if data is not None:
        return Result("published", "ok", f"the authors' files in {folder} ({data.table['panel'].nunique()} models)")
    return Result("published", "warn", f"no readable authors' files in {folder}: session 5 runs on the toy panels "
                                       "instead", "online: `circuitdev published fetch`; offline: copy the folder "
                                                  "and set CIRCUITDEV_PUBLISHED=/path/to/it")


def check_frontend() -> Result:
    found = [name for name, module in (("JupyterLab", "jupyterlab"), ("Notebook", "notebook"))
             if importlib.util.find_spec(module) is not None]
    if found:
        return Result("front end", "ok", f"{' and '.join(found)} installed (`make lab` opens the sessions)")
    return Result("front end", "warn", "no Jupyter front end (JupyterLab or Notebook) is installed",
                  "`.venv/bin/pip install -e '.[workshop]'` while online (JupyterLab + jupytext), or open the "
                  "notebooks in VS Code with its Jupyter extension")


def check_sessions() -> Result:
    from circuitdev.workshop.build import discover, parse_session

    sessions = [parse_session(p) for p in discover()]
    if not sessions:
        return Result("sessions", "fail", "no session sources in notebooks/workshop",
                      "run from a complete checkout of the repository")
    n = sum(len(s.exercises) for s in sessions)
    return Result("sessions", "ok", f"{len(sessions)} sessions, {n} exercises with solutions and checks")


WORKSHOP_CHECKS = [check_toy_checkpoints, check_mini_run, check_probe, check_toy_records, check_published,
                   check_frontend, check_sessions]
