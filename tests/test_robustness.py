"""How robust is each finding (issue 21): the grid of bars, the claim registry, the robustness table and its values
at the paper's bars (equal to the findings functions'), censoring, holds_ranges as sets of ranges, what a claim hangs
on, `circuitdev reanalyse`'s robustness.csv, and -- skipped when absent -- the authors' own files.

Hand answers on the synthetic fixture (published_fixtures.py):
- pythia-1b (3x4 heads): induction L2H3 1/0.2/171.8/150.7/181.6, L1H2 1/1/60/45/55, L0H3 1/1/49.99/52/70,
  L0H2 1/1/80/10/10, so the 3rd-strongest induction head reads 60 at step3000 (L1H2), 45 at step10000, 55 at
  step143000: "induction >= 3 heads" is first reached at step3000 (6.291B) for bars up to 60x, never above.
  BOS 50% = 6 of 12 heads: the 6th-strongest first-token head reads 40 at step143000 only (1 before it).
  Layers 0/1 hold first-token heads up to 40x (L1H0-L1H3 at step143000): the floor holds from 45x.
- olmo-1b-0724 (4x2): one induction head only (never 3); L0H1 reads 35x first-token at 264B (the floor breaks
  up to 35x); BOS 50% (4 of 8 heads) at 264B.
- olmoe-1b-7b-0924 (2x2): L1H0 40x from its first revision 20B (BOS 10% = 1 head: reached at the first probe).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from circuitdev.analysis import findings as F
from circuitdev.analysis.reanalysis import reanalyse
from circuitdev.errors import ConfigError
from findings_fixtures import E, O, P
from findings_fixtures import dev  # noqa: F401  (pytest fixture)
from published_fixtures import published_fixture, real_published_dir, write_published  # noqa: F401  (fixture)

REQUIRED = ["claim", "panel", "varied", "threshold", "rule", "value", "holds", "censored"]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """The robustness table of the fixture, computed once for the module."""
    from circuitdev.sources.published import load_published

    return F.robustness_table(load_published(write_published(tmp_path_factory.mktemp("pub"))).table)


def rows(table, claim, panel, **where):
    g = table[(table["claim"] == claim) & (table["panel"] == panel)]
    for key, value in where.items():
        g = g[g[key] == value]
    return g


def at(table, claim, panel, threshold, **where):
    g = rows(table, claim, panel, threshold=float(threshold), paper_rule=True, **where)
    assert len(g) == 1, g
    return g.iloc[0]


def test_the_grid_is_one_constant():
    grid = F.ROBUSTNESS_THRESHOLDS
    assert grid == (*map(float, range(5, 101, 5)), 150.0, 200.0, 300.0, 500.0, 1000.0)
    assert {30.0, 50.0, 100.0} <= set(grid)


def test_the_registry_names_the_issue_claims():
    assert {"F1.floor", "F2.shapes", "F3.gap", "F3.milestones", "F4.recall", "F5.lead"} <= set(F.ROBUSTNESS_CLAIMS)
    assert F.ROBUSTNESS_CLAIMS["F3.gap"].rules[0] == "per-class / first-hit"  # the paper's rule first
    assert "per-class / sustained" in F.ROBUSTNESS_CLAIMS["F3.gap"].rules
    assert "best-class" in F.ROBUSTNESS_CLAIMS["F1.floor"].rules
    with pytest.raises(ConfigError, match="unknown robustness claim"):
        F.robustness_table(pd.DataFrame(), claims=["F9.nothing"])


def test_table_columns_and_every_rule(table):
    assert REQUIRED == [c for c in table.columns if c in REQUIRED]
    assert set(table["threshold"]) == set(F.ROBUSTNESS_THRESHOLDS)
    gap = rows(table, "F3.gap", P)
    assert set(gap["rule"]) == set(F.MILESTONE_RULES) and set(gap["varied"]) == {"induction", "first_token"}
    assert not rows(table, "F4.recall", "toy-x").size  # paper-number claims apply to the published models only


def test_values_at_the_paper_bars_equal_the_findings(dev, table):  # noqa: F811
    floor = F.floor_check(dev).groupby("panel")["n_floor"].max()
    for panel in (P, O, E):
        assert at(table, "F1.floor", panel, 30)["value"] == floor[panel]
    gap = F.milestone_gap(F.milestones(dev)).set_index("panel")
    assert at(table, "F3.gap", P, 50, varied="induction")["value"] == pytest.approx(gap.loc[P, "token_ratio"])
    assert at(table, "F3.gap", P, 30, varied="first_token")["value"] == pytest.approx(47.67, abs=0.01)
    ms = F.milestones(dev).set_index(["panel", "milestone"])
    for name, tau in (("induction_3_heads", 50), ("bos_50pct", 30), ("bos_10pct", 30)):
        assert at(table, "F3.milestones", P, tau, item=name)["value"] == ms.loc[(P, name), "tokens_b"]
    rec = F.recall_milestones(F.circuit_recall(dev)).set_index(["panel", "level_pct"])
    for level in (33, 67, 100):
        assert at(table, "F4.recall", P, 50, item=f"{level}%")["value"] == rec.loc[(P, level), "tokens_b"]
    lead = F.lead_summary(F.pr_lead(dev, head_class="induction")).set_index("panel")
    assert at(table, "F5.lead", P, 50, item="induction")["value"] == lead.loc[P, "median_lead"]
    shape = F.trajectory_shape(F.bos_fraction(dev)).set_index("panel")
    assert at(table, "F2.shapes", O, 30)["value"] == pytest.approx(shape.loc[O, "jump_share"])


def test_hand_answers_and_holds_ranges(table):
    assert F.holds_ranges(table, "F1.floor", panel=P) == [(45.0, 1000.0)]
    assert F.holds_ranges(table, "F1.floor", panel=O) == [(40.0, 1000.0)]
    assert F.holds_ranges(table, "F1.floor", panel="all") == [(45.0, 1000.0)]
    assert F.holds_ranges(table, "F3.gap", panel=P, varied="induction") == [(5.0, 60.0)]
    assert F.holds_ranges(table, "F3.gap", panel=O, varied="induction") == []  # never 3 induction heads
    above = rows(table, "F3.gap", P, varied="induction", threshold=65.0, paper_rule=True).iloc[0]
    assert above["bound"] == "upper" and above["value"] == pytest.approx(1.0) and not above["holds"]
    with pytest.raises(ConfigError, match="varied"):
        F.holds_ranges(table, "F3.gap", panel=P)  # two bars move: name one


def test_censored_values_are_bounds(table):
    # BOS 50% of Pythia is never reached above 40x: the gap is then at least 299.892 / 6.291 (a lower bound)
    never = at(table, "F3.gap", P, 45, varied="first_token")
    assert never["censored"] and never["bound"] == "lower" and never["holds"]
    assert never["value"] == pytest.approx(299.892 / 6.291)
    assert not at(table, "F3.gap", P, 40, varied="first_token")["censored"]
    first = at(table, "F3.milestones", E, 30, item="bos_10pct")  # OLMoE's L1H0 at its first revision, 20B
    assert first["censored"] and first["bound"] == "upper" and first["value"] == 20.0
    assert not at(table, "F1.floor", P, 30)["censored"]


def test_holds_ranges_is_a_set_of_ranges():
    grid = F.ROBUSTNESS_THRESHOLDS
    holds = [t <= 25 or 35 <= t <= 100 for t in grid]
    t = pd.DataFrame({"claim": "F1.floor", "panel": "m", "item": "L0+L1", "varied": "first_token",
                      "threshold": grid, "rule": "per-class", "holds": holds})
    ranges = F.holds_ranges(t, "F1.floor", panel="m")
    assert ranges == [(5.0, 25.0), (35.0, 100.0)]
    assert F.ranges_text(ranges) == "5–25× and 35–100×"
    assert F.ranges_text([(5.0, 1000.0)]) == "every bar (5–1000×)"
    assert F.ranges_text([]) == "at no bar of the grid" and F.ranges_text([(35.0, 35.0)]) == "35×"


def test_hangs_on_names_the_deciding_head(dev):  # noqa: F811
    gap = F.hangs_on(dev, "F3.gap").set_index("panel")
    start = gap.loc[P]  # the more fragile milestone: induction at 60x (1.2x its bar) before BOS 50% at 40x (1.33x)
    assert start["item"] == "induction_3_heads" and start["head"] == "L1H2" and start["head_value"] == 60
    assert start["margin"] == pytest.approx(1.2)
    assert start["stays_from"] == pytest.approx(1.0) and start["stays_to"] == 60
    assert "L1H2" in start["text"] and "60×" in start["text"] and "is never reached" in start["text"]
    end = F.milestone_margin(dev, F.milestone("bos_50pct")).set_index("panel").loc[P]
    assert end["head_value"] == 40 and end["stays_to"] == 40 and end["revision"] == "step143000"
    floor = F.hangs_on(dev, "F1.floor").set_index("panel")
    assert floor.loc[O, "head"] == "L0H1" and floor.loc[O, "head_value"] == 35
    assert floor.loc[O, "margin"] == pytest.approx(35 / 30)
    olmo = F.milestone_margin(dev, F.milestone("bos_50pct")).set_index("panel").loc[O]  # 4 of OLMo's 8 heads
    assert olmo["k"] == 4 and "4th-strongest" in olmo["hangs_on"] and olmo["revision"] == "step126000-tokens264B"


def test_milestone_margin_agrees_with_the_milestones(dev):  # noqa: F811
    spec = F.milestone("induction_3_heads")
    margin = F.milestone_margin(dev, spec).set_index("panel")
    first = F.milestones(dev, specs=[spec]).set_index("panel")
    assert margin.loc[P, "revision"] == first.loc[P, "revision"] == "step3000"
    for tau in (margin.loc[P, "stays_to"], np.nextafter(margin.loc[P, "stays_from"], np.inf)):
        moved = F.Milestone(spec.name, spec.head_class, float(tau), spec.min_heads)
        assert F.milestones(dev, specs=[moved]).set_index("panel").loc[P, "revision"] == "step3000"
    past = F.Milestone(spec.name, spec.head_class, float(np.nextafter(60.0, np.inf)), spec.min_heads)
    assert pd.isna(F.milestones(dev, specs=[past]).set_index("panel").loc[P, "revision"])


def test_reanalyse_writes_robustness_csv(published_fixture, tmp_path):  # noqa: F811
    out = tmp_path / "out"
    tables = reanalyse(published_fixture, out)
    csv = pd.read_csv(out / "robustness.csv")
    assert REQUIRED == [c for c in csv.columns if c in REQUIRED]
    assert len(csv) == len(tables["robustness"]) > 0
    assert (out / "milestones.csv").is_file()  # the contract tables stay
    assert list(pd.read_csv(out / "milestones.csv").columns) == ["model", "milestone", "revision", "tokens_b"]
    row = csv[(csv["claim"] == "F3.gap") & (csv["panel"] == P) & (csv["varied"] == "induction")
              & (csv["threshold"] == 50) & csv["paper_rule"]]
    assert row["value"].iloc[0] == pytest.approx(299.892 / 6.291)


def test_the_authors_files():
    """The numbers issue 21 quotes, re-derived from the authors' files (skipped when absent)."""
    from circuitdev.sources.published import load_published

    dev = load_published(real_published_dir()).table
    t = F.robustness_table(dev, claims=["F1.floor", "F3.gap"])
    gap = lambda tau: at(t, "F3.gap", O, tau, varied="induction")["value"]  # noqa: E731
    assert gap(30) == pytest.approx(264 / 10) and gap(40) == gap(50) == pytest.approx(264 / 23)
    assert gap(55) == gap(60) == pytest.approx(1.0)
    assert F.holds_ranges(t, "F3.gap", panel=O, varied="induction") == [(5.0, 50.0)]
    sustained = rows(t, "F3.gap", O, varied="induction", threshold=50.0, rule="per-class / sustained").iloc[0]
    assert not sustained["holds"]  # under `sustained` the sinks come first
    olmoe = at(t, "F3.gap", E, 50, varied="induction")
    assert olmoe["censored"] and olmoe["bound"] == "lower" and olmoe["value"] == pytest.approx(419 / 20)
    assert F.holds_ranges(t, "F1.floor", panel=O) == [(30.0, 1000.0)]  # L1H1 reads 28.1x at 4B
    hang = F.hangs_on(dev, "F3.gap").set_index("panel").loc[O]
    assert hang["item"] == "induction_3_heads" and hang["head"] == "L2H7" and hang["head_value"] == pytest.approx(54.8, abs=0.05)
    assert hang["revision"] == "step11000-tokens23B" and "the gap becomes 1.0×" in hang["text"]
    assert "falling back to 36.5× at the next revision" in hang["text"]


