"""Fault class: a record that is not the one being computed (issue 31, items 2 and 4).

Never replace, always archive: a record of a newer format, of another panel file with the same panel name (other
weights, another hub model) is moved aside under a name that says why, byte for byte; a newer format is refused
by readers as newer, not called corrupt. A toy record knows its weights by content: the same recipe with other
weights (a retrain, a replaced `model.safetensors`) makes it stale.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from conftest import tiny_model
from circuitdev.cli import main
from circuitdev.sources.panels import load_panel
from circuitdev.sources.records import PanelRecords
from circuitdev.sources.run import probe_panel
from circuitdev.sources.store import record_paths, record_status


def probe(panel_file, out):
    return [r.action for r in probe_panel(load_panel(panel_file, results_dir=out), results_dir=out, progress=False)]


def files_of(paths) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in paths.files if p.is_file()}


def test_a_newer_format_is_refused_as_newer_and_archived_not_replaced(make_tiny_panel, tmp_path, capsys):
    path = make_tiny_panel(revisions=1, name="tiny-newer")
    out = tmp_path / "out"
    assert probe(path, out) == ["computed"]
    paths = record_paths(out, "tiny-newer", "step0")
    meta = json.loads(paths.sidecar.read_text())
    meta["format"] = "circuitdev.record/99"  # what a later circuitdev would write
    paths.sidecar.write_text(json.dumps(meta))
    theirs = files_of(paths)
    status = record_status(paths, panel="tiny-newer", revision="step0")
    assert status.state == "stale" and status.newer and "newer circuitdev" in status.reason
    assert main(["show", "--panel", str(path), "--revision", "step0", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "written by a newer circuitdev" in err and "corrupt" not in err
    assert probe(path, out) == ["computed"]
    kept = record_paths(out, "tiny-newer", "step0").folder / "newer-format" / "circuitdev.record-99"
    assert {p.name: p.read_bytes() for p in kept.iterdir()} == theirs  # the newer record, byte for byte
    assert record_status(paths, panel="tiny-newer", revision="step0").complete


def test_another_panel_file_of_the_same_name_archives_the_other_weights_record(make_tiny_panel, tmp_path):
    first = make_tiny_panel(revisions=1, name="tiny-same", folder=tmp_path / "a")
    second = make_tiny_panel(revisions=1, name="tiny-same", folder=tmp_path / "b")
    tiny_model("gpt_neox", seed=7).save_pretrained(load_panel(second).revision_path("step0"))  # other weights
    out = tmp_path / "out"
    assert probe(first, out) == ["computed"]
    paths = record_paths(out, "tiny-same", "step0")
    theirs = files_of(paths)
    sha = json.loads(paths.sidecar.read_text())["weights"]["id"]
    assert probe(second, out) == ["computed"]
    kept = paths.folder / "by-weights" / sha[:12]
    assert {p.name: p.read_bytes() for p in kept.iterdir()} == theirs
    assert probe(second, out) == ["skipped"]


def test_a_record_of_another_hub_model_is_stale_and_archived_by_model(make_tiny_panel, tmp_path):
    from circuitdev.sources.store import archive_reason

    path = make_tiny_panel(revisions=1, name="tiny-hub")
    out = tmp_path / "out"
    probe(path, out)
    meta = json.loads(record_paths(out, "tiny-hub", "step0").sidecar.read_text())
    meta_hub = {**meta, "model": "EleutherAI/pythia-14m", "weights": None}
    record_paths(out, "tiny-hub", "step0").sidecar.write_text(json.dumps(meta_hub))
    hub = dataclasses.replace(load_panel(path), model="EleutherAI/pythia-70m", is_local=False)
    status = PanelRecords(out, "tiny-hub", hub).status_of("step0", config_hash=meta["config_hash"])
    assert status.state == "stale" and "another model" in status.reason
    assert archive_reason(meta_hub, hub, meta["config_hash"], None) == \
        Path("by-model") / "EleutherAI-pythia-14m" / meta["config_hash"]


def test_a_toy_record_goes_stale_when_its_weights_change_under_the_same_recipe(make_tiny_panel, tmp_path):
    path = make_tiny_panel(revisions=1, name="toy-tinyretrain")
    panel = load_panel(path)
    (Path(panel.model) / "recipe.json").write_text(json.dumps({"hash": "aaaaaaaaaaaa"}))
    out = tmp_path / "out"
    assert probe(path, out) == ["computed"]
    meta = json.loads(record_paths(out, panel.name, "step0").sidecar.read_text())
    assert meta["weights"]["kind"] == "sha256" and len(meta["weights"]["id"]) == 64
    tiny_model("gpt_neox", seed=11).save_pretrained(panel.revision_path("step0"))  # a retrain, same recipe.json
    status = PanelRecords.open(out, path).status_of("step0")
    assert status.state == "stale" and "other weights" in status.reason
    assert probe(path, out) == ["computed"]  # not "already complete"
