"""Three editions of each session from one jupytext source: student, solutions (executed) and the book's.

A session is `notebooks/workshop/NN_name.py`. An exercise is a markdown cell whose first line is its heading,

    ### Exercise 1.2 — selectivity of one class · difficulty ●●○○○ · importance ●●●●○ · 10 min

optionally followed by a markdown cell whose first line is `#### Hint` (the hint, folded in every edition), then by
the code cell the participant writes in, where the instructor's code sits between `# BEGIN SOLUTION` and
`# END SOLUTION` lines (the rest of the cell -- the `def` line, the docstring -- is kept for the participant), and then
by the code cell that checks it (`checks.ex_1_2(fn)`, see `circuitdev.workshop.checks`).

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
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from circuitdev.errors import ConfigError
from circuitdev.paths import REPO_ROOT

SESSIONS_DIR = REPO_ROOT / "notebooks" / "workshop"
EDITIONS = ("student", "solutions", "book")
DOTS = "●○"
HEADING_RE = re.compile(
    r"^###\s+Exercise\s+(?P<session>\d+)\.(?P<number>\d+)\s+[—–-]\s+(?P<title>.+?)\s+·\s+"
    r"difficulty\s+(?P<difficulty>[●○]{5})\s+·\s+importance\s+(?P<importance>[●○]{5})\s+·\s+"
    r"(?P<minutes>\d+)\s+min\s*$")
BEGIN_RE = re.compile(r"^(?P<indent>[ \t]*)# BEGIN SOLUTION\s*$")
END_RE = re.compile(r"^[ \t]*# END SOLUTION\s*$")
HINT_RE = re.compile(r"^####\s+Hint\b")
SESSION_FILE_RE = re.compile(r"^(?P<number>\d\d)_[a-z0-9_]+\.py$")


@dataclass(frozen=True)
class Exercise:
    session: int
    number: int
    title: str
    difficulty: int  # 1..5 filled dots
    importance: int
    minutes: int
    heading_cell: int  # cell indices in the source notebook
    solution_cell: int
    check_cell: int
    hint_cell: int | None = None  # the `#### Hint` markdown cell between the heading and the solution

    @property
    def id(self) -> str:
        return f"{self.session}.{self.number}"

    @property
    def label(self) -> str:
        return f"ex-{self.session}-{self.number}"

    @property
    def stub_message(self) -> str:
        return f"Exercise {self.id}: {self.title}"

    @property
    def ratings(self) -> str:
        dots = lambda k: DOTS[0] * k + DOTS[1] * (5 - k)  # noqa: E731
        return f"difficulty {dots(self.difficulty)} · importance {dots(self.importance)} · {self.minutes} min"


@dataclass
class Session:
    source: Path
    number: int
    name: str  # the file's stem, e.g. 01_probe_by_hand
    title: str  # the first "# " heading
    notebook: object  # nbformat.NotebookNode of the source
    exercises: list[Exercise] = field(default_factory=list)

    @property
    def minutes(self) -> int:
        return sum(e.minutes for e in self.exercises)


# ------------------------------------------------------------------------------------------------------ parsing


def discover(folder: str | Path = SESSIONS_DIR) -> list[Path]:
    """The session sources of a folder (NN_name.py), in order."""
    folder = Path(folder)
    return sorted(p for p in folder.glob("*.py") if SESSION_FILE_RE.match(p.name))


def find_sessions(names: Sequence[str] | None = None, folder: str | Path = SESSIONS_DIR) -> list[Path]:
    """Sessions by number ("1", "01"), name ("01_probe_by_hand") or source path; all of `folder` when `names` is empty."""
    every = discover(folder)
    if not names:
        if not every:
            raise ConfigError(f"no session sources (NN_name.py) in {folder}")
        return every
    chosen = []
    for name in names:
        path = Path(name)
        if path.suffix == ".py" and path.is_file():
            chosen.append(path.resolve())
            continue
        hits = [p for p in every if p.stem == name or (name.isdigit() and int(p.name[:2]) == int(name))]
        if len(hits) != 1:
            raise ConfigError(f"no session {name!r}; the sessions are {', '.join(p.stem for p in every)} (a number, "
                              "a name or the path of a jupytext source)")
        chosen.append(hits[0])
    return chosen


def _lines(cell) -> list[str]:
    return cell.source.splitlines()


def _regions(lines: list[str], where: str) -> list[tuple[int, int, str]]:
    """(begin line, end line, indentation) of every BEGIN/END SOLUTION region in a cell's lines."""
    out, start, indent = [], None, ""
    for i, line in enumerate(lines):
        if m := BEGIN_RE.match(line):
            if start is not None:
                raise ConfigError(f"{where}: a second `# BEGIN SOLUTION` before `# END SOLUTION`")
            start, indent = i, m.group("indent")
        elif END_RE.match(line):
            if start is None:
                raise ConfigError(f"{where}: `# END SOLUTION` without `# BEGIN SOLUTION`")
            out.append((start, i, indent))
            start = None
    if start is not None:
        raise ConfigError(f"{where}: `# BEGIN SOLUTION` without `# END SOLUTION`")
    return out


