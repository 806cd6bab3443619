"""The workshop on a participant's machine: the torch thread count chosen by measurement and stored, the workshop's
own folder (nothing written into the data folder), the participant's mini run reused, and the doctor's mini-run and
published checks. Timings are injected (a fake step timer): no test reads a wall clock.
"""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pytest
from published_fixtures import write_published

from circuitdev import doctor
from circuitdev.workshop import data, machine
from circuitdev.workshop import paths as wpaths
from circuitdev.workshop import doctor as wdoctor


def fake_timer(per_step: dict[int, list[float]]):
    """A step timer returning, for each thread count, the given seconds per step round after round."""
    calls: dict[int, int] = {}

    def timer(threads: int, steps: int) -> float:
        k = calls.get(threads, 0)
        calls[threads] = k + 1
        return per_step[threads][k % len(per_step[threads])]

    return timer


@pytest.fixture
def workshop(tmp_path, monkeypatch) -> Path:
    """An empty data folder and workshop folder for one test."""
    monkeypatch.setenv("CIRCUITDEV_DATA", str(tmp_path / "data"))
    monkeypatch.setenv(wpaths.WORKSHOP_ENV, str(tmp_path / "ws"))
    (tmp_path / "data").mkdir()
    return tmp_path / "ws"


def fake_mini_run(root: Path, *, seconds: float | None = 41.5) -> str:
    """The mini preset's checkpoints (empty files), recipe.json and panel file under a data root, as training leaves
    them: enough for `panel_ready`."""
    recipe = wpaths.mini_recipe()
    panel = recipe.panel_name("gpt_neox")
    folder = root / "toy" / panel
    for step in recipe.grid():
        (folder / f"step{step}").mkdir(parents=True)
        for name in ("config.json", "model.safetensors"):
            (folder / f"step{step}" / name).write_text("{}")
    (folder / "recipe.json").write_text(json.dumps({"hash": recipe.recipe_hash(),
                                                    **({"seconds": seconds} if seconds else {})}))
    (root / "panels").mkdir(parents=True, exist_ok=True)
    (root / "panels" / f"{panel}.yaml").write_text(f"name: {panel}\n")
    return panel


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------------------------------------- thread choice


def test_the_fastest_thread_count_is_chosen_from_interleaved_rounds(workshop):
    # a busy 2-core machine: 2 threads ten times slower; one slow round of 1 thread does not change the median
    timer = fake_timer({1: [0.10, 0.30, 0.12], 2: [1.0, 1.1, 0.9]})
    timed: list[int] = []
    choice = machine.measure(timer=lambda n, steps: timed.append(n) or timer(n, steps), counts=[1, 2], rounds=3)
    assert choice.threads == 1 and choice.seconds_per_step == {1: 0.12, 2: 1.0}
    assert timed == [1, 2, 1, 1]  # interleaved; 2 threads, 10x slower in the first round, not timed again
    assert choice.estimate_s == pytest.approx(0.12 * wpaths.mini_recipe().steps)
    lo, hi = choice.expected_range()
    assert lo < choice.estimate_s < hi
    line = choice.summary()
    assert "1 thread: 120 ms a step" in line and "2 threads: 1000 ms a step (8.3x slower)" in line
    assert "-> 1 thread; the mini run should take about" in line
    quiet = machine.measure(timer=fake_timer({1: [0.2], 2: [0.11]}), counts=[1, 2])
    assert quiet.threads == 2  # a quiet machine: both cores
    tie = machine.measure(timer=fake_timer({1: [0.2], 2: [0.2]}), counts=[1, 2])
    assert tie.threads == 1


def test_the_choice_is_stored_in_the_workshop_folder_and_read_back_on_this_machine_only(workshop, monkeypatch):
    choice = machine.measure(timer=fake_timer({1: [0.1], 2: [0.5]}), counts=[1, 2])
    where = machine.save(choice)
    assert where == workshop / machine.MACHINE_FILE
    assert machine.load() == choice and machine.stored_threads() == 1
    monkeypatch.setattr(machine, "measure", lambda **_: pytest.fail("measured again"))
    assert machine.current(log=None) == choice  # stored: no new measurement
    raw = json.loads(where.read_text())
    where.write_text(json.dumps({**raw, "cpus": raw["cpus"] + 7}))  # measured on other hardware
    assert machine.load() is None
    where.write_text("{not json")
    assert machine.load() is None and machine.stored_threads() is None


