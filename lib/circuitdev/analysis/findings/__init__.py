"""The paper's findings F1-F6, a threshold sensitivity and the refinement metrics, as pure functions over a
developmental table; one module per finding, as the book has one page per finding:

    f1_floor        layer_counts, floor_check, floor_summary, floor_margin, floor_headroom, floor_verdict, bar_mass
    f2_shapes       bos_fraction, trajectory_shape, steepest_rise, shape_ranges, run_differences, panel_files
    f3_milestones   Milestone, PAPER_MILESTONES, FIG1B_MILESTONES, milestone, milestones, milestone_gap, bound_text,
                    fmt_ratio, milestone_text, with_texts, gap_texts (censored values written as bounds)
    f3_behaviour    BehaviourMilestone, BEHAVIOUR_MILESTONES, behaviour_milestones, behaviour_specs, milestone_order
    f4_convergence  circuit_recall (recall, precision, Jaccard), faded_heads, recall_milestones
    f5_pr_lead      head_trajectories, pr_lead, pr_lead_sensitivity, lead_summary, pr_features, pr_elevated,
                    lead_value, lead_censoring
    f5_control      elevation_base_rate, lead_null, lead_null_settings, pr_against_null, null_pr_summary
    spectral_topk   scaled_k, topk_heads, topk_breakdown, topk_dominance (the authors' top-K PR ranking)
    f6_noise_floor  NULL_COLUMNS, null_statistics, noise_floor
    sink_measures   sink_flags, measure_counts, measure_agreement, sink_onsets, floor_by_measure, lowest_layers
    first_position  position_norms, norm_summary (the position-0 residual norm against the median's, beside sinks)
    robustness      ROBUSTNESS_THRESHOLDS, ROBUSTNESS_CLAIMS, robustness_table (every threshold-dependent claim
                    over one grid of bars and rules)
    robustness_reading  holds_ranges, ranges_text, ranges_sentence, claim_summary, rule_verdicts (reading it)
    hangs_on        hangs_on, milestone_margin, kth_strongest (what a claim hangs on: the deciding head, its margin)
    sensitivity     SENSITIVITY_THRESHOLDS, threshold_sensitivity, shape_sensitivity, transition_range
    refinement      REVISION_METRICS, revision_metric, event_window, window_comparison, milestone_window_comparison,
                    PanelView (the refinement page's view of one record panel)
    seeds           SEED_SUFFIX, seed_of, seed_spread
    basics          BOS, EPS (what they share; the table basics are `analysis.devtable`)

Every public name is importable from here (`from circuitdev.analysis import findings; findings.bos_fraction`), so
a page needs only this package; to add a finding, add its module and list its names below.

Input is the developmental table of schema.py (one row per panel, revision, layer, head) from any source: the
published files (`circuitdev.sources.published`), our probe store, or the toy panel. Outputs are tidy DataFrames, one row per
(panel, revision, ...), with revisions in token order and `token_fraction` = tokens_b / the panel's final tokens_b
(the paper's training-fraction denominators, method reference §6).

Defaults reproduce the paper exactly (method reference §2, §6):
- counting rule "per-class": a head counts for class c at threshold tau iff sel_c >= tau, WHATEVER its best class.
  This is what every developmental table and figure of the paper uses (method reference §2: a head whose best class is
  induction still counts as BOS-class when its first-token selectivity passes 30x). Use "best-class" (sel_c >= tau
  AND c is the head's argmax class) to ask how many heads are *primarily* of class c, as the repository README does.
- thresholds: 30x for BOS (first-token) counts, previous-token / self milestone counts; 50x for the induction
  circuit and induction milestones; 100x for previous-token formation in F5.

Intervals (issue 14): F1-F5 accept `boot=`, the bootstrap replicates of the table's records
(`sources.records.RecordSet.boot`), and then add `<column>_lo` / `<column>_hi` (95%, from the same resamples for
every head: `analysis.uncertainty`); without it (the published tier has no per-sequence data) their output is
exactly the paper's computation. `floor_verdict` states F1 per panel as holds / fails / within noise.
"""

from __future__ import annotations

