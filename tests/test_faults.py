"""Fault injection: the authors' files under a failing mirror, kills, incomplete copies; page runs under bad input.

A loopback mirror (`loopback_mirror.Mirror`: the synthetic fixture, its own manifest) serves the files and fails on
demand -- 404, 503, a corrupt or short body, a dropped connection, a trickle, a hang. Every case asserts the exit
code, the message, and the files before and after: a failed `fetch` (exit 2) or `ensure` (exit 0, "not
available") leaves the folder exactly as it was, a user's files survive every repair, a fetch killed at any step
leaves nothing a reader would take for complete, and the next run completes it. An incomplete copy is refused by
every reader unless allowed, and then marked partial. Page runs check their parameters' ranges, output, working
directory and kernel before a kernel starts. Hang guards are generous (30x the deadline); nothing here times.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pandas as pd
import pytest

from circuitdev.cli import main
from circuitdev.errors import DataError
from circuitdev.sources.fetch import is_complete, read_manifest
from circuitdev.sources.published import PartialCopyWarning, load_published
from loopback_mirror import Mirror, closed_port_url, snapshot

REPO = Path(__file__).resolve().parents[1]
HANG_GUARD_S = 30  # a call with a 1 s deadline that has not returned by then hangs


def within(seconds: float, fn, *args):
    """fn(*args), failing (not hanging) when it has not returned within `seconds` (a hang guard, not a timing)."""
    result: dict = {}

    def target():
        try:
            result["value"] = fn(*args)
        except BaseException as err:  # noqa: BLE001
            result["error"] = err

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"hung: no return within {seconds} s"
    if "error" in result:
        raise result["error"]
    return result["value"]


@pytest.fixture
def user_copy(tmp_path, mirror) -> Path:
    """A user's folder: their README and notes, and the first half of the pinned files (an earlier, partial copy)."""
    dest = tmp_path / "pub"
    (dest / "notes").mkdir(parents=True)
    (dest / "README.md").write_text("my notes on the authors' files\n")
    (dest / "notes" / "todo.txt").write_text("ask about OLMoE\n")
    for local in mirror.local_paths[: len(mirror.local_paths) // 2]:
        (dest / local).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(mirror.files / local, dest / local)
    return dest


def missing_half(mirror: Mirror) -> list[str]:
    return mirror.local_paths[len(mirror.local_paths) // 2:]


def no_staging(dest: Path) -> bool:
    return not (dest.parent / f".{dest.name}.staging").exists()


# ------------------------------------------------------------------------------------------- download faults

FAULTS = [  # fault, what the message says, the fix it names
    ("404", "HTTP 404", "lacks this file at the pinned commit"),
    ("503", "HTTP 503", "the server failed"),
    ("corrupt", "differs from the pinned", "not written"),
    ("short", "bytes where the manifest says", "not written"),
    ("drop", "connection dropped after", "the connection broke off; try again"),
    ("trickle", "no complete file within 1 s", "too slow or stopped answering"),
    ("hang", "no complete file within 1 s (0 bytes)", "too slow or stopped answering"),
]


@pytest.mark.parametrize("fault, said, fix", FAULTS, ids=[f[0] for f in FAULTS])
def test_fetch_fault_exits_2_naming_it_and_leaves_the_folder_as_it_was(mirror, user_copy, capsys, fault, said, fix):
    victim = missing_half(mirror)[-1]  # the others download fine first
    mirror.faults[victim] = fault
    before = snapshot(user_copy)
    rc = within(HANG_GUARD_S, main, ["published", "fetch", "--to", str(user_copy), "--timeout", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and said in err and fix in err, err
    assert victim.split("/")[-1] in err and "offline?" not in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert snapshot(user_copy) == before and no_staging(user_copy)


@pytest.mark.parametrize("fault, said, fix", FAULTS, ids=[f[0] for f in FAULTS])
def test_ensure_turns_any_fault_into_not_available(mirror, user_copy, tmp_path, capsys, fault, said, fix):
    mirror.faults[missing_half(mirror)[0]] = fault
    before = snapshot(user_copy)
    status = tmp_path / "published.status.json"
    rc = within(HANG_GUARD_S, main, ["published", "ensure", "--to", str(user_copy), "--timeout", "1",
                                     "--status", str(status)])
    out = capsys.readouterr().out.strip().splitlines()
    assert rc == 0 and len(out) == 1, out
    line = out[0]
    assert line.startswith("published: not available (") and "built without the authors' files" in line
    assert "circuitdev published fetch" in line and "is left as it was" in line and "files missing" in line
    assert json.loads(status.read_text())["complete"] is False
    assert snapshot(user_copy) == before and no_staging(user_copy)
    assert not [p.name for p in user_copy.parent.iterdir() if p.name.startswith("pub.")]  # nothing set aside


def test_offline_says_offline_and_ensure_goes_on(mirror, user_copy, monkeypatch, capsys):
    monkeypatch.setenv("CIRCUITDEV_PUBLISHED_URL", closed_port_url())
    before = snapshot(user_copy)
    assert main(["published", "fetch", "--to", str(user_copy)]) == 2
    err = capsys.readouterr().err
    assert "offline?" in err and "--from DIR" in err and "refused" in err.lower()
    assert main(["published", "ensure", "--to", str(user_copy)]) == 0
    assert capsys.readouterr().out.startswith("published: not available (")
    assert snapshot(user_copy) == before and no_staging(user_copy)


@pytest.mark.parametrize("template, said", [
    ("http://127.0.0.1:1/{commit}/{repo_path", "not a valid template"),
    ("http://127.0.0.1:1/{commit}/files", "no {repo_path} field"),
    ("http://127.0.0.1:1/{sha}/{repo_path}", "unknown field(s) {sha}"),
    ("127.0.0.1:8000/{commit}/{repo_path}", "not an http(s):// or file:// URL"),
])
def test_a_malformed_url_template_is_exit_2_before_any_download(mirror, user_copy, monkeypatch, capsys, template,
                                                                 said):
    monkeypatch.setenv("CIRCUITDEV_PUBLISHED_URL", template)
    before = snapshot(user_copy)
    assert main(["published", "fetch", "--to", str(user_copy)]) == 2
    err = capsys.readouterr().err
    assert f"CIRCUITDEV_PUBLISHED_URL={template!r}" in err and said in err and "{commit}" in err
    assert main(["published", "ensure", "--to", str(user_copy)]) == 0  # the build goes on, saying why
    out = capsys.readouterr().out
    assert out.startswith("published: not available (CIRCUITDEV_PUBLISHED_URL=") and said in out
    assert mirror.requests == [] and snapshot(user_copy) == before and no_staging(user_copy)


@pytest.mark.parametrize("action", ["fetch", "ensure"])
@pytest.mark.parametrize("timeout", ["-1", "0"])
def test_a_timeout_that_is_not_positive_is_exit_2(mirror, user_copy, capsys, action, timeout):
    before = snapshot(user_copy)
    assert main(["published", action, "--to", str(user_copy), "--timeout", timeout]) == 2
    assert "--timeout must be > 0 seconds" in capsys.readouterr().err
    assert mirror.requests == [] and snapshot(user_copy) == before


def test_fetch_into_a_file_is_exit_2(mirror, tmp_path, capsys):
    target = tmp_path / "published"
    target.write_text("not a folder")
    assert main(["published", "fetch", "--to", str(target)]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err and target.read_text() == "not a folder"


# ------------------------------------------------------------------------------------------------- repairs


def test_a_repair_touches_only_the_manifests_files(mirror, user_copy, capsys):
    changed = mirror.local_paths[0]
    (user_copy / changed).write_text('{"edited": true}')
    theirs = {k: v for k, v in snapshot(user_copy).items() if k.startswith(("README", "notes/"))}
    assert main(["published", "fetch", "--to", str(user_copy)]) == 0
    out = capsys.readouterr().out
    n = len(mirror.local_paths)
    assert f"{len(missing_half(mirror)) + 1} downloaded" in out and f"{n // 2 - 1} present" in out
    assert "kept the replaced file(s)" in out and f"{changed}.replaced-" in out
    after = snapshot(user_copy)
    assert {k: after[k] for k in theirs} == theirs  # the user's files, untouched
    aside = [k for k in after if ".replaced-" in k]
    assert len(aside) == 1 and after[aside[0]] == b'{"edited": true}'
    assert is_complete(user_copy, manifest=read_manifest()) and no_staging(user_copy)
    assert main(["published", "fetch", "--to", str(user_copy)]) == 0  # again: nothing to do, nothing moved
    assert f"{n} present" in capsys.readouterr().out and snapshot(user_copy) == after
    assert main(["published", "ensure", "--to", str(user_copy)]) == 0
    assert "nothing to fetch" in capsys.readouterr().out and snapshot(user_copy) == after


# ---------------------------------------------------------------------------------------------- kills

KILLER = """
import os, signal, sys
from circuitdev.sources import fetch
step, n, dest = sys.argv[1], int(sys.argv[2]), sys.argv[3]
calls = [0]
def killing(real):
    def wrapped(*args, **kwargs):
        calls[0] += 1
        if calls[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)
    return wrapped
if step != "download":
    name = {"stage": "_stage_one", "swap": "_swap_in"}[step]
    setattr(fetch, name, killing(getattr(fetch, name)))
from circuitdev.cli import main
sys.exit(main(["published", "fetch", "--to", dest, "--timeout", "60"]))
"""


@pytest.mark.parametrize("step, n", [("download", 1), ("download", 3), ("stage", 1), ("stage", 4), ("swap", 1),
                                     ("swap", 3)])
def test_a_fetch_killed_at_any_step_is_never_taken_for_complete(mirror, user_copy, step, n, capsys):
    before = snapshot(user_copy)
    if step == "download":  # killed while the n-th missing file is half received
        mirror.faults[missing_half(mirror)[n - 1]] = "hold"
    env = {**os.environ, **mirror.env(), "PYTHONPATH": str(REPO / "lib")}
    proc = subprocess.Popen([sys.executable, "-c", KILLER, step, str(n), str(user_copy)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if step == "download":
        assert mirror.arrived.wait(HANG_GUARD_S), "the fetch never asked for the held file"
        proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=120)
    mirror.release()
    assert proc.returncode == -signal.SIGKILL
    after = snapshot(user_copy)
    theirs = [k for k in before if k.startswith(("README", "notes/"))]
    assert {k: after[k] for k in theirs} == {k: before[k] for k in theirs}  # the user's files, always
    if step == "swap":  # n - 1 files moved in: more than before, still not complete
        assert len(after) == len(before) + n - 1 and all(after[k] == v for k, v in before.items())
    else:
        assert after == before  # nothing moved in before every file was verified
    with pytest.raises(DataError, match="an incomplete copy of the authors' files"):
        load_published(user_copy)
    mirror.faults.clear()
    assert main(["published", "fetch", "--to", str(user_copy)]) == 0  # the next run completes it
    assert is_complete(user_copy, manifest=read_manifest()) and no_staging(user_copy)
    assert {k: snapshot(user_copy)[k] for k in theirs} == {k: before[k] for k in theirs}
    assert load_published(user_copy).partial is False


# ------------------------------------------------------------------------------------- incomplete copies


def test_load_published_refuses_an_incomplete_copy_unless_allowed(mirror, user_copy, monkeypatch):
    missing = missing_half(mirror)
    with pytest.raises(DataError) as err:
        load_published(user_copy)
    msg = str(err.value)
    assert "an incomplete copy" in msg and f"{len(missing)} of {len(mirror.local_paths)} files missing" in msg
    assert missing[0] in msg and f"circuitdev published fetch --to {user_copy}" in msg and "--allow-partial" in msg
    assert "\n" not in msg
    with pytest.warns(PartialCopyWarning, match="PARTIAL copy"):
        data = load_published(user_copy, allow_partial=True)
    assert data.partial and list(data.missing) == missing
    assert "pythia-1b" not in set(data.table["panel"])  # the subset: no Pythia file is there
    assert data.table.groupby("panel")["revision"].nunique().to_dict() == {"olmo-1b-0724": 4, "olmoe-1b-7b-0924": 2}
    monkeypatch.setenv("CIRCUITDEV_PUBLISHED_PARTIAL", "1")  # what --allow-partial sets for a page's kernel
    with pytest.warns(PartialCopyWarning):
        assert load_published(user_copy).partial


def test_a_changed_file_is_refused_too(mirror, tmp_path):
    dest = tmp_path / "full"
    shutil.copytree(mirror.files, dest)
    assert load_published(dest).partial is False  # complete: read as it is
    victim = dest / mirror.local_paths[-1]
    victim.write_text(victim.read_text().replace("1.0", "2.0", 1))
    with pytest.raises(DataError, match=r"1 changed \(" + mirror.local_paths[-1]):
        load_published(dest)


def test_reanalyse_refuses_an_incomplete_copy_and_marks_an_allowed_one(mirror, user_copy, tmp_path, capsys):
    out = tmp_path / "reanalysis"
    assert main(["reanalyse", "--published", str(user_copy), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "an incomplete copy" in err and "circuitdev published fetch" in err and not out.exists()
    assert main(["reanalyse", "--published", str(user_copy), "--out", str(out), "--allow-partial"]) == 0
    said = capsys.readouterr().out
    assert f"PARTIAL: {len(missing_half(mirror))} of the authors' files missing" in said
    assert pd.read_csv(out / "partial.csv")["missing_file"].tolist() == missing_half(mirror)
    assert set(pd.read_csv(out / "bos_fraction.csv")["model"]) == {"olmo-1b-0724", "olmoe-1b-7b-0924"}
    assert main(["published", "fetch", "--to", str(user_copy)]) == 0
    assert main(["reanalyse", "--published", str(user_copy), "--out", str(out)]) == 0
    assert not (out / "partial.csv").exists()  # complete now: the stale mark goes
    assert (user_copy / "README.md").is_file()


def test_published_check_lists_what_an_incomplete_copy_lacks(mirror, user_copy, capsys):
    assert main(["published", "check", "--from", str(user_copy)]) == 2
    out, err = capsys.readouterr()
    assert all(f"{user_copy / m}: missing" in out for m in missing_half(mirror))
    assert f"{len(missing_half(mirror))} file(s) missing or changed" in err


def test_the_workshop_lookup_refuses_an_incomplete_copy(mirror, user_copy, monkeypatch):
    from circuitdev.workshop.data import published

    monkeypatch.setenv("CIRCUITDEV_PUBLISHED", str(user_copy))
    assert published() is None  # the session runs on the toy panels instead, and says so
    monkeypatch.setenv("CIRCUITDEV_PUBLISHED_PARTIAL", "1")
    with pytest.warns(PartialCopyWarning):
        assert published().partial


@pytest.mark.slow
def test_a_page_refuses_an_incomplete_copy_and_marks_an_allowed_one(mirror, user_copy, tmp_path, monkeypatch):
    from circuitdev.book.sweep import glued_values

    monkeypatch.setenv("CIRCUITDEV_PUBLISHED", str(user_copy))
    monkeypatch.setenv("CIRCUITDEV_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("CIRCUITDEV_PANELS", "[]")
    assert main(["notebook", "run", "f2_shapes", "--out", str(tmp_path / "refused")]) == 0
    page = (tmp_path / "refused" / "f2_shapes.ipynb").read_text()
    assert "an incomplete copy of the authors" in page and "circuitdev published fetch" in page
    glued = glued_values(tmp_path / "refused" / "f2_shapes.ipynb")
    assert {v for k, v in glued.items() if k.startswith("f2-pub-")} == {"n/a"}  # no number from the subset
    assert main(["notebook", "run", "f2_shapes", "--out", str(tmp_path / "partial"), "--allow-partial"]) == 0
    page = (tmp_path / "partial" / "f2_shapes.ipynb").read_text()
    glued = glued_values(tmp_path / "partial" / "f2_shapes.ipynb")
    assert "PARTIAL copy of the authors" in page
    assert "Part of the published (authors' files) data is missing" in page  # the tier's note at the page's top
    assert "an incomplete copy of the authors' files" in page and "allowed by --allow-partial" in page
    assert isinstance(glued["f2-pub-olmo-final-pct"], float) and glued["f2-pub-pythia-final-pct"] == "n/a"
    assert "CIRCUITDEV_PUBLISHED_PARTIAL" not in os.environ  # the opt-in went to the kernel only
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(DataError):
            load_published(user_copy)


# ------------------------------------------------------------------------------------------------- page runs


@pytest.mark.parametrize("argv, said", [
    (["-p", "transition_share", "1.5"], "'transition_share' of page f2_shapes: the value must be in [0, 1]; got 1.5"),
    (["-p", "bos_threshold", "0"], "must be in (0, inf); got 0"),
    (["-p", "rule", "yes"], "YAML read 'yes' as bool"),
    (["-p", "rule", "a: b"], "quote it inside the shell's quotes: -p rule '\"a: b\"'"),
    (["--cwd", "{tmp}/nowhere"], "--cwd {tmp}/nowhere: no such folder"),
    (["--kernel", "no-such-kernel"], "--kernel 'no-such-kernel' is not installed; the kernels here: "),
    (["--out", "{tmp}/a-file"], "{tmp}/a-file is a file, not a folder"),
    (["--out", "{tmp}/a-file/below"], "{tmp}/a-file is a file, not a folder"),
])
def test_a_page_run_checks_its_inputs_before_a_kernel_starts(tmp_path, capsys, argv, said):
    (tmp_path / "a-file").write_text("mine")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    out = ["--out", str(tmp_path / "out")] if "--out" not in argv else []
    before = snapshot(tmp_path)
    assert main(["notebook", "run", "f2_shapes", *out, *argv]) == 2
    err = capsys.readouterr().err
    assert said.replace("{tmp}", str(tmp_path)) in err and len(err.strip().splitlines()) == 1, err
    assert snapshot(tmp_path) == before and not (tmp_path / "out").exists()


def test_each_item_of_a_list_parameter_is_in_range(capsys, tmp_path):
    assert main(["notebook", "run", "f4_convergence", "-p", "levels", "[0.5, 2]", "--out", str(tmp_path)]) == 2
    assert "each item of the value must be in (0, 1]; got [0.5, 2.0]" in capsys.readouterr().err
    assert main(["notebook", "sweep", "f2_shapes", "--grid", "transition_share=0.5,1.5",
                 "--out", str(tmp_path / "sweep")]) == 2  # every point checked before the first runs
    assert "must be in [0, 1]; got 1.5" in capsys.readouterr().err and not (tmp_path / "sweep").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_an_output_folder_that_cannot_be_written_is_exit_2(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    assert main(["notebook", "run", "method", "--out", str(locked / "out")]) == 2
    assert f"{locked} is not writable" in capsys.readouterr().err


def test_stale_page_folders_of_killed_runs_go(tmp_path, monkeypatch):
    import tempfile

    from circuitdev.book import execute

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{execute.TEMP_PREFIX}{dead.pid}-abc"
    live = tmp_path / f"{execute.TEMP_PREFIX}{os.getpid()}-def"
    other = tmp_path / "circuitdev-page-notes"  # not of the form <pid>-<random>: not ours to judge
    for folder in (stale, live, other):
        (folder / "x.ipynb").parent.mkdir()
        (folder / "x.ipynb").write_text("{}")
    execute._remove_stale_temp_folders()
    assert not stale.exists() and live.is_dir() and other.is_dir()


@pytest.mark.slow
def test_a_page_run_is_quiet_clean_and_keeps_one_failed_notebook(tmp_path):
    """No kernel warning on stderr, no temporary folder left, the failed notebook kept in one named place and
    removed by the next success of the same page."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    stale = tmpdir / "circuitdev-page-999999999-x"  # a killed run's folder (no such process)
    stale.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir), "PYTHONPATH": str(REPO / "lib"), "CIRCUITDEV_PUBLISHED": "none"}
    cli = [sys.executable, "-m", "circuitdev.cli", "notebook", "run"]
    bad = tmp_path / "page.py"
    bad.write_text((REPO / "notebooks" / "method.py").read_text().replace("ch = chapter(", "1 / 0\nch = chapter("))
    out = tmp_path / "out"
    failed = subprocess.run([*cli, str(bad), "--out", str(out)], env=env, capture_output=True, text=True,
                            timeout=300)
    assert failed.returncode == 2 and "ZeroDivisionError" in failed.stderr
    assert failed.stderr.startswith("circuitdev notebook: error: page page failed in cell")  # no kernel line first
    assert "[IPKernelApp]" not in failed.stderr, failed.stderr
    kept = Path(failed.stderr.split("(the failed notebook: ")[1].split(")")[0])
    assert kept.parent == tmpdir / "circuitdev-failed" and kept.is_file() and "ZeroDivisionError" in kept.read_text()
    assert not out.exists() or not list(out.iterdir())
    bad.write_text((REPO / "notebooks" / "method.py").read_text())  # fixed
    ran = subprocess.run([*cli, str(bad), "--out", str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert "[IPKernelApp]" not in ran.stderr and "WARNING" not in ran.stderr, ran.stderr
    assert (out / "page.ipynb").is_file() and not kept.exists()  # the last failure is history
    assert sorted(p.name for p in tmpdir.iterdir()) == ["circuitdev-failed"]  # no page folder, the stale one gone


@pytest.mark.slow
def test_make_book_with_a_failing_mirror_builds_and_keeps_the_users_files(mirror, user_copy, tmp_path):
    """The pipeline's `published` rule against a mirror that 404s one file, over a data/published holding a user's
    notes and half the files: the build succeeds, says in one line that the tier is not available, the folder is
    as it was, and the page notes the incomplete copy instead of using it."""
    from test_rerun import run_pipeline

    data = tmp_path / "data"
    data.mkdir()
    shutil.move(user_copy, data / "published")
    before = snapshot(data / "published")
    mirror.faults[missing_half(mirror)[2]] = "404"
    proc = run_pipeline(tmp_path, mirror.env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = [l for l in (proc.stdout + proc.stderr).splitlines() if l.startswith("published: ")]
    assert len(said) == 1 and said[0].startswith("published: not available (HTTP 404"), said
    assert snapshot(data / "published") == before and not (data / ".published.staging").exists()
    page = (tmp_path / "gen" / "f2_shapes.ipynb").read_text()
    assert "an incomplete copy of the authors" in page and "circuitdev published fetch --to" in page
