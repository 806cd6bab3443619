"""Bootstrap over the batch's sequences: how sure is each selectivity (issue 14; method reference §2).

A selectivity is a ratio of batch means: mean target attention over the class's sequences / mean baseline attention.
Resampling the N sequences with replacement and recomputing that ratio on every resample — for every head and class
from the SAME draws — gives B replicates per (class, layer, head); the 2.5th and 97.5th percentiles are the 95%
interval stored beside each point value (`sel_<class>_lo` / `sel_<class>_hi`). No extra forward pass: everything
is reduced from the query rows the capture already holds to per-sequence values first:

    target[c]  (N, L, H)   the sequence's attention at class c's target (local: the mean over q-2..q-5)
    base_sum   (N, L, H)   the sequence's summed attention over its baseline positions
    base_count (N,)        how many baseline positions the sequence has (fewer with `baseline_excludes_ab`)

so that a replicate with multiplicities w (N,) is target_mean = w·target / w·1 (induction and duplicate-token over
valid sequences only, as `screen.target_attention`) and baseline = w·base_sum / w·base_count
(`screen.baseline_attention`, both variants), divided with the same 1e-8 floor. With w = 1 (every sequence once)
this is the point value, which the tests check.

Which function to use: `bootstrap_selectivities(attn_rows, batch, ...)` for the replicates of one capture;
`percentile_interval(replicates, point)` for the lo / hi arrays. Numpy only (the query rows are converted once).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from circuitdev.errors import ConfigError
from circuitdev.measure.batch import InductionBatch
from circuitdev.measure.positions import BASELINE_FLOOR, baseline_positions, class_targets
from circuitdev.schema import HEAD_CLASSES, INTERVAL_LEVEL, HeadClass

LEVEL = INTERVAL_LEVEL  # the interval's coverage
VALID_ONLY: tuple[HeadClass, ...] = ("induction", "duplicate-token")  # averaged over valid sequences only


@dataclass(frozen=True)
class SequenceValues:
    """What one selectivity is made of, per sequence: every replicate is a weighted sum of these."""

    target: dict[HeadClass, np.ndarray]  # class -> (N, L, H) attention at the class's target, float64
    base_sum: np.ndarray  # (N, L, H) summed attention over the sequence's baseline positions, float64
    base_count: np.ndarray  # (N,) number of baseline positions of the sequence
    valid: np.ndarray  # (N,) bool: the sequences induction / duplicate-token average over

    @property
    def n(self) -> int:
        return len(self.valid)

    def selectivities(self, weights: np.ndarray) -> np.ndarray:
        """(R, 6, L, H) selectivities for R resamples given as multiplicities `weights` (R, N), classes in
        HEAD_CLASSES order. A resample without a valid sequence gives NaN for induction / duplicate-token."""
        w = np.asarray(weights, dtype=np.float64)  # (R, N)
        n, shape = self.n, self.base_sum.shape[1:]
        flat = lambda a: a.reshape(n, -1)  # noqa: E731  (N, L*H)
        base = (w @ flat(self.base_sum)) / (w @ self.base_count.astype(np.float64))[:, None]  # (R, L*H)
        denom = np.maximum(base, BASELINE_FLOOR)
        wv = w * self.valid[None, :]  # (R, N) valid sequences only
        n_all, n_valid = w.sum(1)[:, None], wv.sum(1)[:, None]  # (R, 1)
        out = np.empty((len(w), len(HEAD_CLASSES), int(np.prod(shape))))
        with np.errstate(invalid="ignore", divide="ignore"):
            for k, c in enumerate(HEAD_CLASSES):
                mean = (wv @ flat(self.target[c])) / n_valid if c in VALID_ONLY else (w @ flat(self.target[c])) / n_all
                out[:, k] = mean / denom
        return out.reshape(len(w), len(HEAD_CLASSES), *shape)


def sequence_values(attn_rows, batch: InductionBatch, *, baseline_size: int = 50, baseline_seed: int = 0,
                    baseline_excludes_ab: bool = False) -> SequenceValues:
    """Per-sequence targets and baseline sums from the captured query rows `attn_rows` (N, L, H, T) (a torch tensor
    or an array), with the screen's positions (`screen.selectivities` takes the same options)."""
    a = attn_rows.numpy() if hasattr(attn_rows, "numpy") else np.asarray(attn_rows)
    n, _, _, t = a.shape  # (N, L, H, T)
    if t != batch.seq_len or n != batch.n:
        raise ConfigError(f"attention rows {a.shape} do not match the batch ({batch.n} x {batch.seq_len})")
    first_a = np.asarray(batch.first_a)
    target = {c: (v.mean(-1, dtype=np.float64) if c == "local" else v).astype(np.float64)
              for c, v in class_targets(a, batch).items()}
    positions = baseline_positions(t, baseline_size, baseline_seed)
    keep = np.ones((n, len(positions)), dtype=bool)  # (N, P)
    if baseline_excludes_ab:
        keep = (positions[None, :] != first_a[:, None]) & (positions[None, :] != first_a[:, None] + 1)
    base_sum = np.empty(a.shape[:3])  # (N, L, H)
    for s in range(0, n, 256):  # in chunks: a float64 copy of (N, L, H, P) would be ~200 MB for a 1B model
        values = a[s:s + 256][..., positions].astype(np.float64)  # (n_chunk, L, H, P)
        base_sum[s:s + 256] = np.einsum("nlhp,np->nlh", values, keep[s:s + 256].astype(np.float64))
    return SequenceValues(target, base_sum, keep.sum(1), np.asarray(batch.valid, dtype=bool))


def resample_weights(n: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n) multiplicities of n sequences drawn with replacement, from `numpy.random.default_rng(seed)`:
    row b says how often each sequence occurs in resample b (the draws every head and class share)."""
    if n_boot < 1 or n < 1:
        raise ConfigError(f"a bootstrap needs n_boot >= 1 and at least one sequence, got n_boot={n_boot}, n={n}")
    draws = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))  # (B, N) sequence indices
    flat = (np.arange(n_boot)[:, None] * n + draws).ravel()
    return np.bincount(flat, minlength=n_boot * n).reshape(n_boot, n)


def bootstrap_selectivities(attn_rows, batch: InductionBatch, *, n_boot: int, seed: int, baseline_size: int = 50,
                            baseline_seed: int = 0, baseline_excludes_ab: bool = False,
                            chunk: int = 50) -> np.ndarray:
    """(n_boot, 6, L, H) replicates of the six selectivities (classes in HEAD_CLASSES order): each the ratio of
    means over one resample of the batch's sequences, all heads and classes from the same draws."""
    seqs = sequence_values(attn_rows, batch, baseline_size=baseline_size, baseline_seed=baseline_seed,
                           baseline_excludes_ab=baseline_excludes_ab)
    weights = resample_weights(seqs.n, n_boot, seed)
    return np.concatenate([seqs.selectivities(weights[i:i + chunk]) for i in range(0, n_boot, chunk)])


def percentile_interval(replicates: np.ndarray, point: np.ndarray, *, level: float = LEVEL
                        ) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval over axis 0 of `replicates` (B, ...), widened where needed to contain `point`.

    A percentile interval of a ratio can miss its own point value only when the replicates are degenerate (every
    resample equal up to rounding); the widening keeps lo <= value <= hi true by construction. NaN replicates (a
    resample without a valid sequence) are left out."""
    tail = 100 * (1 - level) / 2
    with warnings.catch_warnings():  # an all-NaN slice (no valid sequence in any resample) stays NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanpercentile(replicates, [tail, 100 - tail], axis=0)
    return np.fmin(lo, point), np.fmax(hi, point)
