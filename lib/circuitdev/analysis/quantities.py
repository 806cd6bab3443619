"""The registry of quantities the audit re-derives claims with: `QUANTITIES[name](ctx, **params)`.

A quantity computes one number (or list, or string) from an `AuditContext` -- a developmental table plus, for the
published source, the run metadata, ablations and an optional F6 null table -- using the findings functions, and may
return `(value, context)` where context says where the value came from, or `(value, context, bound)` where the value
is censored ("upper" / "lower" / "none", as `f3_milestones` says; "exact" otherwise). `Unverifiable` means the data
cannot decide
the claim (no such revision, no null draws, no definition); its `data_value` may still say what the data give.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable

import numpy as np
import pandas as pd

from circuitdev.analysis import findings as F
from circuitdev.analysis.claims import CLAIMS_PATH, NEVER, Claim, decimals_of, read_claims
from circuitdev.analysis.findings import f5_pr_lead as P
from circuitdev.errors import ConfigError
from circuitdev.schema import parse_head, sel_column
from circuitdev.sources.published import PublishedData
from circuitdev.sources.published_panels import tokens_b_for_step

class Unverifiable(Exception):
    """The data cannot decide this claim; `data_value` may still carry what the data say under our definitions."""

    def __init__(self, reason: str, data_value: Any = None):
        super().__init__(reason)
        self.data_value = data_value


@dataclass
class AuditContext:
    dev: pd.DataFrame  # the developmental table (any source)
    published: PublishedData | None = None  # run metadata and ablations (published source only)
    nulls: pd.DataFrame | None = None  # F6 null-selectivity table (findings.NULL_COLUMNS + panel)
    _memo: dict = field(default_factory=dict, repr=False)

    @cached_property
    def revisions(self) -> pd.DataFrame:
        return F.revisions(self.dev)

    @cached_property
    def _by_panel(self) -> dict[str, pd.DataFrame]:
        return {str(p): g for p, g in self.dev.groupby("panel", sort=False)}

    def panel_rows(self, panel: str) -> pd.DataFrame:
        if panel not in self._by_panel:
            raise Unverifiable(f"no data for panel {panel!r} in this source")
        return self._by_panel[panel]

    @cached_property
    def _revisions_of(self) -> dict[str, list[dict]]:
        return {str(p): g.to_dict("records") for p, g in self.revisions.groupby("panel", sort=False)}

    def revision(self, panel: str, revision: str | None = None, tokens_b: float | None = None) -> dict:
        """One row of `revisions`: by label, by "final", or by the revision whose tokens round to `tokens_b`."""
        self.panel_rows(panel)
        revs = self._revisions_of[panel]
        if revision == "final":
            return revs[-1]
        if revision is not None:
            hit = [r for r in revs if r["revision"] == revision]
            if not hit:
                raise Unverifiable(f"revision {revision} is not in the {panel} data")
            return hit[0]
        if tokens_b is None:
            raise ConfigError("a revision selector (revision or tokens_b) is required")
        d = decimals_of(tokens_b)
        hit = [r for r in revs if abs(round(r["tokens_b"], d) - tokens_b) < 1e-9]
        if len(hit) != 1:
            raise Unverifiable(f"{len(hit)} {panel} revisions have tokens rounding to {tokens_b}B")
        return hit[0]

    @cached_property
    def _by_revision(self) -> dict[tuple[str, str], pd.DataFrame]:
        return {(str(p), str(r)): g for (p, r), g in self.dev.groupby(["panel", "revision"], sort=False)}

    def at(self, panel: str, revision: str | None = None, tokens_b: float | None = None) -> pd.DataFrame:
        """The table's rows at one revision of a panel (see `revision` for the selectors)."""
        return self._by_revision[panel, self.revision(panel, revision, tokens_b)["revision"]]

    def memo(self, key: tuple, compute: Callable[[], Any]) -> Any:
        """Findings tables reused across claims and threshold sweeps (e.g. one recall table per panel and tau)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def need_published(self, what: str) -> PublishedData:
        if self.published is None:
            raise Unverifiable(f"{what} exists only in the published files' metadata")
        return self.published


# -------------------------------------------------------------------------------------------------- the quantities

Quantity = Callable[..., Any]
QUANTITIES: dict[str, Quantity] = {}


def quantity(fn: Quantity) -> Quantity:
    QUANTITIES[fn.__name__] = fn
    return fn


def load_claims(path=CLAIMS_PATH) -> list[Claim]:
    """The claims file (`claims.read_claims`) with every claim checked against this registry: a known quantity and
    the parameters its signature takes; ConfigError names the claim and the field."""
    return read_claims(path, check=_check)


def _check(claim: Claim, where: str) -> None:
    if claim.quantity not in QUANTITIES:
        raise ConfigError(f"{where}: field 'quantity': unknown {claim.quantity!r}; known: {sorted(QUANTITIES)}")
    parameters = inspect.signature(QUANTITIES[claim.quantity]).parameters
    accepted = set(parameters) - {"ctx"}
    unknown = set(claim.params) - accepted
    if unknown:
        raise ConfigError(f"{where}: unknown parameter(s) {sorted(unknown)} for quantity {claim.quantity!r}; "
                          f"it takes {sorted(accepted)}")
    required = {n for n, p in parameters.items() if p.default is inspect.Parameter.empty} - {"ctx"}
    missing = sorted(required - set(claim.params))
    if missing:
        raise ConfigError(f"{where}: quantity {claim.quantity!r} needs parameter(s) {missing}")


def _rev_label(ctx, panel, revision=None, tokens_b=None) -> str:
    return ctx.revision(panel, revision, tokens_b)["revision"]


def _head(head: str, rows: pd.DataFrame) -> pd.Series:
    layer, h = parse_head(head)
    hit = rows[(rows["layer"] == layer) & (rows["head"] == h)]
    if hit.empty:
        raise Unverifiable(f"head {head} is not in the data")
    return hit.iloc[0]


@quantity
def layer_counts(ctx, panel, revision=None, tokens_b=None, threshold=30.0, rule="per-class"):
    """BOS-class heads per layer at a revision (list over layers)."""
    rows = ctx.at(panel, revision, tokens_b)
    return F.layer_counts(rows, threshold=threshold, rule=rule)["n"].tolist()


@quantity
def layer_count(ctx, panel, layer, revision=None, tokens_b=None, threshold=30.0, rule="per-class"):
    """BOS-class heads in one layer at a revision."""
    counts = layer_counts(ctx, panel, revision, tokens_b, threshold, rule)
    if not 0 <= int(layer) < len(counts):
        raise Unverifiable(f"{panel} has no layer {layer} in this source")
    return counts[int(layer)]


@quantity
def floor_max(ctx, panel, layers=(0, 1), threshold=30.0, rule="per-class"):
    """Most BOS-class heads in `layers` at any revision of the panel ("all": over every panel)."""
    dev = ctx.dev if panel == "all" else ctx.panel_rows(panel)
    floor = F.floor_check(dev, layers=layers, threshold=threshold, rule=rule)
    broken = floor[~floor["holds"]]
    where = "broken at " + ", ".join(f"{p} {r}" for p, r in zip(broken["panel"], broken["revision"])) \
        if len(broken) else f"holds at all {len(floor)} runs"
    return int(floor["n_floor"].max()), where


@quantity
def bos_count(ctx, panel, revision=None, tokens_b=None, threshold=30.0, rule="per-class"):
    """Heads with first-token >= threshold at a revision."""
    return int(F.head_mask(ctx.at(panel, revision, tokens_b), F.BOS, threshold=threshold, rule=rule).sum())


@quantity
def bos_pct(ctx, panel, revision=None, tokens_b=None, threshold=30.0, rule="per-class"):
    """Whole-model BOS fraction (%) at a revision."""
    rows = ctx.at(panel, revision, tokens_b)
    n = int(F.head_mask(rows, F.BOS, threshold=threshold, rule=rule).sum())
    return 100 * n / len(rows), f"{n}/{len(rows)} heads at {rows['revision'].iloc[0]}"


@quantity
def bos_jump_pp(ctx, panel, from_tokens_b, to_tokens_b, threshold=30.0):
    """BOS-fraction change (pp) between two revisions."""
    return bos_pct(ctx, panel, tokens_b=to_tokens_b, threshold=threshold)[0] - \
        bos_pct(ctx, panel, tokens_b=from_tokens_b, threshold=threshold)[0]


@quantity
def largest_jump_tokens(ctx, panel, threshold=30.0):
    """Tokens (B) of the two revisions around the largest BOS-fraction jump."""
    shape = F.trajectory_shape(F.bos_fraction(ctx.panel_rows(panel), threshold=threshold)).iloc[0]
    return [shape["jump_from_tokens_b"], shape["jump_to_tokens_b"]], \
        f"+{shape['largest_jump_pp']:.1f} pp = {shape['jump_share']:.0%} of the total rise ({shape['shape']})"


@quantity
def final_bos_gap_pp(ctx, panels, threshold=30.0):
    """Final BOS fraction of panels[0] minus panels[1] (pp)."""
    a, b = (bos_pct(ctx, p, revision="final", threshold=threshold)[0] for p in panels)
    return a - b, f"{a:.1f}% - {b:.1f}%"


@quantity
def bos_pct_max_through(ctx, panel, through_tokens_b, threshold=30.0):
    """Highest BOS fraction (%) over the revisions up to `through_tokens_b`."""
    frac = F.bos_fraction(ctx.panel_rows(panel), threshold=threshold)
    frac = frac[frac["tokens_b"] <= through_tokens_b + 1e-9]
    top = frac.loc[frac["bos_fraction"].idxmax()]
    return 100 * top["bos_fraction"], f"{top['n_bos']} head(s) at {top['revision']}"


@quantity
def milestone_tokens(ctx, panel, milestone, threshold=None, sustained=False):
    """Tokens (B) of the first revision reaching an F3 milestone, or "never"."""
    table = ctx.memo(("milestones", panel, milestone, threshold, sustained), lambda: F.milestones(
        ctx.panel_rows(panel), specs=[F.milestone(milestone, threshold=threshold)], sustained=sustained))
    row = table.iloc[0]  # reached at the first probed revision: an upper bound (f3_milestones' censoring)
    return (NEVER, "never reached") if pd.isna(row["revision"]) else (row["tokens_b"], row["revision"], row["bound"])


@quantity
def milestone_gap_ratio(ctx, panel, start, end, threshold=None):
    """Token ratio between two F3 milestones (end / start)."""
    table = F.milestones(ctx.panel_rows(panel), specs=[F.milestone(start, threshold=threshold), F.milestone(end)])
    gap = F.milestone_gap(table, start=start, end=end).iloc[0]
    if not np.isfinite(gap["token_ratio"]):
        return NEVER, "a milestone is never reached"
    return gap["token_ratio"], f"{gap['end_tokens_b']:g}B / {gap['start_tokens_b']:g}B", gap["bound"]


def _circuit(ctx, panel, revision, tokens_b, threshold, head_class, rule) -> list[str]:
    rows = ctx.at(panel, revision, tokens_b)
    hit = rows[F.head_mask(rows, head_class, threshold=threshold, rule=rule)]
    return [F.head_name(l, h) for l, h in sorted(zip(hit["layer"], hit["head"]))]


@quantity
def circuit_heads(ctx, panel, threshold, revision=None, tokens_b=None, head_class="induction", rule="per-class"):
    """Heads with sel_c >= threshold at a revision (compared as a set)."""
    return _circuit(ctx, panel, revision, tokens_b, threshold, head_class, rule)


@quantity
def circuit_size(ctx, panel, threshold, revision=None, tokens_b=None, head_class="induction", rule="per-class"):
    """Number of heads with sel_c >= threshold at a revision."""
    heads = _circuit(ctx, panel, revision, tokens_b, threshold, head_class, rule)
    return len(heads), " ".join(heads) if len(heads) <= 12 else f"{' '.join(heads[:12])} ..."


@quantity
def head_selectivity(ctx, panel, head=None, head_class=None, revision=None, tokens_b=None, key=None):
    """One head's selectivity; `key` = "revision/head/class" or the separate parameters."""
    if key is not None:
        revision, head, head_class = key.split("/")
    return float(_head(head, ctx.at(panel, revision, tokens_b))[sel_column(head_class)])


