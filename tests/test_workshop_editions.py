"""The workshop's editions as a participant meets them: folded hints from one source, a diagram per session, a rebuild
that never overwrites a participant's notebook, and the participants' edition of the book (no solution in it).

The fast tests build the notebooks without running them. The slow one builds a small Jupyter Book from the sessions'
book edition twice -- the instructors' edition (solutions folded) and the participants' (`hide_solutions`, through
`circuitdev.book.build.book_config`, what `make book WORKSHOP_EDITION=participants` uses) -- and reads the HTML.
"""

from __future__ import annotations

import hashlib
import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from workshop_sessions import SESSIONS, session, solution_lines

from circuitdev.workshop import build, checks, diagrams, manifest
from circuitdev.workshop import session as parsing

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------------------------------------------ hints


def test_each_hint_is_folded_in_the_notebooks_and_printed_by_checks_hint():
    for path in SESSIONS:
        s = session(path.stem)
        for edition in (build.student_notebook(s), build.solutions_notebook(s)):
            for ex in s.exercises:
                cell = edition.cells[ex.hint_cell]
                assert cell.cell_type == "markdown"
                assert cell.source.startswith(f"<details><summary><b>Hint</b> for exercise {ex.id}")
                assert parsing.hint_text(s, ex) in cell.source and cell.source.endswith("</details>")
                assert "#### Hint" not in cell.source
        solution_code = [line for line in solution_lines(s) if len(line) > 25 and not line.startswith("#")]
        for ex in s.exercises:
            given_away = [line for line in solution_code if line in parsing.hint_text(s, ex)]
            assert not given_away, f"{ex.id}: a hint, not the answer: {given_away}"
            shown = checks.hint(ex.id)
            assert shown.text == parsing.hint_text(s, ex)
            assert shown._repr_markdown_().startswith(f"**Hint for exercise {ex.id}.** ")


def test_a_hint_for_an_unknown_exercise_says_which_exist():
    from circuitdev.errors import ConfigError

    with pytest.raises(ConfigError, match=r"no exercise 2\.9 in 02_watch_a_circuit_form; its exercises are 2\.1, 2\.2"):
        checks.hint("2.9")
    with pytest.raises(ConfigError, match="an exercise is named N.M"):
        checks.hint("two")


# ---------------------------------------------------------------------------------------------------- diagrams


@pytest.mark.parametrize("path", SESSIONS, ids=[p.stem for p in SESSIONS])
def test_each_session_opens_with_its_diagram_showing_its_exercises(path):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.patches import FancyBboxPatch

    s = session(path.stem)
    shown = [e for row in diagrams.DIAGRAMS[s.number][1] for box in row.boxes for e in box.exercises]
    assert sorted(shown) == [ex.id for ex in s.exercises]
    calls = [i for i, c in enumerate(s.notebook.cells) if c.cell_type == "code"
             and f"diagrams.session_diagram({s.number})" in c.source]
    setup = next(i for i, c in enumerate(s.notebook.cells) if "workshop.setup()" in c.source)
    code_after = [i for i, c in enumerate(s.notebook.cells) if c.cell_type == "code" and i > setup]
    assert calls and calls[0] == code_after[0], "the diagram is the session's first picture, right after its setup"
    fig = diagrams.session_diagram(s.number)
    boxes = [p for p in fig.axes[0].patches if isinstance(p, FancyBboxPatch)]
    assert len(boxes) == sum(len(r.boxes) for r in diagrams.DIAGRAMS[s.number][1])
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    for ex in s.exercises:
        assert re.search(rf"exercises? [\d., ]*\b{re.escape(ex.id)}\b", texts), ex.id
    import matplotlib.pyplot as plt

    plt.close(fig)


# ---------------------------------------------------------------------------------------- never lose a file


