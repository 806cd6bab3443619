"""The book's figures: seaborn / matplotlib, one message each, titled, axes labelled with units; one module per page
on shared basics (`axes`: token axes, colours, placeholders, bands, tier columns, titles, heat maps):

    f1_floor        bos_layer_heatmaps, floor_margin
    f2_shapes       bos_fraction_lines
    f3_milestones   milestone_timeline, behaviour_timeline
    f4_convergence  recall_curves
    f5_pr_lead      pr_selectivity (also on the one-model page), lead_vs_null, base_rate_lines,
                    pr_null_calibration, topk_bars
    f6_noise_floor  noise_floor
    sink_measures   sink_counts, sink_rates, sink_timeline, sink_floor, first_position_norms
    sensitivity     threshold_sensitivity
    robustness      robustness_curves (a findings page's "How robust"), robustness_map (the robustness page)
    refinement      refined_trajectory, metric_label
    toy_trials      trial_counts (the toy recipe page: the recorded long trials)
    model           class_count_heatmaps, ablation_bars, ablation_over_training (the one-model page)
    method          batch_layout
    audit           audit_status

Every function takes a tidy table from `circuitdev.analysis` (plus a `tier` column, see `book.tiers.Tiers.apply`)
and returns a matplotlib Figure; none of them computes a finding. Every figure is importable from here
(`from circuitdev.book import plots; plots.bos_fraction_lines`); the conventions they share are in `axes`.
"""

from __future__ import annotations

from circuitdev.book.plots.audit import audit_status
from circuitdev.book.plots.axes import (TIER_TITLES, TOKENS_LABEL, TokenAxis, palette, panel_color, placeholder,
                                        plain_log_ticks, tier_title, token_tick)
from circuitdev.book.plots.f1_floor import bos_layer_heatmaps, floor_margin
from circuitdev.book.plots.f2_shapes import bos_fraction_lines
from circuitdev.book.plots.f3_milestones import behaviour_timeline, milestone_timeline
from circuitdev.book.plots.f4_convergence import recall_curves
from circuitdev.book.plots.f5_pr_lead import (base_rate_lines, lead_vs_null, pr_null_calibration, pr_selectivity,
                                              topk_bars)
from circuitdev.book.plots.f6_noise_floor import noise_floor
from circuitdev.book.plots.method import batch_layout
from circuitdev.book.plots.model import ablation_bars, ablation_over_training, class_count_heatmaps
from circuitdev.book.plots.refinement import metric_label, refined_trajectory
from circuitdev.book.plots.robustness import robustness_curves, robustness_map
from circuitdev.book.plots.sensitivity import PAPER_THRESHOLDS, threshold_sensitivity
from circuitdev.book.plots.sink_measures import (first_position_norms, sink_counts, sink_floor, sink_rates,
                                                 sink_timeline)
from circuitdev.book.plots.toy_trials import trial_counts

__all__ = [
    # the shared basics
    "TIER_TITLES", "TOKENS_LABEL", "TokenAxis", "palette", "panel_color", "placeholder", "plain_log_ticks",
    "tier_title", "token_tick",
    # one figure per finding / page
    "bos_layer_heatmaps", "floor_margin", "bos_fraction_lines", "milestone_timeline", "behaviour_timeline", "recall_curves",
    "pr_selectivity", "noise_floor", "threshold_sensitivity", "PAPER_THRESHOLDS", "refined_trajectory", "metric_label",
    "class_count_heatmaps", "ablation_bars", "ablation_over_training", "batch_layout", "audit_status",
    "robustness_curves", "robustness_map",
    # F5's control and the spectral top-K; the sink measures
    "lead_vs_null", "base_rate_lines", "pr_null_calibration", "topk_bars", "sink_counts", "sink_rates", "sink_timeline", "first_position_norms",
    "sink_floor", "trial_counts",
]