# the table basics a page uses beside the findings, importable from here too
from circuitdev.schema import head_name
from circuitdev.analysis.devtable import (final_circuit, head_counts, head_mask, reuse_indexes,
                                          revisions)
from circuitdev.analysis.findings.basics import BOS, EPS
from circuitdev.analysis.findings.f1_floor import (VERDICTS, bar_mass, floor_check, floor_headroom, floor_margin,
                                                   floor_summary, floor_verdict, layer_counts)
from circuitdev.analysis.findings.f2_shapes import (MIN_RISE_HEADS, MIN_RISE_PP, MIN_SPAN_EFOLDS, RUN_COLUMNS,
                                                    bos_fraction, panel_files, run_differences, shape_ranges,
                                                    steepest_rise, trajectory_shape)
from circuitdev.analysis.findings.f3_behaviour import (BEHAVIOUR_MILESTONES, BehaviourMilestone, behaviour_milestones,
                                                       behaviour_specs, milestone_order)
from circuitdev.analysis.findings.f3_milestones import (BOUND_SIGNS, FIG1B_MILESTONES, MILESTONE_COLUMNS,
                                                        MILESTONE_WINDOW_COLUMNS, PAPER_MILESTONES, Bound, Milestone,
                                                        bound_text, describe_milestones, fmt_ratio, gap_row, gap_texts,
                                                        milestone, milestone_gap, milestone_margin,
                                                        milestone_text, milestones, reached_table, with_texts)
from circuitdev.analysis.findings.f4_convergence import circuit_recall, faded_heads, recall_milestones
from circuitdev.analysis.findings.f5_control import (LEAD_NULL_COLUMNS, LEAD_NULL_TABLE, N_PERMUTATIONS, NULL_PR_QUANTILE,
                                                     PERMUTATION_SEED, elevation_base_rate, lead_null,
                                                     lead_null_settings, lead_null_texts, null_pr_summary,
                                                     pr_against_null)
from circuitdev.analysis.findings.f5_pr_lead import (DEFAULT_ELEVATION_GRID, FORMATION_THRESHOLDS, LEAD_CENSORING,
                                                     PR_SIGNAL_FLOOR, ElevationRule, LeadCensoring, PanelHeads,
                                                     head_trajectories, lead_bound_text, lead_censoring, lead_summary,
                                                     lead_texts, lead_value, sensitivity_medians,
                                                     pr_elevated, pr_features, pr_lead,
                                                     pr_lead_sensitivity)
from circuitdev.analysis.findings.f6_noise_floor import NULL_COLUMNS, noise_floor, null_statistics
from circuitdev.analysis.findings.first_position import NORM_COLUMNS, norm_summary, position_norms, stream_words
from circuitdev.analysis.findings.sink_measures import (AGREEMENT_COLUMNS, FLOOR_COLUMNS, GU_EPSILON, MEASURE_COLUMNS,
                                                        SINK_MEASURES, SinkMeasure, floor_by_measure,
                                                        floor_texts, lowest_layers, mass_for_selectivity,
                                                        measure_agreement, measure_counts, measured, sink_flags,
                                                        sink_onsets)
from circuitdev.analysis.findings.spectral_topk import (BREAKDOWN_COLUMNS, PAPER_K_SHARE, PAPER_TOP_K, TOPK_CLASSES,
                                                        dominance_texts, scaled_k, topk_breakdown,
                                                        topk_dominance, topk_heads)
from circuitdev.analysis.findings.refinement import (REVISION_METRICS, PanelView, event_window,
                                                     milestone_window_comparison, revision_metric, window_comparison)
from circuitdev.analysis.findings.hangs_on import HANGS_ON_COLUMNS, hangs_on
from circuitdev.analysis.findings.claim import (ALL, COUNTING_RULES, MILESTONE_RULES, ROBUSTNESS_COLUMNS,
                                                ROBUSTNESS_THRESHOLDS, VARIED_CLASS, RobustClaim)
from circuitdev.analysis.findings.robustness import ROBUSTNESS_CLAIMS, robust_claim, robustness_table
from circuitdev.analysis.findings.robustness_reading import (claim_summary, claims_frame, holds_ranges,
                                                             ranges_sentence, ranges_text, rule_verdicts)
