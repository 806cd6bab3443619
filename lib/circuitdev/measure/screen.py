"""The all-head six-class selectivity screen (method reference §2): target attention over a fixed baseline, per head.

selectivity[c][L, H] = mean attention of the query row at class c's target / mean attention at the baseline positions,
a ratio of batch means (average first, then divide) with a 1e-8 floor on the baseline. The baseline is 50 positions
drawn once with RandomState(0) — the same for every sequence, not excluding its A / B (use `baseline_excludes_ab`
for the variant that does).
"""

from __future__ import annotations

import numpy as np
import torch

from circuitdev.measure.batch import InductionBatch
from circuitdev.measure.positions import BASELINE_FLOOR, avoid_positions, baseline_positions, class_targets
from circuitdev.errors import ConfigError, NumericalError
from circuitdev.schema import HeadClass



def target_attention(attn_rows: torch.Tensor, batch: InductionBatch) -> dict[HeadClass, np.ndarray]:
    """Mean query-row attention at each class's target, (L, H) per class, with the paper's averaging sets.

    Induction and duplicate-token average over valid examples in float64; the others over all N in fp32.
    """
    n, _, _, t = attn_rows.shape  # (N, L, H, T)
    if t != batch.seq_len or n != batch.n:
        raise ConfigError(f"attention rows {tuple(attn_rows.shape)} do not match the batch ({batch.n} x {batch.seq_len})")
    valid = torch.as_tensor(batch.valid)
    if not valid.any():
        raise ConfigError("no valid example in the batch (B must occur exactly once before the query)")
    at = class_targets(attn_rows, batch)
    return {
        "induction": at["induction"][valid].double().mean(0).numpy(),  # (L, H)
        "previous-token": at["previous-token"].mean(0).numpy(),
        "duplicate-token": at["duplicate-token"][valid].double().mean(0).numpy(),
        "first-token": at["first-token"].mean(0).numpy(),
        "self": at["self"].mean(0).numpy(),
        "local": at["local"].mean(dim=(0, 3)).numpy(),
    }


def baseline_attention(
    attn_rows: torch.Tensor, batch: InductionBatch, positions: np.ndarray, *, excludes_ab: bool = False
) -> np.ndarray:
    """Mean attention over all N examples and the fixed positions, (L, H).

    `excludes_ab=True` (a variant, off by default) drops each sequence's A and B positions from its baseline, which
    the paper does not do; use it to check that a planted bigram inside the baseline set does not bias the ratio.
    """
    idx = torch.as_tensor(positions)
    values = attn_rows[..., idx]  # (N, L, H, P)
    if not excludes_ab:
        return values.mean(dim=(0, 3)).numpy()
    pos = idx[None, :]  # (1, P)
    fa = torch.as_tensor(batch.first_a)[:, None]  # (N, 1)
    keep = ((pos != fa) & (pos != fa + 1)).to(values.dtype)  # (N, P)
    summed = (values * keep[:, None, None, :]).sum(dim=(0, 3))
    return (summed / keep.sum()).numpy()


def selectivities(
    attn_rows: torch.Tensor,
    batch: InductionBatch,
    *,
    baseline_size: int = 50,
    baseline_seed: int = 0,
    baseline_excludes_ab: bool = False,
) -> dict[HeadClass, np.ndarray]:
    """Six (L, H) selectivity arrays: target attention / max(baseline, 1e-8)."""
    if not torch.isfinite(attn_rows).all():
        raise NumericalError(
            "attention rows hold NaN or Inf (fp16 underflow/overflow is the usual cause): probe in fp32 (--dtype fp32)"
        )
    positions = baseline_positions(batch.seq_len, baseline_size, baseline_seed)
    base = baseline_attention(attn_rows, batch, positions, excludes_ab=baseline_excludes_ab)
    denom = np.maximum(base, BASELINE_FLOOR)
    return {c: (v / denom) for c, v in target_attention(attn_rows, batch).items()}


def null_selectivity(
    attn_rows: torch.Tensor,
    batch: InductionBatch,
    *,
    n_nulls: int = 20,
    seed: int = 2026,
    baseline_size: int = 50,
    baseline_seed: int = 0,
    baseline_excludes_ab: bool = False,
) -> np.ndarray:
    """The selectivity null (method reference §3): attention at one random non-target position per valid example, over the baseline.

    For each draw and valid example, rp = randint(1, T-1) from RandomState(seed), rejecting the avoid set and the
    example's A and B positions. Returns (n_nulls, L, H); the paper reports the 99th percentile over all values.
    The denominator is the same baseline as `selectivities` with the same `baseline_excludes_ab`: pass the
    record's setting, so that the null and the real selectivities are on one scale (the toy panels exclude A/B).
    """
    if n_nulls < 1:
        raise ConfigError(f"n_nulls must be >= 1, got {n_nulls}")
    t = batch.seq_len
    positions = baseline_positions(t, baseline_size, baseline_seed)
    denom = np.maximum(baseline_attention(attn_rows, batch, positions, excludes_ab=baseline_excludes_ab),
                       BASELINE_FLOOR)
    avoid = avoid_positions(t)
    valid_idx = np.flatnonzero(batch.valid)
    rng = np.random.RandomState(seed)
    valid_rows = attn_rows[torch.as_tensor(valid_idx)]  # (V, L, H, T)
    out = np.empty((n_nulls, *denom.shape))
    for d in range(n_nulls):
        picks = np.empty(len(valid_idx), dtype=np.int64)
        for j, i in enumerate(valid_idx):
            fa = batch.first_a[i]
            while True:
                rp = int(rng.randint(1, t - 1))
                if rp not in avoid and rp != fa and rp != fa + 1:
                    break
            picks[j] = rp
        at = valid_rows[torch.arange(len(valid_idx)), :, :, torch.as_tensor(picks)].double().mean(0).numpy()
        out[d] = at / denom
    return out
