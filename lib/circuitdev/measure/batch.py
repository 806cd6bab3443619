"""The paper's synthetic induction batch (method reference §1), bit-identical to the authors' RNG stream.

Each sequence is random filler with one planted bigram (A, B) at positions (first_a, first_a + 1) and a second A at
the query position q = seq_len - 1; the correct next token there is B. Every other occurrence of A or B in the filler
is redrawn so that the bigram is unique.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PAPER_SEQ_LEN = 256
PAPER_FIRST_A_RANGE = (20, 128)  # randint(20, 128): first_a in [20, 127] at seq_len 256


@dataclass(frozen=True)
class InductionBatch:
    tokens: np.ndarray  # (N, T) int64 token ids
    first_a: np.ndarray  # (N,) position of the first A; B sits at first_a + 1
    query: int  # T - 1: the second A, where attention rows and logits are read
    target: np.ndarray  # (N,) the token B the model should predict at the query
    valid: np.ndarray  # (N,) bool: B occurs exactly once in positions 0..T-2 (the authors' filter)

    @property
    def n(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def seq_len(self) -> int:
        return int(self.tokens.shape[1])

    def head(self, n: int) -> "InductionBatch":
        """The first n rows: the paper's 500-row PR batch is `induction_batch().head(500)`."""
        return InductionBatch(self.tokens[:n], self.first_a[:n], self.query, self.target[:n], self.valid[:n])


def default_first_a_range(seq_len: int) -> tuple[int, int]:
    """Half-open range for the first A. The paper's (20, 128) at 256 tokens; shorter contexts scale it.

    Rule: low = round(20 * T / 256) clipped to >= 1, high = T // 2. This keeps the paper's layout (bigram in the
    first half, at least a few filler tokens before it, a long filler gap before the second A) at any length.
    """
    if seq_len == PAPER_SEQ_LEN:
        return PAPER_FIRST_A_RANGE
    return max(1, round(20 * seq_len / PAPER_SEQ_LEN)), seq_len // 2


def induction_batch(
    n: int = 2000,
    seq_len: int = 256,
    seed: int = 42,
    vocab_range: tuple[int, int] = (100, 10000),
    *,
    first_a_range: tuple[int, int] | None = None,
    first_token: int | None = None,
) -> InductionBatch:
    """Build the batch exactly as `build_induction_batch` does (one `RandomState(seed)`, draws in the paper's order).

    vocab_range is half-open [lo, hi). Use the defaults for the real 1B models; for a toy model pass a vocab range
    inside its vocabulary and a shorter seq_len (first_a_range then follows `default_first_a_range`).
    first_token: None keeps the paper's random filler at position 0; an id (a BOS) is written there after the draw,
    so every other token, A/B position and the RNG stream stay exactly the paper's.
    """
    lo, hi = (int(v) for v in vocab_range)
    if n < 1:
        raise ValueError(f"n must be >= 1 sequences, got {n}")
    if hi - lo < 3:
        raise ValueError(f"vocab_range {vocab_range} must hold at least 3 ids (filler, A, B): give [lo, hi) with hi > lo + 2")
    if lo < 0:
        raise ValueError(f"vocab_range {vocab_range} starts below 0: token ids are non-negative")
    a_lo, a_hi = first_a_range if first_a_range is not None else default_first_a_range(seq_len)
    # Layout needs: first_a >= 1 (position 0 is the first-token target), first_a + 1 < q - 1 so B is not the
    # previous-token target, and the local window q-5..q-2 after B.
    if seq_len < 12:
        raise ValueError(
            f"seq_len={seq_len} is too short for the induction layout (first A, B, filler, local window q-5..q-2, "
            "second A at q): use seq_len >= 12 (the paper uses 256)"
        )
    if not (1 <= a_lo < a_hi and a_hi - 1 + 1 < seq_len - 6):
        raise ValueError(
            f"first_a_range {(a_lo, a_hi)} does not fit seq_len={seq_len}: need 1 <= lo < hi and the B position "
            f"(hi - 1) + 1 before the local window at {seq_len - 6}; e.g. use default_first_a_range({seq_len}) = "
            f"{default_first_a_range(seq_len)}"
        )

    rng = np.random.RandomState(seed)
    tokens = np.empty((n, seq_len), dtype=np.int64)
    first_a = np.empty(n, dtype=np.int64)
    candidates = np.arange(lo, hi)
    for i in range(n):
        tok = rng.randint(lo, hi, size=seq_len)
        a, b = rng.choice(candidates, size=2, replace=False)
        ab = rng.randint(a_lo, a_hi)
        tok[ab], tok[ab + 1] = a, b
        # Two separate scans, each redrawing one id per replaced position: the draw order is part of the contract.
        for k in range(seq_len):
            if tok[k] == a and k != ab:
                tok[k] = rng.randint(lo, hi)
        for k in range(seq_len):
            if tok[k] == b and k != ab + 1:
                tok[k] = rng.randint(lo, hi)
        tok[seq_len - 1] = a
        tokens[i], first_a[i] = tok, ab
    if first_token is not None:
        tokens[:, 0] = first_token  # first_a >= 1: the bigram is never overwritten
    target = tokens[np.arange(n), first_a + 1]
    return InductionBatch(tokens, first_a, seq_len - 1, target, valid_mask(tokens, target))


def valid_mask(tokens: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The authors' `reconstruct_ab_indices` filter: B occurs exactly once in positions 0..T-2."""
    counts = (tokens[:, :-1] == target[:, None]).sum(axis=1)  # (N,)
    return counts == 1


def repeated_batch(n: int, seq_len: int, seed: int, vocab_range: tuple[int, int], *,
                   first_token: int | None = None) -> np.ndarray:
    """(n, seq_len) random ids whose second half repeats the first: the prefix-matching score's input (Olsson et al.).

    An odd seq_len is trimmed by one so both halves have equal length. first_token (a BOS id) starts both halves,
    so the second half still repeats the first exactly.
    """
    half = seq_len // 2
    rng = np.random.RandomState(seed)
    first = rng.randint(int(vocab_range[0]), int(vocab_range[1]), size=(n, half))
    if first_token is not None:
        first[:, 0] = first_token
    return np.concatenate([first, first], axis=1).astype(np.int64)
