"""F1, the layer floor, on the synthetic fixture (answers worked out by hand from published_fixtures.py), on the
authors' files, and its figure; the margin to the bar, and the verdict's rule on constructed replicates (same head vs
any head, the simultaneous band, its Monte Carlo error). The verdict on uniform noise is in test_bootstrap.py."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from circuitdev.analysis import findings as F
from circuitdev.analysis import uncertainty
from circuitdev.book import plots
from circuitdev.errors import ConfigError
from circuitdev.schema import SEL_COLUMNS
from circuitdev.sources.published import load_published
from findings_fixtures import E, EMPTY, O, P, assert_placeholder, two_tiers
from findings_fixtures import dev  # noqa: F401  (pytest fixture)
from published_fixtures import published_fixture, real_published_dir  # noqa: F401  (pytest fixture)


def test_layer_counts(dev):  # noqa: F811
    counts = F.layer_counts(dev)
    at = lambda panel, rev: counts[(counts["panel"] == panel) & (counts["revision"] == rev)]["n"].tolist()  # noqa
    assert at(P, "step256") == [0, 0, 0]  # L1H0 = 29.99 is below 30
    assert at(P, "step3000") == [0, 1, 1]  # L1H0 = 30.0 exactly counts
    assert at(P, "step10000") == [0, 2, 2]
    assert at(P, "step143000") == [0, 4, 4]
    assert at(O, "step126000-tokens264B") == [1, 0, 2, 2]
    assert at(E, "step1220000-tokens5117B") == [1, 2]  # a 2-layer panel lists only its layers


def test_floor_check_lists_the_runs_that_break_it(dev):  # noqa: F811
    floor = F.floor_check(dev)
    broken = floor[~floor["holds"]]
    assert list(zip(broken["panel"], broken["revision"])) == [
        (P, "step3000"), (P, "step10000"), (P, "step143000"), (O, "step126000-tokens264B"), (E, "step5000-tokens20B"),
        (E, "step100000-tokens419B"), (E, "step1220000-tokens5117B")]
    only_l0 = F.floor_check(dev, layers=(0,))
    assert list(zip(*[only_l0.loc[~only_l0["holds"], c] for c in ("panel", "revision")])) == [
        (O, "step126000-tokens264B"), (E, "step1220000-tokens5117B")]
    assert floor.loc[(floor["panel"] == P) & (floor["revision"] == "step143000"), "n_floor"].item() == 4


def test_the_floor_holds_on_the_published_data():
    floor = F.floor_check(load_published(real_published_dir()).table)
    assert len(floor) == 30 and floor["holds"].all()


def test_layer_heatmap_cells_are_the_layer_counts():
    layers = two_tiers().apply(F.layer_counts)
    fig = plots.bos_layer_heatmaps(layers)
    grid = fig.axes[0].images[0].get_array()
    want = layers[layers["tier"] == "toy"].pivot(index="layer", columns="revision_index", values="n").to_numpy()
    assert np.array_equal(np.asarray(grid), want)
    assert_placeholder(plots.bos_layer_heatmaps(EMPTY), "bos_layer_heatmaps")


# ------------------------------------------------------------------------------ the margin and the verdict (issue 21)


def test_floor_headroom_is_the_strongest_floor_head_against_the_bar(dev):  # noqa: F811
    room = F.floor_headroom(dev).set_index("panel")
    o = room.loc[O]  # L0H1 reads 35x at 264B: the only floor head past the bar
    assert (o["name"], o["revision"], o["value"]) == ("L0H1", "step126000-tokens264B", 35.0)
    assert o["share_of_bar"] == pytest.approx(35 / 30) and not o["holds"] and o["fails_at_or_below"] == 35.0
    p = room.loc[P]  # L1H0 reads 40x first at step10000 (29.99 then 30.0 before it)
    assert (p["name"], p["revision"], p["value"], p["runs"]) == ("L1H0", "step10000", 40.0, 5)
    assert p["where"] == "L1H0 at step10000 reads 40.0× (133% of the bar)" and p["margin"] == pytest.approx(-1 / 3)
    every = F.floor_headroom(dev, overall=True).set_index("panel").loc["all"]  # the strongest over all panels
    assert (every["name"], every["value"], every["runs"]) == ("L1H0", 40.0, 12)
    assert every["where"].startswith(f"{P} L1H0 at step10000")
    higher = F.floor_headroom(dev, threshold=36.0).set_index("panel").loc[O]
    assert higher["holds"] and higher["share_of_bar"] == pytest.approx(35 / 36)
    # the margin agrees with the paper's count at any bar: the floor holds exactly above fails_at_or_below
    for bar in (34.9, 35.0, 35.1):
        held = F.floor_check(dev[dev["panel"] == O], threshold=bar)["holds"].all()
        assert held == (bar > 35.0)


def test_floor_headroom_on_the_published_data():
    room = F.floor_headroom(load_published(real_published_dir()).table).set_index("panel")
    olmo = room.loc[O]  # the case: one OLMo layer-1 head at 94% of the bar
    assert (olmo["name"], olmo["revision"]) == ("L1H1", "step2000-tokens4B")
    assert olmo["value"] == pytest.approx(28.1, abs=0.05) and olmo["share_of_bar"] == pytest.approx(0.937, abs=0.001)
    assert room["holds"].all() and (room["value"] < 30).all()


def floor_table(values: dict[tuple[int, int, int], np.ndarray], *, n_boot: int = 200, revisions: int = 1,
                layers: int = 2, heads: int = 4, other: dict | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A one-panel table (revisions x layers x heads) whose first-token selectivity at (revision, layer, head) has
    the replicates `values[...]` (B,) and their median as the point value; every other head reads 1 everywhere.
    `other`: {sel column: value} for every head (e.g. a competing class)."""
    rows, reps = [], []
    for r in range(revisions):
        for layer in range(layers):
            for head in range(heads):
                v = np.asarray(values.get((r, layer, head), np.ones(n_boot)), dtype=float)
                base = {"panel": "p", "revision": f"step{r}", "step": r, "tokens_b": (r + 1) * 1e-3, "layer": layer,
                        "head": head, **{c: 1.0 for c in SEL_COLUMNS}, **(other or {})}
                rows.append({**base, "sel_first_token": float(np.median(v))})
                reps.append(pd.DataFrame({**{k: base[k] for k in ("panel", "revision", "tokens_b", "layer", "head")},
                                          "replicate": np.arange(n_boot), **{c: base[c] for c in SEL_COLUMNS
                                                                              if c != "sel_first_token"},
                                          "sel_first_token": v}))
    return pd.DataFrame(rows), pd.concat(reps, ignore_index=True)