def test_a_rebuild_keeps_an_edited_student_notebook_and_writes_the_new_one_beside_it(tmp_path):
    said: list[str] = []
    build.build(tmp_path, ["1", "2"], editions=("student",), run=False, log=said.append)
    mine = tmp_path / "student" / "01_probe_by_hand.ipynb"
    untouched = tmp_path / "student" / "02_watch_a_circuit_form.ipynb"
    nb = nbformat.read(mine, as_version=4)
    nb.cells[0].source += "\n\nmy notes: the induction heads are in layer 1"
    nbformat.write(nb, mine)
    edited, before_untouched = mine.read_bytes(), sha(untouched)
    assert (tmp_path / manifest.MANIFEST).is_file()

    said.clear()
    built = build.build(tmp_path, ["1", "2"], editions=("student",), run=False, log=said.append)
    assert mine.read_bytes() == edited  # the participant's file, byte for byte
    beside = tmp_path / "student" / "01_probe_by_hand.new.ipynb"
    assert built[0].paths["student"] == beside and beside.is_file()
    assert nbformat.read(beside, as_version=4).cells[0].source == build.student_notebook(session(
        "01_probe_by_hand")).cells[0].source
    assert sha(untouched) == before_untouched and built[1].paths["student"] == untouched  # unedited: rewritten alike
    assert any("student/01_probe_by_hand.ipynb changed since the last build" in line and "kept" in line
               and "student/01_probe_by_hand.new.ipynb" in line for line in said), said
    assert sorted(p.name for p in (tmp_path / "student").iterdir()) == [
        "01_probe_by_hand.ipynb", "01_probe_by_hand.new.ipynb", "02_watch_a_circuit_form.ipynb"]

    # a third build: the edited file still kept, the unedited .new one replaced in place (no .new2)
    build.build(tmp_path, ["1"], editions=("student",), run=False, log=said.append)
    assert mine.read_bytes() == edited and not (tmp_path / "student" / "01_probe_by_hand.new2.ipynb").exists()
    # the participant edits the .new one too: the next goes to .new2
    beside.write_text(beside.read_text().replace("Session 1", "Session 1 (mine)"))
    built = build.build(tmp_path, ["1"], editions=("student",), run=False, log=said.append)
    assert built[0].paths["student"].name == "01_probe_by_hand.new2.ipynb"

    said.clear()
    build.build(tmp_path, ["1"], editions=("student",), run=False, force=True, log=said.append)
    assert mine.read_bytes() != edited and "my notes" not in mine.read_text()
    assert any("replaced (--force)" in line for line in said), said


