"""Positions of the screen at context length T: the query, the class targets (`class_targets`, the one class ->
target table), and the fixed baseline set.

Pure numpy (no torch): the book reads the induction ceiling from here without loading a model.
"""

from __future__ import annotations

import numpy as np

from circuitdev.errors import ConfigError
from circuitdev.measure.batch import InductionBatch, default_first_a_range
from circuitdev.schema import HeadClass

BASELINE_FLOOR = 1e-8  # the smallest baseline a selectivity divides by (screen and bootstrap alike)


def avoid_positions(seq_len: int) -> set[int]:
    """Positions no baseline may use: 0 (first token), q-1, q and the local window q-5..q-2 (q = seq_len - 1)."""
    q = seq_len - 1
    return {0, q - 1, q, *range(q - 5, q - 1)}


def local_positions(seq_len: int) -> list[int]:
    q = seq_len - 1
    return [q - 2, q - 3, q - 4, q - 5]


def class_targets(attn_rows, batch: InductionBatch) -> dict[HeadClass, object]:
    """The one class -> target table: each sequence's query-row attention at its class's target, from `attn_rows`
    (N, L, H, T), a torch tensor or a numpy array (indexing keeps its type and dtype). Per class (N, L, H): induction
    at each sequence's B (first A + 1), duplicate-token at its first A, previous-token at q-1, first-token at 0, self at
    q; "local" keeps its window's four positions q-2..q-5, (N, L, H, 4), for the caller to average."""
    n, t = attn_rows.shape[0], attn_rows.shape[-1]
    q, rows = batch.query, np.arange(n)
    first_a = np.asarray(batch.first_a)
    return {
        "induction": attn_rows[rows, :, :, first_a + 1],
        "previous-token": attn_rows[..., q - 1],
        "duplicate-token": attn_rows[rows, :, :, first_a],
        "first-token": attn_rows[..., 0],
        "self": attn_rows[..., q],
        "local": attn_rows[..., local_positions(t)],
    }


def baseline_positions(seq_len: int = 256, size: int = 50, seed: int = 0) -> np.ndarray:
    """The authors' fixed "uniform-other" set: repeated `randint(1, T-1)` draws, rejecting the avoid set and repeats.

    At T = 256 this is exactly the paper's 50 positions. For short contexts the size is capped at the number of
    eligible positions.
    """
    avoid = avoid_positions(seq_len)
    eligible = [p for p in range(1, seq_len - 1) if p not in avoid]
    size = min(size, len(eligible))
    if size < 1:
        raise ConfigError(f"seq_len={seq_len} leaves no baseline position; use seq_len >= 12")
    rng = np.random.RandomState(seed)
    chosen: list[int] = []
    while len(chosen) < size:
        p = int(rng.randint(1, seq_len - 1))
        if p not in avoid and p not in chosen:
            chosen.append(p)
    return np.array(sorted(chosen), dtype=np.int64)


def induction_ceiling(
    seq_len: int = 256,
    *,
    baseline_size: int = 50,
    baseline_seed: int = 0,
    first_a_range: tuple[int, int] | None = None,
    baseline_excludes_ab: bool = False,
) -> float:
    """The largest induction selectivity any head can score: the one that puts all its attention on B.

    The paper's baseline is a fixed position set that does not exclude each sequence's B, so a perfect induction head
    lifts its own baseline whenever B falls on a baseline position: selectivity <= size / P(B in baseline), with B
    uniform over the first-A range + 1. At T = 256 that ceiling is ~235x, far above the 50x bar; at T = 64 the 50
    positions cover almost every position and the ceiling drops to ~56x, so 50x would need ~90% of the head's mass
    on B. Use it to read short-context (toy) selectivities, or pass `baseline_excludes_ab=True` (no ceiling: inf).
    """
    if baseline_excludes_ab:
        return float("inf")
    base = set(baseline_positions(seq_len, baseline_size, baseline_seed).tolist())
    lo, hi = first_a_range if first_a_range is not None else default_first_a_range(seq_len)
    share = np.mean([b + 1 in base for b in range(lo, hi)])  # P(B = first_a + 1 is a baseline position)
    return float("inf") if share == 0 else float(len(base) / share)
