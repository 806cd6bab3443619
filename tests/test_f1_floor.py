"""F1, the layer floor, on the synthetic fixture (answers worked out by hand from published_fixtures.py), on the
authors' files, and its figure. The floor's bootstrap verdict is tested in test_bootstrap.py."""

from __future__ import annotations

import numpy as np

from circuitdev.analysis import findings as F
from circuitdev.book import plots
from circuitdev.sources.published import load_published
from findings_fixtures import E, EMPTY, O, P, assert_placeholder, two_tiers
from findings_fixtures import dev  # noqa: F401  (pytest fixture)
from published_fixtures import published_fixture, real_published_dir  # noqa: F401  (pytest fixture)


def test_layer_counts(dev):  # noqa: F811
    counts = F.layer_counts(dev)
    at = lambda panel, rev: counts[(counts["panel"] == panel) & (counts["revision"] == rev)]["n"].tolist()  # noqa
    assert at(P, "step256") == [0, 0, 0]  # L1H0 = 29.99 is below 30
    assert at(P, "step3000") == [0, 1, 1]  # L1H0 = 30.0 exactly counts
    assert at(P, "step10000") == [0, 2, 2]
    assert at(P, "step143000") == [0, 4, 4]
    assert at(O, "step126000-tokens264B") == [1, 0, 2, 2]
    assert at(E, "step1220000-tokens5117B") == [1, 2]  # a 2-layer panel lists only its layers


def test_floor_check_lists_the_runs_that_break_it(dev):  # noqa: F811
    floor = F.floor_check(dev)
    broken = floor[~floor["holds"]]
    assert list(zip(broken["panel"], broken["revision"])) == [
        (P, "step3000"), (P, "step10000"), (P, "step143000"), (O, "step126000-tokens264B"), (E, "step5000-tokens20B"),
        (E, "step100000-tokens419B"), (E, "step1220000-tokens5117B")]
    only_l0 = F.floor_check(dev, layers=(0,))
    assert list(zip(*[only_l0.loc[~only_l0["holds"], c] for c in ("panel", "revision")])) == [
        (O, "step126000-tokens264B"), (E, "step1220000-tokens5117B")]
    assert floor.loc[(floor["panel"] == P) & (floor["revision"] == "step143000"), "n_floor"].item() == 4


def test_the_floor_holds_on_the_published_data():
    floor = F.floor_check(load_published(real_published_dir()).table)
    assert len(floor) == 30 and floor["holds"].all()


def test_layer_heatmap_cells_are_the_layer_counts():
    layers = two_tiers().apply(F.layer_counts)
    fig = plots.bos_layer_heatmaps(layers)
    grid = fig.axes[0].images[0].get_array()
    want = layers[layers["tier"] == "toy"].pivot(index="layer", columns="revision_index", values="n").to_numpy()
    assert np.array_equal(np.asarray(grid), want)
    assert_placeholder(plots.bos_layer_heatmaps(EMPTY), "bos_layer_heatmaps")
