"""The workshop track: sessions, checks, the three editions, the CLI and the doctor's workshop checks.

Fast tests parse the five sessions, run every check on the instructor's solution (taken from the session source, not
copied here) and on one deliberately wrong implementation each, and build the editions without running them. The
slow ones execute every solution notebook with papermill from a temporary working directory within its budget
(3 minutes; session 2 trains the `mini` preset live inside it), and every student notebook up to its first exercise,
where it must stop with NotImplementedError naming that exercise. They use the data folder of the checkout (as the
sessions do): the toy panel `toy-pythia` and its records are prepared first when they are missing (training them is
not counted in any session's budget), and the authors' files are used when `CIRCUITDEV_PUBLISHED` names them.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from circuitdev.errors import ConfigError
from circuitdev.workshop import build, checks

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SESSIONS = build.discover()
BUDGET_S = 180.0  # a participant's "run all" of a solved session, on 2 cores


@pytest.fixture(scope="module")
def parsed() -> dict[str, build.Session]:
    return {p.stem: build.parse_session(p) for p in SESSIONS}


def exercises(parsed_sessions):
    return [(s, ex) for s in parsed_sessions.values() for ex in s.exercises]


def solution_namespace(session: build.Session, upto: build.Exercise) -> dict:
    """The imports of the session's cells (imports only: no data is loaded) and its solution cells up to `upto`."""
    ns: dict = {}
    for cell in session.notebook.cells:
        if cell.cell_type != "code" or "parameters" in cell.metadata.get("tags", []):
            continue
        tree = ast.parse(build.strip_markers(cell.source))
        imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        exec(compile(ast.Module(body=imports, type_ignores=[]), session.name, "exec"), ns)  # noqa: S102
    for ex in session.exercises:
        exec(build.strip_markers(session.notebook.cells[ex.solution_cell].source), ns)  # noqa: S102
        if ex is upto:
            break
    return ns


# ---------------------------------------------------------------------------------------------- the sessions


def test_five_sessions_with_at_least_three_rated_exercises_each(parsed):
    assert [s.number for s in parsed.values()] == [1, 2, 3, 4, 5]
    for s in parsed.values():
        assert len(s.exercises) >= 3, s.name
        assert s.title.startswith(f"Session {s.number} ·"), s.title
        assert 25 <= s.minutes <= 45, (s.name, s.minutes)  # exercise minutes fit a 30-45 minute session
        for ex in s.exercises:
            assert ex.id in checks.CHECKS, ex.id
            assert 1 <= ex.difficulty <= 5 and 1 <= ex.importance <= 5 and 3 <= ex.minutes <= 20
            source = s.notebook.cells[ex.solution_cell].source
            for fn in checks.CHECKS[ex.id].functions:  # the cell defines what the check is called with
                assert re.search(rf"^def {fn}\(", source, re.M), (ex.id, fn)
    assert sorted(checks.CHECKS) == sorted(ex.id for _, ex in exercises(parsed))


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
    }
    for body, message in cases.items():
        path = tmp_path / "09_bad.py"
        path.write_text(head + body)
        with pytest.raises(ConfigError, match=re.escape(message)):
            build.parse_session(path)


# -------------------------------------------------------------------------------------------------- the checks


@pytest.mark.parametrize("exercise", sorted(checks.CHECKS))
def test_each_check_passes_on_the_instructor_solution(parsed, exercise):
    session, ex = next((s, e) for s, e in exercises(parsed) if e.id == exercise)
    ns = solution_namespace(session, ex)
    verdict = checks.check(exercise, *(ns[f] for f in checks.CHECKS[exercise].functions))
    assert verdict.ok, verdict.line()
    assert verdict.line().startswith(f"✔ Exercise {exercise} · ") and "\n" not in verdict.line()


def _ref_targets(first_a, seq_len):
    q = seq_len - 1
    return {"induction": first_a + 1, "previous-token": q - 1, "duplicate-token": first_a, "first-token": 0,
            "self": q, "local": [q - 2, q - 3, q - 4, q - 5]}