@quantity
def max_selectivity(ctx, panel, head_class, revision=None, tokens_b=None):
    """Largest selectivity of a class over all heads at a revision."""
    rows = ctx.at(panel, revision, tokens_b)
    top = rows.loc[rows[sel_column(head_class)].idxmax()]
    return float(top[sel_column(head_class)]), F.head_name(top["layer"], top["head"])


@quantity
def count_above(ctx, panel, head_class, threshold, revision=None, tokens_b=None):
    """Heads with sel_c strictly above `threshold` at a revision."""
    return int((ctx.at(panel, revision, tokens_b)[sel_column(head_class)] > threshold).sum())


def _recall_row(ctx, panel, level_pct, threshold):
    recall = ctx.memo(("recall", panel, threshold),
                      lambda: F.circuit_recall(ctx.panel_rows(panel), threshold=threshold))
    level = {33: 1 / 3, 67: 2 / 3}.get(int(level_pct), level_pct / 100)
    row = ctx.memo(("recall_level", panel, threshold, level),
                   lambda: F.recall_milestones(recall, levels=[level]).iloc[0])
    return row, recall


@quantity
def recall_tokens(ctx, panel, level_pct, threshold=50.0):
    """Tokens (B) of the first revision where recall of the final circuit reaches level_pct (33 = 1/3, 67 = 2/3)."""
    row, recall = _recall_row(ctx, panel, level_pct, threshold)
    if pd.isna(row["revision"]):
        return NEVER, "never reached"
    hit = recall[recall["revision"] == row["revision"]].iloc[0]
    return (row["tokens_b"], f"{row['revision']}: {hit['n_found']}/{hit['n_circuit']} heads ({hit['found']})",
            F.first_hit_bound(row["revision_index"], float(recall["tokens_b"].iloc[0])))


