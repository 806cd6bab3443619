"""What every finding rests on, on the synthetic fixture: revisions in token order, results independent of row
order, the best-class tie rule, and errors that name the missing column."""

from __future__ import annotations

import pandas as pd
import pytest

from circuitdev.analysis import findings as F
from circuitdev.errors import DataError
from findings_fixtures import E, O, P, by_panel
from findings_fixtures import dev  # noqa: F401  (pytest fixture)
from published_fixtures import published_fixture  # noqa: F401  (pytest fixture)



def test_revisions_in_token_order_with_fractions(dev):  # noqa: F811
    revs = F.revisions(dev)
    assert by_panel(revs, P, "revision") == ["step1", "step256", "step3000", "step10000", "step143000"]
    assert by_panel(revs, P, "revision_index") == [0, 1, 2, 3, 4]
    assert by_panel(revs, O, "token_fraction") == pytest.approx([2 / 3048, 117 / 3048, 264 / 3048, 1.0])
    assert by_panel(revs, E, "n_heads") == [4, 4, 4]
    assert list(pd.unique(revs["panel"])) == [P, O, E]


def test_results_do_not_depend_on_row_order(dev):  # noqa: F811
    shuffled = dev.sample(frac=1.0, random_state=0)
    a = F.bos_fraction(dev).set_index(["panel", "revision"]).sort_index()
    b = F.bos_fraction(shuffled).set_index(["panel", "revision"]).sort_index()
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(F.circuit_recall(dev).set_index(["panel", "revision"]).sort_index(),
                                  F.circuit_recall(shuffled).set_index(["panel", "revision"]).sort_index())


def test_best_class_tie_goes_to_the_class_listed_first(dev):  # noqa: F811
    final = dev[(dev["panel"] == P) & (dev["revision"] == "step143000")].set_index(["layer", "head"])
    assert final.loc[(0, 1), "best_class"] == "self"  # self = local = 40: self is listed first
    assert final.loc[(0, 1), "classification"] == "self"
    assert final.loc[(2, 3), "best_class"] == "induction"
    first = dev[(dev["panel"] == P) & (dev["revision"] == "step1")].set_index(["layer", "head"])
    assert first.loc[(0, 1), "best_class"] == "induction"  # all six equal 1.0
    assert first.loc[(0, 1), "classification"] == "unclassified"


def test_missing_columns_name_the_function_and_column(dev):  # noqa: F811
    with pytest.raises(DataError, match="sel_first_token"):
        F.bos_fraction(dev.drop(columns="sel_first_token"))
    with pytest.raises(DataError, match="empty"):
        F.revisions(dev.iloc[:0])


def test_one_head_name_and_one_parser():
    """Issue 28 item 4: heads are written and read in one place (schema.head_name / parse_head / heads_text)."""
    from circuitdev.errors import ConfigError
    from circuitdev.schema import head_name, heads_text, parse_head

    assert head_name(4, 12) == "L4H12" and parse_head("L4H12") == (4, 12)
    assert parse_head("L4_H12") == parse_head("l4h12") == parse_head((4, 12)) == (4, 12)
    assert all(parse_head(head_name(l, h)) == (l, h) for l in range(3) for h in range(11))
    assert heads_text({2: [10, 1], 0: [3]}) == "L0H3 L2H1 L2H10"  # by layer, then head, as numbers
    with pytest.raises(ConfigError, match="L4H4"):
        parse_head("head 4")
