"""F2, the BOS fraction and the shape of its trajectory, on the synthetic fixture (answers worked out by hand from
published_fixtures.py), the paper's headline values on the authors' files, and its figure."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from circuitdev.analysis import findings as F
from circuitdev.book import plots
from circuitdev.sources.published import load_published
from findings_fixtures import E, EMPTY, O, P, assert_placeholder, by_panel, dev_table, two_tiers
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


# --------------------------------------------------------------- the e-fold measure, the minimum rise (issue 21)


def trajectory(tokens, pct, n_heads=256, panel="m") -> pd.DataFrame:
    return pd.DataFrame({"panel": panel, "revision": [f"r{i}" for i in range(len(tokens))], "tokens_b": tokens,
                         "bos_fraction": np.asarray(pct, dtype=float) / 100, "n_heads": n_heads})


def test_steepest_rise_per_e_fold_by_hand():
    e = np.e
    shape = F.trajectory_shape(trajectory([1, e, e**2, e**3], [0, 0, 60, 60])).iloc[0]
    assert shape["steepest_pp_per_efold"] == pytest.approx(60)
    assert (shape["steepest_from_revision"], shape["steepest_to_revision"]) == ("r1", "r2")
    assert shape["efold_share"] == pytest.approx(1.0) and shape["shape_efold"] == "transition"
    # a rise spread evenly over three e-folds: 20 pp per e-fold, a third of the rise -> a ramp
    ramp = F.trajectory_shape(trajectory([1, e, e**2, e**3], [0, 20, 40, 60])).iloc[0]
    assert ramp["steepest_pp_per_efold"] == pytest.approx(20) and ramp["shape_efold"] == "ramp"
    # two close revisions: with no floor the per-e-fold slope of a 6.25 pp step over 10% more tokens is 66 pp
    close = trajectory([1.0, 1.1], [0, 6.25], n_heads=16)
    assert F.steepest_rise(close["tokens_b"], [0, 6.25], min_span_efolds=0)[0] == pytest.approx(6.25 / np.log(1.1))
    assert F.steepest_rise(close["tokens_b"], [0, 6.25])[0] == pytest.approx(6.25)  # measured over >= 1 e-fold
    assert np.isnan(F.steepest_rise(np.array([0.0, 1.0]), [0, 50])[0])  # zero tokens have no logarithm


def test_the_e_fold_measure_does_not_move_with_the_grid():
    e = np.e
    base = F.trajectory_shape(trajectory([1, e, e**2.5, e**4], [0, 0, 60, 70])).iloc[0]
    # revisions added where nothing changes, and one where the rise is straight in log tokens (its log-midpoint)
    finer = F.trajectory_shape(trajectory([1, e**0.5, e, e**1.75, e**2.5, e**3, e**4],
                                          [0, 0, 0, 30, 60, 60 + 10 / 3, 70])).iloc[0]
    assert finer["steepest_pp_per_efold"] == pytest.approx(base["steepest_pp_per_efold"]) == pytest.approx(40)
    assert finer["shape_efold"] == base["shape_efold"]
    assert finer["jump_share"] != pytest.approx(base["jump_share"])  # the largest jump does move: 60 pp -> 30 pp
    # the same without the floor: the adjacent-revision slope, also unchanged by these revisions
    tokens = np.array([1, e**0.5, e, e**1.75, e**2.5, e**3, e**4])
    assert F.steepest_rise(tokens, [0, 0, 0, 30, 60, 60 + 10 / 3, 70], min_span_efolds=0)[0] == pytest.approx(40)


def test_no_shape_below_the_minimum_rise():
    e = np.e
    one_head = F.trajectory_shape(trajectory([1, e, e**2], [0, 0, 6.25], n_heads=16)).iloc[0]
    assert one_head["jump_share"] == 1.0 and one_head["shape"] == one_head["shape_efold"] == "flat"
    assert one_head["min_rise_pp"] == pytest.approx(18.75)  # three heads of 16
    two = F.trajectory_shape(trajectory([1, e, e**2], [0, 0, 12.5], n_heads=16)).iloc[0]
    assert two["shape"] == "flat"  # 12.5 pp is above 10 pp but only two heads
    three = F.trajectory_shape(trajectory([1, e, e**2], [0, 0, 18.75], n_heads=16)).iloc[0]
    assert three["shape"] == "transition"
    big = F.trajectory_shape(trajectory([1, e, e**2], [0, 0, 8.0], n_heads=1000)).iloc[0]
    assert big["shape"] == "flat" and big["min_rise_pp"] == 10  # 80 heads, but under 10 pp
    assert F.trajectory_shape(trajectory([1, e, e**2], [0, 0, 8.0], n_heads=1000), min_rise_pp=5).iloc[0][
        "shape"] == "transition"


def test_shapes_on_the_published_data():
    shape = F.trajectory_shape(F.bos_fraction(load_published(real_published_dir()).table)).set_index("panel")
    assert shape.loc[O, "steepest_pp_per_efold"] > 2 * shape.loc[E, "steepest_pp_per_efold"]
    assert shape.loc[E, "steepest_pp_per_efold"] > shape.loc[P, "steepest_pp_per_efold"]
    assert (shape.loc[O, "steepest_from_tokens_b"], shape.loc[O, "steepest_to_tokens_b"]) == (117, 264)
    assert shape.loc[O, "shape_efold"] == "transition" and shape.loc[P, "shape_efold"] == "ramp"


def test_run_differences_come_from_the_table_and_the_panel_files(dev):  # noqa: F811
    from types import SimpleNamespace

    from circuitdev.sources.panels import load_panel

    panels = {P: load_panel(P, resolve_hub=False), O: SimpleNamespace(family="olmo", dtype="fp16",
                                                                      tokens_per_step=None, description="a  b")}
    runs = F.run_differences(dev, panels).set_index("panel")
    assert list(runs.index) == [P, O, E]
    assert runs.loc[P, ["architecture", "layers", "heads_per_layer", "heads", "revisions"]].tolist() == [
        "gpt_neox", 3, 4, 12, 5]
    assert runs.loc[P, "tokens_per_step"] == 2097152 and runs.loc[P, "final_tokens_b"] == pytest.approx(299.892)
    assert runs.loc[O, "description"] == "a b" and runs.loc[O, "heads"] == 8
    assert pd.isna(runs.loc[E, "architecture"]) and runs.loc[E, "layers"] == 2  # no panel given: the table part only


def test_each_tier_gets_its_own_fraction_axis():
    toy = F.bos_fraction(dev_table("toy-a")).assign(tier="toy")
    toy = toy.assign(bos_fraction=toy["bos_fraction"] / 10)  # a few percent at most
    pub = F.bos_fraction(dev_table("real-b", seed=1)).assign(tier="measured")
    fig = plots.bos_fraction_lines(pd.concat([toy, pub], ignore_index=True))
    toy_top, pub_top = fig.axes[0].get_ylim()[1], fig.axes[1].get_ylim()[1]
    assert toy_top < 20 <= 100 * pub["bos_fraction"].max() <= pub_top
    assert toy_top >= 100 * toy["bos_fraction"].max()


def test_tokens_per_step_from_the_revisions_when_the_panel_file_has_none(dev):  # noqa: F811
    from types import SimpleNamespace

    rev = lambda tokens, step: SimpleNamespace(tokens=tokens, step=step)  # noqa: E731
    same = SimpleNamespace(tokens_per_step=None, revisions=[rev(0, 0), rev(1024, 1), rev(4096, 4)])
    labels = SimpleNamespace(tokens_per_step=None, revisions=[rev(2_000_000_000, 1000), rev(3_048_000_000_000, 1454000)])
    runs = F.run_differences(dev, {P: same, O: labels}).set_index("panel")
    assert runs.loc[P, "tokens_per_step"] == 1024 and pd.isna(runs.loc[O, "tokens_per_step"])


def test_shape_ranges_are_the_set_of_runs_of_the_grid():
    grid = [2.0, 3.0, 5.0, 10.0, 30.0, 100.0, 300.0, 1000.0]
    shapes = pd.DataFrame({"panel": "m", "threshold": grid,
                           "shape": ["transition", "ramp", "transition", "transition", "transition", "ramp", "flat",
                                     "transition"]})
    row = F.shape_ranges(shapes).iloc[0]
    assert (row["count"], row["ranges"]) == (5, "2×, 5–30×, 1000×")  # not "from 2× to 1000×"
    # a threshold of the grid missing from the table breaks a run as a different shape would
    assert F.shape_ranges(shapes[shapes["threshold"] != 10.0], thresholds=grid).iloc[0]["ranges"] == "2×, 5×, 30×, 1000×"
    assert F.shape_ranges(shapes.assign(shape="ramp")).iloc[0]["ranges"] == "none"
    tiers = F.shape_ranges(pd.concat([shapes.assign(tier="toy"), shapes.assign(tier="published")]))
    assert list(tiers.columns) == ["tier", "panel", "count", "ranges"] and len(tiers) == 2


def test_run_differences_reads_the_panel_files_by_name(dev):  # noqa: F811
    runs = F.run_differences(dev).set_index("panel")
    assert runs.loc[O, "tokens_per_step"] == 2_097_152  # the file has none: the published run's
    assert runs.loc[E, "architecture"] == "olmoe" and "Trained on" in runs.loc[P, "description"]
