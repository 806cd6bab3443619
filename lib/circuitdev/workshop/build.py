"""Three editions of each session from one jupytext source: student, solutions (executed) and the book's.

A session and its exercises as parsed from the source: `circuitdev.workshop.session`. The hint is folded in every
edition; around a solution region (`# BEGIN SOLUTION` ... `# END SOLUTION`) the rest of the cell -- the `def` line,
the docstring -- is kept for the participant; the cell after it runs the check (`circuitdev.workshop.checks`).

    student    each solution region replaced by `raise NotImplementedError("Exercise 1.2: selectivity of one class")`
               at the region's indentation, each hint folded (a <details> block; `checks.hint("1.2")` prints it too),
               outputs cleared: "run all" stops at the first exercise not done yet
    solutions  the markers removed, the hints folded, executed with papermill (`circuitdev.book.execute.execute_page`)
    book       the executed solutions with each exercise as a sphinx-exercise `exercise` block (its hint a dropdown
               inside it) and its solution as a folded `solution` block (`circuitdev.workshop.book_edition`)

`build(out)` writes out/student/NN_*.ipynb, out/solutions/NN_*.ipynb and, for the book, out/NN_*.ipynb. A rebuild never
overwrites a student or solutions notebook a participant changed (`circuitdev.workshop.manifest`).
"""

from __future__ import annotations

import copy
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from circuitdev.errors import ConfigError
from circuitdev.workshop.book_edition import book_notebook
from circuitdev.workshop.session import (BEGIN_RE, END_RE, Exercise, Session, find_sessions, hint_text, parse_session,
                                        solution_regions)

EDITIONS = ("student", "solutions", "book")
# ----------------------------------------------------------------------------------------------------- editions


def strip_markers(code: str) -> str:
    """The solutions edition of a cell: the BEGIN/END SOLUTION lines removed, the code between them kept."""
    return "\n".join(line for line in code.splitlines() if not (BEGIN_RE.match(line) or END_RE.match(line)))


def stub(code: str, exercise: Exercise) -> str:
    """The student edition of a cell: every solution region replaced by a NotImplementedError naming the exercise."""
    lines = code.splitlines()
    regions = solution_regions(lines, f"exercise {exercise.id}")
    out, last = [], 0
    for begin, end, indent in regions:
        out += lines[last:begin]
        out += [f"{indent}# your code here (exercise {exercise.id}); then delete the next line",
                f"{indent}raise NotImplementedError({exercise.stub_message!r})"]
        last = end + 1
    out += lines[last:]
    return "\n".join(out)


def folded_hint(session: Session, exercise: Exercise) -> str:
    """The notebooks' hint cell: a <details> block that opens on a click (JupyterLab, Notebook, VS Code)."""
    return (f"<details><summary><b>Hint</b> for exercise {exercise.id} (click to open, or run "
            f"<code>checks.hint(\"{exercise.id}\")</code>)</summary>\n\n{hint_text(session, exercise)}\n\n</details>")


def _fold_hints(nb, session: Session) -> None:
    for ex in session.exercises:
        if ex.hint_cell is not None:
            nb.cells[ex.hint_cell].source = folded_hint(session, ex)


def _stable_ids(nb, session: Session) -> None:
    """Cell ids from the session and the cell's place (nbformat draws random ones): a rebuild of an unchanged source
    writes the same bytes, so the build's manifest sees an untouched notebook as untouched."""
    for i, cell in enumerate(nb.cells):
        if "id" in cell:
            cell["id"] = f"{session.number:02d}-{i:03d}"


def _clear(nb) -> None:
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
    nb.metadata.pop("papermill", None)


def student_notebook(session: Session):
    nb = copy.deepcopy(session.notebook)
    for ex in session.exercises:
        cell = nb.cells[ex.solution_cell]
        cell.source = stub(cell.source, ex)
    _fold_hints(nb, session)
    _clear(nb)
    _stable_ids(nb, session)
    return nb


