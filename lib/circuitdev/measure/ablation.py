"""Group ablations as causal checks (method reference §5): knock heads out at W_O's input, read the query's logits.

A head set is a spec `{layer: [heads]}`. Zero ablation (the paper's only mode) sets the head's slice of the output
projection's input to 0 at every position; mean ablation (a variant) sets it to the head's mean output over the
evaluation batch and positions, which keeps the residual stream's scale.

`circuit_conditions` is the one place a circuit's control groups are drawn (no ablation, the circuit, matched random
groups, any-layer groups, whole layers): `circuitdev ablate`, the model pages and the ablation over training all
take their rows from it. `condition_outcomes` scores any number of head sets in the same batched forwards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import count
from typing import Literal

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from nnsight import NNsight

from circuitdev.measure.batch import InductionBatch
from circuitdev.measure.capture import as_token_tensor, chunks, envoy
from circuitdev.errors import ConfigError
from circuitdev.measure.classify import spec_labels
from circuitdev.measure.families import Layout, family_of
from circuitdev.schema import MATCHED_RANDOM_SEED, AblationMode

HeadSpec = dict[int, list[int]]


def check_spec(spec: HeadSpec, layout: Layout) -> HeadSpec:
    clean: HeadSpec = {}
    for layer, heads in spec.items():
        layer = int(layer)
        if not 0 <= layer < layout.n_layers:
            raise ConfigError(f"layer {layer} in the head set is outside the model's {layout.n_layers} layers")
        bad = [h for h in heads if not 0 <= int(h) < layout.n_heads]
        if bad:
            raise ConfigError(f"heads {bad} of layer {layer} are outside the model's {layout.n_heads} heads")
        clean[layer] = sorted({int(h) for h in heads})
    return clean


def n_heads_in(spec: HeadSpec) -> int:
    return sum(len(h) for h in spec.values())


def head_means(model: torch.nn.Module, batch: InductionBatch, *, layout: Layout, batch_size: int = 8) -> torch.Tensor:
    """(L, H * d_head) mean of W_O's input over all sequences and positions: what mean ablation writes in."""
    ids = as_token_tensor(batch.tokens, model)
    wrapped = NNsight(model)
    total = torch.zeros(layout.n_layers, layout.n_heads * layout.head_dim, dtype=torch.float64)
    with torch.no_grad():
        for sl in chunks(ids.shape[0], batch_size):
            sums: list = []
            with wrapped.trace(input_ids=ids[sl]):
                for layer in range(layout.n_layers):
                    z = envoy(wrapped, layout.out_proj_path(layer)).input  # (B, T, H * d_head)
                    sums.append(z.double().sum(dim=(0, 1)).save())
            total += torch.stack([s.cpu() for s in sums])
    return (total / ids.numel()).float()


@dataclass(frozen=True)
class QueryOutcomes:
    """Per sequence at the query, for one condition: what `metrics` and the ablation tables reduce."""

    correct: torch.Tensor  # (N,) bool: the top-1 token is the target B
    top5: torch.Tensor  # (N,) bool: the target is among the top 5
    loss: torch.Tensor  # (N,) fp32 cross-entropy of the target
    logit_b: torch.Tensor  # (N,) fp32 logit of the target


