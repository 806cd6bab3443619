"""F4, the final circuit's recall over training and the revisions reaching each recall level, on the synthetic
fixture (answers worked out by hand from published_fixtures.py), and its figure."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from circuitdev.analysis import findings as F
from circuitdev.book import plots
from findings_fixtures import E, EMPTY, O, P, assert_placeholder, by_panel, two_tiers
from findings_fixtures import dev  # noqa: F401  (pytest fixture)
from published_fixtures import published_fixture  # noqa: F401  (pytest fixture)


def test_final_circuit_and_recall(dev):  # noqa: F811
    circuit = F.final_circuit(dev)
    assert by_panel(circuit, P, "name") == ["L0H3", "L1H2", "L2H3"]
    assert by_panel(circuit, P, "selectivity") == pytest.approx([70, 55, 181.6])
    assert by_panel(circuit, O, "name") == ["L1H0"] and by_panel(circuit, E, "name") == []
    recall = F.circuit_recall(dev)
    assert by_panel(recall, P, "recall") == pytest.approx([0, 0, 2 / 3, 2 / 3, 1])
    assert by_panel(recall, P, "found")[2:4] == ["L1H2 L2H3", "L0H3 L2H3"]
    assert by_panel(recall, O, "recall") == [0, 1, 0, 1]
    assert all(math.isnan(r) for r in by_panel(recall, E, "recall"))  # empty circuit: recall undefined


def test_recall_milestones_use_exact_thirds(dev):  # noqa: F811
    ms = F.recall_milestones(F.circuit_recall(dev))
    assert by_panel(ms, P, "revision") == ["step3000", "step3000", "step143000"]
    assert by_panel(ms, P, "level_pct") == [33, 67, 100]
    assert by_panel(ms, P, "token_fraction") == pytest.approx([6.291 / 299.892, 6.291 / 299.892, 1.0])
    assert by_panel(ms, O, "tokens_b") == [117, 117, 117]
    assert all(pd.isna(r) for r in by_panel(ms, E, "revision"))
    # 0.67 as a level would wrongly miss 2/3
    assert by_panel(F.recall_milestones(F.circuit_recall(dev), levels=[0.67]), P, "revision") == ["step143000"]


def test_recall_at_another_reference_revision(dev):  # noqa: F811
    recall = F.circuit_recall(dev, reference_revision="step3000")  # S = {L0H2, L1H2, L2H3}
    assert by_panel(recall, P, "recall") == pytest.approx([0, 0, 1, 1 / 3, 2 / 3])


def test_recall_curves_draw_the_recall():
    recall = two_tiers().apply(F.circuit_recall)
    fig = plots.recall_curves(recall)
    ys = np.concatenate([line.get_ydata() for ax in fig.axes for line in ax.get_lines() if len(line.get_ydata()) > 2])
    assert set(np.round(ys, 6)) >= set(np.round(100 * recall["recall"].dropna().to_numpy(), 6))
    assert set(np.round(ys[np.isfinite(ys)], 6)) >= set(np.round(100 * recall["precision"].dropna().to_numpy(), 6))
    assert len([ax for ax in fig.axes if ax.axison]) == 2  # one panel per model: one in each tier
    assert_placeholder(plots.recall_curves(EMPTY), "recall_curves")


def test_precision_and_jaccard_by_hand(dev):  # noqa: F811
    """P: final circuit {L0H3, L1H2, L2H3}; screened (induction >= 50): none, none, {L0H2, L1H2, L2H3},
    {L0H3, L2H3}, {L0H3, L1H2, L2H3}. O: {L1H0} screened at 117B and 3048B. E: nothing ever."""
    recall = F.circuit_recall(dev)
    assert by_panel(recall, P, "n_screened") == [0, 0, 3, 2, 3]
    p = by_panel(recall, P, "precision")
    assert math.isnan(p[0]) and math.isnan(p[1]) and p[2:] == pytest.approx([2 / 3, 1, 1])
    assert by_panel(recall, P, "jaccard") == pytest.approx([0, 0, 2 / 4, 2 / 3, 1])
    o = by_panel(recall, O, "precision")
    assert [math.isnan(x) for x in o] == [True, False, True, False] and by_panel(recall, O, "jaccard") == [0, 1, 0, 1]
    assert all(math.isnan(x) for c in ("precision", "jaccard") for x in by_panel(recall, E, c))


def test_heads_that_rise_and_fade(dev):  # noqa: F811
    faded = F.faded_heads(dev)
    assert faded["name"].tolist() == ["L0H2"] and faded["panel"].tolist() == [P]  # 80x at step3000, then 10x
    row = faded.iloc[0]
    assert (row["passes"], row["first_revision"], row["last_revision"], row["peak"], row["final"]) == (
        1, "step3000", "step3000", 80.0, 10.0)
    later = F.faded_heads(dev, reference_revision="step3000")  # against step3000's screen, L0H3 rises after it
    assert set(later.loc[later["panel"] == P, "name"]) == {"L0H3"}
    assert F.faded_heads(dev, threshold=1e6).empty


def test_recall_csv_carries_precision_and_jaccard(dev):  # noqa: F811
    from circuitdev.analysis.reanalysis import CONTRACT_COLUMNS, findings_tables

    table = findings_tables(dev)["recall"]
    assert list(table.columns) == CONTRACT_COLUMNS["recall"][:4] + ["precision", "jaccard"]
    np.testing.assert_allclose(table["precision"], F.circuit_recall(dev)["precision"])


def test_recall_intervals_include_precision():
    from test_bootstrap import dev_and_boot

    d, boot = dev_and_boot({(1, 0): [1.0, 30.5, 40.0]}, {(1, 0): 0.1})
    d = d.assign(sel_induction=np.where(d["layer"] == 1, 60.0, 1.0))
    rec = F.circuit_recall(d, boot=boot)
    assert (rec["precision"] == 1).all() and (rec["precision_lo"] == 1).all() and not rec["recall_widened"].any()


def test_recall_milestones_carry_the_screen_there(dev):  # noqa: F811
    ms = F.recall_milestones(F.circuit_recall(dev))
    assert by_panel(ms, P, "precision") == pytest.approx([2 / 3, 2 / 3, 1])  # step3000, step3000, step143000
    assert by_panel(ms, P, "n_screened") == [3, 3, 3]
    bare = F.recall_milestones(F.circuit_recall(dev)[["panel", "revision", "revision_index", "tokens_b",
                                                      "token_fraction", "recall"]])
    assert "precision" not in bare.columns