def test_two_builds_into_one_folder_execute_at_once_and_keep_each_others_record(tmp_path, monkeypatch):
    """The pipeline builds each session in its own job, all into one folder: the folder's lock covers only the
    writes (and the build record, read afresh under it), so the two executions overlap -- the barrier below breaks
    if one waits out the other -- and the record ends up with both builds' files."""
    import json
    import threading

    both_running = threading.Barrier(2, timeout=30)

    def execute(s, **kwargs):  # stands in for papermill: each session's run waits for the other's to start
        both_running.wait()
        return build.solutions_notebook(s), 0.0

    monkeypatch.setattr(build, "execute", execute)
    errors: list[BaseException] = []

    def one(name: str) -> None:
        try:
            build.build(tmp_path, [name], editions=("student", "solutions", "book"), log=lambda _: None)
        except BaseException as err:  # noqa: BLE001 -- re-raised in the test's thread below
            errors.append(err)

    threads = [threading.Thread(target=one, args=(n,)) for n in ("1", "2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    recorded = json.loads((tmp_path / manifest.MANIFEST).read_text())["files"]
    assert sorted(recorded) == [f"{e}/{s}.ipynb" for e in ("solutions", "student")
                                for s in ("01_probe_by_hand", "02_watch_a_circuit_form")]
    assert (tmp_path / "01_probe_by_hand.ipynb").is_file() and (tmp_path / "02_watch_a_circuit_form.ipynb").is_file()


def test_a_file_no_build_wrote_is_kept_too(tmp_path):
    (tmp_path / "student").mkdir()
    theirs = tmp_path / "student" / "03_sinks_and_selectivity.ipynb"
    theirs.write_text("a participant's own notebook with this name")
    build.build(tmp_path, ["3"], editions=("student",), run=False, log=lambda _: None)
    assert theirs.read_text() == "a participant's own notebook with this name"
    assert (tmp_path / "student" / "03_sinks_and_selectivity.new.ipynb").is_file()


def test_the_command_says_what_it_kept_and_force_replaces(tmp_path):
    cmd = [str(BIN / "circuitdev"), "workshop", "build", "1", "--out", str(tmp_path), "--no-execute",
           "--edition", "student"]
    assert subprocess.run(cmd, capture_output=True, text=True, timeout=120).returncode == 0
    mine = tmp_path / "student" / "01_probe_by_hand.ipynb"
    mine.write_text(mine.read_text().replace("Session 1", "Session 1, my copy"))
    edited = mine.read_bytes()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "changed since the last build" in proc.stdout and "01_probe_by_hand.new.ipynb" in proc.stdout
    assert mine.read_bytes() == edited
    proc = subprocess.run([*cmd, "--force"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "replaced (--force)" in proc.stdout
    assert mine.read_bytes() != edited
    (tmp_path / "a-file").write_text("x")
    proc = subprocess.run([*cmd[:5], str(tmp_path / "a-file"), *cmd[6:]], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "is a file" in proc.stderr


# --------------------------------------------------------------------------------- the participants' edition


def _small_book(root: Path, sessions_dir: Path) -> None:
    """A book of the instructor page and the five sessions' book edition (not executed), with the repository's
    _config.yml, its bibliography and style sheet, and stubs for the pages the sessions link to."""
    shutil.copy(REPO / "_config.yml", root / "_config.yml")
    (root / "book").mkdir()
    shutil.copy(REPO / "book" / "workshop_instructor.md", root / "book" / "workshop_instructor.md")
    shutil.copy(REPO / "book" / "references.bib", root / "book" / "references.bib")
    shutil.copytree(REPO / "book" / "_static", root / "book" / "_static")
    (root / "book" / "toy_recipe.md").write_text("# The toy recipe\n\nA stub.\n")
    generated = root / "book" / "_generated"
    shutil.copytree(sessions_dir, generated / "workshop", ignore=shutil.ignore_patterns("student", "solutions", ".*"))
    for page in ("audit", "f5_pr_lead"):
        (generated / f"{page}.md").write_text(f"# {page}\n\nA stub.\n")
    chapters = "\n".join(f"  - file: book/_generated/workshop/{p.stem}" for p in SESSIONS)
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/workshop_instructor\nchapters:\n"
                                   f"{chapters}\n  - file: book/toy_recipe\n  - file: book/_generated/audit\n"
                                   "  - file: book/_generated/f5_pr_lead\n")


@pytest.mark.skipif(shutil.which("make") is None, reason="no `make` on this machine")
def test_one_make_variable_selects_the_participants_edition():
    """`make book WORKSHOP_EDITION=participants` hands the edition to the pipeline (its book rule builds with
    `book_config(..., workshop_edition=...)`); a plain `make book` hands none."""
    def book_command(*args: str) -> str:
        # -o: the venv counts as up to date (no install recipe, no index probe)
        proc = subprocess.run(["make", "-n", "-o", ".venv/.installed", "book", *args], cwd=REPO, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return next(line for line in proc.stdout.splitlines() if "snakemake" in line)

    assert "--config workshop_edition=participants" in book_command("WORKSHOP_EDITION=participants")
    assert "workshop_edition" not in book_command()
    from circuitdev.book.pipeline import Pipeline  # the book rule's edition: the config's, else the instructors'

    base = {"toy_families": [], "published_dir": None, "notebooks": [], "refine": []}
    assert Pipeline({**base, "workshop_edition": "participants"}, REPO).workshop_edition == "participants"
    assert Pipeline(base, REPO).workshop_edition == "instructors"
    assert "workshop_edition=P.workshop_edition" in (REPO / "rules" / "pages.smk").read_text()


def test_book_config_refuses_an_unknown_edition(tmp_path):
    from circuitdev.book.build import book_config
    from circuitdev.errors import ConfigError

    (tmp_path / "_config.yml").write_text("title: x\nsphinx:\n  config:\n    hide_solutions: false\n")
    with pytest.raises(ConfigError, match="'students' is not one of instructors, participants"):
        book_config(None, workshop_edition="students", source=tmp_path / "_config.yml")
    out = book_config("https://github.com/o/r", workshop_edition="participants", source=tmp_path / "_config.yml",
                      out=tmp_path / "generated.yml")
    text = out.read_text()
    assert "hide_solutions: true" in text and "https://github.com/o/r" in text
    assert "hide_solutions: false" in (tmp_path / "_config.yml").read_text()  # the source is never edited


@pytest.mark.slow
def test_the_participants_edition_of_the_book_has_no_solution(tmp_path):
    from circuitdev.book.build import book_config

    sessions_dir = tmp_path / "sessions"
    build.build(sessions_dir, editions=("book",), run=False, log=lambda _: None)
    root = tmp_path / "book"
    root.mkdir()
    _small_book(root, sessions_dir)
    pages = {}
    for edition in ("instructors", "participants"):
        config = book_config(None, workshop_edition=edition, source=root / "_config.yml",
                             out=root / "_build" / "_config.generated.yml")
        assert (config == root / "_config.yml") == (edition == "instructors")  # _config.yml itself is never edited
        proc = subprocess.run([str(BIN / "jupyter-book"), "build", str(root), "--config", str(config), "--all", "-W",
                               "--keep-going"], capture_output=True, text=True, timeout=900)
        warnings = [line for line in proc.stdout.splitlines() + proc.stderr.splitlines() if "WARNING" in line]
        assert proc.returncode == 0 and not warnings, "\n".join(warnings) or proc.stdout[-3000:]
        pages[edition] = {p.stem: (root / "_build" / "html" / "book" / "_generated" / "workshop" / f"{p.stem}.html")
                          .read_text() for p in SESSIONS}
    assert "hide_solutions: false" in (root / "_config.yml").read_text()
    for path in SESSIONS:
        s = session(path.stem)
        folded, bare = pages["instructors"][path.stem], pages["participants"][path.stem]
        solution_code = [line for line in solution_lines(s) if len(line) > 25 and not line.startswith("#")]
        assert solution_code, path.stem
        # the instructors' edition has the solution blocks and their code (so this test can fail) ...
        assert folded.count('class="solution') >= len(s.exercises), path.stem
        assert all(line in text_of(folded) for line in solution_code), path.stem
        # ... the participants' none, but the exercises, their hints and checks
        assert 'class="solution' not in bare and 'admonition-title">Solution<' not in bare, path.stem
        leaked = [line for line in solution_code if line in text_of(bare)]
        assert not leaked, (path.stem, leaked[:3])
        assert bare.count('class="exercise') >= len(s.exercises) and bare.count('admonition hint"') >= len(s.exercises)
        for ex in s.exercises:
            words = re.findall(r"[A-Za-z]{5,}", parsing.hint_text(s, ex))  # plain words of the hint, in the page
            assert words[0] in text_of(bare) and words[-1] in text_of(bare), (ex.id, words[0], words[-1])
            assert f"checks.ex_{s.number}_{ex.number}(" in text_of(bare)


def text_of(page: str) -> str:
    """A page's text as a reader (or a copy-paste) gets it: tags removed, entities decoded, lines kept."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))
