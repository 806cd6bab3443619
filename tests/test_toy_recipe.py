"""The central claim of the toy chapter, tested: the shipped recipe, trained here from scratch, forms at least one
induction head at >= 50x in each family (GPT-NeoX-like, OLMo-like, OLMoE-like), measured by the probe with the
panel's own settings. Slow: the three families train side by side in ~5-6 minutes on 2 cores."""

from __future__ import annotations

import pytest

from circuitdev.schema import INDUCTION_THRESHOLD
from circuitdev.sources.panels import load_panel
from circuitdev.sources.run import probe_panel
from circuitdev.sources.store import read_record
from circuitdev.toy import FAMILIES, ToyRecipe, train_all


@pytest.mark.slow
def test_the_shipped_recipe_forms_an_induction_head_in_every_family(tmp_path):
    shipped = ToyRecipe()
    # the same run, saving only the final checkpoint (which checkpoints are saved does not change the training)
    recipe = shipped.replace(checkpoint_steps=(shipped.steps,))
    results = train_all(recipe, FAMILIES, tmp_path / "data", jobs=2, progress=False)
    for family, result in zip(FAMILIES, results):
        panel = tmp_path / "data" / "panels" / f"{result['panel']}.yaml"
        final = f"step{shipped.steps}"
        probe_panel(load_panel(panel), revisions=[final], results_dir=tmp_path / "results", progress=False)
        table, _ = read_record(tmp_path / "results", result["panel"], final)
        best = table.sort_values("sel_induction", ascending=False).iloc[0]
        assert best["sel_induction"] >= INDUCTION_THRESHOLD, (
            f"{family}: no induction head at {INDUCTION_THRESHOLD:g}x after {shipped.steps} steps "
            f"(best L{best['layer']}H{best['head']} {best['sel_induction']:.1f}x)")