def test_how_robust_glues_ranges_and_hangs_on_and_draws_the_figure(published_fixture, tmp_path,  # noqa: F811
                                                                    monkeypatch):
    """The contract other pages rely on (book.chapter.Chapter.how_robust), on the fixture's published tier."""
    from circuitdev.book import display, plots
    from circuitdev.sources.published import load_published

    figures = []
    monkeypatch.setattr(display, "glue_text", lambda key, text, value=None: None)
    monkeypatch.setattr(display, "show_figure", lambda fig, **kw: figures.append((fig, kw)))
    ch = f3_chapter(tmp_path, published_fixture)
    table = ch.how_robust("F3.gap")
    glued = ch.glued
    assert glued["f3-robust-f3-gap-pub-pythia-ranges"] == (
        "moving the induction bar: 5–60×; moving the first-token bar: every bar (5–1000×) (17 of them bounds)")
    # (BOS 50% is never reached above 40x: the 17 bars 45-100x and 150-1000x give a lower bound)
    assert glued["f3-robust-f3-gap-ranges"].startswith("published: moving the induction bar: Pythia 5–60×")
    assert "L1H2" in glued["f3-robust-f3-gap-pub-pythia-hangs-on"] and "60×" in glued["f3-robust-f3-gap-hangs-on"]
    assert glued["f3-robust-f3-gap-toy-ranges"] == "n/a (no data in this tier)"
    assert set(table["claim"]) == {"F3.gap"} and set(table["tier"]) == {"published"}
    ((fig, kw),) = figures
    assert kw["name"] == "fig-f3-robust-f3-gap" and "paper's bar" in kw["caption"]
    assert len([ax for ax in fig.axes if ax.axison]) == 3  # one readable panel per model
    ch.how_robust("F1.floor", table=F.robustness_table(load_published(published_fixture).table).assign(
        tier="published"), figure=False)
    assert len(figures) == 1 and glued["f3-robust-f1-floor-pub-olmo-ranges"] == "40–1000×"
    assert plots.robustness_map(table.assign(tier="published"), tier="toy").axes[0].texts  # a placeholder


