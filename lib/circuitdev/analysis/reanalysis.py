"""The published re-analysis: F1-F6, the sensitivities and the audit over the authors' files, as tidy tables.

`findings_tables(dev)` runs every finding on a developmental table from any source (published, probe store, toy);
`reanalyse(published_dir, out_dir)` adds the audit for the published data and writes one CSV per table, atomically.
Output tables name the panel `model`. The contract tables (other issues and checks read them) are exactly:

    bos_fraction.csv   model, revision, tokens_b, n_heads, n_bos, bos_fraction (a fraction in [0, 1])
    layer_counts.csv   model, revision, layer, n_bos
    milestones.csv     model, milestone, revision, tokens_b (empty revision / tokens where never reached)
    recall.csv         model, revision, tokens_b, recall, precision, jaccard (precision: the share of the heads
                       screened at the revision that are in the final circuit; jaccard: their overlap with it)
    audit.csv          claim, paper_value, data_value, status (match / differs), reason
    spectral_topk.csv  panel, revision, class, count (the authors' top-K PR heads of that class at that revision;
                       then tokens_b, k, share, recomputed: our count from the table, source) -- named `panel`

The others carry the detail: developmental_table, f1_floor, f2_shape, f2_shape_sensitivity, f3_gaps, f4_circuit,
f4_recall_milestones, f5_trajectories, f5_lead, f5_lead_sensitivity, f5_features, f5_lead_null (per model, class
and elevation rule: the circuit's median lead, the permutation null's mean and 95% range, the p-value, the base
rate at the first revision), f5_base_rate (the share of all heads elevated at each revision), f6_noise_floor,
sensitivity, audit_unverified (claims the data cannot decide, with the reason), greater_than (the authors'
greater-than ablation conditions per model with the Wilson interval of top-1: `greater_than_table`).

    spectral_topk_enrichment.csv  panel, revision, class, observed, k, base_count, n_heads, expected, p_fewer,
                       p_more: each class's top-K count against its base rate among all heads (hypergeometric;
                       findings.topk_enrichment; issue 29)
    robustness.csv     claim, panel, item, varied, threshold, rule, value, holds, censored, bound, paper_threshold,
                       paper_rule: every threshold-dependent claim over findings.ROBUSTNESS_THRESHOLDS and the rule
                       variants (findings.robustness_table; issue 21)
    verdicts.csv       claim, panel, item, verdict, bound, reason: what the data support, per robustness claim
                       (findings.claim_verdicts: untestable / not supported / fragile / supported; issue 29)
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pandas as pd

from circuitdev.analysis import findings as F
from circuitdev.analysis.findings import f5_control as C
from circuitdev.analysis.findings import f5_pr_lead as P
from circuitdev.analysis.findings import spectral_topk as K
from circuitdev.analysis.findings import verdicts as V
from circuitdev.analysis.audit import AUDIT_COLUMNS, UNVERIFIED_COLUMNS, run_audit
from circuitdev.atomic import write_atomic
from circuitdev.schema import SEL_COLUMNS, parse_head
from circuitdev.sources.published import load_published

CONTRACT_COLUMNS: dict[str, list[str]] = {
    "bos_fraction": ["model", "revision", "tokens_b", "n_heads", "n_bos", "bos_fraction"],
    "layer_counts": ["model", "revision", "layer", "n_bos"],
    "milestones": ["model", "milestone", "revision", "tokens_b"],
    "recall": ["model", "revision", "tokens_b", "recall", "precision", "jaccard"],
    "audit": AUDIT_COLUMNS,
}
# F5 follows the final-revision circuit of each class at its formation threshold (induction 50x, prev-token 100x,
# first-token 30x).
# F5's control (issue 21 item 5): the default elevation rule and the one that uses no future, each with its null
F5_NULL_SETTINGS = (("fraction-of-peak", 0.5), ("peak-to-date", 0.5))
SPECTRAL_TOPK_COLUMNS = ["panel", "revision", "class", "count"]  # the contract; extra columns follow
# tables whose contract names the panel `panel`, not `model`
_PANEL_NAMED = {"spectral_topk", "spectral_topk_enrichment"}


def _model(df: pd.DataFrame) -> pd.DataFrame:
    return df.rename(columns={"panel": "model"})


def findings_tables(dev: pd.DataFrame, *, nulls: pd.DataFrame | None = None) -> dict[str, pd.DataFrame]:
    """Every finding with the paper's defaults, as tidy tables keyed by CSV stem (see the module docstring)."""
    with F.reuse_indexes():
        return _findings_tables(dev, nulls)


