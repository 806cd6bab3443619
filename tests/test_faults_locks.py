"""Fault class: two runs meet on one folder (issue 31, item 1).

Two probes with different settings on one results folder, two `published fetch` runs on one published folder, and a
run's clean-up beside another run's temporary file: every record and file is kept or archived, each exit code is
truthful, and a run that cannot wait exits 2 naming the run that holds the folder. Real processes where processes
meet (subprocesses of the CLI); an in-process interleaving where the order must be forced.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import circuitdev
from circuitdev import atomic
from circuitdev.cli import main
from circuitdev.locks import folder_lock, lock_path
from circuitdev.measure.probe import probe_model
from circuitdev.sources.fetch import is_complete, read_manifest
from circuitdev.sources.panels import load_panel
from circuitdev.sources.run import probe_panel
from circuitdev.sources.store import clean_temp_files, record_paths, record_status
from loopback_mirror import snapshot

REPO = Path(__file__).resolve().parents[1]
HANG_GUARD_S = 120


def cli_env(**extra) -> dict:
    """The environment of a CLI subprocess: the library this test imports, one thread."""
    return {**os.environ, "PYTHONPATH": str(Path(circuitdev.__file__).resolve().parents[1]), "OMP_NUM_THREADS": "1",
            **extra}


def probe(panel_file, out, **fields):
    panel = load_panel(panel_file, results_dir=out)
    return probe_panel(panel, config=panel.probe_config(**fields), results_dir=out, progress=False)


def states(out, panel, revision, *hashes):
    """The state of the plain record and of each archived configuration's record."""
    plain = record_status(record_paths(out, panel, revision), panel=panel, revision=revision)
    return plain, [record_status(record_paths(out, panel, revision, h), panel=panel, revision=revision, config_hash=h)
                   for h in hashes]


# ------------------------------------------------------------------------------------------------------- probe


def test_a_probe_that_finishes_second_archives_the_first_ones_record(make_tiny_panel, tmp_path):
    """Run A (n_nulls=2) computes; meanwhile run B (n_nulls=3) computes and stores its record; A's write must move
    B's record to by-config/<B's hash>/, not overwrite it."""
    path = make_tiny_panel(revisions=1, name="tiny-meet")
    out = tmp_path / "out"
    panel = load_panel(path)
    hash_a, hash_b = (panel.probe_config(n_nulls=k).config_hash() for k in (2, 3))

    def a_probe(model, config, progress=True):  # B runs to completion while A is computing
        assert [r.action for r in probe(path, out, n_nulls=3)] == ["computed"]
        return probe_model(model, config, progress=False)

    panel = load_panel(path, results_dir=out)
    done = probe_panel(panel, config=panel.probe_config(n_nulls=2), results_dir=out, progress=False,
                       probe_fn=a_probe)
    assert [r.action for r in done] == ["computed"]
    plain, (archived_b,) = states(out, "tiny-meet", "step0", hash_b)
    assert plain.complete and plain.sidecar["config_hash"] == hash_a
    assert archived_b.complete and archived_b.sidecar["config_hash"] == hash_b  # B's record kept, not overwritten
    # and asking for B's configuration again restores it instead of recomputing
    assert [r.action for r in probe(path, out, n_nulls=3)] == ["restored"]