def condition_outcomes(
    model: torch.nn.Module,
    batch: InductionBatch,
    specs: list[HeadSpec],
    *,
    mode: AblationMode = "zero",
    means: torch.Tensor | None = None,
    layout: Layout | None = None,
    batch_size: int = 8,
    logits: bool = False,
) -> list[QueryOutcomes] | list[torch.Tensor]:
    """Every head set of `specs` ablated on the whole batch, each layer computed once per distinct history.

    Per block of `batch_size` sequences, the conditions run as a prefix tree (`measure.condition_tree`): a
    condition that ablates what an earlier one (or nothing) ablates below layer g starts at g from what that
    forward kept there -- the layers below are not computed again, nor layer g's attention (its z is the same;
    only the heads masked at W_O's input differ), nor, in a parallel block (GPT-NeoX), layer g's MLP. A per-row
    head mask on W_O's input (0, or the head's mean for mode "mean") ablates; the conditions branching at the same
    layer from the same parent are stacked condition-major in chunks of `batch_size` rows. Only the query's output
    is computed where nothing reads the other positions: the logits (`logits_to_keep`) and the last layer's MLP,
    the query being the last position. Equal to one condition at a time (tests/test_ablation_batched.py: logits
    within 1e-6, top-1 identical). Returns one QueryOutcomes per spec, or with `logits=True` the (N, V) fp32
    logits at the query per spec."""
    from circuitdev.measure.condition_tree import HeadMask, branch_plan, condition_keys, run_branches

    layout = layout or family_of(model)
    specs = [check_spec(s or {}, layout) for s in specs]
    if mode not in ("zero", "mean"):
        raise ConfigError(f"unknown ablation mode {mode!r}; use 'zero' (the paper) or 'mean'")
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    if mode == "mean" and any(specs) and means is None:
        means = head_means(model, batch, layout=layout, batch_size=batch_size)
    ids = as_token_tensor(batch.tokens, model)
    keep = torch.ones(len(specs), layout.n_layers, layout.n_heads, dtype=torch.bool)  # (C, L, H): False = ablated
    for c, spec in enumerate(specs):
        for layer, heads in spec.items():
            keep[c, layer, heads] = False
    plan = branch_plan(condition_keys(keep))
    keep_last = batch.query == ids.shape[1] - 1  # the usual case: only the last position's output is computed

    def query_logits_of(rows_ids: torch.Tensor) -> torch.Tensor:  # (B, V) fp32
        output = model(input_ids=rows_ids, logits_to_keep=1 if keep_last else 0)
        return output.logits[:, -1 if keep_last else batch.query].float().cpu()

    out: list[list[torch.Tensor]] = [[] for _ in specs]
    fill = means if mode == "mean" else None
    with HeadMask(model, layout, keep, fill=fill, query_only=keep_last) as mask, torch.no_grad():
        for block in chunks(ids.shape[0], batch_size):
            per_condition = run_branches(mask, plan, ids[block], batch_size=batch_size, query_logits=query_logits_of)
            for c in range(len(specs)):
                out[c].append(per_condition[c])
    per_spec = [torch.cat(parts) for parts in out]
    if logits:
        return per_spec
    target = torch.as_tensor(np.asarray(batch.target), dtype=torch.long)
    return [_outcomes(lq, target) for lq in per_spec]


def _outcomes(logits: torch.Tensor, target: torch.Tensor) -> QueryOutcomes:
    top5 = logits.topk(min(5, logits.shape[-1]), dim=-1).indices
    return QueryOutcomes(correct=top5[:, 0] == target, top5=(top5 == target[:, None]).any(-1),
                         loss=F.cross_entropy(logits, target, reduction="none"),
                         logit_b=logits[torch.arange(len(target)), target])


def query_logits(
    model: torch.nn.Module,
    batch: InductionBatch,
    spec: HeadSpec | None = None,
    *,
    mode: AblationMode = "zero",
    means: torch.Tensor | None = None,
    layout: Layout | None = None,
    batch_size: int = 8,
) -> torch.Tensor:
    """(N, V) fp32 logits at the query with the heads of `spec` ablated (none: a plain forward); one condition of
    `condition_outcomes`."""
    return condition_outcomes(model, batch, [spec or {}], mode=mode, means=means, layout=layout,
                              batch_size=batch_size, logits=True)[0]


def outcome_metrics(o: QueryOutcomes) -> dict[str, float]:
    """loss, acc_top1, acc_top5, mean_logit_B of one condition's per-sequence outcomes (as `metrics`)."""
    return {"loss": float(o.loss.mean()), "acc_top1": float(o.correct.float().mean()),
            "acc_top5": float(o.top5.float().mean()), "mean_logit_B": float(o.logit_b.mean())}


def metrics(logits: torch.Tensor, target) -> dict[str, float]:
    """loss (mean cross-entropy of the target B), acc_top1, acc_top5, mean_logit_B — the paper's four."""
    return outcome_metrics(_outcomes(logits.float(), torch.as_tensor(target)))


def evaluate(model: torch.nn.Module, batch: InductionBatch, spec: HeadSpec | None = None, **kwargs) -> dict[str, float]:
    """Next-token metrics at the query with `spec` ablated; keyword arguments as `query_logits`."""
    return outcome_metrics(condition_outcomes(model, batch, [spec or {}], **kwargs)[0])


def matched_random(spec: HeadSpec, n_heads: int, *, seed: int = MATCHED_RANDOM_SEED) -> HeadSpec:
    """Same layers and per-layer counts as `spec`, drawn from the other heads of each layer (count capped by how many
    there are). One RandomState(seed) is drawn sequentially over the layers in the spec's order, as the authors do."""
    rng = np.random.RandomState(seed)
    out: HeadSpec = {}
    for layer, heads in spec.items():
        eligible = [h for h in range(n_heads) if h not in set(heads)]
        k = min(len(heads), len(eligible))
        if k:
            out[int(layer)] = sorted(int(h) for h in rng.choice(eligible, size=k, replace=False))
    return out