def test_one_formatter_of_ranges_of_bars():
    """Issue 28 item 4: the audit's diagnostic, F2's shape ranges and the robustness ranges write bars one way."""
    from circuitdev.analysis.bars import bar_runs, runs_text

    grid = (2, 3, 5, 7, 50, 75, 100)
    assert bar_runs([100, 2, 3, 5, 50], grid) == [(2, 5), (50, 50), (100, 100)]
    assert bar_runs([], grid) == [] and runs_text([]) == ""
    assert runs_text(bar_runs([2, 3, 5, 75, 100], grid)) == "2–5×, 75–100×"
    assert runs_text([(5, 25), (35, 35), (45, 100)], last=" and ") == "5–25×, 35× and 45–100×"
    assert F.ranges_text([(5.0, 50.0)]) == "5–50×" and F.ranges_text([]) == "at no bar of the grid"


def test_chapter_verdict_states_each_models_verdict_and_glues_it(published_fixture, tmp_path,  # noqa: F811
                                                                 monkeypatch):
    """Issue 29 item 2: `Chapter.verdict` (under a findings page's title) says, per model, the verdict
    findings.claim_verdicts gives and its reason, and glues the verdicts the intro's table quotes; a present tier
    without a row for the claim reads "does not apply", an absent tier's keys are left to `finish`."""
    from circuitdev.book import display
    from circuitdev.sources.published import load_published

    notes = []
    monkeypatch.setattr(display, "glue_text", lambda key, text, value=None: None)
    monkeypatch.setattr(display, "note", lambda text, **kw: notes.append((text, kw)))
    ch = f3_chapter(tmp_path, published_fixture)
    got = ch.verdict("F3.gap")
    want = F.claim_verdicts(F.robustness_table(load_published(published_fixture).table, claims=["F3.gap"]))
    assert got.drop(columns="tier").reset_index(drop=True).equals(want.reset_index(drop=True))
    ((text, kw),) = notes
    assert kw["title"].startswith("Verdict on F3.gap")
    for r in want.to_dict("records"):
        short = {"pythia-1b": "pythia", "olmo-1b-0724": "olmo", "olmoe-1b-7b-0924": "olmoe"}[r["panel"]]
        assert ch.glued[f"f3-verdict-f3-gap-pub-{short}"] == r["verdict"] + ("*" if r["bound"] else "")
        assert r["reason"] in text  # one item: the line gives the verdict's own reason
    assert len(text.splitlines()) == len(want)  # one line per model
    assert not any("-toy" in k for k in ch.glued)  # the absent toy tier: left to Chapter.finish