def test_candidates_are_one_half_and_all_cores():
    assert machine.candidates(1) == [1]
    assert machine.candidates(2) == [1, 2]
    assert machine.candidates(8) == [1, 4, 8]
    assert machine.candidates(64) == [1, 4, 8]  # capped: the toy models are small


def test_a_jobs_thread_share_caps_the_candidates(monkeypatch):
    """In `make book` a session is a one-thread job beside another job (OMP_NUM_THREADS=1): its mini run must not
    measure, let alone take, a second thread that the other job is using."""
    monkeypatch.setattr(machine.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert machine.cpu_count() == 4 and machine.candidates() == [1, 2, 4]
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert machine.cpu_count() == 1 and machine.candidates() == [1]
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert machine.candidates() == [1, 2]
    monkeypatch.setenv("OMP_NUM_THREADS", "16")  # more than the cores: the cores
    assert machine.cpu_count() == 4
    for unusable in ("", "0", "4,2", "all"):  # not a thread count: the cores
        monkeypatch.setenv("OMP_NUM_THREADS", unusable)
        assert machine.cpu_count() == 4


# ------------------------------------------------------------------------------------- the workshop's folder


def test_the_workshop_folder_is_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("CIRCUITDEV_DATA", str(tmp_path / "data"))
    monkeypatch.delenv(wpaths.WORKSHOP_ENV, raising=False)
    assert wpaths.workshop_dir() == tmp_path / "data" / "toy" / "_workshop"
    monkeypatch.setenv(wpaths.WORKSHOP_ENV, str(tmp_path / "elsewhere"))
    assert wpaths.workshop_dir() == tmp_path / "elsewhere" and wpaths.workshop_results_dir() == tmp_path / "elsewhere" / \
        "results"
    panel = wpaths.mini_recipe().panel_name("gpt_neox")
    assert data.is_mini(panel) and not data.is_mini("toy-pythia") and not data.is_mini("pythia-1b")
    assert data.mini_root(panel) == tmp_path / "elsewhere"  # where it will be trained


def test_a_mini_run_pre_trained_in_the_data_folder_is_reused_read_only(workshop, tmp_path):
    panel = fake_mini_run(tmp_path / "data", seconds=63.0)
    before = snapshot(tmp_path / "data")
    assert data.mini_root(panel) == tmp_path / "data"
    run = data.train_mini("gpt_neox", live=False)
    assert run.reused and run.root == tmp_path / "data" and run.seconds == 63.0 and run.steps == []
    assert snapshot(tmp_path / "data") == before  # nothing written into the data folder
    assert "reused (pre-trained in" in data.timing_note(run) and "trained earlier in 63 s" in data.timing_note(run)


def test_the_workshop_folder_goes_first_and_keeps_the_loss_log(workshop, tmp_path):
    fake_mini_run(tmp_path / "data")
    panel = fake_mini_run(workshop, seconds=None)
    recipe = wpaths.mini_recipe()
    (workshop / f"{panel}-loss.json").write_text(json.dumps({"recipe_hash": recipe.recipe_hash(), "steps": [10, 20],
                                                             "losses": [6.5, 6.1], "seconds": 88.0, "threads": 1}))
    run = data.train_mini("gpt_neox", live=False)
    assert run.root == workshop and run.reused and run.losses == [6.5, 6.1] and run.threads == 1
    assert data.timing_note(run) == f"{panel}: reused, trained earlier in 88 s; `retrain = True` trains it again, live"


def test_the_timing_note_compares_the_measured_time_with_the_expected_range(workshop):
    plan = machine.measure(timer=fake_timer({1: [0.1], 2: [1.0]}), counts=[1, 2])  # about 150 s for 1500 steps
    run = data.MiniRun("toy-pythia-mini", "gpt_neox", seconds=160.0, threads=1, root=workshop)
    note = data.timing_note(run, plan)
    assert note.startswith("toy-pythia-mini: trained in 2.7 min with 1 torch thread on this machine -- expected ")
    assert note.endswith("as expected")
    slow = data.timing_note(data.MiniRun("toy-pythia-mini", "gpt_neox", seconds=900.0, threads=2, root=workshop), plan)
    assert "with 2 torch threads" in slow and "slower than expected: is something else running?" in slow


# --------------------------------------------------------------------------------------------------- the doctor


def test_the_doctor_passes_a_mini_run_already_trained_and_says_it_is_reused(workshop, monkeypatch):
    panel = fake_mini_run(workshop, seconds=52.0)
    monkeypatch.setattr(machine, "measure", lambda **_: pytest.fail("a reused run needs no timing"))
    (result,) = doctor.run_checks([wdoctor.check_mini_run])
    assert result.status == "ok", result
    assert f"session 2 reuses {panel}" in result.message and "trained in 52 s" in result.message
    assert "retrain = True" in result.message


def test_the_doctor_times_a_missing_mini_run_with_the_stored_thread_count(workshop, monkeypatch):
    quick = machine.measure(timer=fake_timer({1: [0.05], 2: [0.4]}), counts=[1, 2])  # 75 s with 1 thread
    slow = machine.measure(timer=fake_timer({1: [1.0]}), counts=[1])  # 25 min: more than 3x the slot
    monkeypatch.setattr(machine, "measure", lambda **_: pytest.fail("the stored choice is used"))
    machine.save(quick)
    (result,) = doctor.run_checks([wdoctor.check_mini_run])
    assert result.status == "ok" and "about 75 s here with 1 torch thread" in result.message, result
    machine.save(slow)
    (result,) = doctor.run_checks([wdoctor.check_mini_run])
    assert result.status == "fail" and "more than the 120 s its slot allows" in result.message
    assert "circuitdev toy train --preset mini" in result.fix


def test_the_doctor_measures_and_stores_the_thread_count(workshop, monkeypatch):
    real = machine.measure
    monkeypatch.setattr(machine, "measure", lambda **kw: real(timer=fake_timer({1: [0.1], 2: [0.9]}), counts=[1, 2]))
    (result,) = doctor.run_checks([wdoctor.check_threads])
    assert result.status == "ok" and "-> 1 thread;" in result.message and machine.MACHINE_FILE in result.message
    assert machine.stored_threads() == 1


def _manifest_for(root: Path, out: Path) -> None:
    with out.open("w", newline="") as fh:
        w = csv.writer(fh, delimiter="\t")
        w.writerow(["local_path", "repo_path", "commit", "bytes", "sha256"])
        for p in sorted(root.rglob("*")):
            if p.is_file():
                w.writerow([p.relative_to(root).as_posix(), p.relative_to(root).as_posix(), "0" * 40,
                            p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest()])


def test_the_doctor_names_the_files_an_incomplete_copy_lacks(tmp_path, monkeypatch):
    pub = write_published(tmp_path / "pub")
    _manifest_for(pub, tmp_path / "manifest.tsv")
    monkeypatch.setenv("CIRCUITDEV_PUBLISHED_MANIFEST", str(tmp_path / "manifest.tsv"))
    monkeypatch.setenv("CIRCUITDEV_PUBLISHED", str(pub))
    monkeypatch.delenv("CIRCUITDEV_PUBLISHED_PARTIAL", raising=False)
    (result,) = doctor.run_checks([wdoctor.check_published])
    assert result.status == "ok" and "3 models" in result.message, result
    gone = sorted(p for p in pub.rglob("*.json") if "per_revision" in p.parts)[0]
    gone.unlink()
    (result,) = doctor.run_checks([wdoctor.check_published])
    assert result.status == "warn", result
    assert "an incomplete copy" in result.message and gone.name in result.message
    assert "circuitdev published fetch" in result.message and "session 5 runs on the toy panels" in result.message
    assert gone.name in data.published_note()  # the session's own note names it too