def _findings_tables(dev: pd.DataFrame, nulls: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    has_pr = "pr" in dev.columns and dev["pr"].notna().any()
    bos = F.bos_fraction(dev)
    mstones = F.milestones(dev)
    recall = F.circuit_recall(dev)
    per_head = [c for c in ("panel", "revision", "step", "tokens_b", "layer", "head", *SEL_COLUMNS, "pr",
                            "best_class", "classification", "source") if c in dev.columns]
    tables = {
        "developmental_table": dev[per_head],
        "bos_fraction": bos,
        "layer_counts": F.layer_counts(dev).rename(columns={"n": "n_bos"}),
        "f1_floor": F.floor_check(dev),
        "f2_shape": F.trajectory_shape(bos),
        "f2_shape_sensitivity": F.shape_sensitivity(dev),
        "milestones": mstones,
        "f3_gaps": F.milestone_gap(mstones),
        "recall": recall,
        "f4_circuit": F.final_circuit(dev),
        "f4_recall_milestones": F.recall_milestones(recall),
        "f6_noise_floor": F.noise_floor(nulls, panels=list(pd.unique(dev["panel"]))),
        "sensitivity": F.threshold_sensitivity(dev),
    }
    if has_pr:
        tables["f5_trajectories"] = pd.concat(
            [P.head_trajectories(dev, head_class=c).assign(head_class=c) for c in C.F5_CLASSES], ignore_index=True)
        tables["f5_lead"] = pd.concat([P.pr_lead(dev, head_class=c) for c in C.F5_CLASSES], ignore_index=True)
        tables["f5_lead_sensitivity"] = pd.concat(
            [P.pr_lead_sensitivity(dev, head_class=c) for c in C.F5_CLASSES], ignore_index=True)
        tables["f5_features"] = P.pr_features(dev)
        tables.update(f5_control_tables(dev))
        if "classification" in dev.columns:
            tables["spectral_topk"] = spectral_topk_table(dev)
            tables["spectral_topk_enrichment"] = K.topk_enrichment(tables["spectral_topk"], dev)
    tables = {name: t if name in _PANEL_NAMED else _model(t) for name, t in tables.items()}
    for name, columns in CONTRACT_COLUMNS.items():
        if name in tables:
            tables[name] = tables[name][columns]
    return tables


def f5_control_tables(dev: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """F5's control: f5_lead_null (`f5_control.lead_null` per class and setting of F5_NULL_SETTINGS: the null's
    mean and p-value per model) and f5_base_rate (`elevation_base_rate` per setting)."""
    return {"f5_lead_null": C.lead_null_settings(dev, F5_NULL_SETTINGS, head_classes=C.F5_CLASSES),
            "f5_base_rate": pd.concat([C.elevation_base_rate(dev, rule=r, level=lv) for r, lv in F5_NULL_SETTINGS],
                                      ignore_index=True)}


def spectral_topk_table(dev: pd.DataFrame, authors: pd.DataFrame | None = None) -> pd.DataFrame:
    """spectral_topk.csv: per panel, revision and class the count among the top-K PR heads -- the authors' own
    counts (`PublishedData.topk`) where given, else ours -- then tokens_b, k, share, recomputed (our count from the
    table: `spectral_topk.topk_breakdown`, K = 45) and source ("authors" / "recomputed")."""
    ours = K.topk_breakdown(dev)
    out = ours.rename(columns={"count": "recomputed"}).assign(source="recomputed")
    out["count"] = out["recomputed"]
    if authors is not None and len(authors):
        theirs = authors.set_index(["panel", "revision", "class"])["count"]
        keys = list(zip(out["panel"], out["revision"], out["class"]))
        has = out["panel"].isin(set(authors["panel"])).to_numpy()
        out["count"] = [int(theirs.get(k, 0)) if h else c for k, h, c in zip(keys, has, out["recomputed"])]
        out["source"] = ["authors" if h else "recomputed" for h in has]
    out["share"] = out["count"] / out["k"]
    return out[[*SPECTRAL_TOPK_COLUMNS, "tokens_b", "k", "share", "recomputed", "source"]]


def reanalyse(published_dir: str | os.PathLike | None = None, out_dir: str | os.PathLike | None = None, *,
              nulls: pd.DataFrame | None = None, claims=None, allow_partial: bool | None = None
              ) -> dict[str, pd.DataFrame]:
    """Load and validate a published directory, run every finding and the audit, and (if `out_dir`) write the
    CSVs. Returns the tables as DataFrames keyed by CSV stem; `audit` holds the five contract columns, the richer
    audit (finding, source, id) is `audit_detail` (not written). An incomplete copy of the authors' files is
    refused unless `allow_partial` (`load_published`); then `partial.csv` lists the files the tables lack (and a
    complete run removes a stale one)."""
    data = load_published(published_dir, allow_partial=allow_partial)
    tables = findings_tables(data.table, nulls=nulls)
    if "spectral_topk" in tables:  # the authors' own counts beside ours, and against the base rate
        tables["spectral_topk"] = spectral_topk_table(data.table, data.topk)
        tables["spectral_topk_enrichment"] = K.topk_enrichment(tables["spectral_topk"], data.table)
    if data.partial:
        tables["partial"] = pd.DataFrame({"missing_file": list(data.missing)})
    elif out_dir is not None:
        (Path(out_dir) / "partial.csv").unlink(missing_ok=True)
    # --- issue 21: every threshold-dependent claim over the grid of bars and rules (robustness.csv)
    tables["robustness"] = F.robustness_table(data.table)
    # --- issue 29: a verdict per claim, panel and item (verdicts.csv)
    tables["verdicts"] = V.claim_verdicts(tables["robustness"], C.lead_null_tests(tables.get("f5_lead_null")))
    # ---
    tables["greater_than"] = greater_than_table(data)
    result = run_audit(data.table, claims=claims, published=data, nulls=nulls)
    tables["audit"] = result.table[AUDIT_COLUMNS]
    tables["audit_unverified"] = result.unverified[UNVERIFIED_COLUMNS + ["finding", "source"]]
    if out_dir is not None:
        write_tables(tables, out_dir)
    tables["audit_detail"] = result.table
    return tables


# ----------------------------------------------------------------------- the greater-than extension task (issue 23)
GREATER_THAN_COLUMNS = ["model", "condition", "label", "drawn_for", "n_ablated", "heads", "heads_outside_model",
                        "n_examples", "top1_above", "top1_above_lo", "top1_above_hi", "prob_above", "prob_below",
                        "logit_diff_above_below"]


def greater_than_table(data) -> pd.DataFrame:
    """The authors' greater-than ablations (`ablation/*_gt_ablation.json`, one file per model) as one table: a row
    per model and condition (GREATER_THAN_COLUMNS). top1_above (the share of the file's n_examples prompts whose
    top-1 next token is a year above the start year) gets its 95% Wilson interval on n_examples (read from each
    file). drawn_for: the head set a control row was drawn for (`published_ablations.authors_ablation`).
    heads_outside_model: how many of the ablated heads the model does not have (a layer or head index beyond its
    grid in the per-revision files): zeroing such a head changes nothing. `data`: `load_published(...)`."""
    from circuitdev.analysis.uncertainty import binomial_intervals
    from circuitdev.sources.published_panels import PUBLISHED_PANELS
    from circuitdev.sources.published_ablations import authors_ablation

    grid = data.table.groupby("panel")[["layer", "head"]].max() + 1 if len(data.table) else pd.DataFrame()
    parts = []
    models = set(data.ablation["model"]) if len(data.ablation) else set()
    for model in [m for m in PUBLISHED_PANELS if m in models]:
        ab = authors_ablation(data.ablation, model, task="greater-than")
        if ab.empty:
            continue
        layers, heads = (int(grid.loc[model, c]) if model in grid.index else None for c in ("layer", "head"))
        outside = [None if layers is None else sum(l >= layers or h >= heads for l, h in
                                                   map(parse_head, str(names).split()))
                   for names in ab["heads"]]
        parts.append(binomial_intervals(ab, "top1_above", "n_examples").assign(model=model,
                                                                               heads_outside_model=outside))
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=GREATER_THAN_COLUMNS)
    return out.reindex(columns=GREATER_THAN_COLUMNS)


def write_tables(tables: dict[str, pd.DataFrame], out_dir: str | os.PathLike) -> list[Path]:
    """One CSV per table, each written atomically (`circuitdev.atomic`)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, table in tables.items():
        buffer = io.StringIO()
        table.to_csv(buffer, index=False)
        path = out / f"{name}.csv"
        write_atomic(path, buffer.getvalue())
        paths.append(path)
    return paths
