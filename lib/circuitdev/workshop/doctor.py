"""The workshop's machine checks, run after the base checks of `circuitdev.doctor` by `circuitdev workshop doctor`
(= `circuitdev doctor --workshop`): can this laptop do the five sessions on the day, offline?

    toy checkpoints   toy-pythia's checkpoints present, or how long training them would take here (a few timed steps)
    threads           which torch thread count trains fastest here, measured (1, half the cores, all of them) and
                      stored in the workshop's folder for the sessions (`circuitdev.workshop.machine`)
    mini run          session 2's `mini` run: its checkpoints reused (said so), or how long training it live takes here
    probe             a 10-second probe: the full screen of one toy checkpoint, timed
    toy records       toy-pythia's probe records present (the sessions probe the missing ones)
    published         the authors' files present and complete (session 5 falls back to the toy panels without them;
                      an incomplete copy is named with the files it lacks)
    front end         JupyterLab or Notebook installed (the `workshop` extra)
    sessions          the session sources parse: exercises, solutions, checks

Each is a `circuitdev.doctor.Result`; a check that raises is turned into a "fail" by `doctor.run_checks`.
"""

from __future__ import annotations

import importlib.util
import time

from circuitdev.doctor import Result
from circuitdev.workshop.data import DEFAULT_PANEL
from circuitdev.workshop.machine import duration as _minutes
from circuitdev.workshop.machine import training_seconds

TOY_PANEL = DEFAULT_PANEL  # the panel the sessions run on
TOY_BUDGET_S = 600.0  # training toy-pythia before the day: fine up to ~10 min, said as a warning
MINI_BUDGET_S = 120.0  # session 2's live training: its slot assumes <= 2 minutes
PROBE_BUDGET_S = 10.0
__all__ = ["WORKSHOP_CHECKS", "training_seconds"]


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


def check_threads() -> Result:
    """Measure the torch thread counts on the mini model (a few seconds) and store the fastest for the sessions."""
    from circuitdev.errors import ConfigError
    from circuitdev.paths import relative_to_repo
    from circuitdev.workshop import machine

    try:
        choice = machine.measure()
    except ConfigError as err:  # no mini preset: the mini-run check says what to do
        return Result("threads", "warn", f"not measured: {err}")
    where = machine.save(choice)
    return Result("threads", "ok", f"{choice.summary()} (stored in {relative_to_repo(where)}, read by the sessions)")


def check_mini_run() -> Result:
    """Session 2's run: reused when its checkpoints are here (ok, said so), else how long training it live takes with
    this machine's thread choice (the one `check_threads` stored; measured now when there is none)."""
    from circuitdev.errors import ConfigError
    from circuitdev.paths import relative_to_repo
    from circuitdev.toy.train import panel_ready
    from circuitdev.workshop import machine
    from circuitdev.workshop.data import mini_root, trained_seconds
    from circuitdev.workshop.paths import mini_recipe

    try:
        recipe = mini_recipe()
    except ConfigError as err:
        return Result("mini run", "fail", f"session 2 cannot train its run: {err}",
                      "update the checkout (the `mini` preset comes with circuitdev.toy.recipe)")
    family = "gpt_neox"
    panel = recipe.panel_name(family)
    root = mini_root(panel)
    if panel_ready(panel, recipe, data_dir=root):
        took = trained_seconds(panel, root)
        return Result("mini run", "ok", f"session 2 reuses {panel}: its checkpoints are in "
                                        f"{relative_to_repo(root / 'toy' / panel)}"
                                        + (f" (trained in {_minutes(took)})" if took else "")
                                        + "; `retrain = True` in the session trains it again, live")
    choice = machine.current(log=None)
    est = choice.estimate_s
    message = (f"session 2 trains {panel} live: about {_minutes(est)} here with {choice.threads} torch "
               f"thread{'s' * (choice.threads > 1)} (measured {choice.measured_at})")
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
        cfg = ProbeConfig.from_dict(recipe.probe_defaults(family))
        what = f"an untrained {TOY_PANEL}-shaped model"
    import torch

    from circuitdev.workshop.machine import stored_threads

    before = torch.get_num_threads()
    torch.set_num_threads(stored_threads() or 1)  # as the sessions run (workshop.setup)
    try:
        t0 = time.perf_counter()
        table = probe_model(model, cfg, progress=False).table
        seconds = time.perf_counter() - t0
    finally:
        torch.set_num_threads(before)
    message = (f"screened {what} ({cfg.n} sequences x {cfg.seq_len} tokens, {len(table)} heads, PR, prefix "
               f"matching, nulls) in {seconds:.1f} s with the sessions' thread count")
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
    from circuitdev.workshop.data import published_or_problem

    folder = relative_to_repo(published_dir())
    data, problem = published_or_problem()
    if data is not None:
        partial = f"; PARTIAL: {len(data.missing)} file(s) missing" if data.partial else ""
        return Result("published", "ok" if not data.partial else "warn",
                      f"the authors' files in {folder} ({data.table['panel'].nunique()} models){partial}")
    return Result("published", "warn", f"the authors' files in {folder} are not usable ({problem}): session 5 runs on "
                                       "the toy panels instead",
                  "online: `circuitdev published fetch`; offline: copy the folder and set "
                  "CIRCUITDEV_PUBLISHED=/path/to/it")


def check_frontend() -> Result:
    found = [name for name, module in (("JupyterLab", "jupyterlab"), ("Notebook", "notebook"))
             if importlib.util.find_spec(module) is not None]
    if found:
        return Result("front end", "ok", f"{' and '.join(found)} installed (`make lab` opens the sessions)")
    return Result("front end", "warn", "no Jupyter front end (JupyterLab or Notebook) is installed",
                  "`.venv/bin/pip install -e '.[workshop]'` while online (JupyterLab + jupytext), or open the "
                  "notebooks in VS Code with its Jupyter extension")


def check_sessions() -> Result:
    from circuitdev.workshop.session import discover, parse_session

    sessions = [parse_session(p) for p in discover()]
    if not sessions:
        return Result("sessions", "fail", "no session sources in notebooks/workshop",
                      "run from a complete checkout of the repository")
    n = sum(len(s.exercises) for s in sessions)
    return Result("sessions", "ok", f"{len(sessions)} sessions, {n} exercises with solutions and checks")


WORKSHOP_CHECKS = [check_toy_checkpoints, check_threads, check_mini_run,
                   check_probe, check_toy_records, check_published,
                   check_frontend, check_sessions]
