"""The figures of the pages that are not one finding (the one-model page, the method page, the audit page); each
finding's figure is tested beside the finding (tests/test_f*.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from circuitdev.analysis import findings as F
from circuitdev.book import plots
from circuitdev.schema import HEAD_CLASSES
from findings_fixtures import EMPTY, assert_placeholder, assert_titled, dev_table


def test_model_page_figures_are_titled():
    counts = pd.concat([F.layer_counts(dev_table("x"), head_class=c).assign(head_class=c) for c in HEAD_CLASSES])
    assert_titled(plots.class_count_heatmaps(counts, title="t"))
    ab = pd.DataFrame({"condition": ["baseline", "screen", "matched_random", "matched_random", "upper_bound"],
                       "n_ablated": [0, 1, 1, 1, 4], "acc_top1": [0.5, 0.1, 0.45, 0.5, 0.0]})
    fig = plots.ablation_bars(ab, title="t")
    assert_titled(fig)
    bars = [p.get_height() for p in fig.axes[0].patches]
    assert sorted(np.round(bars, 4)) == sorted(np.round([50.0, 10.0, 47.5, 0.0], 4))  # matched random: mean


def test_method_page_figure_is_titled():
    assert_titled(plots.batch_layout(30, 64, [5, 9, 40]))


def test_audit_figure_says_when_empty():
    assert_placeholder(plots.audit_status(EMPTY), "audit_status")
