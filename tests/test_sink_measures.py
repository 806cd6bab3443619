"""The three sink measures compared (issue 23 item 5), on hand-built tables whose answers are worked out below, and
the page's figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from circuitdev.analysis import findings as F
from circuitdev.book import plots
from circuitdev.errors import ConfigError
from circuitdev.schema import SEL_COLUMNS
from findings_fixtures import EMPTY, assert_placeholder, assert_titled, tiered

# (layer, head) -> per revision (second-A selectivity, all-query selectivity, all-query mass), 3 revisions, 3 x 2 heads
HEADS = {
    (0, 0): [(1, 1, 0.01)] * 3,  # never a sink
    (1, 0): [(10, 5, 0.1), (30, 25, 0.35), (40, 25, 0.4)],  # second-A from r1 (30 exactly), mass from r1, all-query never
    (1, 1): [(1, 1, 0.05), (1, 2, 0.3), (1, 50, 0.6)],  # dormant: all-query and mass at r2 only (0.3 is not > 0.3)
    (2, 0): [(35, 31, 0.5)] * 3,  # all three from r0
    (2, 1): [(1, 1, 0.02)] * 3,
    (0, 1): [(1, 1, 0.02), (1, 1, 0.02), (1, 1, np.nan)],  # a missing value stays unknown
}


def table(panel: str = "toy-s", *, all_query: bool = True) -> pd.DataFrame:
    rows = []
    for (layer, head), values in HEADS.items():
        for r, (sel, allq, mass) in enumerate(values):
            row = {"panel": panel, "revision": f"step{r}", "tokens_b": r * 1e-3, "step": r, "layer": layer,
                   "head": head, **{c: 1.0 for c in SEL_COLUMNS}, "sel_first_token": float(sel), "pr": 2.0}
            if all_query:
                row.update(sel_first_token_allq=float(allq), mass_first_token_allq=float(mass))
            rows.append(row)
    return pd.DataFrame(rows)


def test_sink_flags_apply_each_bar():
    flags = F.sink_flags(table()).set_index(["revision", "name"])
    assert flags.loc[("step1", "L1H0"), ["second_a", "all_query", "mass"]].tolist() == [True, False, True]
    assert flags.loc[("step1", "L1H1"), ["second_a", "all_query", "mass"]].tolist() == [False, False, False]
    assert flags.loc[("step2", "L1H1"), ["second_a", "all_query", "mass"]].tolist() == [False, True, True]
    assert pd.isna(flags.loc[("step2", "L0H1"), "mass"]) and not flags.loc[("step2", "L0H1"), "second_a"]
    assert list(flags.index.get_level_values(0)[:6]) == ["step0"] * 6  # revisions in token order
    strict = F.sink_flags(table(), bos_threshold=35, allq_threshold=20, epsilon=0.45).set_index(["revision", "name"])
    assert strict.loc[("step2", "L1H0"), ["second_a", "all_query", "mass"]].tolist() == [True, True, False]
    with pytest.raises(ConfigError, match="epsilon"):
        F.sink_flags(table(), epsilon=1.5)


def test_counts_and_agreement():
    flags = F.sink_flags(table())
    counts = F.measure_counts(flags).set_index("revision")
    assert counts.loc["step2", ["n_second_a", "n_all_query", "n_mass", "n_all", "n_any"]].tolist() == [2, 2, 3, 1, 3]
    assert counts.loc["step0", "jaccard_second_a_all_query"] == 1.0  # only L2H0, under both
    assert counts.loc["step2", "jaccard_second_a_mass"] == pytest.approx(2 / 3)
    agree = F.measure_agreement(flags).set_index(["first", "second"])
    row = agree.loc[("second_a", "all_query")]
    # second-A: L2H0 x3, L1H0 x2 = 5 cells; all-query: L2H0 x3, L1H1 x1 = 4; both: 3
    assert (row["both"], row["only_first"], row["only_second"]) == (3, 2, 1)
    assert row["jaccard"] == pytest.approx(3 / 6)
    assert row["heads_first"] == "L1H0 L2H0" and row["heads_second"] == "L1H1 L2H0" and not row["same_heads"]
    gu = agree.loc[("second_a", "mass")]
    assert gu["cells"] == 17 and gu["heads_both"] == "L1H0 L2H0"  # L0H1's missing mass leaves one cell out


def test_onsets_and_floor():
    flags = F.sink_flags(table())
    onsets = F.sink_onsets(flags).set_index("name")
    assert onsets.loc["L2H0", ["onset_second_a", "onset_all_query", "onset_mass"]].tolist() == ["step0"] * 3
    assert bool(onsets.loc["L2H0", "same_onset"]) and not bool(onsets.loc["L1H0", "same_onset"])
    assert onsets.loc["L1H1", "onset_second_a"] is None and onsets.loc["L1H1", "onset_mass"] == "step2"
    assert list(onsets.index) == ["L1H0", "L1H1", "L2H0"]
    floor = F.floor_by_measure(flags).set_index("measure")
    assert floor.loc["second_a", ["floor_heads", "floor_holds", "first_break", "lowest_layer"]].tolist() == [
        "L1H0", False, "step1", 1]
    assert floor.loc["all_query", ["floor_heads", "first_break"]].tolist() == ["L1H1", "step2"]
    assert floor.loc["mass", "floor_heads"] == "L1H0 L1H1" and floor.loc["mass", "heads_ever"] == 3
    assert bool(F.floor_by_measure(flags, layers=(0,)).set_index("measure").loc["mass", "floor_holds"])
    lowest = F.lowest_layers(flags).set_index(["measure", "revision"])
    assert lowest.loc[("second_a", "step0"), "lowest_layer"] == 2 and lowest.loc[("mass", "step1"), "lowest_layer"] == 1
    assert lowest.loc[("all_query", "step2"), "n_flagged"] == 2 and lowest["n_layers"].eq(3).all()


def test_a_table_with_one_measure_compares_nothing():
    """The published tier has the second-A measure only: flagged, counted, floored -- never compared."""
    flags = F.sink_flags(table("pythia-1b", all_query=False))
    assert F.measured(flags) == ["second_a"] and flags["mass"].isna().all()
    assert F.measure_agreement(flags).empty
    assert F.floor_by_measure(flags)["measure"].tolist() == ["second_a"]
    assert pd.isna(F.measure_counts(flags)["n_mass"]).all()


def test_figures_are_titled_and_say_when_empty():
    tiers = tiered(("toy", table()), ("published", table("pythia-1b", all_query=False)))
    flags = tiers.apply(F.sink_flags)
    counts = pd.concat([F.measure_counts(g.drop(columns="tier")).assign(tier=t)
                        for t, g in flags.groupby("tier", sort=False)], ignore_index=True)
    lowest = pd.concat([F.lowest_layers(g.drop(columns="tier")).assign(tier=t)
                        for t, g in flags.groupby("tier", sort=False)], ignore_index=True)
    assert_titled(plots.sink_counts(counts))
    assert_titled(plots.sink_timeline(flags))
    assert_titled(plots.sink_floor(lowest))
    for fn in (plots.sink_counts, plots.sink_timeline, plots.sink_floor):
        assert_placeholder(fn(EMPTY), fn.__name__)
    assert_placeholder(plots.sink_timeline(flags[flags["tier"] == "published"]), "sink_timeline")


def test_floor_texts_and_the_mass_a_bar_means():
    floor = F.floor_texts(F.floor_by_measure(F.sink_flags(table()))).set_index("measure")
    assert floor.loc["second_a", "text"] == "breaks (L1H0, from step1)"
    assert F.floor_texts(F.floor_by_measure(F.sink_flags(table()), layers=(0,))).set_index("measure").loc[
        "mass", "text"] == "holds (lowest sink layer 1)"
    for t in (64, 256):  # the mass that gives 30x when the rest is spread evenly, checked on an explicit row
        m = F.mass_for_selectivity(30.0, t)
        row = np.full(t, (1 - m) / (t - 1))
        row[0] = m
        assert row.sum() == pytest.approx(1.0) and row[0] / row[1:].mean() == pytest.approx(30.0)
    assert F.mass_for_selectivity(30.0, 256) == pytest.approx(0.105, abs=1e-3)


def revision_norms(panel: str = "toy-s") -> pd.DataFrame:
    """A revision table with norms of two streams over three revisions: position 0 grows after layer 0."""
    pos0 = {"embed": [1.0, 1.0, 1.0], "l0": [1.0, 4.0, 9.0]}
    median = {"embed": [1.0, 1.0, 1.0], "l0": [2.0, 2.0, 3.0]}
    rev = pd.DataFrame({"panel": panel, "revision": ["step0", "step10", "step20"], "step": [0, 10, 20],
                        "tokens_b": [0.0, 1e-5, 2e-5]})
    for s in pos0:
        rev[f"norm_pos0_{s}"], rev[f"norm_median_{s}"] = pos0[s], median[s]
        rev[f"norm_ratio_{s}"] = np.array(pos0[s]) / np.array(median[s])
    return rev


def test_first_position_norms_long_form_and_the_sink_layer_they_feed():
    """position_norms: one row per (revision, stream) with depth 0 = embeddings, 1 = after layer 0; norm_summary
    finds the largest ratio (numpy on the same numbers) and the ratio a sink head of layer 1 reads (depth 1)."""
    rev = revision_norms()
    norms = F.position_norms(rev)
    assert list(norms.columns) == F.NORM_COLUMNS and len(norms) == 6
    assert list(norms["revision"]) == ["step0", "step0", "step10", "step10", "step20", "step20"]
    assert list(norms.loc[norms["stream"] == "l0", "depth"]) == [1, 1, 1]
    ratios = np.concatenate([rev["norm_ratio_embed"], rev["norm_ratio_l0"]])
    flags = pd.DataFrame({"panel": "toy-s", "revision": "step20", "layer": [1, 2], "head": [0, 0],
                          "second_a": pd.array([True, False], dtype="boolean")})
    s = F.norm_summary(norms, flags).iloc[0]
    assert s["largest"] == pytest.approx(ratios.max()) and s["largest_stream"] == "l0"
    assert s["sink_layers"] == [1] and s["ratio_at_sinks"] == pytest.approx(3.0)
    assert "after layer 0, at step20" in s["text"] and "3× (layer 1)" in s["text"]
    none = F.norm_summary(norms, flags.assign(second_a=pd.array([False, False], dtype="boolean"))).iloc[0]
    assert np.isnan(none["ratio_at_sinks"]) and "no head is a sink at step20" in none["text"]
    assert F.position_norms(rev.drop(columns=[c for c in rev.columns if c.startswith("norm_")])).empty  # format 2
    fig = plots.first_position_norms(norms.assign(tier="toy"), flags.assign(tokens_b=2e-5, tier="toy"))
    assert_titled(fig)
    assert any("read by sink heads of layer 1" in t.get_text() for t in fig.legends[0].get_texts())
    assert_placeholder(plots.first_position_norms(F.position_norms(rev.iloc[:0])), "first_position_norms")


def test_sink_rates_side_by_side():
    """Gu et al.'s rate is the mean of the records' per-head share; the mass rate the share of heads over epsilon;
    both NaN where the records lack the columns (the published tier)."""
    dev = pd.DataFrame({"panel": "p", "revision": ["r0"] * 4 + ["r1"] * 4, "tokens_b": [0.0] * 4 + [1.0] * 4,
                        "layer": [0, 0, 1, 1] * 2, "head": [0, 1] * 4,
                        "gu_sink_share": [0.0, 0.5, 1.0, 0.25, 1.0, 1.0, 0.0, 0.0],
                        "mass_first_token_allq": [0.1, 0.2, 0.4, 0.31, 0.9, 0.3, 0.29, 0.0]})
    rates = F.sink_rates(dev, epsilon=0.3).set_index("revision")
    assert rates.loc["r0", "gu_sink_rate"] == pytest.approx(1.75 / 4)
    assert rates.loc["r0", "mass_sink_rate"] == pytest.approx(2 / 4) and rates.loc["r1", "mass_sink_rate"] == 0.25
    assert rates["heads"].tolist() == [4, 4]
    bare = F.sink_rates(dev.drop(columns=["gu_sink_share", "mass_first_token_allq"]))
    assert bare["gu_sink_rate"].isna().all() and bare["mass_sink_rate"].isna().all()
    with pytest.raises(ConfigError):
        F.sink_rates(dev, epsilon=1.5)