@quantity
def recall_token_pct(ctx, panel, level_pct, threshold=50.0):
    """Share of training (%) at the first revision where recall reaches level_pct."""
    row, recall = _recall_row(ctx, panel, level_pct, threshold)
    if pd.isna(row["revision"]):
        return NEVER, "never reached"
    return (100 * row["token_fraction"], f"{row['revision']} ({row['tokens_b']:g}B)",
            F.first_hit_bound(row["revision_index"], float(recall["tokens_b"].iloc[0])))


@quantity
def head_pr(ctx, panel, head, revision=None, tokens_b=None):
    """One head's participation ratio at a revision."""
    value = float(_head(head, ctx.at(panel, revision, tokens_b))["pr"])
    if not math.isfinite(value):
        raise Unverifiable(f"no PR for {head} at this revision (no trajectory)")
    return value


@quantity
def pr_feature(ctx, panel, key):
    """A static PR feature ("L3H6/integral", spread, final_pr, max_pr, min_pr) recomputed from the trajectory."""
    head, feature = key.split("/")
    feats = P.pr_features(ctx.panel_rows(panel))
    return float(_head(head, feats)[feature])


@quantity
def pr_lead_checkpoints(ctx, head_class, panel=None):
    """PR lead over formation: always unverifiable (the paper defines no "elevated"); reports our default rule."""
    dev = ctx.dev if panel is None else ctx.panel_rows(panel)
    if dev["pr"].isna().all():
        raise Unverifiable("no PR trajectories in this source")
    lead = P.pr_lead(dev, head_class=head_class)
    summary = "; ".join(f"{p}: median {g.median():g} (range {g.min():g} to {g.max():g}, {g.count()} heads)"
                        for p, g in lead.groupby("panel", sort=False)["lead_checkpoints"])
    raise Unverifiable("the paper gives no definition of 'PR is elevated'; value under findings.pr_lead's default "
                       "(PR-1 >= 0.5 x its peak); see f5_lead_sensitivity.csv", summary)