def _wrong_six(rows, batch):
    """Every class averaged over the valid sequences (the paper: only induction and duplicate-token)."""
    from circuitdev.measure.positions import baseline_positions, local_positions

    a = torch.as_tensor(rows, dtype=torch.float64)
    base = a[..., torch.as_tensor(baseline_positions(batch.seq_len))].mean(dim=(0, 3)).clamp(min=1e-8)
    n, v, q = torch.arange(batch.n), torch.as_tensor(batch.valid), batch.seq_len - 1
    fa = torch.as_tensor(batch.first_a)

    def at(pos):
        return (a[n, :, :, pos][v].mean(0) / base).numpy()

    return {"induction": at(fa + 1), "duplicate-token": at(fa), "previous-token": at(torch.full_like(fa, q - 1)),
            "first-token": at(torch.zeros_like(fa)), "self": at(torch.full_like(fa, q)),
            "local": np.mean([at(torch.full_like(fa, p)) for p in local_positions(batch.seq_len)], axis=0)}


def _allq_over_t(attn, skip):
    """The all-query baseline with T - 1 other keys for every query (query q has q)."""
    c0 = np.asarray(attn, float)[:, :, skip:, 0]
    mass = c0.mean(axis=(0, 2))
    return mass, mass / ((1 - c0) / (np.asarray(attn).shape[-1] - 1)).mean(axis=(0, 2))


def _bos_best_class(dev, threshold):
    hit = dev.assign(bos=(dev["sel_first_token"] >= threshold) & (dev["best_class"] == "first-token"))
    return hit.groupby(["panel", "revision"], as_index=False).agg(bos_fraction=("bos", "mean"))


def _recall_cumulative(dev, panel, threshold):
    p = dev[dev["panel"] == panel].sort_values("tokens_b")
    final = p[p["tokens_b"] == p["tokens_b"].max()]
    circuit = set(zip(final["layer"][final["sel_induction"] >= threshold],
                      final["head"][final["sel_induction"] >= threshold]))
    p = p.assign(hit=[(l, h) in circuit and s >= threshold for l, h, s in zip(p["layer"], p["head"],
                                                                            p["sel_induction"])])
    p["hit"] = p.groupby(["layer", "head"])["hit"].cummax()
    out = p.groupby("revision", as_index=False, sort=False)["hit"].sum()
    return out.assign(recall=out["hit"] / len(circuit))


def _gap_fraction(dev, a, b, threshold):
    from circuitdev.analysis import findings

    f = findings.bos_fraction(dev, threshold=threshold).sort_values("tokens_b").groupby("panel")["bos_fraction"].last()
    return float(f[a] - f[b])  # a fraction, not percentage points


def _pr_inverse(m):
    s = np.linalg.svd(np.asarray(m, float), compute_uv=False)
    p = s**2 / (s**2).sum()
    return float(1 / (p**2).sum())


def _lead_raw_pr(pr, sel, threshold, level):
    pr, sel = np.asarray(pr, float), np.asarray(sel, float)
    formed = np.flatnonzero(sel >= threshold)
    up = np.flatnonzero(pr >= level * pr.max())  # PR, not PR - 1
    return (int(formed[0]) if len(formed) else None, int(up[0]) if len(up) else None)


def _matched_per_layer_rng(spec, n_heads, seed):
    out = {}
    for layer, heads in spec.items():
        rng = np.random.RandomState(seed)  # a fresh stream per layer
        eligible = [h for h in range(n_heads) if h not in heads]
        k = min(len(heads), len(eligible))
        if k:
            out[layer] = sorted(int(h) for h in rng.choice(eligible, size=k, replace=False))
    return out


def _zero_in_place(z, heads, d_head):
    for h in heads:
        z[..., h * d_head:(h + 1) * d_head] = 0
    return z