def test_two_concurrent_probe_runs_with_different_settings_keep_every_record(make_tiny_panel, tmp_path):
    path = make_tiny_panel(revisions=2, name="tiny-twice")
    out = tmp_path / "out"
    panel = load_panel(path)
    hashes = {k: panel.probe_config(n_nulls=k).config_hash() for k in (2, 3)}
    cmd = [sys.executable, "-m", "circuitdev.cli", "probe", "--panel", str(path), "--out", str(out), "--no-progress"]
    procs = [subprocess.Popen([*cmd, "--set", f"n_nulls={k}"], env=cli_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for k in (2, 3)]
    outputs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    for rev in ("step0", "step1"):
        plain = record_status(record_paths(out, "tiny-twice", rev), panel="tiny-twice", revision=rev)
        assert plain.complete
        other = next(h for h in hashes.values() if h != plain.sidecar["config_hash"])
        kept = record_status(record_paths(out, "tiny-twice", rev, other), panel="tiny-twice", revision=rev,
                             config_hash=other)
        assert kept.complete, f"{rev}: the other run's record ({other}) was lost: {kept.reason}"
    assert not list((out / "tiny-twice").rglob("*.tmp"))


def test_clean_up_leaves_another_live_runs_temp_file(tmp_path):
    folder = tmp_path / "tiny" / "x"
    folder.mkdir(parents=True)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        host = atomic._host()
        theirs = folder / f".step0.parquet.p{live.pid}@{host}.abc123.tmp"  # another run, writing right now
        crashed = folder / f".step0.parquet.p{dead.pid}@{host}.def456.tmp"  # a run that died mid-write
        legacy = folder / ".step0.parquet.k2j3h4.tmp"  # an unmarked one (older circuitdev)
        for f in (theirs, crashed, legacy):
            f.write_bytes(b"partial")
        clean_temp_files(folder, "step0")
        assert theirs.exists(), "a live run's temporary file was deleted"
        assert not crashed.exists() and not legacy.exists()
    finally:
        live.kill()
        live.wait()


def test_a_temp_file_names_its_writer(tmp_path, monkeypatch):
    seen = []
    real = atomic.publish
    monkeypatch.setattr(atomic, "publish", lambda src, dst: (seen.append(src.name), real(src, dst)))
    atomic.write_atomic(tmp_path / "a.json", "{}")
    assert seen and seen[0].startswith(f".a.json.p{os.getpid()}@")


# -------------------------------------------------------------------------------------------- published fetch


def fetch_proc(mirror, dest, **env):
    return subprocess.Popen([sys.executable, "-m", "circuitdev.cli", "published", "fetch", "--to", str(dest),
                             "--timeout", "120"], env=cli_env(**mirror.env(), **env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_two_concurrent_fetches_both_end_complete_and_truthful(mirror, tmp_path):
    dest = tmp_path / "pub"
    dest.mkdir()
    (dest / "README.md").write_text("my notes\n")
    mirror.faults[mirror.local_paths[-1]] = "pause"  # A has staged the others and waits for the last one
    first = fetch_proc(mirror, dest)
    assert mirror.arrived.wait(HANG_GUARD_S), "the first fetch never asked for the paused file"
    asked = len(mirror.requests)
    second = fetch_proc(mirror, dest)
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(second.stderr), daemon=True)
    reader.start()
    guard = time.monotonic() + HANG_GUARD_S  # until the second run meets the first: it waits, or downloads too
    while not any("waiting for it" in line for line in said) and len(mirror.requests) == asked:
        assert time.monotonic() < guard, "the second fetch neither waited nor downloaded"
        time.sleep(0.05)
    mirror.faults.clear()
    mirror.release()
    out1 = first.communicate(timeout=HANG_GUARD_S)
    second.wait(timeout=HANG_GUARD_S)
    reader.join(HANG_GUARD_S)
    assert (first.returncode, second.returncode) == (0, 0), (out1, said)
    assert any(f"pid {first.pid}" in line for line in said)  # the second said whom it waits for
    assert is_complete(dest, manifest=read_manifest())
    assert (dest / "README.md").read_text() == "my notes\n"
    assert not (tmp_path / ".pub.staging").exists()


def test_a_fetch_that_cannot_wait_exits_2_naming_the_holder(mirror, tmp_path):
    dest = tmp_path / "pub"
    mirror.faults[mirror.local_paths[0]] = "pause"
    first = fetch_proc(mirror, dest)
    assert mirror.arrived.wait(HANG_GUARD_S)
    before = snapshot(dest)
    second = fetch_proc(mirror, dest, CIRCUITDEV_LOCK_WAIT="0.2")
    _, err = second.communicate(timeout=HANG_GUARD_S)
    mirror.faults.clear()
    mirror.release()
    first.communicate(timeout=HANG_GUARD_S)
    assert second.returncode == 2
    assert "being written by another run" in err and f"pid {first.pid}" in err and "published fetch" in err
    assert "CIRCUITDEV_LOCK_WAIT" in err
    assert first.returncode == 0 and is_complete(dest, manifest=read_manifest())
    assert before == {}  # the waiting run touched nothing


def test_a_killed_holder_never_leaves_the_folder_locked(tmp_path, monkeypatch):
    folder = tmp_path / "results" / "p"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from circuitdev.locks import folder_lock\n"
                               "with folder_lock(sys.argv[1], what='test folder'):\n print('held', flush=True)\n"
                               " time.sleep(120)", str(folder)], env=cli_env(), stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    info = json.loads(lock_path(folder).read_text())
    assert info["pid"] == holder.pid
    holder.kill()
    holder.wait()
    with folder_lock(folder, what="test folder", wait=HANG_GUARD_S):  # the kernel released the dead run's lock
        assert json.loads(lock_path(folder).read_text())["pid"] == os.getpid()


def test_a_bad_lock_wait_is_a_user_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CIRCUITDEV_LOCK_WAIT", "soon")
    assert main(["published", "fetch", "--to", str(tmp_path / "pub"), "--from", str(tmp_path)]) == 2
    assert "CIRCUITDEV_LOCK_WAIT='soon'" in capsys.readouterr().err


HOLDER = ("import sys, time\nfrom circuitdev.locks import folder_lock\n"
          "with folder_lock(sys.argv[1], what=sys.argv[2]):\n print('held', flush=True)\n time.sleep(120)")


def test_a_workshop_build_into_a_folder_being_built_exits_2_naming_the_holder(tmp_path, monkeypatch, capsys):
    out = tmp_path / "workshop"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out), "workshop folder"], env=cli_env(),
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setenv("CIRCUITDEV_LOCK_WAIT", "0.2")
        assert main(["workshop", "build", "--out", str(out), "--no-execute"]) == 2
        err = capsys.readouterr().err
        assert f"the workshop folder {out} is being written by another run: pid {holder.pid}" in err
        assert not out.exists() or not any(out.iterdir())  # nothing written while another build holds it
    finally:
        holder.kill()
        holder.wait()
