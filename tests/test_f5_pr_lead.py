"""F5, participation-ratio trajectories and the lead of PR elevation over formation, on the synthetic fixture
(answers worked out by hand from published_fixtures.py), and its figure."""

from __future__ import annotations

import math

import pandas as pd
import pytest

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
    assert lead.loc[(P, "L1H2"), "lead_checkpoints"] == 2  # flat PR is at its peak from the start
    assert lead.loc[(P, "L2H3"), "lead_checkpoints"] == 1  # 26.35 >= 0.5 x 47.05
    assert lead.loc[(O, "L1H0"), "lead_checkpoints"] == 1


def test_pr_lead_other_rules(dev):  # noqa: F811
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


def test_the_former_module_name_is_the_f5_module():
    """`circuitdev.analysis.pr_lead` (the public name pages import) is the F5 module itself, not a copy."""
    from circuitdev.analysis import pr_lead

    assert pr_lead is PR and F.pr_lead is PR.pr_lead and F.head_trajectories is PR.head_trajectories


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