def parse_session(source: str | Path) -> Session:
    """Read a session source and find its exercises; a malformed one is a ConfigError naming the cell."""
    import jupytext

    source = Path(source)
    m = SESSION_FILE_RE.match(source.name)
    if not m:
        raise ConfigError(f"{source.name}: a session source is named NN_name.py (e.g. 01_probe_by_hand.py)")
    number = int(m.group("number"))
    nb = jupytext.read(source)
    title = next((line[2:].strip() for c in nb.cells if c.cell_type == "markdown" for line in _lines(c)
                  if line.startswith("# ")), source.stem)
    session = Session(source, number, source.stem, title, nb)
    pending: dict | None = None

    def close(at: str) -> None:
        if pending is not None:
            missing = "solution cell (# BEGIN SOLUTION ... # END SOLUTION)" if pending.get("solution") is None \
                else "check cell"
            raise ConfigError(f"{source.name}: exercise {number}.{pending['number']} has no {missing} {at}")

    for i, cell in enumerate(nb.cells):
        where = f"{source.name}, cell {i + 1}"
        lines = _lines(cell)
        if cell.cell_type == "markdown":
            first = lines[0] if lines else ""
            if any(line.lstrip().startswith("### Exercise") for line in lines[1:]):
                raise ConfigError(f"{where}: an exercise heading must be the first line of its own markdown cell "
                                  "(start a new `# %% [markdown]` cell before it)")
            if HINT_RE.match(first.strip()):
                if pending is None or pending["solution"] is not None or pending["hint"] is not None:
                    raise ConfigError(f"{where}: a hint (`#### Hint`) belongs right after its exercise's heading cell, "
                                      "before the solution cell (one per exercise)")
                pending["hint"] = i
                continue
            if first.lstrip().startswith("### Exercise"):
                h = HEADING_RE.match(first.strip())
                if not h:
                    raise ConfigError(f"{where}: exercise heading {first!r} does not read '### Exercise N.M — title "
                                      "· difficulty ●●○○○ · importance ●●●●○ · 10 min'")
                if pending is not None:
                    close("before the next exercise")
                if int(h.group("session")) != number:
                    raise ConfigError(f"{where}: exercise {h.group('session')}.{h.group('number')} in session "
                                      f"{number:02d}")
                expected = len(session.exercises) + 1
                if int(h.group("number")) != expected:
                    raise ConfigError(f"{where}: exercise {number}.{h.group('number')} should be {number}.{expected} "
                                      "(exercises are numbered 1, 2, 3 ... in order)")
                pending = {"number": expected, "heading": i, "match": h, "solution": None, "hint": None}
            continue
        if cell.cell_type != "code":
            continue
        regions = _regions(lines, where)
        if regions:
            if pending is None or pending["solution"] is not None:
                raise ConfigError(f"{where}: a solution region outside an exercise (no exercise heading above it, "
                                  "or its exercise already has one)")
            pending["solution"] = i
        elif pending is not None and pending["solution"] is not None:
            h = pending["match"]
            ex = Exercise(number, pending["number"], h.group("title").strip(), h.group("difficulty").count("●"),
                          h.group("importance").count("●"), int(h.group("minutes")), pending["heading"],
                          pending["solution"], i, pending["hint"])
            call = re.compile(rf"\bex_{number}_{ex.number}\(|\bcheck\(\s*['\"]{re.escape(ex.id)}['\"]")
            if not call.search(cell.source):
                raise ConfigError(f"{where}: the cell after exercise {ex.id}'s solution must run its check "
                                  f"(`checks.ex_{number}_{ex.number}(...)`)")
            session.exercises.append(ex)
            pending = None
    close("at the end of the session")
    return session


# ----------------------------------------------------------------------------------------------------- editions


def strip_markers(code: str) -> str:
    """The solutions edition of a cell: the BEGIN/END SOLUTION lines removed, the code between them kept."""
    return "\n".join(line for line in code.splitlines() if not (BEGIN_RE.match(line) or END_RE.match(line)))