def solutions_notebook(session: Session, executed=None):
    """The solutions edition: the executed notebook (or the source when not executed) without the markers."""
    nb = copy.deepcopy(executed if executed is not None else session.notebook)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = strip_markers(cell.source)
    _fold_hints(nb, session)
    _stable_ids(nb, session)
    return nb


# -------------------------------------------------------------------------------------------------------- build


@dataclass
class Built:
    session: str
    paths: dict[str, Path]  # edition -> file written
    seconds: float | None  # execution time of the solutions (None: not executed)
    exercises: int


def execute(session: Session, *, kernel: str = "python3", cwd: str | Path | None = None,
            failed_dir: str | Path | None = None):
    """Run the session's source (solutions included) with papermill; returns (executed notebook, seconds)."""
    import nbformat

    from circuitdev.book.execute import execute_page

    with tempfile.TemporaryDirectory(prefix="circuitdev-workshop-") as tmp:
        out = Path(tmp) / f"{session.name}.ipynb"
        t0 = time.perf_counter()
        execute_page(session.source, out, {}, cwd=cwd or tmp, kernel=kernel, failed_dir=failed_dir)
        seconds = time.perf_counter() - t0
        return nbformat.read(out, as_version=4), seconds


def build(out: str | Path, sessions: Sequence[str] | None = None, *, editions: Iterable[str] = ("student", "solutions"),
          run: bool = True, kernel: str = "python3", cwd: str | Path | None = None, force: bool = False,
          log: Callable[[str], None] = print) -> list[Built]:
    """Write the editions of the sessions into `out` (student/, solutions/, and the book's edition in `out` itself).
    run=False writes the solutions and book editions unexecuted. Sessions are parsed (and checked) before any runs.
    A student or solutions notebook changed since the last build (a participant's work) is kept and the new edition
    written beside it, said in `log`; `force=True` replaces it (`circuitdev.workshop.manifest`).

    Two builds into one folder (the pipeline runs one job per session) run their sessions at the same time: each
    holds the folder's lock only while it writes a session's editions and the build record, which it reads afresh
    under the lock, so that neither loses the other's entries and neither waits out the other's execution."""
    import nbformat

    from circuitdev.atomic import write_atomic
    from circuitdev.locks import folder_lock
    from circuitdev.workshop.manifest import BuildManifest

    editions = tuple(editions)
    bad = [e for e in editions if e not in EDITIONS]
    if bad or not editions:
        raise ConfigError(f"unknown edition(s) {bad}; the editions are {', '.join(EDITIONS)}")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; name a folder (it is created when missing)")
    parsed = [parse_session(p) for p in find_sessions(sessions)]
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for s in parsed:
        seconds = None
        executed = None
        if run and ("solutions" in editions or "book" in editions):
            log(f"running {s.name} ({len(s.exercises)} exercises) ...")
            executed, seconds = execute(s, kernel=kernel, cwd=cwd or out, failed_dir=out / "failed")
        solutions = solutions_notebook(s, executed)
        written: dict[str, Path] = {}
        with folder_lock(out, what="workshop folder"):  # another build's writes and record: before or after ours
            manifest = BuildManifest.open(out)
            if "student" in editions:
                written["student"] = manifest.write(out / "student" / f"{s.name}.ipynb",
                                                    nbformat.writes(student_notebook(s)), force=force, log=log)
            if "solutions" in editions:
                written["solutions"] = manifest.write(out / "solutions" / f"{s.name}.ipynb",
                                                      nbformat.writes(solutions), force=force, log=log)
            if "book" in editions:  # a pipeline output: replaced by every build
                written["book"] = write_atomic(out / f"{s.name}.ipynb", nbformat.writes(
                    book_notebook(s, solutions, executed=executed is not None)))
        took = f" in {seconds:.0f} s" if seconds is not None else ""
        log(f"{s.name}: {len(s.exercises)} exercises, {s.minutes} min of exercises{took} -> "
            + ", ".join(str(p) for p in written.values()))
        results.append(Built(s.name, written, seconds, len(s.exercises)))
    return results
