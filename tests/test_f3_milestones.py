"""F3, the milestones and the gap between two of them, on the synthetic fixture (answers worked out by hand from
published_fixtures.py), and its figure. Their bootstrap windows are tested in test_bootstrap.py."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from circuitdev.analysis import findings as F
from circuitdev.book import plots
from findings_fixtures import E, EMPTY, O, P, assert_titled, two_tiers
from findings_fixtures import dev  # noqa: F401  (pytest fixture)
from published_fixtures import published_fixture  # noqa: F401  (pytest fixture)


def test_milestones(dev):  # noqa: F811
    m = F.milestones(dev).set_index(["panel", "milestone"])
    tokens = lambda panel, name: m.loc[(panel, name), "tokens_b"]  # noqa: E731
    assert tokens(P, "induction_3_heads") == pytest.approx(6.291)  # L2H3, L1H2, L0H2 at step3000
    assert math.isnan(tokens(P, "induction_5_heads")) and pd.isna(m.loc[(P, "induction_5_heads"), "revision"])
    assert [m.loc[(P, f"bos_{x}pct"), "revision"] for x in (10, 30, 50)] == ["step3000", "step10000", "step143000"]
    assert pd.isna(m.loc[(P, "bos_70pct"), "revision"])
    assert [tokens(O, f"bos_{x}pct") for x in (10, 30, 50)] == [117, 264, 264]
    assert [tokens(E, f"bos_{x}pct") for x in (10, 30, 50, 70)] == [20, 419, 419, 5117]
    assert pd.isna(m.loc[(P, "previous_token_30_heads"), "revision"])


def test_milestone_first_vs_sustained(dev):  # noqa: F811
    spec = [F.Milestone("bos_60pct", "first-token", 30.0, min_fraction=0.6)]
    first = F.milestones(dev, specs=spec).set_index("panel")
    sustained = F.milestones(dev, specs=spec, sustained=True).set_index("panel")
    assert first.loc[O, "revision"] == "step126000-tokens264B"  # 62.5%, then back to 50%
    assert pd.isna(sustained.loc[O, "revision"])
    assert first.loc[P, "revision"] == sustained.loc[P, "revision"] == "step143000"


def test_milestone_gap(dev):  # noqa: F811
    gap = F.milestone_gap(F.milestones(dev)).set_index("panel")
    assert gap.loc[P, "token_ratio"] == pytest.approx(299.892 / 6.291)
    assert gap.loc[P, "checkpoints"] == 2
    assert math.isnan(gap.loc[O, "token_ratio"])  # OLMo never has 3 induction heads


def test_milestone_timeline_is_titled_and_says_when_empty():
    tiers = two_tiers()
    ms = tiers.apply(F.milestones)
    gaps = tiers.apply(lambda d: F.milestone_gap(F.milestones(d), start="induction_3_heads", end="bos_10pct"))
    assert_titled(plots.milestone_timeline(ms, gaps))
    assert plots.milestone_timeline(EMPTY).axes[0].texts
