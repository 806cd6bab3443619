"""What the workshop's test files share (test_workshop.py: the machinery; test_workshop_<name>.py: one per session).

The sessions are parsed from their sources (notebooks/workshop/NN_<name>.py); the instructor's solutions are executed
from there (never copied into a test), and every check gets the same two assertions: it passes on the instructor's
solution, and it fails on a deliberately wrong answer with a one-line verdict containing a given phrase.
"""

from __future__ import annotations

import ast
import functools

import pytest

from circuitdev.workshop import build, checks
from circuitdev.workshop import session as parsing

SESSIONS = parsing.discover()


@functools.lru_cache(maxsize=None)
def session(stem: str) -> parsing.Session:
    """A session parsed from notebooks/workshop/<stem>.py (e.g. "01_probe_by_hand")."""
    (path,) = [p for p in SESSIONS if p.stem == stem]
    return parsing.parse_session(path)


def solution_lines(s: parsing.Session) -> list[str]:
    """Every non-blank line inside a solution region (what must not appear in the student edition)."""
    found = []
    for ex in s.exercises:
        lines = parsing.cell_lines(s.notebook.cells[ex.solution_cell])
        for begin, end, _ in parsing.solution_regions(lines, ex.id):
            found += [line.strip() for line in lines[begin + 1:end] if line.strip()]
    return found


def exercise_ids(stem: str) -> list[str]:
    return [ex.id for ex in session(stem).exercises]


def solution_namespace(s: parsing.Session, upto: parsing.Exercise) -> dict:
    """The imports of the session's cells (imports only: no data is loaded) and its solution cells up to `upto`."""
    ns: dict = {}
    for cell in s.notebook.cells:
        if cell.cell_type != "code" or "parameters" in cell.metadata.get("tags", []):
            continue
        tree = ast.parse(build.strip_markers(cell.source))
        imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        exec(compile(ast.Module(body=imports, type_ignores=[]), s.name, "exec"), ns)  # noqa: S102
    for ex in s.exercises:
        exec(build.strip_markers(s.notebook.cells[ex.solution_cell].source), ns)  # noqa: S102
        if ex is upto:
            break
    return ns


def assert_passes_on_the_solution(stem: str, exercise: str) -> None:
    s = session(stem)
    ex = next(e for e in s.exercises if e.id == exercise)
    ns = solution_namespace(s, ex)
    verdict = checks.check(exercise, *(ns[f] for f in checks.CHECKS[exercise].functions))
    assert verdict.ok, verdict.line()
    assert verdict.line().startswith(f"✔ Exercise {exercise} · ") and "\n" not in verdict.line()


def assert_fails_naming(exercise: str, fn, phrase: str) -> None:
    """The check fails on `fn` (a function, or a tuple of them for a check of several) and its one line, no
    traceback, contains `phrase` (the likely cause it names)."""
    fns = fn if isinstance(fn, tuple) else (fn,)
    verdict = checks.check(exercise, *fns)
    line = verdict.line()
    assert not verdict.ok, line
    assert line.startswith(f"✘ Exercise {exercise} · ") and "\n" not in line
    assert phrase in line, line
    assert "Traceback" not in line


def check_tests(stem: str, wrong: dict):
    """The three tests every session's checks get, for its test file to bind to test names: each check passes on the
    instructor's solution; there is a wrong answer for each; each fails on it, naming the phrase given with it.
    `wrong`: exercise id -> (function or tuple of functions, phrase)."""
    ids = exercise_ids(stem)

    @pytest.mark.parametrize("exercise", ids)
    def passes_on_the_solution(exercise):
        assert_passes_on_the_solution(stem, exercise)

    def has_a_wrong_answer_for_every_check():
        assert sorted(wrong) == sorted(ids)

    @pytest.mark.parametrize("exercise", ids)
    def fails_on_a_wrong_answer_naming_it(exercise):
        assert_fails_naming(exercise, *wrong[exercise])

    return passes_on_the_solution, has_a_wrong_answer_for_every_check, fails_on_a_wrong_answer_naming_it
