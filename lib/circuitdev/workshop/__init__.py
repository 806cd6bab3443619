"""The workshop track: hands-on sessions with exercises, checks and hidden solutions, on a laptop CPU.

Five sessions (`notebooks/workshop/NN_*.py`, jupytext percent format) are built on the library and the toy panel.
Each exercise is a small function the participant writes; its heading line gives difficulty, importance and minutes,
the instructor's code sits between `# BEGIN SOLUTION` / `# END SOLUTION`, and the cell after it calls a check.

    checks   one check per exercise (`checks.ex_1_2(fn)`): a one-line verdict, "✔ ..." or "✘ ... differs at index ...;
             likely cause ...", computed against the library or an independent computation on small inputs
    data     the toy checkpoints, their probe records, the live `mini` run and the authors' files, found (or trained,
             or probed) through the library, so a session runs from any working directory
    paths    the workshop's own folder (what sessions write) and the recipe of the participant's `mini` run
    session  a session parsed from its source: its exercises, their hint, solution and check cells
    build    one source -> a student edition (solutions replaced by `raise NotImplementedError("Exercise N.M: ...")`,
             hints folded), a solutions edition (executed) and the book's edition (`book_edition`: sphinx-exercise
             exercise / solution blocks, hints as dropdowns)
    doctor   the workshop's machine checks, run by `circuitdev workshop doctor` after the base checks
    machine  this machine's torch thread count, measured (the doctor stores it; the sessions read it)
    manifest what a build wrote (hashes), so that a rebuild never overwrites a participant's edited notebook
    diagrams each session's diagram: what it builds, with its exercises where they sit
    plots    the few pictures the sessions share (attention rows of one sequence, the live loss curve)

A session opens with `workshop.setup()`: plot style, one-line error display for exercises that are not done yet or
whose check failed (no bare traceback), a strict mode in which a failed check stops "run all" where it failed, and
this machine's measured torch thread count.
"""

from __future__ import annotations

import os
import sys
import warnings

EXERCISE_PREFIX = "Exercise "
# tqdm.auto warns at import in a kernel without ipywidgets (the sessions need none): import circuitdev.workshop first
warnings.filterwarnings("ignore", message="IProgress not found")


def setup(*, strict: bool = True, threads: int | None = None) -> None:
    """Call once at the top of a session: display settings, compact errors for exercises, torch threads.

    strict: a failed check raises `checks.ExerciseFailed` (shown as its one-line verdict) so that "run all" stops at
    the exercise to fix. threads: torch's CPU threads (default: the count `circuitdev workshop doctor` measured fastest
    on this machine, `circuitdev.workshop.machine`; 1 when it has not run: more threads than free cores make torch
    many times slower on a busy laptop)."""
    from circuitdev.book import display
    from circuitdev.workshop import checks, machine

    display.setup()
    warnings.filterwarnings("ignore", message="IProgress not found")
    checks.STRICT = strict
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import torch

        torch.set_num_threads(threads or machine.stored_threads() or 1)
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    _install_compact_errors()


def _compact_handler(shell, etype, value, tb, tb_offset=None):
    """IPython custom exception handler: one line for an exercise not done yet or a failed check, else the usual
    traceback. Registered for NotImplementedError and ExerciseFailed only."""
    from circuitdev.workshop.checks import ExerciseFailed

    text = str(value)
    if isinstance(value, ExerciseFailed):
        stb = [f"\x1b[31m{text}\x1b[0m"]
    elif text.startswith(EXERCISE_PREFIX):
        stb = [f"\x1b[31mNotImplementedError\x1b[0m: {text} — write it in the exercise's cell (and delete the "
               "`raise` line), run that cell, then run its check again"]
    else:
        stb = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
    shell._showtraceback(etype, value, stb)
    return stb


def _install_compact_errors() -> None:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - ipykernel brings IPython
        return
    shell = get_ipython()
    if shell is None:
        return
    from circuitdev.workshop.checks import ExerciseFailed

    shell.set_custom_exc((NotImplementedError, ExerciseFailed), _compact_handler)


def in_notebook() -> bool:
    return "ipykernel" in sys.modules
