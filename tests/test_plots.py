"""The figures of the pages that are not one finding (the one-model page, the method page, the audit page); each
finding's figure is tested beside the finding (tests/test_f*.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from circuitdev.analysis import findings as F
from circuitdev.book import plots
from circuitdev.schema import HEAD_CLASSES
from findings_fixtures import EMPTY, assert_placeholder, assert_titled, dev_table


def test_model_page_figures_are_titled():
    counts = pd.concat([F.layer_counts(dev_table("x"), head_class=c).assign(head_class=c) for c in HEAD_CLASSES])
    assert_titled(plots.class_count_heatmaps(counts, title="t"))
    ab = pd.DataFrame({"condition": ["baseline", "screen", "matched_random", "matched_random", "upper_bound"],
                       "label": ["no ablation", "circuit", "matched random set", "matched random set", "whole"],
                       "drawn_for": ["", "", "circuit", "circuit", "circuit"], "n": 100,
                       "n_ablated": [0, 1, 1, 1, 4], "acc_top1": [0.5, 0.1, 0.45, 0.5, 0.0]})
    fig = plots.ablation_bars(ab, title="t")
    assert_titled(fig)
    bars = [p.get_width() for p in fig.axes[0].patches]
    assert sorted(np.round(bars, 4)) == sorted(np.round([50.0, 10.0, 47.5, 0.0], 4))  # matched random: mean


def test_screen_heatmaps_are_laid_out_to_be_read():
    """A long revision grid (the toy's 31) gets one class per row on one shared revision axis, not a strip; a short
    one (the published models' 10) several per row."""
    long = pd.concat([F.layer_counts(dev_table("x", revisions=31), head_class=c).assign(head_class=c)
                      for c in HEAD_CLASSES])
    fig = plots.class_count_heatmaps(long, title="t", heads_per_layer=4)
    panels = [ax for ax in fig.axes if ax.get_title()]
    width, height = fig.get_size_inches()
    assert len(panels) == 6 and len({round(ax.get_position().x0, 3) for ax in panels}) == 1 and height > 0.6 * width
    short = pd.concat([F.layer_counts(dev_table("y", revisions=10, layers=16), head_class=c).assign(head_class=c)
                       for c in HEAD_CLASSES])
    fig = plots.class_count_heatmaps(short, title="t")
    assert len({round(ax.get_position().x0, 3) for ax in fig.axes if ax.get_title()}) >= 2


def test_ablation_bars_say_when_a_control_cannot_be_drawn_and_grey_out_other_sets():
    ab = pd.DataFrame({"condition": ["baseline", "screen", "matched_random", "other", "matched_random"],
                       "label": ["no ablation", "circuit", "matched random set", "top-6", "matched random set"],
                       "drawn_for": ["", "", "circuit", "", "top-6"], "n": 2000, "n_ablated": [0, 3, 0, 6, 6],
                       "acc_top1": [0.04, 0.0025, np.nan, 0.004, 0.0175],
                       "note": ["", "", "not possible: layer(s) 1 hold no head outside the circuit", "", ""]})
    fig = plots.ablation_bars(ab, title="t")
    ax = fig.axes[0]
    assert any(t.get_text().startswith("Not possible: layer(s) 1") for t in ax.texts)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert "matched random set\ndrawn for the top-6 · 6 heads" in labels and "matched random set · none drawn" in labels
    assert len(ax.patches) == 4  # no bar for the control that does not exist
    fig = plots.ablation_bars(ab, title="t", reported={"the paper's control": 4.4})
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[2] == "the paper's control" and len(fig.axes[0].patches) == 4  # a marker after the circuit


def test_ablation_bars_take_the_workshops_bare_table():
    """Session 4 draws its own table (condition, n_ablated, top-1, one row per matched-random seed): no label or
    drawn_for columns; its bars are labelled by condition and the seeds drawn as one bar (their mean)."""
    ab = pd.DataFrame({"condition": ["baseline", "screen", "matched_random", "matched_random", "upper_bound"],
                       "n_ablated": [0, 2, 2, 2, 4], "seed": [None, None, 123, 1, None],
                       "acc_top1": [0.9, 0.2, 0.8, 0.7, 0.0]})
    fig = plots.ablation_bars(ab, title="t")
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["baseline · nothing zeroed", "screen · 2 heads", "matched random · 2 heads",
                      "upper bound · 4 heads"]
    assert sorted(np.round([p.get_width() for p in fig.axes[0].patches], 4)) == [0.0, 20.0, 75.0, 90.0]


def test_ablation_bars_draw_the_intervals_their_label_names():
    """Issue 30: session 4's chart promised Wilson intervals it did not draw. With `n` (the sequences behind each
    top-1) every bar carries its interval (Wilson for one head set, over the groups for random groups) and the axis
    label names them; without `n` nothing is drawn and the label promises nothing."""
    from matplotlib.container import ErrorbarContainer

    from circuitdev.measure.behaviour import wilson_interval

    ab = pd.DataFrame({"condition": ["baseline", "screen", "matched_random", "matched_random", "upper_bound"],
                       "n_ablated": [0, 2, 2, 2, 4], "seed": [None, None, 123, 1, None],
                       "acc_top1": [0.9, 0.2, 0.8, 0.7, 0.0]})
    bars = lambda fig: [c for c in fig.axes[0].containers if isinstance(c, ErrorbarContainer)]  # noqa: E731
    fig = plots.ablation_bars(ab.assign(n=200), title="t")
    assert len(bars(fig)) == 4 and "Wilson" in fig.axes[0].get_xlabel()
    lo, hi = wilson_interval(40, 200)  # the screen's 20% of 200 sequences
    seg = bars(fig)[1].lines[2][0].get_segments()[0]
    assert sorted(p[0] for p in seg) == pytest.approx([100 * lo, 100 * hi])
    fig = plots.ablation_bars(ab, title="t")
    assert not bars(fig) and "interval" not in fig.axes[0].get_xlabel()


def test_ablation_over_training_draws_intact_ablated_and_controls():
    over = pd.DataFrame({"revision": ["step0", "step1", "step2"], "tokens_b": [0.0, 1e-3, 2e-3],
                         "baseline_top1": [0.0, 0.2, 0.6], "ablated_top1": [0.0, 0.0, 0.01],
                         "ablated_top1_lo": [0.0, 0.0, 0.002], "ablated_top1_hi": [0.01, 0.01, 0.03],
                         "random_top1": [np.nan] * 3, "random_any_top1": [0.0, 0.1, 0.4]})
    fig = plots.ablation_over_training(over, title="t", marks={"necessary": 1e-3})
    assert_titled(fig)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert labels[:2] == ["intact model", "final induction circuit zeroed"] and "necessary" in labels
    assert not any("matched random" in lab for lab in labels)  # no such control: no line
    assert_placeholder(plots.ablation_over_training(over.iloc[:0], title="t"), "ablation_over_training")


def test_method_page_figure_is_titled_and_zooms_where_targets_crowd():
    fig = plots.batch_layout(30, 64, [5, 9, 40])
    assert_titled(fig)
    zooms = [ax for ax in fig.axes if ax.get_title().startswith("Zoom")]
    assert len(zooms) == 2 and zooms[1].get_xlim()[1] < 64 and zooms[0].get_xlim()[0] > 20


def test_audit_figure_says_when_empty():
    assert_placeholder(plots.audit_status(EMPTY), "audit_status")


def test_audit_figure_keeps_bookkeeping_apart_and_says_cannot_decide():
    audit = pd.DataFrame({"finding": ["F1", "F2", "panel", "method", "F2"],
                          "status": ["match", "differs", "differs", "match", "unverified"]})
    ax = plots.audit_status(audit).axes[0]
    names = [t.get_text() for t in ax.get_yticklabels()]
    assert names == ["F1", "F2", "method", "panel"]
    assert "cannot decide" in ax.get_legend_handles_labels()[1]
    assert {"findings", "bookkeeping"} <= {t.get_text() for t in ax.texts}


def test_page_figures_title_metrics_in_words():
    assert plots.metric_label("bos_fraction") == "share of heads that are sinks"
    assert plots.metric_label("induction_3_heads") == "“≥ 3 heads with induction selectivity ≥ 50×” holds"
    sens = pd.DataFrame({"head_class": ["first-token"] * 2 + ["induction"] * 2, "threshold": [10, 30] * 2,
                         "fraction": [0.5, 0.4, np.nan, np.nan], "n": [8, 6, 3, 2], "panel": "p", "tier": "toy"})
    fig = plots.threshold_sensitivity(sens)
    assert [ax.get_title() for ax in fig.axes] == ["first-token heads at the final revision",
                                                   "induction heads at the final revision"]
    assert "sinks" in fig.axes[0].get_ylabel() and "_" not in fig.axes[0].get_ylabel()


def _robustness_rows(claim, panel, values, holds, censored=None, tier="toy", item="x", varied="first_token"):
    bars = [5.0, 30.0, 100.0][:len(values)]
    return pd.DataFrame({"claim": claim, "panel": panel, "item": item, "varied": varied, "threshold": bars,
                         "rule": "per-class", "value": values, "holds": holds,
                         "censored": censored or [False] * len(values),
                         "bound": ["lower" if c else "exact" for c in (censored or [False] * len(values))],
                         "paper_threshold": 30.0, "paper_rule": True, "tier": tier})


def test_robustness_map_shows_untestable_and_bound_cells_apart_one_block_per_claim():
    table = pd.concat([_robustness_rows("F1.floor", "toy-pythia", [0, 0, 2], [True, True, False]),
                       _robustness_rows("F2.shapes", "toy-olmo", [np.nan, 0.4, 0.5], [False, False, True],
                                        censored=[False, True, True]),
                       _robustness_rows("F5.lead", "toy-olmo", [np.nan, np.nan, 1.0], [False, False, False])])
    states = plots.robustness.map_states(table)
    assert [plots.robustness.STATES[s] for s in states] == [
        "holds", "holds", "fails", "untestable", "fails (value a bound)", "holds (value a bound)",
        "untestable", "untestable", "fails"]
    assert len(set(plots.robustness.STATE_COLORS)) == len(plots.robustness.STATES)  # each state its own colour
    fig = plots.robustness_map(table, tier="toy")
    blocks = [ax for ax in fig.axes if ax.get_images()]
    assert [ax.get_title(loc="left") for ax in blocks] == ["F1.floor", "F2.shapes", "F5.lead"]
    for ax in blocks:
        labels = ax.get_yticklabels()
        assert labels and all(t.get_fontsize() >= 8 for t in labels)
        assert not any(t.get_text().startswith("F") for t in labels)  # the claim is the block's title, not the row's
    drawn = blocks[1].get_images()[0].get_array()
    assert drawn[0].tolist() == [4, 2, 1]


def test_robustness_curves_draw_counts_as_counts_and_shares_up_to_1():
    f1 = _robustness_rows("F1.floor", "toy-pythia", [0, 0, 0], [True, True, True])
    fig = plots.robustness_curves(f1, "F1.floor")
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    assert lo > -1 and hi >= 0.5 and all(float(t).is_integer() for t in ax.get_yticks() if lo <= t <= hi)
    f2 = pd.concat([_robustness_rows("F2.shapes", "toy-pythia", [0.4, 3.0, 0.9], [True, False, True]),
                    _robustness_rows("F2.shapes", "toy-olmoe", [np.nan] * 3, [False] * 3)])
    fig = plots.robustness_curves(f2, "F2.shapes")
    drawn = np.concatenate([line.get_ydata() for line in fig.axes[0].get_lines() if len(line.get_ydata()) == 3])
    assert np.nanmax(drawn) <= 1.0 and fig.axes[0].get_ylim()[1] < 1.2
    assert "untestable" in fig.axes[1].texts[0].get_text()  # the empty panel says why
    assert any("above 1 drawn at 1" in t.get_text() for leg in fig.legends for t in leg.get_texts())


def test_refined_yes_no_milestone_is_drawn_as_steps_and_the_zoom_has_ticks():
    from matplotlib.collections import PolyCollection

    tokens = np.array([0.0, 1e-3, 2e-3, 2.5e-3, 3e-3, 4e-3, 8e-3])  # billions; a zoom of less than a decade
    refined = pd.DataFrame({"tokens_b": tokens, "value": [0, 0, 0, 1, 1, 1, 1], "value_lo": 0, "value_hi": 1,
                            "refined": [False, False, False, True, False, False, False]})
    fig = plots.refined_trajectory(refined, refined[~refined["refined"]], value="value", ylabel="milestone holds",
                                   title="t", window=(2e-3, 3e-3), refined_window=(2e-3, 2.5e-3))
    for ax in fig.axes[:2]:
        assert not [c for c in ax.collections if isinstance(c, PolyCollection) and not c.get_label() == "_nolegend_"
                    and len(c.get_paths()) and c.get_paths()[0].vertices.shape[0] > 4]  # no interpolated band
        assert all(line.get_drawstyle() == "steps-post" for line in ax.get_lines() if len(line.get_xdata()) > 1
                   and line.get_linestyle() != ":")
        lo, hi = ax.get_xlim()
        labelled = [t for t, lab in zip(ax.get_xticks(), ax.get_xticklabels()) if lo <= t <= hi and lab.get_text()]
        assert len(labelled) >= 2, "an axis (the zoom) without tick labels"


def test_a_log_token_axis_of_less_than_a_decade_is_labelled():
    import matplotlib.pyplot as plt

    from circuitdev.book.plots.axes import TokenAxis

    tokens = 1e6 * np.array([1.0, 1.3, 1.8, 2.4, 3.3, 4.4])  # log-spaced over less than one decade: no power of 10
    axis = TokenAxis.of(tokens)
    fig, ax = plt.subplots()
    ax.plot(axis.x(tokens), np.arange(len(tokens)))
    axis.apply(ax)
    fig.canvas.draw()
    lo, hi = ax.get_xlim()
    labelled = [lab.get_text() for t, lab in zip(ax.get_xticks(), ax.get_xticklabels()) if lo <= t <= hi
                and lab.get_text()]
    assert axis.scale == "log" and len(labelled) >= 2, labelled
    plt.close(fig)


def test_plain_log_ticks_label_a_short_log_axis_more_than_once():
    import matplotlib.pyplot as plt

    from circuitdev.book.plots.axes import plain_log_ticks

    fig, ax = plt.subplots()
    ax.plot([1, 2], [0.7, 4.0])
    ax.set_yscale("log")
    ax.set_ylim(0.6, 4.5)  # less than a decade: one power of ten (1) in view
    plain_log_ticks(ax)
    fig.canvas.draw()
    lo, hi = ax.get_ylim()
    labelled = [lab.get_text() for t, lab in zip(ax.get_yticks(), ax.get_yticklabels()) if lo <= t <= hi
                and lab.get_text()]
    assert len(labelled) >= 2 and "2" in labelled, labelled  # (without: "1" alone)
    plt.close(fig)


def test_plain_log_ticks_label_a_log_axis_under_two_fold_twice():
    """Issue 30: the sink-measures page's norm ratios (about 0.9 to 1.8) showed a single tick, "1": neither 2 nor 5
    of a decade falls inside. Round values label it instead."""
    import matplotlib.pyplot as plt

    from circuitdev.book.plots.axes import plain_log_ticks

    for lo, hi in ((0.8, 1.9), (1.02, 1.3), (3.1, 4.9)):
        fig, ax = plt.subplots()
        ax.plot([1, 2], [lo * 1.01, hi * 0.99])
        ax.set_yscale("log")
        ax.set_ylim(lo, hi)
        plain_log_ticks(ax)
        fig.canvas.draw()
        labelled = [lab.get_text() for t, lab in zip(ax.get_yticks(), ax.get_yticklabels()) if lo <= t <= hi
                    and lab.get_text()]
        assert len(labelled) >= 2, (lo, hi, labelled)
        assert all(lo <= float(v) <= hi for v in labelled)
        plt.close(fig)