@dataclass(frozen=True)
class MatchedGroups:
    """Distinct matched random groups of a head set (`matched_random_groups`)."""

    groups: list[tuple[int, HeadSpec]]  # (seed, group): the seed's `matched_random` draw, duplicates left out
    full_layers: list[int]  # layers of the set with no head outside it: no random head there (scope "layer")
    short_layers: dict[int, tuple[int, int]]  # layer -> (heads of the set, heads outside) where fewer are outside
    possible: int  # how many distinct groups exist (0 when no layer has a head outside the set)

    @property
    def n_heads(self) -> int:
        """Heads per random group (fewer than in the set where layers are full or short)."""
        return n_heads_in(self.groups[0][1]) if self.groups else 0


def matched_random_groups(spec: HeadSpec, n_heads: int, n_groups: int, *, seed: int = MATCHED_RANDOM_SEED,
                          scope: Literal["layer", "any"] = "layer", n_layers: int | None = None,
                          max_draws: int = 1000) -> MatchedGroups:
    """Up to `n_groups` DISTINCT random control groups of `spec`, heads always drawn outside `spec`, one draw per
    seed s = seed, seed + 1, ... (a group equal to an earlier one skipped) until n_groups are found, every possible
    group is found, or `max_draws` seeds were tried.

    scope="layer" (the paper's matched random): `matched_random(spec, seed=s)` -- the same layers and per-layer
    counts (the first group is the paper's draw); a layer the set fills has no head to draw and is listed in
    `full_layers` instead of being ablated as nothing, a layer with fewer heads outside than inside in
    `short_layers`. scope="any": as many heads as `spec` holds, drawn from every head of the model's `n_layers`
    layers outside it, whatever their layer -- a control that exists when the set fills its layers (small models).
    Use it for a mean over random controls; `matched_random` for the paper's single control."""
    if n_groups < 1:
        raise ConfigError(f"n_groups must be >= 1 random groups, got {n_groups}")
    full, short, possible = [], {}, 1
    if scope == "layer":
        for layer, heads in spec.items():
            outside = n_heads - len(set(heads))
            if outside == 0:
                full.append(int(layer))
            elif outside < len(heads):
                short[int(layer)] = (len(heads), outside)
            possible *= math.comb(outside, min(len(heads), outside)) if outside else 1
        if len(full) == len(spec):  # nothing to draw anywhere
            return MatchedGroups([], sorted(full), short, 0)
        draw = lambda s: matched_random(spec, n_heads, seed=s)  # noqa: E731
    elif scope == "any":
        if n_layers is None:
            raise ConfigError("scope='any' needs n_layers (the model's layer count) to know the heads outside")
        inside = {(int(l), int(h)) for l, hs in spec.items() for h in hs}
        pool = [(l, h) for l in range(n_layers) for h in range(n_heads) if (l, h) not in inside]
        k = min(len(inside), len(pool))
        possible = math.comb(len(pool), k) if k else 0
        if not possible:
            return MatchedGroups([], [], {}, 0)

        def draw(s: int) -> HeadSpec:
            picked = sorted(pool[i] for i in np.random.RandomState(s).choice(len(pool), size=k, replace=False))
            out: HeadSpec = {}
            for l, h in picked:
                out.setdefault(l, []).append(h)
            return out
    else:
        raise ConfigError(f"unknown scope {scope!r}; use 'layer' (the paper's matched random) or 'any'")
    groups: list[tuple[int, HeadSpec]] = []
    for s in count(seed):
        group = draw(s)
        if all(group != g for _, g in groups):
            groups.append((s, group))
        if len(groups) >= min(n_groups, possible) or s - seed + 1 >= max_draws:
            break
    return MatchedGroups(groups, sorted(full), short, possible)


def upper_bound(spec: HeadSpec, n_heads: int) -> HeadSpec:
    """Every head of the layers the spec touches."""
    return {int(layer): list(range(n_heads)) for layer in spec}


@dataclass(frozen=True)
class Condition:
    """One row of a circuit's ablation: which heads are zeroed and what the row is."""

    condition: str  # baseline | screen (the circuit) | matched_random | random_any | upper_bound
    label: str  # the heads zeroed, in words
    drawn_for: str  # the head set a control was drawn for ("" for the baseline and the circuit)
    seed: int | None  # the draw's seed (random controls)
    spec: HeadSpec | None  # None: a control that cannot be drawn (the note says why); {}: nothing ablated
    note: str = ""


@dataclass(frozen=True)
class CircuitConditions:
    """The conditions of a circuit's ablation (`circuit_conditions`): the rows and the control groups they hold."""

    circuit: HeadSpec
    matched: MatchedGroups  # matched random groups: the circuit's layers and per-layer counts, heads outside it
    anywhere: MatchedGroups  # as many heads as the circuit, from any layer outside it
    conditions: list[Condition]
    note: str  # where the matched groups cannot match the circuit (full or short layers); "" when they can

    def measured(self) -> list[Condition]:
        """The conditions with heads to evaluate (`spec` not None), in row order."""
        return [c for c in self.conditions if c.spec is not None]


