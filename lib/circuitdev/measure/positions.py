"""Positions of the screen at context length T: the query, the class targets, and the fixed baseline set.

Pure numpy (no torch): the book reads the induction ceiling from here without loading a model.
"""

from __future__ import annotations

import numpy as np

from circuitdev.errors import ConfigError
from circuitdev.measure.batch import default_first_a_range

BASELINE_FLOOR = 1e-8  # the smallest baseline a selectivity divides by (screen and bootstrap alike)


def avoid_positions(seq_len: int) -> set[int]:
    """Positions no baseline may use: 0 (first token), q-1, q and the local window q-5..q-2 (q = seq_len - 1)."""
    q = seq_len - 1
    return {0, q - 1, q, *range(q - 5, q - 1)}


def local_positions(seq_len: int) -> list[int]:
    q = seq_len - 1
    return [q - 2, q - 3, q - 4, q - 5]


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
