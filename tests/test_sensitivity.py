"""Beyond the paper: the counts and the F2 shape over a grid of selectivity thresholds, on the synthetic fixture
(answers worked out by hand from published_fixtures.py), and the sensitivity page's figure."""

from __future__ import annotations

import numpy as np
import pytest

from circuitdev.analysis import findings as F
from circuitdev.book import plots
from findings_fixtures import EMPTY, O, P, assert_placeholder, assert_titled, by_panel, two_tiers
from findings_fixtures import dev  # noqa: F401  (pytest fixture)
from published_fixtures import published_fixture  # noqa: F401  (pytest fixture)


def test_threshold_sensitivity(dev):  # noqa: F811
    sens = F.threshold_sensitivity(dev, thresholds=[2, 30, 50, 100, 1000])
    bos30 = sens[(sens["head_class"] == "first-token") & (sens["threshold"] == 30)]
    assert bos30["fraction"].tolist() == pytest.approx(F.bos_fraction(dev)["bos_fraction"].tolist())
    final = F.threshold_sensitivity(dev, head_classes=["induction"], thresholds=[2, 50, 100], final_only=True)
    assert by_panel(final, P, "n") == [4, 3, 1]  # L0H2 (10) counts at 2x; only L2H3 at 100x
    assert (sens[sens["threshold"] == 1000]["n"] == 0).all()
    for _, g in sens.groupby(["panel", "revision", "head_class"]):
        assert (np.diff(g.sort_values("threshold")["n"].to_numpy()) <= 0).all()
    assert {30.0, 50.0, 2.0, 1000.0} <= set(F.SENSITIVITY_THRESHOLDS)


def test_shape_sensitivity(dev):  # noqa: F811
    shapes = F.shape_sensitivity(dev, thresholds=[30, 50])
    o = shapes[(shapes["panel"] == O)].set_index("threshold")
    assert o.loc[30.0, "largest_jump_pp"] == pytest.approx(50)
    assert o.loc[50.0, "shape"] == "flat"  # no head reaches 50x first-token in OLMo


def test_sensitivity_figure_is_titled_and_says_when_empty():
    assert_titled(plots.threshold_sensitivity(two_tiers().apply(F.threshold_sensitivity, final_only=True)))
    assert_placeholder(plots.threshold_sensitivity(EMPTY), "threshold_sensitivity")