WRONG = {
    # one deliberately wrong implementation per check, and a phrase its verdict must contain
    "1.1": (lambda first_a, seq_len: {**_ref_targets(first_a, seq_len), "previous-token": seq_len - 1},
            "previous token is q - 1"),
    "1.2": (lambda rows, targets, valid, base: (
        torch.as_tensor(rows, dtype=torch.float64)[torch.arange(len(targets)), :, :, torch.as_tensor(targets)].mean(0)
        / torch.as_tensor(rows, dtype=torch.float64)[..., torch.as_tensor(base)].mean(dim=(0, 3)).clamp(min=1e-8)
    ).numpy(), "over the valid ones only"),
    "1.3": (_wrong_six, "the other four classes average over all of them"),
    "1.4": (lambda rows, first_a, positions: torch.as_tensor(rows, dtype=torch.float64)[
        ..., torch.as_tensor(positions)].mean(dim=(0, 3)).numpy(), "A and B are still in the baseline"),
    "2.1": (lambda sel, t: (np.asarray(sel) >= t).argmax(0), "never reaches the threshold gets -1"),
    "2.2": (lambda steps, sel, t, k: (lambda c: int(steps[np.flatnonzero(c >= k)[0]]) if (c >= k).any() else None)(
        (np.maximum.accumulate(np.asarray(sel) >= t, axis=0)).reshape(len(steps), -1).sum(1)),
            "a head that fell back does not count"),
    "2.3": (lambda attn: (lambda a, h: a[:, :, np.arange(h, 2 * h), np.arange(0, h)].mean(axis=(0, 2)))(
        np.asarray(attn, float), np.asarray(attn).shape[-1] // 2), "the token AFTER the earlier copy"),
    "3.1": (_allq_over_t, "q of them, not T - 1"),
    "3.2": ((lambda m, t: m * t / (1 - m), lambda s, t: s / (s + t)), "selectivity = m(T-1)/(1-m)"),
    "3.3": (lambda attn0, eps, skip: np.asarray(attn0)[..., skip:].mean(axis=(0, 3)), "not the mean attention"),
    "4.1": (_zero_in_place, "changed its input in place"),
    "4.2": (_matched_per_layer_rng, "the random stream is not"),
    "4.3": (_pr_inverse, "inverse participation ratio"),
    "4.4": (_lead_raw_pr, "the signal is PR - 1"),
    "5.1": (_bos_best_class, "whatever its best class"),
    "5.2": (_gap_fraction, "multiply the difference of fractions by 100"),
    "5.3": (_recall_cumulative, "only while it is at or above the threshold"),
}


def test_there_is_a_wrong_answer_for_every_check():
    assert sorted(WRONG) == sorted(checks.CHECKS)


@pytest.mark.parametrize("exercise", sorted(checks.CHECKS))
def test_each_check_fails_on_a_wrong_answer_and_says_what_differs(exercise):
    fn, phrase = WRONG[exercise]
    fns = fn if isinstance(fn, tuple) else (fn,)
    verdict = checks.check(exercise, *fns)
    line = verdict.line()
    assert not verdict.ok, line
    assert line.startswith(f"✘ Exercise {exercise} · ") and "\n" not in line
    assert phrase in line, line
    assert "Traceback" not in line


def test_other_right_answers_pass_too():
    """Answers a participant wrote cold, not the instructor's: other dtypes and libraries must not fail a check (a
    float64 answer once failed 3.3 on values at eps: float32(0.3) > 0.3)."""
    def parking_share(attn0, eps, skip):  # torch, float64
        a = torch.as_tensor(attn0, dtype=torch.float64)[..., skip:]
        return (a > eps).double().mean(dim=(0, 3)).numpy()

    def milestone(steps, sel, threshold, k):  # counts per revision, then the first
        counts = (np.asarray(sel) >= threshold).reshape(len(steps), -1).sum(1)
        ok = np.flatnonzero(counts >= k)
        return None if len(ok) == 0 else steps[ok[0]]

    for exercise, fn in (("3.3", parking_share), ("2.2", milestone)):
        verdict = checks.check(exercise, fn)
        assert verdict.ok, verdict.line()


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

    verdict = checks.ex_1_1(stub)
    assert not verdict.ok and "not done yet (Exercise 1.1: the six class targets)" in verdict.line()
    monkeypatch.setattr(checks, "STRICT", True)
    with pytest.raises(NotImplementedError, match="Exercise 1.1"):
        checks.ex_1_1(stub)
    with pytest.raises(checks.ExerciseFailed, match=r"^✘ Exercise 1.1 · "):
        checks.ex_1_1(WRONG["1.1"][0])


def test_difference_names_shape_index_and_type():
    assert checks.difference(np.ones((2, 3)), np.ones((2, 3))) is None
    assert "shape (3, 2), expected (2, 3) (transposed?)" in checks.difference(np.ones((3, 2)), np.ones((2, 3)))
    d = checks.difference(np.array([[1.0, 2.0], [3.0, 5.0]]), np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert "differs at index (1, 1): 5 instead of 4 (1 of 4 values)" in d
    assert "is None: does the function `return`" in checks.difference(None, np.ones(2))
    assert "lacks the key(s) ['b']" in checks.difference({"a": 1}, {"a": 1, "b": 2})
    assert checks.difference(torch.ones(2), np.ones(2)) is None


# ------------------------------------------------------------------------------------------------- the editions


def test_student_edition_keeps_no_solution_code(parsed):
    for s in parsed.values():
        student = build.student_notebook(s)
        code = "\n".join(c.source for c in student.cells if c.cell_type == "code")
        assert "BEGIN SOLUTION" not in code and "END SOLUTION" not in code
        outside = {line.strip() for c in s.notebook.cells for line in
                   (build.stub(c.source, s.exercises[0]) if c.cell_type == "code" else c.source).splitlines()}
        for line in set(build.solution_lines(s)) - outside:
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
    nb = build.book_notebook(s, build.solutions_notebook(s), executed=False)
    sources = [c.source for c in nb.cells]
    for ex in s.exercises:
        at = next(i for i, src in enumerate(sources) if f":label: {ex.label}\n" in src)
        assert sources[at].startswith(f"### Exercise {ex.id} — {ex.title}\n\n```{{exercise}} {ex.ratings}")
        assert ":nonumber:" in sources[at]
        assert sources[at + 1].startswith(f"````{{solution}} {ex.label}\n:label: sol-{s.number}-{ex.number}\n"
                                          ":class: dropdown\n\n```python\n")
        assert f"def {checks.CHECKS[ex.id].functions[0]}(" in sources[at + 1]
        assert nb.cells[at + 1].cell_type == "markdown" and sources[at + 1].endswith("\n```\n````")
        assert f"checks.ex_{s.number}_{ex.number}(" in sources[at + 2]
    assert "without running it" in "\n".join(sources)
    assert "BEGIN SOLUTION" not in "\n".join(sources)


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
    from circuitdev.workshop import doctor as wdoctor

    checks_run = doctor.default_checks(workshop=True)
    assert checks_run[:len(doctor.BASE_CHECKS)] == doctor.BASE_CHECKS
    assert checks_run[len(doctor.BASE_CHECKS):] == wdoctor.WORKSHOP_CHECKS
    assert doctor.default_checks() == doctor.BASE_CHECKS
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
    from circuitdev.toy.recipe import ToyRecipe
    from circuitdev.workshop.doctor import training_seconds

    small = ToyRecipe(n_layer=1, d_model=16, n_head=2, d_ff=32, steps=100, batch_size=2, seq_len=16)
    seconds = training_seconds(small, "gpt_neox", steps=2)
    assert 0 < seconds < 60


@pytest.mark.slow
def test_workshop_doctor_command():
    t0 = time.perf_counter()
    proc = subprocess.run([str(BIN / "circuitdev"), "workshop", "doctor"], capture_output=True, text=True,
                          timeout=300)
    out = proc.stdout
    for name in ("python", "packages", "toy checkpoints", "mini run", "probe", "toy records", "published",
                 "front end", "sessions"):
        assert re.search(rf"^(ok  |WARN|FAIL)  {re.escape(name)} ", out, re.M), (name, out)
    assert proc.returncode in (0, 2) and "doctor: " in out
    probe = next(line for line in out.splitlines() if re.match(r"^(ok  |WARN|FAIL)  probe ", line))
    assert "screened" in probe, probe
    assert time.perf_counter() - t0 < 120


# ----------------------------------------------------------------------------------------- executed notebooks


@pytest.fixture(scope="module")
def toy_data():
    """The default toy panel and its probe records, trained / probed when missing (not timed)."""
    from circuitdev.workshop import data

    data.ensure_toy("toy-pythia")
    data.toy_table("toy-pythia")
    if data.published() is None:  # session 5 then runs on the three toy panels
        for panel in ("toy-olmo", "toy-olmoe"):
            data.ensure_toy(panel)
            data.toy_table(panel)


@pytest.mark.slow
@pytest.mark.parametrize("session", [p.stem for p in SESSIONS])
def test_solution_notebook_runs_from_any_directory_within_budget(session, toy_data, tmp_path_factory, parsed):
    import nbformat

    out = tmp_path_factory.mktemp(f"solutions-{session}")
    (built,) = build.build(out, [session], editions=("solutions", "book"), cwd=out, log=lambda _: None)
    assert built.seconds <= BUDGET_S, f"{session} took {built.seconds:.0f} s (budget {BUDGET_S:.0f} s)"
    nb = nbformat.read(built.paths["solutions"], as_version=4)
    text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                     if o.output_type == "stream")
    for ex in parsed[session].exercises:
        assert f"✔ Exercise {ex.id} · " in text, (session, ex.id)
    assert "✘" not in text and "Traceback" not in text
    assert not any(o.output_type == "error" for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    book_nb = nbformat.read(built.paths["book"], as_version=4)
    assert sum("{solution}" in c.source for c in book_nb.cells) == len(parsed[session].exercises)
    print(f"{session}: {built.seconds:.0f} s")
    (Path(out) / "timing.json").write_text(json.dumps({"session": session, "seconds": built.seconds}))


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