def above(n_boot: int, where: np.ndarray, high: float = 31.0, low: float = 29.0) -> np.ndarray:
    out = np.full(n_boot, low)
    out[where] = high
    return out


def test_verdict_fails_only_when_the_same_head_reaches_the_bar():
    half = np.arange(100)
    # L0H0 passes in the first half of the resamples, L1H0 in the second: some floor head always does, none does
    # in 97.5% of them -- the old any-head rule called this "fails"
    dev, boot = floor_table({(0, 0, 0): above(200, half), (0, 1, 0): above(200, half + 100)})
    v = F.floor_verdict(dev, boot=boot).iloc[0]
    assert v["verdict"] == "within noise" and v["share_any"] == 1.0 and v["share_head"] == 0.5
    assert v["statement"].endswith("it reaches the bar in 50.0% of 200 resamples, some floor head at some of the 8 "
                                   "looks in 100.0%")
    assert F.floor_check(dev, boot=boot)["n_floor_lo"].iloc[0] >= 1  # what the any-head rule read
    dev, boot = floor_table({(0, 0, 0): above(200, half), (0, 1, 2): above(200, np.arange(196))})
    v = F.floor_verdict(dev, boot=boot).iloc[0]  # 196 / 200 = 98% >= 97.5%: one head, one revision
    assert (v["verdict"], v["name"], v["share_head"]) == ("fails", "L1H2", 0.98)
    dev, boot = floor_table({(0, 1, 2): above(200, np.arange(194))})  # 97% < 97.5%
    assert F.floor_verdict(dev, boot=boot).iloc[0]["verdict"] == "within noise"


