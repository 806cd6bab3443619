"""Adaptive revision refinement (issue 14): new revisions strictly inside the largest-jump window or its refined
halves, nearest the log-midpoint first, K respected, stored like any record (readers and `show` include them), and
a clear error for an offline hub panel without candidates."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from circuitdev.cli import main
from circuitdev.errors import DataError, ModelUnavailableError
from circuitdev.sources.panels import load_panel
from circuitdev.sources.refine import PYTHIA_STEPS, candidate_revisions, refine_panel
from circuitdev.sources.run import probe_panel
from circuitdev.sources.records import load_boot_replicates, load_panel_table
from circuitdev.sources.refined import refined_revisions
from conftest import TINY_TOKENS_PER_STEP, write_tiny_panel


def step_metric(onset: int):
    """A metric that jumps from 0 to 1 at step `onset` (the tiny random models have no real event)."""
    return lambda dev: dev.drop_duplicates("revision").assign(value=lambda d: (d["step"] >= onset).astype(float))


@pytest.fixture
def grid_panel(tmp_path) -> Path:
    """Checkpoints step0..step8 on disk; the panel file lists step0, step4, step8 only (the rest are candidates)."""
    path = write_tiny_panel(tmp_path, "gpt_neox", 9, "tiny-grid")
    raw = yaml.safe_load(path.read_text())
    raw["revisions"] = [r for r in raw["revisions"] if r["step"] in (0, 4, 8)]
    raw["probe"].update(n_nulls=0, n_prefix=0, n_boot=20)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_candidates_are_the_checkpoint_folders_not_yet_probed(grid_panel, tmp_path):
    cands = candidate_revisions(load_panel(grid_panel), results_dir=tmp_path / "results")
    assert [r.name for r in cands] == [f"step{i}" for i in (1, 2, 3, 5, 6, 7)]
    assert all(r.tokens == r.step * TINY_TOKENS_PER_STEP for r in cands)


def test_refinement_stays_inside_the_largest_jump_and_respects_k(grid_panel, tmp_path):
    out = tmp_path / "results"
    probe_panel(load_panel(grid_panel), results_dir=out, progress=False)
    lines: list[str] = []
    steps = refine_panel(load_panel(grid_panel), metric=step_metric(6), metric_name="onset", max_new=4, results_dir=out,
                         log=lines.append)
    probed = [s.chosen for s in steps if s.chosen is not None]
    # window step4 -> step8; log-midpoint of 4096 and 8192 tokens is 5793 -> step6; then the changing half
    # step4 -> step6 -> step5; then the change sits between step5 and step6, which have nothing between them
    assert [r.name for r in probed] == ["step6", "step5"]
    assert steps[-1].chosen is None and "no candidate" in steps[-1].note
    assert all(4 * TINY_TOKENS_PER_STEP < r.tokens < 8 * TINY_TOKENS_PER_STEP for r in probed)
    assert any("step6" in line and "step4" in line for line in lines)
    assert [r.name for r in refined_revisions(out, "tiny-grid")] == ["step5", "step6"]
    table = load_panel_table(out, "tiny-grid")  # the panel now reads five revisions, in token order
    assert list(pd.unique(table["revision"])) == ["step0", "step4", "step5", "step6", "step8"]
    assert set(load_boot_replicates(out, "tiny-grid")["revision"]) == {"step0", "step4", "step5", "step6", "step8"}
    assert len(set(table["config_hash"])) == 1  # refined revisions use the records' configuration

    again = refine_panel(load_panel(grid_panel), metric=step_metric(2), metric_name="early", max_new=1, results_dir=out)
    assert [s.chosen.name for s in again] == ["step2"]  # K = 1: one revision, inside step0 -> step4


def test_show_lists_the_refined_revisions(grid_panel, tmp_path, capsys):
    out = tmp_path / "results"
    probe_panel(load_panel(grid_panel), results_dir=out, progress=False)
    refine_panel(load_panel(grid_panel), metric=step_metric(6), max_new=1, results_dir=out)
    capsys.readouterr()
    assert main(["show", "--panel", str(grid_panel), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.strip().startswith("step6"))
    assert "yes" in row and "refined" in text
    assert main(["show", "--panel", str(grid_panel), "--out", str(out), "--revision", "step6"]) == 0


def test_refinement_needs_records_and_candidates(grid_panel, tmp_path):
    with pytest.raises(DataError, match="circuitdev probe"):  # nothing probed yet
        refine_panel(load_panel(grid_panel), metric=step_metric(6), max_new=1, results_dir=tmp_path / "empty")
    full = write_tiny_panel(tmp_path / "full", "gpt_neox", 2, "tiny-full")  # every checkpoint already listed
    with pytest.raises(DataError, match="no candidate"):
        refine_panel(load_panel(full), metric=step_metric(1), max_new=1, results_dir=tmp_path / "r")


def test_offline_hub_panel_without_candidates_is_a_clear_error(tmp_path):
    panel = tmp_path / "hub.yaml"
    panel.write_text(yaml.safe_dump({"name": "hub-olmo", "model": "allenai/OLMo-1B-0724-hf", "family": "olmo",
                                     "dtype": "fp16", "revisions": [{"name": "step1000-tokens2B",
                                                                     "tokens": 2 * 10**9}]}))
    with pytest.raises(ModelUnavailableError, match="offline"):
        candidate_revisions(load_panel(panel), results_dir=tmp_path)
    # Pythia's published step grid is known offline
    pythia = candidate_revisions(load_panel("pythia-1b"), results_dir=tmp_path)
    listed = set(load_panel("pythia-1b").revision_names)
    assert [r.name for r in pythia] == [f"step{s}" for s in PYTHIA_STEPS if f"step{s}" not in listed]
    assert pythia[1].tokens == 2 * 2097152  # step2, from the panel's tokens_per_step
