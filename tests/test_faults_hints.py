"""Hints that lead somewhere (issue 31, "unclear"): a page's range written as `-p` takes it, and a revision the
panel does not have named as such instead of "probe them first"."""

from __future__ import annotations

import pytest

from circuitdev.book.execute import parse_cli_value
from circuitdev.book.parameters import Bounds, parse_bounds
from circuitdev.errors import ConfigError, DataError
from circuitdev.sources.null_pr import null_pr_over_training
from circuitdev.sources.panels import load_panel


@pytest.mark.parametrize("high", [1e6, 1e9, 2.5e7])
def test_a_range_reads_back_as_a_number(high):
    """A bound shown as 1e+06 was refused by `-p` in that very form (YAML reads it as text)."""
    shown = str(Bounds(0.0, high))
    top = shown.strip("[]").split(", ")[1]
    assert "e+" not in top and parse_cli_value(top) == high
    assert str(parse_bounds(f"in {shown}")) == shown


def test_null_pr_names_a_revision_the_panel_lacks(make_tiny_panel, tmp_path):
    panel = load_panel(make_tiny_panel(revisions=1, name="tiny-hint"))
    with pytest.raises(ConfigError) as err:
        null_pr_over_training(panel, results_dir=tmp_path, revisions=["step7"], progress=False)
    assert "has no revision(s) ['step7']" in str(err.value) and "step0" in str(err.value)
    assert "probe them first" not in str(err.value)
    with pytest.raises(DataError, match=r"run `circuitdev probe --panel tiny-hint`"):  # its own revision, unprobed
        null_pr_over_training(panel, results_dir=tmp_path, revisions=["step0"], progress=False)
