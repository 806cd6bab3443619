"""F2, the BOS fraction and the shape of its trajectory, on the synthetic fixture (answers worked out by hand from
published_fixtures.py), the paper's headline values on the authors' files, and its figure."""

from __future__ import annotations

import numpy as np
import pytest

from circuitdev.analysis import findings as F
from circuitdev.book import plots
from circuitdev.sources.published import load_published
from findings_fixtures import E, EMPTY, O, P, assert_placeholder, by_panel, two_tiers
from findings_fixtures import dev  # noqa: F401  (pytest fixture)
from published_fixtures import published_fixture, real_published_dir  # noqa: F401  (pytest fixture)


def test_bos_fraction_per_class_and_best_class(dev):  # noqa: F811
    bos = F.bos_fraction(dev)
    assert by_panel(bos, P, "n_bos") == [0, 0, 2, 4, 8]
    assert by_panel(bos, P, "bos_fraction") == pytest.approx([0, 0, 2 / 12, 4 / 12, 8 / 12])
    assert by_panel(bos, O, "n_bos") == [0, 1, 5, 4]
    assert by_panel(bos, E, "bos_fraction") == pytest.approx([0.25, 0.5, 0.75])
    best = F.bos_fraction(dev, rule="best-class")
    # L1H2 (induction 55) and L2H3 (induction 181.6) count per class but not by best class
    assert by_panel(best, P, "n_bos")[-1] == 6
    assert by_panel(F.bos_fraction(dev, threshold=50), P, "n_bos") == [0, 0, 0, 1, 4]


def test_trajectory_shape(dev):  # noqa: F811
    shape = F.trajectory_shape(F.bos_fraction(dev)).set_index("panel")
    p = shape.loc[P]
    assert p["largest_jump_pp"] == pytest.approx(100 / 3)
    assert p["rise_pp"] == pytest.approx(200 / 3)
    assert p["jump_share"] == pytest.approx(0.5)
    assert (p["jump_from_revision"], p["jump_to_revision"]) == ("step10000", "step143000")
    assert p["jump_token_ratio"] == pytest.approx(299.892 / 20.971)
    assert p["shape"] == "transition"
    assert F.trajectory_shape(F.bos_fraction(dev), transition_share=0.6).set_index("panel").loc[P, "shape"] == "ramp"
    o = shape.loc[O]
    assert (o["jump_from_tokens_b"], o["jump_to_tokens_b"]) == (117, 264)
    assert o["largest_jump_pp"] == pytest.approx(50) and o["jump_share"] == pytest.approx(1.0)
    assert o["peak_pct"] == pytest.approx(62.5) and o["saturation_pct"] == pytest.approx(50)
    assert o["saturation_revision"] == "step126000-tokens264B"  # first >= 0.9 x 50%


def test_headline_values_on_the_published_data():
    data = load_published(real_published_dir())
    bos = F.bos_fraction(data.table)
    finals = bos.groupby("panel", sort=False).tail(1).set_index("panel")["bos_fraction"]
    assert [round(100 * finals[p], 1) for p in (P, O, E)] == [57.8, 80.9, 75.8]
    olmo = bos[bos["panel"] == O].set_index("tokens_b")["bos_fraction"]
    assert (round(100 * olmo[117], 1), round(100 * olmo[264], 1)) == (7.4, 70.3)


def test_bos_fraction_lines_draw_the_fractions():
    """The plotted data are the findings' numbers: the line y-values are the BOS fractions (%) of each tier."""
    frac = two_tiers().apply(F.bos_fraction)
    fig = plots.bos_fraction_lines(frac)
    for ax, tier in zip(fig.axes, ["toy", "measured"]):
        want = frac[frac["tier"] == tier]
        ys = np.concatenate([line.get_ydata() for line in ax.get_lines() if len(line.get_ydata()) > 1])
        assert np.allclose(np.sort(ys), np.sort(100 * want["bos_fraction"].to_numpy()))
    assert_placeholder(plots.bos_fraction_lines(EMPTY), "bos_fraction_lines")