def test_the_robustness_map_colours_f5_by_its_verdict_not_its_sign():
    """Issue 29 item 3: a lead of the paper's sign whose test does not reject is drawn as failing, one whose test
    cannot reject whatever the data as untestable; other claims keep their sign's colour."""
    from circuitdev.book.plots.robustness import map_states, verdict_states

    g = pd.DataFrame({"claim": ["F5.lead"] * 3 + ["F3.gap"], "panel": ["a", "b", "c", "a"],
                      "item": ["induction"] * 3 + ["gap"], "holds": [True, True, True, True],
                      "censored": [False, True, False, False], "value": [2.0, 3.0, 1.0, 5.0]})
    verdicts = pd.DataFrame({"claim": ["F5.lead", "F5.lead", "F5.lead", "F3.gap"], "panel": ["a", "b", "c", "a"],
                             "item": ["induction"] * 3 + ["gap"],
                             "verdict": ["not supported", "not supported", "untestable", "not supported"]})
    assert list(map_states(g)) == [0, 1, 0, 0]
    assert list(verdict_states(g, verdicts, ("F5.lead",))) == [3, 2, 4, 0]


def f3_chapter(tmp_path, published):
    """The F3 page's Chapter on the authors' files (published tier) and no toy records, outside a kernel."""
    from circuitdev.book.build import BuildFolders
    from circuitdev.book.chapter import Chapter
    from circuitdev.book.tiers import load_tiers

    folders = BuildFolders(results_dir=tmp_path / "r", data_dir=tmp_path, published_dir=published, panels=[])
    return Chapter(name="f3_milestones", prefix="f3", params={}, folders=folders,
                   tiers=load_tiers(["published", "toy"], published_dir=published, results_dir=tmp_path / "r"))
