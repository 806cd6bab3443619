"""The workshop reads the toy panel's records as the book's chapters do: with the revisions `circuitdev refine` added."""

from __future__ import annotations

import json

import pandas as pd

from circuitdev.sources import records
from circuitdev.sources.panels import load_panel
from circuitdev.sources.revision import Revision
from circuitdev.sources.refined import add_refined
from circuitdev.toy.recipe import recipe_of
from circuitdev.toy.train import panel_ready, revision_name, write_panel_file
from circuitdev.workshop import data


def test_the_workshops_toy_revisions_are_the_chapters_refined_ones(tmp_path, monkeypatch):
    """toy_table reads the panel `load_panel(name, results_dir=...)` builds (refined.yaml joined), not the bare grid:
    otherwise the sessions' milestones differ from the chapters' (step1500 against the refined step1490)."""
    panel = "toy-pythia"
    results = tmp_path / "results"
    monkeypatch.setenv("CIRCUITDEV_DATA", str(tmp_path))
    monkeypatch.setenv("CIRCUITDEV_RESULTS", str(results))
    family, recipe = recipe_of(panel)
    folder = tmp_path / "toy" / panel
    for step in recipe.grid():  # a checkpoint folder per grid step: the panel counts as trained (none is loaded)
        (folder / revision_name(step)).mkdir(parents=True)
        for name in ("config.json", "model.safetensors"):
            (folder / revision_name(step) / name).write_text("{}")
    (folder / "recipe.json").write_text(json.dumps({"hash": recipe.recipe_hash()}))
    write_panel_file(family, recipe, tmp_path)
    assert panel_ready(panel)
    refined = Revision("step1490", int(1490 * recipe.tokens_per_step), 1490)
    add_refined(results, panel, refined, metric="induction_3_heads", between=["step1250", "step1500"], change=1.0)

    seen: list[list[str]] = []

    def complete(results_dir, pan, **_):  # every revision has its record: nothing is probed
        seen.append([r.name for r in pan.revisions])
        return pd.DataFrame({"revision": [r.name for r in pan.revisions], "state": "complete"})

    def table(results_dir, pan, **_):  # one row per revision of the panel the workshop asked for
        return pd.DataFrame({"revision": [r.name for r in pan.revisions]})

    monkeypatch.setattr(records, "panel_status", complete)
    monkeypatch.setattr(records, "load_panel_table", table)
    chapters = [r.name for r in load_panel(panel, results_dir=results).revisions]
    assert "step1490" in chapters and len(chapters) == len(recipe.grid()) + 1
    assert data.toy_table(panel)["revision"].tolist() == chapters
    assert seen == [chapters]