@quantity
def null_stat(ctx, panel, stat, revision=None):
    """A null-selectivity statistic (null_p99, null_max, real_max, k_above) from the F6 null table."""
    if ctx.nulls is None or len(ctx.nulls) == 0:
        raise Unverifiable("no null-selectivity draws: the published folder holds none; run the null calibration "
                           "and pass its table (`--nulls`)")
    nulls = ctx.nulls if "panel" not in ctx.nulls.columns else ctx.nulls[ctx.nulls["panel"] == panel]
    label = _rev_label(ctx, panel, "final") if revision == "final" else revision
    hit = nulls[nulls["revision"] == label]
    if hit.empty:
        raise Unverifiable(f"no null draws for {panel} at {label}")
    return float(hit.iloc[0][stat])


@quantity
def revision_meta_min(ctx, panel, field):
    """Smallest value of a per-revision file field (n_examples_valid, top_k, ...) over the panel's revisions."""
    meta = ctx.need_published(field).revisions
    values = meta.loc[meta["panel"] == panel, field].dropna()
    if values.empty:
        raise Unverifiable(f"no {field} in the {panel} per-revision files")
    return values.min().item(), f"over {len(values)} files"


@quantity
def trajectory_meta(ctx, panel, field):
    """A field of the panel's PR-trajectory file (n_examples, dtype, ...)."""
    meta = ctx.need_published(field).trajectories
    hit = meta[meta["panel"] == panel] if len(meta) else meta
    if hit.empty or pd.isna(hit.iloc[0].get(field)):
        raise Unverifiable(f"no {field} in a {panel} PR trajectory")
    value = hit.iloc[0][field]
    return value.item() if hasattr(value, "item") else value