def stub(code: str, exercise: Exercise) -> str:
    """The student edition of a cell: every solution region replaced by a NotImplementedError naming the exercise."""
    lines = code.splitlines()
    regions = _regions(lines, f"exercise {exercise.id}")
    out, last = [], 0
    for begin, end, indent in regions:
        out += lines[last:begin]
        out += [f"{indent}# your code here (exercise {exercise.id}); then delete the next line",
                f"{indent}raise NotImplementedError({exercise.stub_message!r})"]
        last = end + 1
    out += lines[last:]
    return "\n".join(out)


def solution_lines(session: Session) -> list[str]:
    """Every non-blank line inside a solution region (what must not appear in the student edition)."""
    found = []
    for ex in session.exercises:
        lines = _lines(session.notebook.cells[ex.solution_cell])
        for begin, end, _ in _regions(lines, ex.id):
            found += [line.strip() for line in lines[begin + 1:end] if line.strip()]
    return found


def hint_text(session: Session, exercise: Exercise) -> str | None:
    """The hint of an exercise (its `#### Hint` cell without that line), as markdown; None without one."""
    if exercise.hint_cell is None:
        return None
    return "\n".join(_lines(session.notebook.cells[exercise.hint_cell])[1:]).strip("\n")


def folded_hint(session: Session, exercise: Exercise) -> str:
    """The notebooks' hint cell: a <details> block that opens on a click (JupyterLab, Notebook, VS Code)."""
    return (f"<details><summary><b>Hint</b> for exercise {exercise.id} (click to open, or run "
            f"<code>checks.hint(\"{exercise.id}\")</code>)</summary>\n\n{hint_text(session, exercise)}\n\n</details>")


def hint(exercise_id: str, folder: str | Path = SESSIONS_DIR) -> str:
    """The hint of exercise "N.M" from its session's source (what `checks.hint` shows)."""
    session_number, _, _ = exercise_id.partition(".")
    if not session_number.isdigit():
        raise ConfigError(f"an exercise is named N.M (e.g. 2.1), not {exercise_id!r}")
    s = parse_session(find_sessions([session_number], folder)[0])
    ex = next((e for e in s.exercises if e.id == exercise_id), None)
    if ex is None:
        raise ConfigError(f"no exercise {exercise_id} in {s.name}; its exercises are "
                          f"{', '.join(e.id for e in s.exercises)}")
    return hint_text(s, ex) or f"Exercise {exercise_id} has no hint: read its heading again, or ask."


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


def book_notebook(session: Session, solutions, *, executed: bool = True):
    """The book's edition (`circuitdev.workshop.book_edition.book_notebook`)."""
    from circuitdev.workshop.book_edition import book_notebook as make

    return make(session, solutions, executed=executed)


def build(out: str | Path, sessions: Sequence[str] | None = None, *, editions: Iterable[str] = ("student", "solutions"),
          run: bool = True, kernel: str = "python3", cwd: str | Path | None = None, force: bool = False,
          log: Callable[[str], None] = print) -> list[Built]:
    """Write the editions of the sessions into `out` (student/, solutions/, and the book's edition in `out` itself).
    run=False writes the solutions and book editions unexecuted. Sessions are parsed (and checked) before any runs.
    A student or solutions notebook changed since the last build (a participant's work) is kept and the new edition
    written beside it, said in `log`; `force=True` replaces it (`circuitdev.workshop.manifest`)."""
    import nbformat

    from circuitdev.atomic import write_atomic
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
    manifest = BuildManifest.open(out)
    results = []
    for s in parsed:
        written: dict[str, Path] = {}
        if "student" in editions:
            written["student"] = manifest.write(out / "student" / f"{s.name}.ipynb",
                                                nbformat.writes(student_notebook(s)), force=force, log=log)
        seconds = None
        executed = None
        if run and ("solutions" in editions or "book" in editions):
            log(f"running {s.name} ({len(s.exercises)} exercises) ...")
            executed, seconds = execute(s, kernel=kernel, cwd=cwd or out, failed_dir=out / "failed")
        solutions = solutions_notebook(s, executed)
        if "solutions" in editions:
            written["solutions"] = manifest.write(out / "solutions" / f"{s.name}.ipynb", nbformat.writes(solutions),
                                                  force=force, log=log)
        if "book" in editions:  # a pipeline output: replaced by every build
            written["book"] = write_atomic(out / f"{s.name}.ipynb",
                                           nbformat.writes(book_notebook(s, solutions, executed=executed is not None)))
        took = f" in {seconds:.0f} s" if seconds is not None else ""
        log(f"{s.name}: {len(s.exercises)} exercises, {s.minutes} min of exercises{took} -> "
            + ", ".join(str(p) for p in written.values()))
        results.append(Built(s.name, written, seconds, len(s.exercises)))
    return results
