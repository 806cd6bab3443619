"""F3, the milestones and the gap between two of them, on the synthetic fixture (answers worked out by hand from
published_fixtures.py), and its figure. Their bootstrap windows are tested in test_bootstrap.py."""

from __future__ import annotations

import math

import numpy as np

import pandas as pd
import pytest

from circuitdev.analysis import findings as F
from circuitdev.book import plots
from findings_fixtures import E, EMPTY, O, P, assert_titled, dev_table, two_tiers
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


# ------------------------------------------------------------------------------------------ censoring (issue 21)
def test_milestone_censoring(dev):  # noqa: F811
    m = F.milestones(dev).set_index(["panel", "milestone"])
    first = m.loc[(E, "bos_10pct")]  # OLMoE's L1H0 reads 40x from its first probed revision, 20B
    assert first["bound"] == "upper" and first["censored"] and first["tokens_b"] == 20
    never = m.loc[(P, "bos_70pct")]
    assert never["bound"] == "lower" and never["censored"] and never["bound_tokens_b"] == pytest.approx(299.892)
    assert m.loc[(P, "induction_3_heads"), "bound"] == "exact" and not m.loc[(P, "induction_3_heads"), "censored"]
    assert F.milestone_text(first, "{:g}B") == "≤ 20B"
    assert F.milestone_text(never, "{:g}B") == "> 299.892B (never reached)"
    assert F.milestone_text(m.loc[(O, "bos_50pct")], "{:g}B") == "264B"


def test_a_milestone_at_initialisation_is_exact():
    dev = dev_table("toy-a").assign(tokens_b=lambda d: d["step"] * 1e-3)  # the first revision is step 0
    dev.loc[dev["layer"] >= 2, "sel_first_token"] = 40.0  # sinks from the start
    m = F.milestones(dev, specs=[F.milestone("bos_10pct")]).iloc[0]
    assert m["revision"] == "step0" and m["bound"] == "exact"


def test_gap_bounds(dev):  # noqa: F811
    ms = F.milestones(dev)
    gap = F.milestone_gap(ms, start="bos_10pct", end="bos_50pct").set_index("panel")
    assert gap.loc[E, "bound"] == "lower" and gap.loc[E, "bound_ratio"] == pytest.approx(419 / 20)  # start ≤ 20B
    assert F.bound_text(gap.loc[E, "bound_ratio"], gap.loc[E, "bound"], "{:.2g}×") == "≥ 21×"
    olmo = F.milestone_gap(ms).set_index("panel").loc[O]  # 3 induction heads never: the ratio is at most 264/3048
    assert olmo["bound"] == "upper" and olmo["bound_ratio"] == pytest.approx(264 / 3048)
    assert np.isnan(olmo["token_ratio"]) and olmo["censored"]
    pythia = F.milestone_gap(ms, end="bos_70pct").set_index("panel").loc[P]  # the end never: at least 299.9/6.291
    assert pythia["bound"] == "lower" and pythia["bound_ratio"] == pytest.approx(299.892 / 6.291)
    assert F.milestone_gap(ms).set_index("panel").loc[P, "bound"] == "exact"
    assert F.bound_text(np.nan, "lower") == "n/a" and F.bound_text(2.0, "none") == "n/a"


# --------------------------------------------------------------------------------- behaviour (issue 23 item 4)
def revision_table(top1=(0.0, 0.1, 0.3, 0.6, 0.55), icl=(0.0, 0.5, 1.2, 3.5, 4.0),
                   drop=(np.nan, 0.0, 0.05, 0.2, 0.3), tokens=(0.0, 1e-6, 2e-6, 3e-6, 4e-6)) -> pd.DataFrame:
    return pd.DataFrame({"panel": "toy-a", "revision": [f"step{i}" for i in range(len(top1))], "tokens_b": tokens,
                         "top1": top1, "icl_score": icl, "top1_drop": drop})


def test_behaviour_milestones_on_known_crossings():
    b = F.behaviour_milestones(revision_table()).set_index("milestone")
    assert b["revision"].to_dict() == {"top1_25pct": "step2", "top1_50pct": "step3", "icl_1nat": "step2",
                                       "icl_3nats": "step3", "drop_10pp": "step3", "drop_25pp": "step4"}
    assert (b["bound"] == "exact").all() and b.loc["top1_50pct", "token_fraction"] == pytest.approx(0.75)
    assert "25%" in F.BEHAVIOUR_MILESTONES[0].describe() and "3 nats" in F.BEHAVIOUR_MILESTONES[3].describe()
    sustained = F.behaviour_milestones(revision_table(top1=(0, 0.1, 0.3, 0.6, 0.45)), sustained=True)
    assert sustained.set_index("milestone").loc["top1_50pct", "bound"] == "lower"  # falls back below 50% at step4
    late = F.behaviour_milestones(revision_table(icl=(2.0, 2, 2, 2, 2), tokens=(1e-6, 2e-6, 3e-6, 4e-6, 5e-6)))
    assert late.set_index("milestone").loc["icl_1nat", "bound"] == "upper"  # at the first probe, after step 0
    unmeasured = F.behaviour_milestones(revision_table(drop=(np.nan,) * 5))
    assert not unmeasured["measure"].eq("top1_drop").any()  # never measured: no row, not "never reached"
    partial = F.behaviour_milestones(revision_table(drop=(np.nan, 0.0, 0.05, np.nan, np.nan))).set_index("milestone")
    assert partial.loc["drop_10pp", "bound"] == "lower"  # not reached where measured: after step2, the last measured
    assert partial.loc["drop_10pp", "bound_tokens_b"] == 2e-6
    assert F.BEHAVIOUR_MILESTONES[4].label() == "circuit ablation costs ≥ 10 pp"


