"""The workshop track's machinery: the sessions' sources, the check machinery and its registry, the three editions,
the CLI and the doctor's workshop checks. Each session's checks have their own file, tests/test_workshop_<name>.py
(helpers shared in tests/workshop_sessions.py).

Fast tests parse the five sessions and build the editions without running them. The slow ones execute every solution
notebook with papermill from a temporary working directory (session 2 trains the `mini` preset live), and every
student notebook up to its first exercise, where it must stop with NotImplementedError naming that exercise. They use
the data folder of the checkout (as the sessions do): the toy panel `toy-pythia` and its records are prepared first
when they are missing, and the authors' files are used when `CIRCUITDEV_PUBLISHED` names them. No test asserts a
duration: a subprocess timeout of ten times a session's budget only stops a hang; how long each session takes next to
its budget is measured by bench/workshop.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from workshop_sessions import SESSIONS, session, solution_lines, solution_namespace

from circuitdev.errors import ConfigError
from circuitdev.workshop import book_edition, build, checks
from circuitdev.workshop import session as parsing

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SESSION_HANG_S = 1800  # 10x a session's budget (bench/workshop.py: 3 minutes on 2 cores): a hang, not a slow run
DOCTOR_HANG_S = 600  # 10x what `circuitdev workshop doctor` takes on a quiet 2-core machine (bench/workshop.py)


@pytest.fixture(scope="module")
def parsed() -> dict[str, parsing.Session]:
    return {p.stem: session(p.stem) for p in SESSIONS}


def exercises(parsed_sessions):
    return [(s, ex) for s in parsed_sessions.values() for ex in s.exercises]


# ---------------------------------------------------------------------------------------------- the sessions


def test_five_sessions_with_at_least_three_rated_exercises_each(parsed):
    assert [s.number for s in parsed.values()] == [1, 2, 3, 4, 5]
    for s in parsed.values():
        assert len(s.exercises) >= 3, s.name
        assert s.title.startswith(f"Session {s.number} ·"), s.title
        assert 25 <= s.minutes <= 60, (s.name, s.minutes)  # exercise minutes fit a session of at most an hour
        for ex in s.exercises:
            assert ex.id in checks.CHECKS, ex.id
            assert 1 <= ex.difficulty <= 5 and 1 <= ex.importance <= 5 and 3 <= ex.minutes <= 20
            assert ex.hint_cell is not None and parsing.hint_text(s, ex), f"exercise {ex.id} has no hint"
            source = s.notebook.cells[ex.solution_cell].source
            for fn in checks.CHECKS[ex.id].functions:  # the cell defines what the check is called with
                assert re.search(rf"^def {fn}\(", source, re.M), (ex.id, fn)
    assert sorted(checks.CHECKS) == sorted(ex.id for _, ex in exercises(parsed))
    assert [ex.id for _, ex in exercises(parsed) if ex.difficulty >= 4], "no harder exercise (difficulty ●●●●○ or more)"


def test_sessions_are_offline_matplotlib_only():
    for path in SESSIONS:
        text = path.read_text()
        for banned in ("ipywidgets", "plotly", "bokeh", "altair", "from_pretrained(", "hf_hub", "http://",
                       "https://"):
            assert banned not in text, (path.name, banned)


def test_the_parser_says_what_is_malformed(tmp_path):
    head = "# %% [markdown]\n# # Session 9 · x\n\n"
    cases = {
        "# %% [markdown]\n# ### Exercise 9.1 — x · difficulty ●● · importance ●●●●○ · 5 min\n": "does not read",
        "# %%\ndef f():\n    # BEGIN SOLUTION\n    return 1\n    # END SOLUTION\n": "outside an exercise",
        ("# %% [markdown]\n# ### Exercise 9.1 — x · difficulty ●○○○○ · importance ●●●●○ · 5 min\n\n"
         "# %%\ndef f():\n    # BEGIN SOLUTION\n    return 1\n    # END SOLUTION\n\n# %%\nprint(f())\n"): "must run its check",
        ("# %% [markdown]\n# ### Exercise 9.2 — x · difficulty ●○○○○ · importance ●●●●○ · 5 min\n"): "should be 9.1",
        ("# %% [markdown]\n# text\n#\n# ### Exercise 9.1 — x · difficulty ●○○○○ · importance ●●●●○ · 5 min\n"):
            "first line of its own markdown cell",
        ("# %% [markdown]\n# ### Exercise 9.1 — x · difficulty ●○○○○ · importance ●●●●○ · 5 min\n\n"
         "# %%\ndef f():\n    # BEGIN SOLUTION\n    return 1\n"): "without `# END SOLUTION`",
        "# %% [markdown]\n# #### Hint\n#\n# a hint with no exercise\n": "belongs right after its exercise's heading",
        ("# %% [markdown]\n# ### Exercise 9.1 — x · difficulty ●○○○○ · importance ●●●●○ · 5 min\n\n"
         "# %%\ndef f():\n    # BEGIN SOLUTION\n    return 1\n    # END SOLUTION\n\n"
         "# %% [markdown]\n# #### Hint\n#\n# too late\n"): "before the solution cell",
    }
    for body, message in cases.items():
        path = tmp_path / "09_bad.py"
        path.write_text(head + body)
        with pytest.raises(ConfigError, match=re.escape(message)):
            parsing.parse_session(path)


# ------------------------------------------------------------------------------------------- the check machinery
# (each session's checks on its solutions and on wrong answers: tests/test_workshop_<name>.py)


def test_each_session_has_its_checks_module_and_each_check_its_name(parsed):
    """checks/<name>.py registers exactly the exercises of notebooks/workshop/NN_<name>.py, each once, under the
    name the session calls (`checks.ex_1_2`)."""
    assert list(checks.SESSION_MODULES) == [stem[3:] for stem in parsed]
    for module, s in zip(checks.SESSION_MODULES, parsed.values()):
        mine = [c.exercise for c in checks.CHECKS.values() if c.run.__module__ == f"{checks.__name__}.{module}"]
        assert mine == [ex.id for ex in s.exercises], (module, mine)
    for exercise, c in checks.CHECKS.items():
        assert c.exercise == exercise and c.run.__name__ == f"ex_{exercise.replace('.', '_')}"
        assert getattr(checks, c.run.__name__) is c.run and c.run.__name__ in checks.__all__


def test_the_decorator_registers_a_check_once_by_its_name(monkeypatch):
    from circuitdev.workshop.checks import base

    monkeypatch.setattr(base, "CHECKS", dict(base.CHECKS))  # the decorator's registry, restored afterwards

    @base.exercise
    def ex_9_1(double) -> str:
        base.expect(double(2), 4, what="double(2)", causes=[("2 + 3 is not 2 * 2", 5)])
        return "doubles"

    assert base.CHECKS["9.1"].functions == ("double",) and base.CHECKS["9.1"].run is ex_9_1
    assert ex_9_1(lambda x: 2 * x).line() == "✔ Exercise 9.1 · doubles"
    assert base.check("9.1", lambda x: x + 3).line() == "✘ Exercise 9.1 · double(2) is 5, expected 4; likely cause: " \
                                                        "2 + 3 is not 2 * 2"
    with pytest.raises(TypeError, match=r"checks 1 function\(s\) \(double\), got 2"):
        ex_9_1(abs, abs)
    with pytest.raises(ValueError, match="exercise 9.1 has two checks"):
        base.exercise(ex_9_1.__wrapped__)
    with pytest.raises(ValueError, match="ex_<session>_<number>"):
        base.exercise(lambda double: "x")
    with pytest.raises(KeyError, match="no check for exercise '9.9'; the exercises are 1.1, 1.2"):
        base.check("9.9", abs)


def test_an_exception_in_the_participant_function_is_one_line():
    def broken(rows, targets, valid, base):
        return rows[..., 1000]

    line = checks.ex_1_2(broken).line()
    assert line.startswith("✘ Exercise 1.2 · your function raised IndexError: ") and "\n" not in line
    assert "line " in line and "rows[..., 1000]" in line
    assert "✘" in checks.ex_1_2(42).line()  # not a function


def test_not_done_and_strict_mode(monkeypatch):
    def stub(first_a, seq_len):
        raise NotImplementedError("Exercise 1.1: the six class targets")

    def wrong(first_a, seq_len):
        return {}

    verdict = checks.ex_1_1(stub)
    assert not verdict.ok and "not done yet (Exercise 1.1: the six class targets)" in verdict.line()
    monkeypatch.setattr(checks, "STRICT", True)
    with pytest.raises(NotImplementedError, match="Exercise 1.1"):
        checks.ex_1_1(stub)
    with pytest.raises(checks.ExerciseFailed, match=r"^✘ Exercise 1.1 · "):
        checks.ex_1_1(wrong)


def test_difference_names_shape_index_and_type():
    assert checks.difference(np.ones((2, 3)), np.ones((2, 3))) is None
    assert "shape (3, 2), expected (2, 3) (transposed?)" in checks.difference(np.ones((3, 2)), np.ones((2, 3)))
    d = checks.difference(np.array([[1.0, 2.0], [3.0, 5.0]]), np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert "differs at index (1, 1): 5 instead of 4 (1 of 4 values)" in d
    assert "is None: does the function `return`" in checks.difference(None, np.ones(2))
    assert "lacks the key(s) ['b']" in checks.difference({"a": 1}, {"a": 1, "b": 2})
    assert checks.difference(torch.ones(2), np.ones(2)) is None


# ------------------------------------------------------------------------------------------ the sessions' data


def test_the_toy_lookups_are_the_toy_packages(tmp_path, monkeypatch):
    """workshop.data answers what the toy package knows through it: panel -> recipe, readiness, window kinds, the
    final revision."""
    import json

    from circuitdev.toy import recipe as toy_recipe
    from circuitdev.toy import train as toy_train
    from circuitdev.workshop import data
    from circuitdev.workshop.paths import mini_recipe

    assert data.WINDOW_KINDS == ("text", "periodic", "repeat", "backcopy")  # recall: an experiment, off throughout
    assert data.final_revision() == "step2500" and data.final_revision("toy-pythia-mini") == "step1500"
    family, mini = toy_recipe.recipe_of("toy-olmo-mini")
    assert family == "olmo" and mini is toy_recipe.PRESETS["mini"] is mini_recipe()
    with pytest.raises(ConfigError, match="not a toy panel of any preset"):
        toy_recipe.recipe_of("pythia-1b")
    with pytest.raises(ConfigError, match="unknown window kind 'recall'; the kinds are text, periodic, repeat, "):
        data.windows("recall")
    monkeypatch.setenv("CIRCUITDEV_DATA", str(tmp_path))
    panel, folder = "toy-pythia-mini", tmp_path / "toy" / "toy-pythia-mini"
    assert not toy_train.panel_ready(panel)
    for step in mini.grid():
        (folder / f"step{step}").mkdir(parents=True)
        for name in ("config.json", "model.safetensors"):
            (folder / f"step{step}" / name).write_text("{}")
    (folder / "recipe.json").write_text(json.dumps({"hash": mini.recipe_hash()}))
    assert not toy_train.panel_ready(panel)  # no panel file yet
    (tmp_path / "panels").mkdir()
    (tmp_path / "panels" / f"{panel}.yaml").write_text(f"name: {panel}\n")
    assert toy_train.panel_ready(panel)
    # training reuses a panel only with its dense checkpoints too (the same hash: saving them changes no weight)
    assert not toy_train.checkpoints_ready(folder, mini.replace(dense_every=10))
    (folder / "recipe.json").write_text(json.dumps({"hash": "another recipe"}))
    assert not toy_train.panel_ready(panel)


# ------------------------------------------------------------------------------------------------- the editions


def test_student_edition_keeps_no_solution_code(parsed):
    for s in parsed.values():
        student = build.student_notebook(s)
        code = "\n".join(c.source for c in student.cells if c.cell_type == "code")
        assert "BEGIN SOLUTION" not in code and "END SOLUTION" not in code
        outside = {line.strip() for c in s.notebook.cells for line in
                   (build.stub(c.source, s.exercises[0]) if c.cell_type == "code" else c.source).splitlines()}
        for line in set(solution_lines(s)) - outside:
            assert line not in code, (s.name, line)
        for ex in s.exercises:
            cell = student.cells[ex.solution_cell].source
            assert f"raise NotImplementedError({ex.stub_message!r})" in cell
            assert f"def {checks.CHECKS[ex.id].functions[0]}(" in cell  # the rest of the cell is kept
        assert all(not c.get("outputs") for c in student.cells if c.cell_type == "code")


def test_a_student_stub_raises_naming_its_exercise(parsed):
    s = parsed["01_probe_by_hand"]
    ex = s.exercises[1]
    ns = solution_namespace(s, s.exercises[0])
    exec(build.student_notebook(s).cells[ex.solution_cell].source, ns)  # noqa: S102
    with pytest.raises(NotImplementedError, match=r"^Exercise 1\.2: selectivity of one class$"):
        ns["selectivity_one_class"](None, None, None, None)


def test_book_edition_has_exercise_and_folded_solution_blocks(parsed):
    s = parsed["03_sinks_and_selectivity"]
    nb = book_edition.book_notebook(s, build.solutions_notebook(s), executed=False)
    sources = [c.source for c in nb.cells]
    for ex in s.exercises:
        at = next(i for i, src in enumerate(sources) if f":label: {ex.label}\n" in src)
        assert sources[at].startswith(f"### Exercise {ex.id} — {ex.title}\n\n```{{exercise}} {ex.ratings}")
        assert ":nonumber:" in sources[at]
        # the hint, folded, inside the exercise's box (kept in the participants' edition)
        assert f":::{{hint}}\n:class: dropdown\n\n{parsing.hint_text(s, ex)}\n:::\n```" in sources[at]
        assert sources[at + 1].startswith(f"````{{solution}} {ex.label}\n:label: sol-{s.number}-{ex.number}\n"
                                          ":class: dropdown\n\n```python\n")
        assert f"def {checks.CHECKS[ex.id].functions[0]}(" in sources[at + 1]
        assert nb.cells[at + 1].cell_type == "markdown" and sources[at + 1].endswith("\n```\n````")
        assert f"checks.ex_{s.number}_{ex.number}(" in sources[at + 2]
    assert "without running it" in "\n".join(sources)
    assert "BEGIN SOLUTION" not in "\n".join(sources)


def test_book_edition_links_the_book_pages_a_session_names_by_path(parsed):
    """Issue 30: paths as text where the reader would follow them. In the book a session's `book/toy_recipe.md` is a
    link to that page (the sessions sit in book/_generated/workshop/); the participants' notebooks keep the path."""
    s = parsed["03_sinks_and_selectivity"]
    solutions = build.solutions_notebook(s)
    assert "`book/toy_recipe.md`" in "\n".join(c.source for c in solutions.cells)
    text = "\n".join(c.source for c in book_edition.book_notebook(s, solutions, executed=False).cells)
    assert "{doc}`book/toy_recipe.md <../../toy_recipe>`" in text and "(`book/toy_recipe.md`)" not in text
    assert book_edition.page_links("see `book/rerun.md` and `lib/x.py`") == \
        "see {doc}`book/rerun.md <../../rerun>` and `lib/x.py`"


