"""The refinement findings: per-revision metrics by name (what `circuitdev refine --metric` refines on), the event
window, and the seed replicas' names and spread. The refine command itself is tested in test_refine.py."""

from __future__ import annotations

import pandas as pd
import pytest

from circuitdev.analysis import findings as F
from circuitdev.errors import DataError
from findings_fixtures import dev  # noqa: F401  (pytest fixture)
from published_fixtures import published_fixture  # noqa: F401  (pytest fixture)


def test_milestone_metrics_are_zero_until_the_milestone_first_holds(dev):  # noqa: F811
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


def test_event_window_on_the_grid_and_inside_a_coarser_window():
    coarse = pd.DataFrame({"revision": list("abcd"), "tokens_b": [1.0, 2.0, 3.0, 4.0], "value": [0, 0, 1, 1.0]})
    w = F.event_window(coarse)  # the largest |change| between adjacent revisions
    assert (w["from_revision"], w["to_revision"], w["change"], w["revisions_inside"]) == ("b", "c", 1.0, 0)
    fine = pd.DataFrame({"revision": list("abcdefg"), "tokens_b": [1, 1.5, 2, 2.5, 3, 3.5, 4],
                         "value": [0, 0, 0, 0.5, 1, 1, 1]})
    w = F.event_window(fine, within=(1.0, 3.0))  # last revision still at the start value -> first at the end value
    assert (w["from_revision"], w["to_revision"], w["from_tokens_b"], w["to_tokens_b"]) == ("c", "e", 2, 3)
    assert w["change"] == 1 and w["revisions_inside"] == 1
    with pytest.raises(DataError, match="two revisions"):
        F.event_window(coarse.iloc[:1])


def test_seed_replica_names_and_their_spread():
    assert F.seed_of("toy-pythia-s2") == ("toy-pythia", 2) and F.seed_of("toy-pythia") == ("toy-pythia", 0)
    values = pd.DataFrame({"panel": ["toy-a"] * 2 + ["toy-a-s1"] * 2 + ["toy-a-s2"] * 2 + ["toy-b"] * 2,
                           "v": [0.1, 0.5, 0.2, 0.6, 0.3, 0.4, 0.0, 0.9]})
    spread = F.seed_spread(values, "v").set_index("panel")
    assert list(spread.index) == ["toy-a"]  # toy-b has one seed: no spread
    row = spread.loc["toy-a"]
    assert row["seeds"] == 3 and row["values"] == "s0: 0.5, s1: 0.6, s2: 0.4"
    assert (row["min"], row["max"], row["spread"]) == pytest.approx((0.4, 0.6, 0.2))
