"""Fault class: names that become paths, and paths that mean one folder (issue 31, items 3 and 6-7).

A revision name read from `refined.yaml` is validated as panel files are (`../other/step0` never writes into another
panel's folder); a sweep's relative `results_dir` means to its reuse check what it means to the page; an
environment variable naming a file, `probe --out` on a file and a panel summary with gaps all say what is wrong
(exit 2 before any model loads, or a note), never "missing", exit 1 or silence.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
import yaml

import circuitdev.sources.run as run_module
from circuitdev.cli import main
from circuitdev.errors import DataError
from circuitdev.sources.panels import load_panel
from circuitdev.sources.run import probe_panel
from circuitdev.sources.store import record_paths


def probe(panel_file, out):
    return [r.action for r in probe_panel(load_panel(panel_file, results_dir=out), results_dir=out, progress=False)]


def test_a_refined_name_that_leaves_the_panel_folder_is_refused(make_tiny_panel, tmp_path, capsys):
    a = make_tiny_panel(revisions=1, name="tiny-a")
    b = make_tiny_panel(revisions=1, name="tiny-b")
    out = tmp_path / "out"
    assert probe(b, out) == ["computed"]
    theirs = {p.name: p.read_bytes() for p in (out / "tiny-b").iterdir() if p.is_file()}
    (out / "tiny-a").mkdir()
    (out / "tiny-a" / "refined.yaml").write_text(yaml.safe_dump(
        {"format": "circuitdev.refined/1", "panel": "tiny-a",
         "revisions": [{"name": "../tiny-b/step0", "tokens": 512, "step": 0}]}))
    assert main(["probe", "--panel", str(a), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "refined.yaml" in err and "'../tiny-b/step0'" in err and "not a plain name" in err
    assert {p.name: p.read_bytes() for p in (out / "tiny-b").iterdir() if p.is_file()} == theirs


def test_record_paths_refuse_names_that_leave_the_panel_folder(tmp_path):
    for panel, revision in (("p", "../q/step0"), ("p", ".."), ("../p", "step0"), ("p", "a/b")):
        with pytest.raises(DataError, match="not a plain file name"):
            record_paths(tmp_path, panel, revision)


def test_an_environment_variable_naming_a_file_says_so(tmp_path, monkeypatch, capsys):
    a_file = tmp_path / "results.txt"
    a_file.write_text("not a folder\n")
    monkeypatch.setenv("CIRCUITDEV_RESULTS", str(a_file))
    assert main(["show", "--panel", "toy-pythia"]) == 2
    err = capsys.readouterr().err
    assert f"CIRCUITDEV_RESULTS={a_file} names a file, not a folder" in err and "unexpected" not in err


def test_probe_out_on_a_file_fails_before_any_model_loads(make_tiny_panel, tmp_path, monkeypatch, capsys):
    path = make_tiny_panel(revisions=1, name="tiny-out")
    blocker = tmp_path / "out"
    blocker.write_text("a file where the results folder belongs\n")

    def no_load(*args, **kwargs):
        raise AssertionError("a model was loaded before --out was checked")

    monkeypatch.setattr(run_module, "loaded_revision", no_load)
    assert main(["probe", "--panel", str(path), "--out", str(blocker), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "is a file, not a folder" in err and str(blocker) in err
    assert blocker.read_text() == "a file where the results folder belongs\n"
    (tmp_path / "out2").mkdir()
    (tmp_path / "out2" / "tiny-out").write_text("x")  # the panel's folder blocked by a file
    assert main(["probe", "--panel", str(path), "--out", str(tmp_path / "out2"), "--no-progress"]) == 2
    assert "tiny-out/ in --out" in capsys.readouterr().err


def test_probe_device_checked_before_any_model_loads(make_tiny_panel, tmp_path, monkeypatch, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU: --device cuda is valid here")
    path = make_tiny_panel(revisions=1, name="tiny-dev")
    monkeypatch.setattr(run_module, "loaded_revision", lambda *a, **k: pytest.fail("loaded a model"))
    assert main(["probe", "--panel", str(path), "--out", str(tmp_path / "out"), "--device", "cuda",
                 "--no-progress"]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err


def test_show_panel_names_the_revisions_it_leaves_out(make_tiny_panel, tmp_path, capsys):
    path = make_tiny_panel(revisions=2, name="tiny-gap")
    out = tmp_path / "out"
    probe(path, out)
    record_paths(out, "tiny-gap", "step1").parquet.write_bytes(b"truncated")
    capsys.readouterr()
    assert main(["show", "--panel", str(path), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "1 of 2 revisions left out" in captured.err and "step1 (corrupt" in captured.err
    assert "circuitdev probe --panel" in captured.err
    for rev in ("step0", "step1"):
        record_paths(out, "tiny-gap", rev).parquet.write_bytes(b"truncated")
    assert main(["show", "--panel", str(path), "--out", str(out)]) == 2
    assert "no complete record" in capsys.readouterr().err


def test_a_sweeps_relative_results_dir_is_the_pages_folder(tmp_path, monkeypatch):
    """Started from another folder, a sweep with `-p results_dir=<relative>` checks the folder the page reads (the
    kernel's working directory, `cwd`): deleting its records re-runs the point instead of reusing it."""
    import circuitdev.book.sweep as sweep_module
    from circuitdev.book.execute import source_of

    base = tmp_path / "repo"  # the kernel's working directory
    records = base / "rel" / "results"
    (records / "toy-x").mkdir(parents=True)
    (records / "toy-x" / "step0.json").write_text("{}")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the user's shell is not in the repository
    runs = []

    def fake_execute(source, path, parameters, **kwargs):
        runs.append(parameters["results_dir"])
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nbformat.v4.new_notebook(), str(path))

    monkeypatch.setattr(sweep_module, "execute_page", fake_execute)
    source = source_of("f2_shapes")
    args = dict(fixed={"results_dir": "rel/results"}, cwd=base)
    sweep_module.sweep(source, {"bos_threshold": [10]}, tmp_path / "sweep", **args)
    assert runs == [str(records)]  # the page got the folder it would have read, absolute
    sweep_module.sweep(source, {"bos_threshold": [10]}, tmp_path / "sweep", **args)
    assert len(runs) == 1  # nothing changed: reused
    (records / "toy-x" / "step0.json").unlink()  # the records it was computed from are gone
    sweep_module.sweep(source, {"bos_threshold": [10]}, tmp_path / "sweep", **args)
    assert len(runs) == 2, "a point was reused although the records it read were deleted"
    point = json.loads(next((tmp_path / "sweep").glob("*/point.json")).read_text())
    assert point["results_dir"]["path"] == str(records)


def test_a_results_folder_with_an_undecodable_name_works(make_tiny_panel, tmp_path):
    import os
    import subprocess
    import sys

    path = make_tiny_panel(revisions=1, name="tiny-bytes")
    out = os.fsencode(tmp_path) + b"/results-\xff"  # not UTF-8: a name from another locale
    import circuitdev

    env = {**os.environ, "PYTHONPATH": str(Path(circuitdev.__file__).resolve().parents[1]), "OMP_NUM_THREADS": "1",
           "PYTHONIOENCODING": "utf-8:strict"}  # a strict UTF-8 terminal
    done = subprocess.run([sys.executable, "-m", "circuitdev.cli", "probe", "--panel", str(path), "--out", out,
                           "--no-progress"], env=env, capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert b"results-\\udcff" in done.stdout  # printed escaped, not a crash
    assert os.path.isfile(out + b"/tiny-bytes/step0.json")