from circuitdev.analysis.findings.seeds import SEED_SUFFIX, seed_of, seed_spread
from circuitdev.analysis.findings.sensitivity import (SENSITIVITY_THRESHOLDS, shape_sensitivity, threshold_sensitivity,
                                                      transition_range)

__all__ = [
    # table basics (analysis.devtable) and what the findings share
    "final_circuit", "head_counts", "head_mask", "head_name", "reuse_indexes", "revisions", "BOS", "EPS",
    # F1
    "VERDICTS", "layer_counts", "floor_check", "floor_summary", "floor_margin", "floor_headroom", "floor_verdict",
    "bar_mass",
    # F2
    "bos_fraction", "trajectory_shape", "steepest_rise", "shape_ranges", "run_differences", "panel_files",
    "RUN_COLUMNS", "MIN_RISE_PP",
    "MIN_RISE_HEADS", "MIN_SPAN_EFOLDS",
    # F3
    "Milestone", "PAPER_MILESTONES", "FIG1B_MILESTONES", "MILESTONE_COLUMNS", "MILESTONE_WINDOW_COLUMNS", "milestone",
    "milestones", "milestone_gap", "Bound", "BOUND_SIGNS", "bound_text", "fmt_ratio", "milestone_text", "with_texts",
    "reached_table", "describe_milestones", "gap_row", "gap_texts", "BehaviourMilestone", "BEHAVIOUR_MILESTONES",
    "behaviour_milestones", "behaviour_specs", "milestone_order",
    # F4
    "circuit_recall", "faded_heads", "recall_milestones",
    # F5
    "ElevationRule", "PanelHeads", "FORMATION_THRESHOLDS", "PR_SIGNAL_FLOOR", "DEFAULT_ELEVATION_GRID",
    "head_trajectories", "pr_elevated", "pr_lead", "lead_summary", "pr_lead_sensitivity", "pr_features",
    "LeadCensoring", "LEAD_CENSORING", "lead_value", "lead_censoring", "lead_bound_text", "lead_texts",
    "sensitivity_medians",
    # F5's control
    "LEAD_NULL_COLUMNS", "LEAD_NULL_TABLE", "N_PERMUTATIONS", "NULL_PR_QUANTILE", "PERMUTATION_SEED", "elevation_base_rate", "lead_null",
    "lead_null_settings", "lead_null_texts", "pr_against_null", "null_pr_summary",
    # the spectral top-K
    "BREAKDOWN_COLUMNS", "PAPER_K_SHARE", "PAPER_TOP_K", "TOPK_CLASSES", "scaled_k", "topk_heads", "topk_breakdown",
    "topk_dominance", "dominance_texts",
    # F6
    "NULL_COLUMNS", "null_statistics", "noise_floor",
    # the sink measures
    "SinkMeasure", "SINK_MEASURES", "MEASURE_COLUMNS", "GU_EPSILON", "AGREEMENT_COLUMNS", "FLOOR_COLUMNS",
    "sink_flags", "measured", "measure_counts", "measure_agreement", "sink_onsets", "floor_by_measure",
    "lowest_layers", "floor_texts", "mass_for_selectivity",
    "NORM_COLUMNS", "position_norms", "norm_summary", "stream_words",
    # sensitivity
    "SENSITIVITY_THRESHOLDS", "threshold_sensitivity", "shape_sensitivity", "transition_range",
    # refinement
    "REVISION_METRICS", "revision_metric", "event_window", "window_comparison", "milestone_window_comparison",
    "PanelView",
    # robustness (issue 21)
    "ROBUSTNESS_THRESHOLDS", "ROBUSTNESS_CLAIMS", "ROBUSTNESS_COLUMNS", "RobustClaim", "COUNTING_RULES",
    "MILESTONE_RULES", "VARIED_CLASS", "ALL", "robust_claim", "robustness_table",
    "holds_ranges", "ranges_text", "ranges_sentence", "claim_summary", "rule_verdicts", "claims_frame",
    "HANGS_ON_COLUMNS", "hangs_on", "milestone_margin",
    # seed replicas
    "SEED_SUFFIX", "seed_of", "seed_spread",
]