def circuit_conditions(spec: HeadSpec, *, n_layers: int, n_heads: int, n_groups: int,
                       seed: int = MATCHED_RANDOM_SEED, label: str = "induction circuit",
                       upper: bool = True) -> CircuitConditions:
    """THE conditions of a circuit's ablation -- the one place its control groups are drawn, so that `circuitdev
    ablate`, the model pages and the ablation over training report the same controls. Rows in order: no ablation;
    the circuit (`label`); up to `n_groups` distinct matched random groups (`matched_random_groups`, scope
    "layer": its layers and per-layer counts, heads outside it, seeds `seed`, `seed` + 1, ...), or one row with no
    heads saying why there is none; up to `n_groups` distinct groups of as many heads from any layer outside it
    (scope "any"); with `upper`, every head of its layers. A layer the circuit fills has no head to draw: the
    matched rows' note says so (and where a layer holds fewer heads outside than in it) instead of ablating
    nothing there."""
    layer = matched_random_groups(spec, n_heads, n_groups, seed=seed)
    anywhere = matched_random_groups(spec, n_heads, n_groups, seed=seed, scope="any", n_layers=n_layers)
    full = f"layer(s) {', '.join(map(str, layer.full_layers))} hold no head outside the circuit"
    short = "; ".join(f"layer {l} holds {outside} head{'s' * (outside != 1)} outside the circuit against {inside} "
                      f"in it: the control draws {outside} there" for l, (inside, outside) in layer.short_layers.items())
    note = "; ".join([f"{full}: those layers are left out"] * bool(layer.full_layers) + [short] * bool(short))
    rows = [Condition("baseline", "no ablation", "", None, {}), Condition("screen", label, "", None, spec)]
    if spec:
        rows += [Condition("matched_random", "matched random set", label, s, g, note) for s, g in layer.groups]
        if not layer.groups:
            rows.append(Condition("matched_random", "matched random set", label, None, None, f"not possible: {full}"))
        rows += [Condition("random_any", "random heads from any layer", label, s, g) for s, g in anywhere.groups]
        if upper:
            rows.append(Condition("upper_bound", "whole layers (upper bound)", label, None, upper_bound(spec, n_heads)))
    return CircuitConditions(spec, layer, anywhere, rows, note if spec else "")


ABLATION_SUITE_COLUMNS = ["condition", "label", "drawn_for", "seed", "n_ablated", "heads", "spec", "mode", "n",
                          "acc_top1", "acc_top5", "loss", "mean_logit_B", "note"]


def ablation_suite(
    model: torch.nn.Module,
    batch: InductionBatch,
    spec: HeadSpec,
    *,
    label: str = "induction circuit",
    n_groups: int = 1,
    seed: int = MATCHED_RANDOM_SEED,
    mode: AblationMode = "zero",
    batch_size: int = 8,
) -> pd.DataFrame:
    """A circuit's ablation on `batch`, one row per condition of `circuit_conditions` (ABLATION_SUITE_COLUMNS; a
    control that cannot be drawn is a row with no scores and a note), all conditions in batched forwards
    (`condition_outcomes`)."""
    layout = family_of(model)
    spec = check_spec(spec, layout)
    cc = circuit_conditions(spec, n_layers=layout.n_layers, n_heads=layout.n_heads, n_groups=n_groups, seed=seed,
                            label=label)
    means = head_means(model, batch, layout=layout, batch_size=batch_size) if mode == "mean" else None
    outcomes = condition_outcomes(model, batch, [c.spec for c in cc.measured()], mode=mode, means=means,
                                  layout=layout, batch_size=batch_size)
    return suite_table(cc, outcomes, mode=mode, n=batch.n)


def suite_table(cc: CircuitConditions, outcomes: list[QueryOutcomes], *, mode: AblationMode, n: int) -> pd.DataFrame:
    """ABLATION_SUITE_COLUMNS, one row per condition of `cc`, from the outcomes of its measured conditions (in
    `cc.measured()` order; a control that cannot be drawn: no scores, its note)."""
    scored = iter(outcomes)
    rows = [{"condition": c.condition, "label": c.label, "drawn_for": c.drawn_for, "seed": c.seed,
             "n_ablated": n_heads_in(c.spec or {}), "heads": " ".join(spec_labels(c.spec)), "spec": c.spec or {},
             "mode": mode, "n": n, **(outcome_metrics(next(scored)) if c.spec is not None else {}),
             "note": c.note} for c in cc.conditions]
    out = pd.DataFrame(rows).reindex(columns=ABLATION_SUITE_COLUMNS)
    out["seed"] = out["seed"].astype("Int64")
    return out
