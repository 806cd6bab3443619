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
    spectral_topk   scaled_k, topk_heads, topk_breakdown, topk_dominance, topk_enrichment (the authors' top-K PR
                    ranking, and each class's count there against its base rate)
    f6_noise_floor  NULL_COLUMNS, null_statistics, noise_floor
    sink_measures   sink_flags, measure_counts, measure_agreement, sink_onsets, floor_by_measure, lowest_layers
    first_position  position_norms, norm_summary (the position-0 residual norm against the median's, beside sinks)
    claim           RobustClaim, ROBUSTNESS_THRESHOLDS, MILESTONE_RULES, ALL (what a robustness claim is: each
                    finding module above declares its own -- evaluation, what it hangs on, unit, axis)
    robustness      ROBUSTNESS_CLAIMS, robustness_table (the claims registered once; every threshold-dependent claim
                    over one grid of bars and rules)
    robustness_reading  holds_ranges, ranges_text, ranges_sentence, claim_summary, rule_verdicts (reading it)
    hangs_on        hangs_on (what a claim hangs on: the deciding head, its margin; milestone_margin is F3's)
    verdicts        claim_verdicts, verdict_table, VERDICTS (what the data support, per claim: one function, one
                    vocabulary)
    sensitivity     SENSITIVITY_THRESHOLDS, threshold_sensitivity, shape_sensitivity
    refinement      REVISION_METRICS, revision_metric, event_window, window_comparison, milestone_window_comparison,
                    PanelView (the refinement page's view of one record panel)
    seeds           SEED_SUFFIX, seed_of, seed_spread
    basics          BOS, EPS (what they share; the table basics are `analysis.devtable`)

Every name a page uses is importable from here (`from circuitdev.analysis import findings; findings.bos_fraction`),
so a page needs only this package: the facade is each module's `__all__` (plus the table basics of
`analysis.devtable`); to add a finding, add its module with its `__all__` to FINDING_MODULES below.

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

from importlib import import_module

# the table basics a page uses beside the findings, importable from here too
from circuitdev.analysis.devtable import final_circuit, head_counts, head_mask, reuse_indexes, revisions
from circuitdev.analysis.findings.basics import *  # noqa: F401,F403
from circuitdev.analysis.findings.f1_floor import *  # noqa: F401,F403
from circuitdev.analysis.findings.f2_shapes import *  # noqa: F401,F403
from circuitdev.analysis.findings.f3_milestones import *  # noqa: F401,F403
from circuitdev.analysis.findings.f3_behaviour import *  # noqa: F401,F403
from circuitdev.analysis.findings.f4_convergence import *  # noqa: F401,F403
from circuitdev.analysis.findings.f5_pr_lead import *  # noqa: F401,F403
from circuitdev.analysis.findings.f5_control import *  # noqa: F401,F403
from circuitdev.analysis.findings.spectral_topk import *  # noqa: F401,F403
from circuitdev.analysis.findings.f6_noise_floor import *  # noqa: F401,F403
from circuitdev.analysis.findings.sink_measures import *  # noqa: F401,F403
from circuitdev.analysis.findings.first_position import *  # noqa: F401,F403
from circuitdev.analysis.findings.sensitivity import *  # noqa: F401,F403
from circuitdev.analysis.findings.refinement import *  # noqa: F401,F403
from circuitdev.analysis.findings.seeds import *  # noqa: F401,F403
from circuitdev.analysis.findings.claim import *  # noqa: F401,F403
from circuitdev.analysis.findings.robustness import *  # noqa: F401,F403
from circuitdev.analysis.findings.robustness_reading import *  # noqa: F401,F403
from circuitdev.analysis.findings.hangs_on import *  # noqa: F401,F403
from circuitdev.analysis.findings.verdicts import *  # noqa: F401,F403
from circuitdev.schema import head_name

FINDING_MODULES = ("basics", "f1_floor", "f2_shapes", "f3_milestones", "f3_behaviour", "f4_convergence", "f5_pr_lead",
                   "f5_control", "spectral_topk", "f6_noise_floor", "sink_measures", "first_position", "sensitivity",
                   "refinement", "seeds", "claim", "robustness", "robustness_reading", "hangs_on", "verdicts")
# (by name: a star import rebinds a module's name when the module exports a function of it, as hangs_on does)
__all__ = ["final_circuit", "head_counts", "head_mask", "head_name", "reuse_indexes", "revisions",
           *(name for m in FINDING_MODULES for name in import_module(f"{__name__}.{m}").__all__)]
