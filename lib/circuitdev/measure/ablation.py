"""Group ablations as causal checks (method reference §5): knock heads out at W_O's input, read the query's logits.

A head set is a spec `{layer: [heads]}`. Zero ablation (the paper's only mode) sets the head's slice of the output
projection's input to 0 at every position; mean ablation (a variant) sets it to the head's mean output over the
evaluation batch and positions, which keeps the residual stream's scale.
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
    """(N, V) fp32 logits at the query with the heads of `spec` ablated (none: bit-identical to a plain forward)."""
    layout = layout or family_of(model)
    spec = check_spec(spec or {}, layout)
    if mode not in ("zero", "mean"):
        raise ConfigError(f"unknown ablation mode {mode!r}; use 'zero' (the paper) or 'mean'")
    if mode == "mean" and spec and means is None:
        means = head_means(model, batch, layout=layout, batch_size=batch_size)
    ids = as_token_tensor(batch.tokens, model)
    q, dh = batch.query, layout.head_dim
    wrapped = NNsight(model)
    out = []
    with torch.no_grad():
        for sl in chunks(ids.shape[0], batch_size):
            with wrapped.trace(input_ids=ids[sl]):
                for layer in sorted(spec):
                    z = envoy(wrapped, layout.out_proj_path(layer)).input  # (B, T, H * d_head)
                    for h in spec[layer]:
                        cols = slice(h * dh, (h + 1) * dh)
                        z[..., cols] = 0 if mode == "zero" else means[layer, cols].to(z.dtype)
                logits = wrapped.output.logits[:, q].save()  # (B, V)
            out.append(logits.float().cpu())
    return torch.cat(out)


def metrics(logits: torch.Tensor, target) -> dict[str, float]:
    """loss (mean cross-entropy of the target B), acc_top1, acc_top5, mean_logit_B — the paper's four."""
    target = torch.as_tensor(target)
    top5 = logits.topk(min(5, logits.shape[-1]), dim=-1).indices
    return {
        "loss": float(F.cross_entropy(logits, target)),
        "acc_top1": float((top5[:, 0] == target).float().mean()),
        "acc_top5": float((top5 == target[:, None]).any(-1).float().mean()),
        "mean_logit_B": float(logits[torch.arange(len(target)), target].mean()),
    }


def evaluate(model: torch.nn.Module, batch: InductionBatch, spec: HeadSpec | None = None, **kwargs) -> dict[str, float]:
    """Next-token metrics at the query with `spec` ablated; keyword arguments as `query_logits`."""
    return metrics(query_logits(model, batch, spec, **kwargs), batch.target)


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


def ablation_suite(
    model: torch.nn.Module,
    batch: InductionBatch,
    spec: HeadSpec,
    *,
    name: str = "screen",
    random_seeds: tuple[int, ...] = (MATCHED_RANDOM_SEED,),
    mode: AblationMode = "zero",
    batch_size: int = 8,
) -> pd.DataFrame:
    """Baseline, the screened set, matched-random controls (one row per seed) and the upper bound, one row each.
    `note` says, on the matched-random rows, where the control could not match the set (a layer the set fills
    gets no random head; see `matched_random_groups` for distinct groups and an any-layer control)."""
    layout = family_of(model)
    spec = check_spec(spec, layout)
    means = head_means(model, batch, layout=layout, batch_size=batch_size) if mode == "mean" else None
    conditions: list[tuple[str, HeadSpec, int | None]] = [("baseline", {}, None), (name, spec, None)]
    conditions += [("matched_random", matched_random(spec, layout.n_heads, seed=s), s) for s in random_seeds]
    conditions.append(("upper_bound", upper_bound(spec, layout.n_heads), None))
    full = [layer for layer, heads in spec.items() if len(set(heads)) >= layout.n_heads]
    short = [layer for layer, heads in spec.items() if 2 * len(set(heads)) > layout.n_heads and layer not in full]
    note = "; ".join([f"layer(s) {full} hold no head outside the set: no random head there"] * bool(full)
                     + [f"layer(s) {short} hold fewer heads outside the set than in it: count capped"] * bool(short))
    rows = []
    for cond, heads, seed in conditions:
        scores = evaluate(model, batch, heads, mode=mode, means=means, layout=layout, batch_size=batch_size)
        rows.append({"condition": cond, "seed": seed, "n_ablated": n_heads_in(heads), "spec": heads, "mode": mode,
                     **scores, "note": note if cond == "matched_random" else ""})
    return pd.DataFrame(rows)
