"""F5, participation-ratio trajectories and the lead of PR elevation over formation, on the synthetic fixture
(answers worked out by hand from published_fixtures.py), and its figure."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from circuitdev.errors import ConfigError
from circuitdev.schema import SEL_COLUMNS

from circuitdev.analysis import findings as F
from circuitdev.analysis.findings import f5_pr_lead as PR
from circuitdev.book import plots
from findings_fixtures import E, EMPTY, O, P, assert_placeholder, assert_titled, two_tiers
from findings_fixtures import dev  # noqa: F401  (pytest fixture)
from published_fixtures import published_fixture  # noqa: F401  (pytest fixture)


def test_head_trajectories(dev):  # noqa: F811
    traj = PR.head_trajectories(dev)
    p = traj[traj["panel"] == P]
    assert len(p) == 15 and p["name"].unique().tolist() == ["L0H3", "L1H2", "L2H3"]
    l0h3 = p[p["name"] == "L0H3"]
    assert l0h3["pr_signal"].tolist() == pytest.approx([1e-3, 1e-3, 4, 8, 8])
    assert l0h3["formed"].tolist() == [False, False, False, True, True]
    assert traj[traj["panel"] == E].empty


def test_pr_lead_default_rule(dev):  # noqa: F811
    lead = PR.pr_lead(dev).set_index(["panel", "name"])
    assert lead.loc[(P, "L0H3"), "formation_revision"] == "step10000"
    assert lead.loc[(P, "L0H3"), "elevation_revision"] == "step3000"  # PR-1 = 4 >= 0.5 x 8
    assert lead.loc[(P, "L0H3"), "lead_checkpoints"] == 1
    assert lead.loc[(P, "L0H3"), "lead_token_ratio"] == pytest.approx(20.971 / 6.291)
    assert lead.loc[(P, "L1H2"), "lead_checkpoints"] == 2  # flat PR is at its peak from the start: elevated at
    assert lead.loc[(P, "L1H2"), "lead_censoring"] == "lower"  # (or before) the first revision, so at least 2
    assert lead.loc[(P, "L0H3"), "lead_censoring"] == "exact"
    assert lead.loc[(P, "L2H3"), "lead_checkpoints"] == 1  # 26.35 >= 0.5 x 47.05
    assert lead.loc[(O, "L1H0"), "lead_checkpoints"] == 1


def test_pr_lead_other_rules(dev):  # noqa: F811
    ratio = PR.pr_lead(dev, rule="ratio-to-start", level=2.0).set_index(["panel", "name"])
    assert ratio.loc[(P, "L0H3"), "lead_checkpoints"] == 1  # 5 >= 2 x 1.0 at step3000
    assert pd.isna(ratio.loc[(P, "L1H2"), "elevation_index"])  # 2.0 never reaches 4.0: elevated after the
    assert ratio.loc[(P, "L1H2"), "lead_checkpoints"] == 2 - 5  # last revision if ever, so the lead is at most -3
    assert ratio.loc[(P, "L1H2"), "lead_censoring"] == "upper"
    level = PR.pr_lead(dev, rule="above-level", level=10.0).set_index(["panel", "name"])
    assert pd.isna(level.loc[(P, "L0H3"), "elevation_index"])
    assert level.loc[(P, "L2H3"), "elevation_revision"] == "step256"
    prev = PR.pr_lead(dev, head_class="previous-token")  # formation threshold 100
    assert prev["name"].tolist() == ["L0H0"] and prev["formation_revision"].tolist() == ["step256"]
    sens = PR.pr_lead_sensitivity(dev, grid={"fraction-of-peak": [0.5, 0.9]})  # noqa: F841
    assert len(sens) == 2 * 4 and sens["level"].tolist()[:4] == [0.5] * 4
    assert sens[(sens["name"] == "L0H3") & (sens["level"] == 0.9)]["lead_checkpoints"].item() == 0


def test_pr_features_follow_the_authors_trapezoid(dev):  # noqa: F811
    feats = PR.pr_features(dev).set_index(["panel", "name"])
    pr = [1.96, 27.35, 48.05, 35.62, 28.29]
    x = [math.log(max(t, 1.0)) for t in (0.002, 0.536, 6.291, 20.971, 299.892)]
    y = [max(v - 1, 0) for v in pr]
    expected = sum((y[i] + y[i + 1]) / 2 * (x[i + 1] - x[i]) for i in range(4))
    row = feats.loc[(P, "L2H3")]
    assert row["integral"] == pytest.approx(expected)
    assert (row["spread"], row["final_pr"], row["max_pr"], row["min_pr"]) == pytest.approx((46.09, 28.29, 48.05, 1.96))
    assert E not in set(feats.index.get_level_values(0))  # no PR trajectory


def test_no_module_aliases_the_f5_module():
    """Issue 28: no `sys.modules` alias (the former `analysis.pr_lead`); the facade's F5 names are the module's."""
    import importlib.util

    assert importlib.util.find_spec("circuitdev.analysis.pr_lead") is None
    assert F.pr_lead is PR.pr_lead and F.head_trajectories is PR.head_trajectories


def test_pr_selectivity_is_titled_and_says_when_empty():
    assert_titled(plots.pr_selectivity(two_tiers().apply(PR.head_trajectories)))
    assert_placeholder(plots.pr_selectivity(EMPTY), "pr_selectivity")


def test_lead_summary_of_no_heads_keeps_the_keys_a_page_selects_on():
    """A tier whose panels follow no head gives an empty summary that still has panel and head_class (the F5 page
    selects rows by class; the small book's tiny random models form no circuit)."""
    import pandas as pd

    from circuitdev.analysis.findings.f5_pr_lead import lead_summary

    empty = lead_summary(pd.DataFrame(columns=["tier"]))  # what Tiers.apply returns when no tier has rows
    assert empty.empty and {"tier", "panel", "head_class", "median_lead"} <= set(empty.columns)
    assert empty[empty["head_class"] == "induction"].empty


def test_lead_censoring_by_hand():
    """Formation / elevation indices (-1: never) of 5 revisions -> the lead or its bound, and its label."""
    f = np.array([3, 3, 0, 0, 2, -1, 2])
    e = np.array([1, 0, 0, 2, -1, 1, 1])
    value = PR.lead_value(f, e, 5, has_pr=np.array([True] * 6 + [False]))
    np.testing.assert_array_equal(value, [2, 3, np.nan, -2, -3, np.nan, np.nan])
    assert PR.lead_censoring(f, e, np.array([True] * 6 + [False])).tolist() == [
        "exact", "lower", "undefined", "upper", "upper", "not formed", "undefined"]


def test_peak_to_date_uses_no_future():
    pr = np.array([[5.0, 5.0, 2.0, 4.0, 6.0], [1.0, 1.5, 3.0, 2.0, 9.0]])
    # head 0: lowest so far 5 5 2 2 2, highest 5 5 5 5 6: PR - low >= 0.5 (high - 1) only at 4.0 and 6.0
    # head 1: rises from 1: 1.5 - 1 >= 0.5 x 0.5, 3 - 1 >= 0.5 x 2, 2 - 1 >= 0.5 x 2, 9 - 1 >= 0.5 x 8
    up = PR.pr_elevated(pr, rule="peak-to-date", level=0.5)
    assert up.tolist() == [[False, False, False, True, True], [False, True, True, True, True]]
    for t in range(1, 5):  # what comes later never changes an earlier answer
        later = pr.copy()
        later[:, t:] = 50.0
        assert (PR.pr_elevated(later, rule="peak-to-date", level=0.5)[:, :t] == up[:, :t]).all()
    assert not PR.pr_elevated(np.full((1, 4), 7.0), rule="peak-to-date").any()  # a plateau never is


def test_pr_lead_peak_to_date_on_the_fixture(dev):  # noqa: F811
    lead = PR.pr_lead(dev, rule="peak-to-date", level=0.5).set_index(["panel", "name"])
    assert lead.loc[(P, "L0H3"), "elevation_revision"] == "step3000"  # 1 1 5: 5 - 1 >= 0.5 x (5 - 1)
    assert lead.loc[(P, "L2H3"), "elevation_revision"] == "step256"  # 27.35 - 1.96 >= 0.5 x 26.35
    assert (lead.loc[(P, "L0H3"), "lead_checkpoints"], lead.loc[(P, "L2H3"), "lead_checkpoints"]) == (1, 1)
    assert lead.loc[(P, "L1H2"), "lead_censoring"] == "upper"  # flat PR never rises: at most 2 - 5
    summary = PR.lead_summary(lead.reset_index()).set_index("panel")
    assert summary.loc[P, ["heads", "exact", "lower", "upper", "undefined"]].tolist() == [3, 2, 0, 1, 0]
    assert summary.loc[P, "median_lead"] == 1 and summary.loc[P, "median_exact"] == 1


def test_elevation_base_rate_on_the_fixture(dev):  # noqa: F811
    base = F.elevation_base_rate(dev).query("panel == @P")
    # flat PR 2.0 is at its own peak from the start: 10 of the 12 heads elevated at step1 under the default rule
    assert base["share_elevated"].iloc[0] == pytest.approx(10 / 12)
    assert base["n_first"].tolist() == [10, 1, 1, 0, 0]  # then L2H3 (step256) and L0H3 (step3000)
    causal = F.elevation_base_rate(dev, rule="peak-to-date").query("panel == @P")
    assert causal["n_elevated"].iloc[0] == 0 and causal["n_first"].tolist() == [0, 1, 1, 0, 0]


def _exact_null(formation, elevation, n_rev, observed):
    """P(median lead >= observed) and the mean median lead over every ordered choice of distinct heads."""
    meds = [np.nanmedian(PR.lead_value(np.array(formation), elevation[list(pick)], n_rev))
            for pick in itertools.permutations(range(len(elevation)), len(formation))]
    meds = np.array(meds)
    return float(np.mean(meds >= observed)), float(meds.mean())


def test_lead_null_matches_an_exact_enumeration(dev):  # noqa: F811
    """On the fixture the circuit's formation times (3, 2, 2) go to 3 of 12 heads: an exact enumeration of all
    1320 ordered choices gives the null the Monte Carlo permutations must approach."""
    null = F.lead_null(dev, n_perm=20000, seed=1).set_index("panel")
    row = null.loc[P]
    elevation = np.array([0] * 12)  # default rule: the 10 flat heads at step1, L2H3 at 1, L0H3 at 2
    names = [f"L{l}H{h}" for l in range(3) for h in range(4)]
    elevation[names.index("L2H3")], elevation[names.index("L0H3")] = 1, 2
    p, mean = _exact_null([3, 2, 2], elevation, 5, row["median_lead"])
    assert row["median_lead"] == 1 and row["heads"] == 3 and row["defined"] == 3
    assert abs(row["p_value"] - p) < 4 * np.sqrt(p * (1 - p) / 20000) + 1e-4
    assert row["null_mean"] == pytest.approx(mean, abs=0.03)
    assert row["other_median_lead"] == 2  # the 9 other heads are all elevated at step1: leads 3, 2, 2
    assert row["transient_heads"] == 1 and row["transient_median_lead"] == 2  # L0H2: 80x at step3000, then 10x
    assert row["base_rate_first"] == pytest.approx(10 / 12) and row["first_revision"] == "step1"
    again = F.lead_null(dev, n_perm=20000, seed=1)
    assert again.equals(F.lead_null(dev, n_perm=20000, seed=1))  # seeded


def test_lead_null_rejects_when_only_the_circuit_rises():
    """40 heads over 8 revisions: 4 circuit heads whose PR triples two checkpoints before they form, 36 flat
    others. Under the rule without future the others are never elevated (leads at most 5 - 8), and a median of 4
    random heads reaches the circuit's +2 only when 3 of them are circuit heads: p = 145 / C(40, 4) = 0.0016."""
    rows = []
    for layer in range(8):
        for head in range(5):
            circuit = head == 0 and layer < 4
            for r in range(8):
                rows.append({"panel": "toy-x", "revision": f"step{r}", "tokens_b": (r + 1) * 1e-3, "step": r,
                             "layer": layer, "head": head, **{c: 1.0 for c in SEL_COLUMNS},
                             "sel_induction": 80.0 if circuit and r >= 5 else 1.0,
                             "pr": 6.0 if circuit and r >= 3 else 2.0})
    dev_ = pd.DataFrame(rows)
    out = F.lead_null(dev_, rule="peak-to-date", n_perm=5000).iloc[0]
    assert out["heads"] == 4 and out["median_lead"] == 2 and out["other_median_lead"] == 5 - 8
    assert out["p_value"] < 0.01 and out["null_hi"] < 2
    with pytest.raises(ConfigError, match="n_perm"):
        F.lead_null(dev_, n_perm=0)


def test_pr_against_null_by_hand():
    dev_ = pd.DataFrame({"panel": "t", "revision": ["a", "a", "b", "b"], "tokens_b": [0.0, 0.0, 1e-3, 1e-3],
                         "layer": [0, 0, 0, 0], "head": [0, 1, 0, 1], "pr": [3.0, 9.0, 4.0, 5.0]})
    null = pd.DataFrame({"panel": "t", "revision": ["a"] * 4 + ["b"] * 4, "draw": [0, 0, 1, 1] * 2,
                         "layer": 0, "head": [0, 1] * 4, "null_pr": [2.0, 4.0, 2.5, 5.0, 3.0, 6.0, 4.5, 7.0]})
    out = F.pr_against_null(dev_, null, quantile=0.5).set_index(["revision", "name"])
    assert out.loc[("a", "L0H0"), ["null_mean", "null_min", "null_max"]].tolist() == [2.25, 2.0, 2.5]
    assert bool(out.loc[("a", "L0H0"), "above_own"]) and not bool(out.loc[("a", "L0H0"), "above_q"])  # q = 3.25
    assert bool(out.loc[("a", "L0H1"), "above_q"]) and not bool(out.loc[("b", "L0H1"), "above_own"])
    summary = F.null_pr_summary(out.reset_index()).set_index("revision")
    assert summary.loc["a", ["heads", "n_above_q", "n_above_own"]].tolist() == [2, 1, 2]
    assert F.pr_against_null(dev_, None).empty


def test_control_figures_are_titled_and_say_when_empty(dev):  # noqa: F811
    tiers = two_tiers()
    assert_titled(plots.lead_vs_null(tiers.apply(F.lead_null, n_perm=200)))
    assert_titled(plots.base_rate_lines(tiers.apply(F.elevation_base_rate)))
    assert_titled(plots.topk_bars(tiers.apply(F.topk_breakdown, k=3)))
    calibrated = F.pr_against_null(dev, pd.DataFrame({"panel": P, "revision": "step1", "draw": 0, "layer": 0,
                                                      "head": [0, 1, 2, 3], "null_pr": 2.0}))
    assert_titled(plots.pr_null_calibration(calibrated.assign(tier="toy")))
    for fn in (plots.lead_vs_null, plots.base_rate_lines, plots.topk_bars, plots.pr_null_calibration):
        assert_placeholder(fn(EMPTY), fn.__name__)


def test_power_conclusion_follows_the_verdict_rules():
    """Tests that cannot reject say nothing; among those that can, none / all / some rejecting read differently."""
    import pandas as pd

    from circuitdev.analysis.findings import power_conclusion

    def tests(*pairs):
        return pd.DataFrame(pairs, columns=["min_p", "p_value"])

    none_can = power_conclusion(tests((0.3, 0.5), (0.07, 0.4)))
    assert (none_can["tests"], none_can["able"], none_can["reject"]) == (2, 0, 0)
    assert none_can["conclusion"].startswith("No test here can reject")
    assert power_conclusion(tests((0.01, 0.43), (0.3, 0.9)))["conclusion"].startswith("None of the tests that can")
    assert power_conclusion(tests((0.01, 0.02)))["conclusion"].startswith("Every test that can reject does")
    mixed = power_conclusion(tests((0.01, 0.02), (0.001, 0.3)))
    assert (mixed["able"], mixed["reject"]) == (2, 1) and "mixed" in mixed["conclusion"]
    assert power_conclusion(tests())["tests"] == 0