def test_verdict_holds_on_a_simultaneous_band_over_heads_and_revisions():
    # 4 floor heads x 3 revisions; each (head, revision) passes in 4 of 200 resamples (2%), every one in its own:
    # pointwise each head's interval stays below the bar, but 24% of the resamples break the floor somewhere
    looks = [(r, layer, h) for r in range(3) for layer in range(2) for h in range(2)]
    values = {k: above(200, np.arange(4 * i, 4 * i + 4)) for i, k in enumerate(looks[:12])}
    dev, boot = floor_table(values, revisions=3, heads=2)
    lo, hi = uncertainty.Replicates.align(dev, boot).head_interval("sel_first_token")
    assert (hi < 30).all()  # a per-head rule would say "holds"
    v = F.floor_verdict(dev, boot=boot).iloc[0]
    assert v["looks"] == 12 and v["verdict"] == "within noise"
    assert v["share_any"] == pytest.approx(48 / 200) and v["floor_upper"] >= 30
    # 5 looks each passing in one resample of their own: 5 / 200 = 2.5% of the resamples break it -> holds
    values = {k: above(200, np.array([i])) for i, k in enumerate(looks[:5])}
    dev, boot = floor_table(values, revisions=3, heads=2)
    v = F.floor_verdict(dev, boot=boot).iloc[0]
    assert v["verdict"] == "holds" and v["share_any"] == 0.025 and v["floor_upper"] < 30
    assert v["mc_se"] == pytest.approx(np.sqrt(0.025 * 0.975 / 200)) and v["mc_close"]  # right at the cut
    values = {k: above(200, np.array([i])) for i, k in enumerate(looks[:6])}  # 3%: one more resample flips it
    dev, boot = floor_table(values, revisions=3, heads=2)
    assert F.floor_verdict(dev, boot=boot).iloc[0]["verdict"] == "within noise"
    dev, boot = floor_table({(0, 1, 0): np.full(200, 20.0)})
    v = F.floor_verdict(dev, boot=boot).iloc[0]
    assert v["verdict"] == "holds" and v["share_any"] == 0 and not v["mc_close"]  # 2.5 points from the cut > 2 se
    assert v["statement"].startswith("holds: L1H0 at step0 reads 20.0× (95% re-measurement interval 20.0×–20.0×)")
    assert "no floor head reaches the bar at any of the 8 looks in 100.0% of 200 resamples" in v["statement"]


def test_verdict_upper_band_agrees_with_the_rule_and_best_class_counts_per_replicate():
    rng = np.random.default_rng(5)
    seen = set()
    for _ in range(20):  # one head near the bar, the others below: every verdict near the cut, both sides of it
        top = rng.uniform(28, 31.5)
        values = {(0, layer, h): rng.uniform(10, top, 200) if (layer, h) == (1, 0) else rng.uniform(5, 25, 200)
                  for layer in range(2) for h in range(4)}
        dev, boot = floor_table(values)
        v = F.floor_verdict(dev, boot=boot).iloc[0]
        assert (v["verdict"] == "holds") == (v["floor_upper"] < 30) == (v["share_any"] <= 0.025)
        seen.add(v["verdict"])
    assert seen == {"holds", "within noise"}
    # a floor head past the bar whose best class is induction counts per class but not by best class
    dev, boot = floor_table({(0, 1, 0): np.full(200, 40.0)}, other={"sel_induction": 100.0})
    assert F.floor_verdict(dev, boot=boot).iloc[0]["verdict"] == "fails"
    v = F.floor_verdict(dev, boot=boot, rule="best-class").iloc[0]
    assert v["verdict"] == "holds" and v["share_any"] == 0


def test_floor_margin_interval_is_the_maximum_re_taken_on_every_replicate():
    rng = np.random.default_rng(1)
    # 8 floor heads at 20x +- 50%: the maximum over them sits above 20 in nearly every resample
    values = {(0, layer, h): np.r_[20.0, rng.uniform(10, 30, 199)] for layer in range(2) for h in range(4)}
    dev, boot = floor_table(values)
    dev["sel_first_token"] = 20.0  # the point: every head at 20x
    m = F.floor_margin(dev, boot=boot).iloc[0]
    assert m["value"] == 20.0 and m["value_boot_mean"] > 25 and m["value_widened"] and m["value_lo"] == 20.0
    plain = F.floor_margin(dev).iloc[0]  # no replicates: the same columns, no interval, never widened
    assert plain["value"] == 20.0 and np.isnan(plain["value_lo"]) and not plain["value_widened"]
    assert list(F.floor_margin(dev, boot=boot).columns) == list(F.floor_margin(dev).columns)


def test_verdict_beside_the_mass_the_bar_means(dev):  # noqa: F811
    masses = dev.assign(mass_first_token=0.25)
    v = F.floor_verdict(masses, seq_len={O: 64}).set_index("panel")
    assert v.loc[O, "bar_mass"] == pytest.approx(30 / 93) and np.isnan(v.loc[P, "bar_mass"])
    assert v.loc[O, "statement"] == ("fails: L0H1 at step126000-tokens264B reads 35.0×; mass on position 0 0.25 "
                                     "(the bar: 0.32 at T = 64)")
    assert F.floor_verdict(dev, seq_len=256)["bar_mass"].tolist() == pytest.approx([30 / 285] * 3)


def test_bar_mass_inverts_selectivity_from_mass():
    assert F.bar_mass(30, 64) == pytest.approx(30 / 93) and F.bar_mass(30, 256) == pytest.approx(30 / 285)
    m = F.bar_mass(np.array([1.0, 30.0, 500.0]), 128)
    np.testing.assert_allclose(m * 127 / (1 - m), [1.0, 30.0, 500.0])
    with pytest.raises(ConfigError, match="seq_len"):
        F.bar_mass(30, 1)