@quantity
def ablation_top1_pct(ctx, key, task="induction"):
    """Top-1 accuracy (%) of an ablation condition; key = "model/condition prefix/number of heads ablated"."""
    model, prefix, n = key.split("/")
    ab = ctx.need_published("ablation").ablation
    hit = ab[(ab["model"] == model) & (ab["task"] == task) & ab["condition"].str.startswith(prefix)
             & (ab["n_ablated"] == int(n)) & (ab["metric"] == "acc_top1")]
    if hit.empty:
        raise Unverifiable(f"no {task} ablation '{prefix}*' with {n} heads for {model} in the published files")
    row = hit.iloc[0]
    return 100 * row["value"], f"{row['file']}: {row['condition']} {row['heads']}".rstrip()


@quantity
def n_revisions(ctx, panel):
    """Number of revisions of the panel in the data."""
    return int((ctx.revisions["panel"] == panel).sum()) or _no_panel(panel)


def _no_panel(panel):
    raise Unverifiable(f"no data for panel {panel!r} in this source")


@quantity
def has_revision(ctx, key):
    """Whether "model/revision" is among the runs."""
    panel, revision = key.split("/")
    ctx.panel_rows(panel)
    return bool(((ctx.revisions["panel"] == panel) & (ctx.revisions["revision"] == revision)).any())


@quantity
def step_tokens_b(ctx, key):
    """Tokens (B) of "model/step" by the model's tokens-per-step rule."""
    panel, step = key.split("/")
    return tokens_b_for_step(panel, int(step))


@quantity
def revision_tokens_b(ctx, panel, revision=None):
    """Tokens (B) the data assign to a revision."""
    rev = ctx.revision(panel, revision)
    return float(rev["tokens_b"]), rev["revision"]
