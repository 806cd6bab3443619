"""F6, the stability of the null-selectivity floor, on hand-written null tables, and its figure."""

from __future__ import annotations

import pandas as pd
import pytest

from circuitdev.analysis import findings as F
from circuitdev.book import plots
from circuitdev.errors import DataError
from findings_fixtures import EMPTY, O, P, assert_placeholder, assert_titled


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


def test_noise_floor_figure_is_titled_and_says_when_empty():
    nulls = pd.DataFrame({"tier": "toy", "panel": "toy-a", "tokens_b": [0.0, 1e-3], "null_p99": [1.1, 1.2],
                          "null_max": [2.0, 3.0], "real_max": [5.0, 60.0]})
    assert_titled(plots.noise_floor(nulls))
    assert_placeholder(plots.noise_floor(EMPTY), "noise_floor")