def test_necessary_means_the_excess_drop_interval_lies_above_zero():
    """Issue 29 item 5: the behavioural "necessary" milestone is the first revision whose excess drop (beyond the
    random groups') has its 95% interval above 0 -- strictly: an interval touching 0 is not necessary. A drop
    against no ablation keeps its own milestones, called what it costs."""
    table = revision_table().assign(excess_drop_lo=[np.nan, -0.1, 0.0, 0.02, 0.05])
    b = F.behaviour_milestones(table).set_index("milestone")
    assert b.loc["necessary", "revision"] == "step3" and b.loc["drop_10pp", "revision"] == "step3"
    spec = {s.name: s for s in F.BEHAVIOUR_MILESTONES}["necessary"]
    assert spec.label() == "circuit necessary: its excess drop's interval > 0 pp"
    dips = F.behaviour_milestones(table.assign(excess_drop_lo=[np.nan, 0.01, -0.01, 0.02, 0.05]), sustained=True)
    assert dips.set_index("milestone").loc["necessary", "revision"] == "step3"


def test_behaviour_milestone_windows_from_the_replicates():
    table = revision_table()
    reps = []
    for b in range(40):  # half the replicates put top-1 at step2 below 25%: the 25% milestone moves to step3
        for i, r in table.iterrows():
            top1 = r["top1"] - (0.1 if (b % 2 and i == 2) else 0.0)
            reps.append({"panel": "toy-a", "revision": r["revision"], "tokens_b": r["tokens_b"], "replicate": b,
                         "top1": top1, "loss_b": 1.0, "icl_score": r["icl_score"]})
    out = F.behaviour_milestones(table, boot=pd.DataFrame(reps)).set_index("milestone")
    assert out.loc["top1_25pct", "revision_lo"] == "step2" and out.loc["top1_25pct", "revision_hi"] == "step3"
    assert out.loc["top1_25pct", "window_from_revision"] == "step1"
    assert out.loc["icl_1nat", "revision_lo"] == out.loc["icl_1nat", "revision_hi"] == "step2"
    assert pd.isna(out.loc["drop_10pp", "revision_lo"])  # no replicates of the ablation: no window
    assert list(F.behaviour_milestones(table).columns) == ["panel", "milestone", "measure", "level",
                                                           *F.MILESTONE_COLUMNS[2:]]


def test_figures_draw_bounds_and_behaviour(dev):  # noqa: F811
    ms = F.milestones(dev).assign(tier="published")
    gaps = F.milestone_gap(ms).assign(tier="published")
    fig = plots.milestone_timeline(ms, gaps)
    assert_titled(fig)
    arrows = [t for t in fig.axes[0].texts if getattr(t, "arrow_patch", None) is not None]
    assert arrows  # OLMoE's BOS 10% at its first revision, Pythia's BOS 70% never reached
    assert any(t.get_text().startswith("≤ ") for t in fig.axes[0].texts)  # OLMo's gap: at most 264/3048
    behaviour = F.behaviour_milestones(revision_table()).assign(tier="toy")
    assert_titled(plots.behaviour_timeline(ms.assign(tier="toy", panel="toy-a"), behaviour))
    assert plots.behaviour_timeline(ms, behaviour.iloc[:0]).axes[0].texts  # says why it is empty


def test_timeline_axis_spans_what_it_draws_not_every_revision(dev):  # noqa: F811
    """Issue 30: the published panel's axis ran from Pythia's 2M-token revisions, three decades of empty axis before
    its first milestone. The axis spans the markers, bars and bound arrows drawn, with a small margin."""
    ms = F.milestones(dev).assign(tier="published")
    gaps = F.milestone_gap(ms).assign(tier="published")
    revs = F.revisions(dev).assign(tier="published")
    early = revs.iloc[[0]].assign(revision="step1", tokens_b=0.002)  # a revision far before any milestone
    fig = plots.milestone_timeline(ms, gaps, revisions=pd.concat([early, revs], ignore_index=True))
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    drawn = ms["bound_tokens_b"].dropna() * 1e9
    left, right = ax.get_xlim()
    assert drawn.min() / 2 < left < drawn.min() and drawn.max() < right < drawn.max() * 2
    # every arrow (a bound) is drawn inside the axis, its tip included
    tips = [t.xy[0] for t in ax.texts if getattr(t, "arrow_patch", None) is not None]
    assert tips and all(left <= x <= right for x in tips)


def test_a_panel_whose_milestones_are_never_reached_spans_its_revisions():
    """With nothing reached, every marker sits at the last revision: the axis keeps the revisions' span so they stand
    at its right end (not alone in the middle of a collapsed axis, under the "no milestone reached" note)."""
    from circuitdev.book.plots.f3_milestones import drawn_axis

    rows = pd.DataFrame({"milestone": ["induction_3_heads", "bos_50pct"], "tokens_b": [np.nan, np.nan],
                         "bound": ["lower", "lower"], "bound_tokens_b": [2.048e-6, 2.048e-6]})
    grid = pd.Series([0.0, 1.024e-6 * 1e9, 2.048e-6 * 1e9])
    axis = drawn_axis(rows, None, grid)
    assert axis.hi >= 2048 and axis.lo <= 1024 and axis.has_init