def test_build_without_running_writes_both_editions(tmp_path):
    proc = subprocess.run([str(BIN / "circuitdev"), "workshop", "build", "--out", str(tmp_path), "--no-execute"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for edition in ("student", "solutions"):
        names = sorted(p.name for p in (tmp_path / edition).glob("*.ipynb"))
        assert names == [f"{p.stem}.ipynb" for p in SESSIONS], edition
    proc = subprocess.run([str(BIN / "circuitdev"), "workshop", "build", "7", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "no session '7'" in proc.stderr


def test_list_shows_the_ratings():
    proc = subprocess.run([str(BIN / "circuitdev"), "workshop", "list"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "1.2   selectivity of one class" in proc.stdout and "difficulty ●●○○○ · importance ●●●●● · 10 min" in proc.stdout


# --------------------------------------------------------------------------------------------------- the doctor


def test_workshop_doctor_is_the_base_doctor_plus_the_workshop_checks(monkeypatch):
    from circuitdev import doctor
    from circuitdev.commands import doctor as doctor_command
    from circuitdev.workshop import doctor as wdoctor

    checks_run = doctor_command.checks_to_run(workshop=True)  # `circuitdev workshop doctor` and `doctor --workshop`
    assert checks_run[:len(doctor.BASE_CHECKS)] == doctor.BASE_CHECKS
    assert checks_run[len(doctor.BASE_CHECKS):] == wdoctor.WORKSHOP_CHECKS
    assert doctor_command.checks_to_run() == doctor.BASE_CHECKS
    assert wdoctor.check_sessions().status == "ok"
    assert wdoctor.check_frontend().status in ("ok", "warn")
    monkeypatch.setenv("CIRCUITDEV_PUBLISHED", "/nonexistent/published")
    result = wdoctor.check_published()
    assert result.status == "warn" and "session 5 runs on the toy panels" in result.message and result.fix


def test_workshop_doctor_without_a_mini_preset_fails_naming_it(monkeypatch):
    from circuitdev import doctor
    from circuitdev.toy import recipe
    from circuitdev.workshop import doctor as wdoctor

    monkeypatch.setattr(recipe, "PRESETS", {k: v for k, v in recipe.PRESETS.items() if k != "mini"})
    (result,) = doctor.run_checks([wdoctor.check_mini_run])
    assert result.status == "fail" and "no 'mini' toy preset" in result.message


def test_training_time_is_extrapolated_from_a_few_steps():
    """steps timed after one warm-up step, per step times the recipe's steps (a fake clock: no wall-clock bound)."""
    from circuitdev.toy.recipe import ToyRecipe
    from circuitdev.workshop import doctor as wdoctor

    ticks = iter([10.0, 10.5])  # the clock before and after the 2 timed steps: 0.25 s a step
    small = ToyRecipe(n_layer=1, d_model=16, n_head=2, d_ff=32, steps=100, batch_size=2, seq_len=16)
    assert wdoctor.training_seconds(small, "gpt_neox", steps=2, clock=lambda: next(ticks)) == pytest.approx(25.0)
    assert 0 < wdoctor.training_seconds(small, "gpt_neox", steps=2) < float("inf")  # the real clock


@pytest.mark.slow
def test_workshop_doctor_command():
    proc = subprocess.run([str(BIN / "circuitdev"), "workshop", "doctor"], capture_output=True, text=True,
                          timeout=DOCTOR_HANG_S)
    out = proc.stdout
    for name in ("python", "packages", "toy checkpoints", "mini run", "probe", "toy records", "published",
                 "front end", "sessions"):
        assert re.search(rf"^(ok  |WARN|FAIL)  {re.escape(name)} ", out, re.M), (name, out)
    assert proc.returncode in (0, 2) and "doctor: " in out
    probe = next(line for line in out.splitlines() if re.match(r"^(ok  |WARN|FAIL)  probe ", line))
    assert "screened" in probe, probe


# ----------------------------------------------------------------------------------------- executed notebooks


@pytest.fixture(scope="module")
def toy_data():
    """The toy panels the sessions read and their probe records, trained / probed when missing."""
    from circuitdev.workshop import data

    data.prepare_sessions()


@pytest.mark.slow
@pytest.mark.parametrize("session", [p.stem for p in SESSIONS])
def test_solution_notebook_runs_from_any_directory(session, toy_data, tmp_path_factory, parsed):
    import nbformat

    out = tmp_path_factory.mktemp(f"solutions-{session}")
    proc = subprocess.run([str(BIN / "circuitdev"), "workshop", "build", session, "--out", str(out), "--edition",
                           "solutions", "--edition", "book"], capture_output=True, text=True, cwd=out,
                          timeout=SESSION_HANG_S)  # the kernel runs in `out` too (build's default)
    assert proc.returncode == 0, proc.stderr[-3000:]
    nb = nbformat.read(out / "solutions" / f"{session}.ipynb", as_version=4)
    text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                     if o.output_type == "stream")
    for ex in parsed[session].exercises:
        assert f"✔ Exercise {ex.id} · " in text, (session, ex.id)
    assert "✘" not in text and "Traceback" not in text
    assert not any(o.output_type == "error" for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    book_nb = nbformat.read(out / f"{session}.ipynb", as_version=4)
    assert sum("{solution}" in c.source for c in book_nb.cells) == len(parsed[session].exercises)


@pytest.mark.slow
@pytest.mark.parametrize("session", [p.stem for p in SESSIONS])
def test_student_notebook_stops_at_its_first_exercise(session, toy_data, tmp_path, parsed):
    import nbformat
    import papermill as pm

    s = parsed[session]
    nb_path = tmp_path / f"{session}.ipynb"
    nbformat.write(build.student_notebook(s), nb_path)
    with pytest.raises(pm.PapermillExecutionError) as err:
        pm.execute_notebook(str(nb_path), str(tmp_path / "out.ipynb"), kernel_name="python3", progress_bar=False,
                            cwd=str(tmp_path))
    first = s.exercises[0]
    assert err.value.ename == "NotImplementedError"
    assert err.value.evalue == first.stub_message
    assert "Traceback" not in "".join(err.value.traceback)  # one line, no bare traceback
