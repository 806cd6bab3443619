"""F1-F6 and the sensitivities on the synthetic fixture (answers worked out by hand from published_fixtures.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from circuitdev.analysis import findings as F
from circuitdev.analysis import pr_lead as PR
from circuitdev.errors import DataError
from circuitdev.sources.published import load_published
from published_fixtures import published_fixture, real_published_dir  # noqa: F401  (pytest fixture)

P, O, E = "pythia-1b", "olmo-1b-0724", "olmoe-1b-7b-0924"


@pytest.fixture
def dev(published_fixture):  # noqa: F811
    return load_published(published_fixture).table


def by_panel(df, panel, column):
    return df.loc[df["panel"] == panel, column].tolist()


# ------------------------------------------------------------------------------------------------------------ basics


def test_revisions_in_token_order_with_fractions(dev):
    revs = F.revisions(dev)
    assert by_panel(revs, P, "revision") == ["step1", "step256", "step3000", "step10000", "step143000"]
    assert by_panel(revs, P, "revision_index") == [0, 1, 2, 3, 4]
    assert by_panel(revs, O, "token_fraction") == pytest.approx([2 / 3048, 117 / 3048, 264 / 3048, 1.0])
    assert by_panel(revs, E, "n_heads") == [4, 4, 4]
    assert list(pd.unique(revs["panel"])) == [P, O, E]


def test_results_do_not_depend_on_row_order(dev):
    shuffled = dev.sample(frac=1.0, random_state=0)
    a = F.bos_fraction(dev).set_index(["panel", "revision"]).sort_index()
    b = F.bos_fraction(shuffled).set_index(["panel", "revision"]).sort_index()
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(F.circuit_recall(dev).set_index(["panel", "revision"]).sort_index(),
                                  F.circuit_recall(shuffled).set_index(["panel", "revision"]).sort_index())


def test_best_class_tie_goes_to_the_class_listed_first(dev):
    final = dev[(dev["panel"] == P) & (dev["revision"] == "step143000")].set_index(["layer", "head"])
    assert final.loc[(0, 1), "best_class"] == "self"  # self = local = 40: self is listed first
    assert final.loc[(0, 1), "classification"] == "self"
    assert final.loc[(2, 3), "best_class"] == "induction"
    first = dev[(dev["panel"] == P) & (dev["revision"] == "step1")].set_index(["layer", "head"])
    assert first.loc[(0, 1), "best_class"] == "induction"  # all six equal 1.0
    assert first.loc[(0, 1), "classification"] == "unclassified"


def test_missing_columns_name_the_function_and_column(dev):
    with pytest.raises(DataError, match="sel_first_token"):
        F.bos_fraction(dev.drop(columns="sel_first_token"))
    with pytest.raises(DataError, match="empty"):
        F.revisions(dev.iloc[:0])


# -------------------------------------------------------------------------------------------------------------- F1


def test_layer_counts(dev):
    counts = F.layer_counts(dev)
    at = lambda panel, rev: counts[(counts["panel"] == panel) & (counts["revision"] == rev)]["n"].tolist()  # noqa
    assert at(P, "step256") == [0, 0, 0]  # L1H0 = 29.99 is below 30
    assert at(P, "step3000") == [0, 1, 1]  # L1H0 = 30.0 exactly counts
    assert at(P, "step10000") == [0, 2, 2]
    assert at(P, "step143000") == [0, 4, 4]
    assert at(O, "step126000-tokens264B") == [1, 0, 2, 2]
    assert at(E, "step1220000-tokens5117B") == [1, 2]  # a 2-layer panel lists only its layers


def test_floor_check_lists_the_runs_that_break_it(dev):
    floor = F.floor_check(dev)
    broken = floor[~floor["holds"]]
    assert list(zip(broken["panel"], broken["revision"])) == [
        (P, "step3000"), (P, "step10000"), (P, "step143000"), (O, "step126000-tokens264B"), (E, "step5000-tokens20B"),
        (E, "step100000-tokens419B"), (E, "step1220000-tokens5117B")]
    only_l0 = F.floor_check(dev, layers=(0,))
    assert list(zip(*[only_l0.loc[~only_l0["holds"], c] for c in ("panel", "revision")])) == [
        (O, "step126000-tokens264B"), (E, "step1220000-tokens5117B")]
    assert floor.loc[(floor["panel"] == P) & (floor["revision"] == "step143000"), "n_floor"].item() == 4


# -------------------------------------------------------------------------------------------------------------- F2


def test_bos_fraction_per_class_and_best_class(dev):
    bos = F.bos_fraction(dev)
    assert by_panel(bos, P, "n_bos") == [0, 0, 2, 4, 8]
    assert by_panel(bos, P, "bos_fraction") == pytest.approx([0, 0, 2 / 12, 4 / 12, 8 / 12])
    assert by_panel(bos, O, "n_bos") == [0, 1, 5, 4]
    assert by_panel(bos, E, "bos_fraction") == pytest.approx([0.25, 0.5, 0.75])
    best = F.bos_fraction(dev, rule="best-class")
    # L1H2 (induction 55) and L2H3 (induction 181.6) count per class but not by best class
    assert by_panel(best, P, "n_bos")[-1] == 6
    assert by_panel(F.bos_fraction(dev, threshold=50), P, "n_bos") == [0, 0, 0, 1, 4]


def test_trajectory_shape(dev):
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


# -------------------------------------------------------------------------------------------------------------- F3


def test_milestones(dev):
    m = F.milestones(dev).set_index(["panel", "milestone"])
    tokens = lambda panel, name: m.loc[(panel, name), "tokens_b"]  # noqa: E731
    assert tokens(P, "induction_3_heads") == pytest.approx(6.291)  # L2H3, L1H2, L0H2 at step3000
    assert math.isnan(tokens(P, "induction_5_heads")) and pd.isna(m.loc[(P, "induction_5_heads"), "revision"])
    assert [m.loc[(P, f"bos_{x}pct"), "revision"] for x in (10, 30, 50)] == ["step3000", "step10000", "step143000"]
    assert pd.isna(m.loc[(P, "bos_70pct"), "revision"])
    assert [tokens(O, f"bos_{x}pct") for x in (10, 30, 50)] == [117, 264, 264]
    assert [tokens(E, f"bos_{x}pct") for x in (10, 30, 50, 70)] == [20, 419, 419, 5117]
    assert pd.isna(m.loc[(P, "previous_token_30_heads"), "revision"])


def test_milestone_first_vs_sustained(dev):
    spec = [F.Milestone("bos_60pct", "first-token", 30.0, min_fraction=0.6)]
    first = F.milestones(dev, specs=spec).set_index("panel")
    sustained = F.milestones(dev, specs=spec, sustained=True).set_index("panel")
    assert first.loc[O, "revision"] == "step126000-tokens264B"  # 62.5%, then back to 50%
    assert pd.isna(sustained.loc[O, "revision"])
    assert first.loc[P, "revision"] == sustained.loc[P, "revision"] == "step143000"


def test_milestone_gap(dev):
    gap = F.milestone_gap(F.milestones(dev)).set_index("panel")
    assert gap.loc[P, "token_ratio"] == pytest.approx(299.892 / 6.291)
    assert gap.loc[P, "checkpoints"] == 2
    assert math.isnan(gap.loc[O, "token_ratio"])  # OLMo never has 3 induction heads


# -------------------------------------------------------------------------------------------------------------- F4


def test_final_circuit_and_recall(dev):
    circuit = F.final_circuit(dev)
    assert by_panel(circuit, P, "name") == ["L0H3", "L1H2", "L2H3"]
    assert by_panel(circuit, P, "selectivity") == pytest.approx([70, 55, 181.6])
    assert by_panel(circuit, O, "name") == ["L1H0"] and by_panel(circuit, E, "name") == []
    recall = F.circuit_recall(dev)
    assert by_panel(recall, P, "recall") == pytest.approx([0, 0, 2 / 3, 2 / 3, 1])
    assert by_panel(recall, P, "found")[2:4] == ["L1H2 L2H3", "L0H3 L2H3"]
    assert by_panel(recall, O, "recall") == [0, 1, 0, 1]
    assert all(math.isnan(r) for r in by_panel(recall, E, "recall"))  # empty circuit: recall undefined


def test_recall_milestones_use_exact_thirds(dev):
    ms = F.recall_milestones(F.circuit_recall(dev))
    assert by_panel(ms, P, "revision") == ["step3000", "step3000", "step143000"]
    assert by_panel(ms, P, "level_pct") == [33, 67, 100]
    assert by_panel(ms, P, "token_fraction") == pytest.approx([6.291 / 299.892, 6.291 / 299.892, 1.0])
    assert by_panel(ms, O, "tokens_b") == [117, 117, 117]
    assert all(pd.isna(r) for r in by_panel(ms, E, "revision"))
    # 0.67 as a level would wrongly miss 2/3
    assert by_panel(F.recall_milestones(F.circuit_recall(dev), levels=[0.67]), P, "revision") == ["step143000"]


def test_recall_at_another_reference_revision(dev):
    recall = F.circuit_recall(dev, reference_revision="step3000")  # S = {L0H2, L1H2, L2H3}
    assert by_panel(recall, P, "recall") == pytest.approx([0, 0, 1, 1 / 3, 2 / 3])


# -------------------------------------------------------------------------------------------------------------- F5


def test_head_trajectories(dev):
    traj = PR.head_trajectories(dev)
    p = traj[traj["panel"] == P]
    assert len(p) == 15 and p["name"].unique().tolist() == ["L0H3", "L1H2", "L2H3"]
    l0h3 = p[p["name"] == "L0H3"]
    assert l0h3["pr_signal"].tolist() == pytest.approx([1e-3, 1e-3, 4, 8, 8])
    assert l0h3["formed"].tolist() == [False, False, False, True, True]
    assert traj[traj["panel"] == E].empty


def test_pr_lead_default_rule(dev):
    lead = PR.pr_lead(dev).set_index(["panel", "name"])
    assert lead.loc[(P, "L0H3"), "formation_revision"] == "step10000"
    assert lead.loc[(P, "L0H3"), "elevation_revision"] == "step3000"  # PR-1 = 4 >= 0.5 x 8
    assert lead.loc[(P, "L0H3"), "lead_checkpoints"] == 1
    assert lead.loc[(P, "L0H3"), "lead_token_ratio"] == pytest.approx(20.971 / 6.291)
    assert lead.loc[(P, "L1H2"), "lead_checkpoints"] == 2  # flat PR is at its peak from the start
    assert lead.loc[(P, "L2H3"), "lead_checkpoints"] == 1  # 26.35 >= 0.5 x 47.05
    assert lead.loc[(O, "L1H0"), "lead_checkpoints"] == 1


def test_pr_lead_other_rules(dev):
    ratio = PR.pr_lead(dev, rule="ratio-to-start", level=2.0).set_index(["panel", "name"])
    assert ratio.loc[(P, "L0H3"), "lead_checkpoints"] == 1  # 5 >= 2 x 1.0 at step3000
    assert pd.isna(ratio.loc[(P, "L1H2"), "lead_checkpoints"])  # 2.0 never reaches 4.0
    level = PR.pr_lead(dev, rule="above-level", level=10.0).set_index(["panel", "name"])
    assert pd.isna(level.loc[(P, "L0H3"), "elevation_index"])
    assert level.loc[(P, "L2H3"), "elevation_revision"] == "step256"
    prev = PR.pr_lead(dev, head_class="previous-token")  # formation threshold 100
    assert prev["name"].tolist() == ["L0H0"] and prev["formation_revision"].tolist() == ["step256"]
    sens = PR.pr_lead_sensitivity(dev, grid={"fraction-of-peak": [0.5, 0.9]})
    assert len(sens) == 2 * 4 and sens["level"].tolist()[:4] == [0.5] * 4
    assert sens[(sens["name"] == "L0H3") & (sens["level"] == 0.9)]["lead_checkpoints"].item() == 0


def test_pr_features_follow_the_authors_trapezoid(dev):
    feats = PR.pr_features(dev).set_index(["panel", "name"])
    pr = [1.96, 27.35, 48.05, 35.62, 28.29]
    x = [math.log(max(t, 1.0)) for t in (0.002, 0.536, 6.291, 20.971, 299.892)]
    y = [max(v - 1, 0) for v in pr]
    expected = sum((y[i] + y[i + 1]) / 2 * (x[i + 1] - x[i]) for i in range(4))
    row = feats.loc[(P, "L2H3")]
    assert row["integral"] == pytest.approx(expected)
    assert (row["spread"], row["final_pr"], row["max_pr"], row["min_pr"]) == pytest.approx((46.09, 28.29, 48.05, 1.96))
    assert E not in set(feats.index.get_level_values(0))  # no PR trajectory


# -------------------------------------------------------------------------------------------------------------- F6


def test_noise_floor_without_data_reports_no_data():
    out = F.noise_floor(None, panels=[P, O])
    assert out["status"].tolist() == ["no data", "no data"] and out["panel"].tolist() == [P, O]
    assert F.noise_floor(pd.DataFrame(), panels=[P])["status"].tolist() == ["no data"]


def test_noise_floor_stability():
    nulls = pd.DataFrame({"revision": ["a", "b", "c"], "tokens_b": [1.0, 10.0, 100.0], "null_p99": [1.5, 2.0, 1.8],
                          "null_max": [10.0, 300.0, 50.0], "real_max": [100.0, 150.0, 180.0],
                          "k_above": [20, 30, 25]})
    out = F.noise_floor(nulls, panels=["", O]).set_index("panel")
    row = out.loc[""]
    assert row["status"] == "ok" and row["n_revisions"] == 3
    assert row["p99_ratio"] == pytest.approx(2.0 / 1.5) and bool(row["p99_stable"])
    assert row["max_ratio"] == pytest.approx(30.0) and not bool(row["max_stable"])
    assert (row["k_above_min"], row["k_above_max"]) == (20, 30)
    assert out.loc[O, "status"] == "no data"
    with pytest.raises(DataError, match="null_p99"):
        F.noise_floor(nulls.drop(columns="null_p99"))


# ----------------------------------------------------------------------------------------------------- sensitivity


def test_threshold_sensitivity(dev):
    sens = F.threshold_sensitivity(dev, thresholds=[2, 30, 50, 100, 1000])
    bos30 = sens[(sens["head_class"] == "first-token") & (sens["threshold"] == 30)]
    assert bos30["fraction"].tolist() == pytest.approx(F.bos_fraction(dev)["bos_fraction"].tolist())
    final = F.threshold_sensitivity(dev, head_classes=["induction"], thresholds=[2, 50, 100], final_only=True)
    assert by_panel(final, P, "n") == [4, 3, 1]  # L0H2 (10) counts at 2x; only L2H3 at 100x
    assert (sens[sens["threshold"] == 1000]["n"] == 0).all()
    for _, g in sens.groupby(["panel", "revision", "head_class"]):
        assert (np.diff(g.sort_values("threshold")["n"].to_numpy()) <= 0).all()
    assert {30.0, 50.0, 2.0, 1000.0} <= set(F.SENSITIVITY_THRESHOLDS)


def test_shape_sensitivity(dev):
    shapes = F.shape_sensitivity(dev, thresholds=[30, 50])
    o = shapes[(shapes["panel"] == O)].set_index("threshold")
    assert o.loc[30.0, "largest_jump_pp"] == pytest.approx(50)
    assert o.loc[50.0, "shape"] == "flat"  # no head reaches 50x first-token in OLMo


# ----------------------------------------------------------------------------------------------- the real data


def test_headline_values_on_the_published_data():
    data = load_published(real_published_dir())
    bos = F.bos_fraction(data.table)
    finals = bos.groupby("panel", sort=False).tail(1).set_index("panel")["bos_fraction"]
    assert [round(100 * finals[p], 1) for p in (P, O, E)] == [57.8, 80.9, 75.8]
    olmo = bos[bos["panel"] == O].set_index("tokens_b")["bos_fraction"]
    assert (round(100 * olmo[117], 1), round(100 * olmo[264], 1)) == (7.4, 70.3)
    floor = F.floor_check(data.table)
    assert len(floor) == 30 and floor["holds"].all()


def test_milestone_metrics_are_zero_until_the_milestone_first_holds(dev):
    """Refining on a milestone (`circuitdev refine --metric induction_3_heads`) needs a 0/1 metric whose first 1 is
    the milestone's first revision, as `findings.milestones` finds it."""
    first = F.milestones(dev).set_index(["panel", "milestone"])["revision"]
    for spec in F.PAPER_MILESTONES:
        values = F.revision_metric(dev, spec.name)
        assert set(values["value"]) <= {0.0, 1.0}
        for panel, g in values.groupby("panel", sort=False):
            hit = g.loc[g["value"] == 1, "revision"]
            expected = first[(panel, spec.name)]
            assert (hit.iloc[0] if len(hit) else None) == (None if pd.isna(expected) else expected), (panel, spec.name)
