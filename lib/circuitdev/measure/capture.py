"""One nnsight pass per chunk: the query row of every head's attention and every head's output at the query.

What leaves the trace per chunk is small — `(B, L, H, T)` query rows, `(B, L, H, d_head)` head outputs and two
`(B, L, H)` all-query first-token statistics — so full `[T, T]` patterns never exist for more than one layer of one
chunk at a time. Everything is cast to fp32 before it is stored. The same pass also reduces what the model does
(`measure.behaviour`): with `target`, the top-1 and loss of the target at the query from the final logits; with
`norms`, each residual stream's position-0 norm and median norm -- per sequence, `(B,)` and `(B, L + 1)` a chunk.
`prefix_pass` does the same for the repeated batch: the prefix-matching scores and, per sequence, the ICL score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import torch
from nnsight import NNsight
from tqdm.auto import tqdm

from circuitdev.errors import ConfigError, NumericalError
from circuitdev.measure.behaviour import icl_difference, position_norms, query_outcome
from circuitdev.measure.families import Layout, family_of

Reduce = Callable[..., dict[str, torch.Tensor]]  # a reduction run inside the trace; its values are saved


@dataclass
class Capture:
    attn_rows: torch.Tensor  # (N, L, H, T) post-softmax attention of the query row, fp32
    head_out: torch.Tensor  # (N, L, H, d_head) per-head output at the query = input of W_O, fp32
    mass_first_allq: torch.Tensor  # (N, L, H) mean over queries q >= skip of a[q, 0]
    mass_first_all: torch.Tensor  # (N, L, H) mean over every query q >= 0 of a[q, 0] (Gu et al.'s, per sequence)
    base_first_allq: torch.Tensor  # (N, L, H) mean over the same queries of the mean attention on keys 1..q
    query_correct: torch.Tensor | None = None  # (N,) bool: argmax of the logits at the query == target (`target=`)
    query_loss: torch.Tensor | None = None  # (N,) cross-entropy of the target at the query
    norm_pos0: torch.Tensor | None = None  # (N, L + 1) residual-stream norm at position 0: embed, then each layer
    norm_median: torch.Tensor | None = None  # (N, L + 1) median norm over positions 1..T-1 (`norms=True`)

    @property
    def n_layers(self) -> int:
        return self.attn_rows.shape[1]

    @property
    def n_heads(self) -> int:
        return self.attn_rows.shape[2]


def envoy(wrapped: NNsight, path: str):
    """Walk a dotted module path ("model.layers.3.self_attn") on an nnsight wrapper."""
    for part in path.split("."):
        wrapped = wrapped[int(part)] if part.isdigit() else getattr(wrapped, part)
    return wrapped


def as_token_tensor(tokens, model: torch.nn.Module) -> torch.Tensor:
    """(N, T) int64 on the model's device; checks ids against the model's vocabulary."""
    ids = torch.as_tensor(np.asarray(tokens), dtype=torch.long)
    if ids.ndim != 2:
        raise ConfigError(f"tokens must be a 2-D [N, T] array of ids, got shape {tuple(ids.shape)}")
    vocab = model.get_input_embeddings().num_embeddings
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
        raise ConfigError(
            f"token ids span [{int(ids.min())}, {int(ids.max())}] but the model's vocabulary has {vocab} ids: "
            f"choose a vocab_range inside [0, {vocab})"
        )
    return ids.to(next(model.parameters()).device)


def chunks(n: int, batch_size: int, *, desc: str | None = None, progress: bool = False) -> Iterator[slice]:
    starts = range(0, n, batch_size)
    for start in tqdm(starts, desc=desc, disable=not progress, leave=False, unit="chunk"):
        yield slice(start, min(start + batch_size, n))


def capture(
    model: torch.nn.Module,
    tokens,
    *,
    query: int | None = None,
    batch_size: int = 8,
    allq_skip: int = 4,
    layout: Layout | None = None,
    progress: bool = False,
    target=None,
    norms: bool = False,
) -> Capture:
    """Run the model over `tokens` (N, T) in chunks and keep, per layer and head, what the screen and PR need.

    The model must use eager attention (`attn_implementation="eager"`): sdpa returns no probabilities.
    `query` defaults to the last position (the paper's second A). `allq_skip` leaves out the first queries in the
    all-query first-token score (position 0 attends only to itself). `target` (N,) ids (the batch's B): also
    keep, per sequence, whether the logits' argmax at the query is the target and its loss there. `norms`: also
    keep the residual streams' position-0 and median norms (`measure.behaviour`). Neither adds a forward pass.
    """
    layout = layout or family_of(model)
    ids = as_token_tensor(tokens, model)
    n, t = ids.shape
    q = t - 1 if query is None else int(query)
    if not 0 <= q < t:
        raise ConfigError(f"query position {q} outside the sequence of length {t}")
    if not 1 <= allq_skip < t:
        raise ConfigError(f"allq_skip={allq_skip} must lie in [1, {t - 1}]")
    _require_eager(model)
    L, H, dh = layout.n_layers, layout.n_heads, layout.head_dim
    out = Capture(
        attn_rows=torch.empty(n, L, H, t),
        head_out=torch.empty(n, L, H, dh),
        mass_first_allq=torch.empty(n, L, H),
        mass_first_all=torch.empty(n, L, H),
        base_first_allq=torch.empty(n, L, H),
        query_correct=torch.empty(n, dtype=torch.bool) if target is not None else None,
        query_loss=torch.empty(n) if target is not None else None,
        norm_pos0=torch.empty(n, L + 1) if norms else None,
        norm_median=torch.empty(n, L + 1) if norms else None,
    )
    if target is not None:
        target = torch.as_tensor(np.asarray(target), dtype=torch.long).to(ids.device)
        if target.shape != (n,):
            raise ConfigError(f"target must hold one id per sequence ({n}), got shape {tuple(target.shape)}")
    keys_per_query = torch.arange(allq_skip, t, device=ids.device, dtype=torch.float32)  # q keys besides 0 for row q

    def per_layer(weights: torch.Tensor, z: torch.Tensor) -> dict[str, torch.Tensor]:
        w = weights.float()  # (B, H, T, T)
        col0 = w[:, :, allq_skip:, 0]  # (B, H, T - skip)
        return {
            "attn_rows": w[:, :, q, :],  # (B, H, T)
            "head_out": z[:, q].float().reshape(z.shape[0], H, dh),  # (B, H, d_head)
            "mass_first_allq": col0.mean(-1),  # (B, H)
            "mass_first_all": w[:, :, :, 0].mean(-1),  # (B, H): query 0 included, as Gu et al. average
            "base_first_allq": ((1.0 - col0) / keys_per_query).mean(-1),  # (B, H)
        }

    def final(sl: slice, output) -> dict[str, torch.Tensor]:  # the (B, V) logits stay in the trace
        return {f"query_{k}": v for k, v in query_outcome(output.logits[:, q], target[sl]).items()}  # (B,) each

    for sl, saved in trace_layers(model, ids, per_layer, layout=layout, batch_size=batch_size, progress=progress,
                                  residual=position_norms if norms else None,
                                  final=final if target is not None else None):
        for name, values in saved.items():  # once per layer (B, L, ...), per stream (B, L + 1), per sequence (B,)
            getattr(out, name)[sl] = (values[0] if name.startswith("query_") else torch.stack(values, dim=1)).cpu()
    if not torch.isfinite(out.attn_rows).all() or not torch.isfinite(out.head_out).all():
        raise NumericalError(
            "NaN or Inf in captured attention rows or head outputs — typically fp16 overflow/underflow at early "
            "checkpoints. Re-run with --dtype fp32 (the paper probes Pythia in fp32 for this reason)."
        )
    return out


def trace_layers(
    model: torch.nn.Module,
    ids: torch.Tensor,
    per_layer: Callable[[torch.Tensor, torch.Tensor], dict[str, torch.Tensor]],
    *,
    layout: Layout,
    batch_size: int,
    progress: bool = False,
    residual: Reduce | None = None,
    final: Reduce | None = None,
) -> Iterator[tuple[slice, dict[str, list[torch.Tensor]]]]:
    """Yield, chunk by chunk, `per_layer(attention_weights (B,H,T,T), out_proj_input (B,T,H*dh))` for every layer.

    `residual(hidden (B,T,d))`, if given, runs on the input of layer 0 (the embedding output) and on every layer's
    output: its values are listed L + 1 times, streams in `behaviour.norm_streams` order. `final(chunk slice, model
    output)`, if given, runs once at the end (on the logits): its values are listed once. The reductions run inside
    the trace, so only their (small) results are saved. Modules are read in execution order — layer 0's input, then
    within a layer W_O's input, the attention module's output, the layer's output; the model's output last — as
    nnsight requires.
    """
    wrapped = NNsight(model)
    with torch.no_grad():
        for sl in chunks(ids.shape[0], batch_size, desc="capture", progress=progress):
            saved: dict[str, list] = {}  # containers live outside the trace; only .save()d values leave it

            def keep(values: dict[str, torch.Tensor]) -> None:
                for name, value in values.items():
                    saved.setdefault(name, []).append(value.save())

            with wrapped.trace(input_ids=ids[sl]):
                if residual is not None:
                    keep(residual(envoy(wrapped, layout.layer_path(0)).input))  # the embedding output
                for layer in range(layout.n_layers):
                    z = envoy(wrapped, layout.out_proj_path(layer)).input
                    weights = envoy(wrapped, layout.attention_path(layer)).output[1]
                    keep(per_layer(weights, z))
                    if residual is not None:
                        hidden = envoy(wrapped, layout.layer_path(layer)).output
                        keep(residual(hidden[0] if isinstance(hidden, tuple) else hidden))  # (B, T, d)
                if final is not None:
                    keep(final(sl, wrapped.output))
            yield sl, saved


def _require_eager(model: torch.nn.Module) -> None:
    impl = getattr(model.config, "_attn_implementation", None)
    if impl not in (None, "eager"):
        raise ConfigError(
            f"the model uses attn_implementation={impl!r}, which returns no attention probabilities; load it with "
            "attn_implementation='eager' (circuitdev.sources.loading does this)"
        )


def prefix_matching_scores(
    model: torch.nn.Module, tokens, *, layout: Layout | None = None, batch_size: int = 8
) -> np.ndarray:
    """(L, H) prefix-matching score on sequences whose second half repeats the first (Olsson et al. 2022):
    mean attention from each query i in the second half to the token after its earlier copy, i - half + 1."""
    return prefix_pass(model, tokens, layout=layout, batch_size=batch_size)[0]


def prefix_pass(
    model: torch.nn.Module, tokens, *, layout: Layout | None = None, batch_size: int = 8, icl: bool = False
) -> tuple[np.ndarray, np.ndarray | None]:
    """One pass over the repeated batch `tokens` (n, T): the (L, H) prefix-matching scores and, with `icl`, the
    (n,) per-sequence ICL differences from the same pass's logits (`behaviour.icl_difference`), else None."""
    layout = layout or family_of(model)
    ids = as_token_tensor(tokens, model)
    n, t = ids.shape
    half = t // 2
    if half < 2 or t != 2 * half:
        raise ConfigError(f"prefix matching needs an even sequence of length >= 4 (two equal halves), got {t}")
    _require_eager(model)
    queries = torch.arange(half, t, device=ids.device)  # second-half positions
    keys = queries - half + 1  # the token after the earlier copy

    def per_layer(weights: torch.Tensor, z: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"score": weights[:, :, queries, keys].float().mean(-1).sum(0)}  # (H,) summed over the chunk

    def final(sl: slice, output) -> dict[str, torch.Tensor]:
        return {"icl": icl_difference(output.logits, ids[sl])}  # (B,); the (B, T, V) logits stay in the trace

    total = torch.zeros(layout.n_layers, layout.n_heads, dtype=torch.float64)
    diffs: list[torch.Tensor] = []
    for _, saved in trace_layers(model, ids, per_layer, layout=layout, batch_size=batch_size,
                                 final=final if icl else None):
        total += torch.stack(saved["score"]).double().cpu()
        if icl:
            diffs.append(saved["icl"][0].double().cpu())
    return (total / n).numpy(), (torch.cat(diffs).numpy() if icl else None)
