"""A workshop session as parsed from its jupytext source: its exercises (heading, hint, solution and check cells).

A session is `notebooks/workshop/NN_name.py`. An exercise is a markdown cell whose first line is its heading,

    ### Exercise 1.2 — selectivity of one class · difficulty ●●○○○ · importance ●●●●○ · 10 min

optionally followed by a markdown cell whose first line is `#### Hint`, then by the code cell the participant writes
in (the instructor's code between `# BEGIN SOLUTION` and `# END SOLUTION` lines), then by the cell that checks it.

`parse_session(source)` reads one (a malformed one is a ConfigError naming the cell); `find_sessions` / `discover`
find the sources; `hint_text` / `hint` read an exercise's hint. The editions made from a parsed session are
`circuitdev.workshop.build` (student, solutions) and `circuitdev.workshop.book_edition` (the book's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from circuitdev.errors import ConfigError
from circuitdev.paths import REPO_ROOT

SESSIONS_DIR = REPO_ROOT / "notebooks" / "workshop"
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


def cell_lines(cell) -> list[str]:
    return cell.source.splitlines()


def solution_regions(lines: list[str], where: str) -> list[tuple[int, int, str]]:
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
    title = next((line[2:].strip() for c in nb.cells if c.cell_type == "markdown" for line in cell_lines(c)
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
        lines = cell_lines(cell)
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
        regions = solution_regions(lines, where)
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


def hint_text(session: Session, exercise: Exercise) -> str | None:
    """The hint of an exercise (its `#### Hint` cell without that line), as markdown; None without one."""
    if exercise.hint_cell is None:
        return None
    return "\n".join(cell_lines(session.notebook.cells[exercise.hint_cell])[1:]).strip("\n")


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
