"""What the model does at a revision, read from the probe's own forward passes (issue 23): no second forward.

Three measures, each reduced to per-sequence values inside the nnsight trace that already runs (`capture` for the
induction batch, `prefix_pass` for the repeated batch), so the (B, T, V) logits never leave a chunk:

top1, loss_b   The induction batch's query (the second A, position q = T - 1): top-1 correct (argmax of the logits at
               q == B) and the cross-entropy of B there. Over ALL N sequences of the batch, valid or not, exactly as
               `ablation.metrics` scores the paper's ablations (the authors' `acc_top1` and `loss`): the no-ablation
               `acc_top1` of `ablation.evaluate` on the same batch is this top1 (tested).
icl_score      On the prefix-matching batch (`batch.repeated_batch`: n_prefix sequences of two equal halves, the
               second repeating the first; with `first_token_id` a BOS starts both halves), per sequence
                   mean loss on the first occurrence  -  mean loss on the repeat,
               where, with half = T // 2 and x the sequence, the first occurrence is the predictions of x[1..half-1]
               (logits at positions 0..half-2) and the repeat the predictions of the same tokens
               x[half+1..2*half-1] (logits at positions half..2*half-2). Both halves' token 0 is left out: it has no
               prediction in the first half (or is the BOS), and predicting x[half] asks the model to guess that the
               span restarts. Same tokens, in context or not: positive, and growing, when the model copies from its
               context (after Olsson et al. 2022's in-context-learning score, on repeated random spans instead of
               natural text). The score is the mean of the per-sequence differences.
norms          The residual stream's L2 norm at position 0 against the median over positions 1..T-1 of the same
               sequence ("massive activations"), per stream: "embed" = the input of layer 0 (the embedding output,
               HF's hidden_states[0]) and "l<i>" = the output of layer i (before the final norm: HF's last
               hidden state has the final layer norm applied, ours never does). norm_pos0 and norm_median are means
               over the N sequences; norm_ratio = norm_pos0 / norm_median is their RATIO OF MEANS -- the convention
               of the selectivities, and the three stored numbers then agree exactly. (With a BOS at position 0 the
               position-0 norm is the same for every sequence, so the two conventions differ only through the
               spread of the medians.) The median interpolates between the two middle values (numpy's median).

Intervals: the 95% percentile interval over the bootstrap resamples (`bootstrap.resample_weights`). top1 and loss_b
use THE SAME draws as the selectivities (`resample_weights(N, n_boot, boot_seed)`), so replicate b of a behaviour and
of every head's selectivity come from the same sequences; icl_score uses the prefix batch's own resamples
(`resample_weights(n_prefix, n_boot, boot_seed)`). `wilson_interval` is the binomial interval for a top-1 on a batch
of n sequences where no per-sequence resamples exist (ablations).

Numpy at import; torch is imported by the functions that run inside a trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from circuitdev.measure.bootstrap import percentile_interval, resample_weights
from circuitdev.schema import INTERVAL_LEVEL

if TYPE_CHECKING:
    import torch

# The per-revision values, in this order in the replicate file (sources.record_format.BEHAVIOUR_BOOT_COLUMNS).
BEHAVIOUR_VALUES = ("top1", "loss_b", "icl_score")
NORM_VALUES = ("norm_pos0", "norm_median", "norm_ratio")


def norm_streams(n_layers: int) -> list[str]:
    """Names of the residual streams whose norms are measured: "embed", "l0", ..., "l<L-1>"."""
    return ["embed", *(f"l{i}" for i in range(n_layers))]


# ------------------------------------------------------------------ reductions inside the trace (torch, per chunk)


def query_outcome(logits_q: "torch.Tensor", target: "torch.Tensor") -> dict[str, "torch.Tensor"]:
    """Per sequence at the query: correct (B,) bool = argmax of `logits_q` (B, V) is `target` (B,); loss (B,) fp32
    = cross-entropy of the target. Cast to fp32 first, as `ablation.query_logits` does."""
    import torch.nn.functional as F

    logits = logits_q.float()
    return {"correct": logits.argmax(-1) == target, "loss": F.cross_entropy(logits, target, reduction="none")}


def icl_difference(logits: "torch.Tensor", ids: "torch.Tensor") -> "torch.Tensor":
    """(B,) mean loss on the first occurrence minus mean loss on the repeat, for sequences `ids` (B, T) of two equal
    halves and their logits (B, T, V) (positions in the module docstring)."""
    import torch.nn.functional as F

    b, t = ids.shape
    half = t // 2
    first = slice(0, half - 1)  # logits at 0..half-2 predict x[1..half-1]
    repeat = slice(half, 2 * half - 1)  # logits at half..2*half-2 predict x[half+1..2*half-1] = x[1..half-1]

    def mean_loss(pos: slice) -> "torch.Tensor":
        lg = logits[:, pos].float()  # (B, half - 1, V)
        tgt = ids[:, pos.start + 1:pos.stop + 1]  # (B, half - 1)
        return F.cross_entropy(lg.reshape(-1, lg.shape[-1]), tgt.reshape(-1), reduction="none").view(b, -1).mean(-1)

    return mean_loss(first) - mean_loss(repeat)


def position_norms(hidden: "torch.Tensor") -> dict[str, "torch.Tensor"]:
    """Per sequence of a residual stream `hidden` (B, T, d): norm_pos0 (B,) = ||h[0]||, norm_median (B,) = the median
    of ||h[t]|| over t = 1..T-1 (interpolated, as numpy's median). fp32."""
    import torch

    norms = hidden.float().norm(dim=-1)  # (B, T)
    return {"norm_pos0": norms[:, 0], "norm_median": torch.quantile(norms[:, 1:], 0.5, dim=-1)}


# ------------------------------------------------------------------------------------- per revision (numpy)


@dataclass(frozen=True)
class SequenceBehaviour:
    """The per-sequence values one probe collected (None: not measured)."""

    correct: np.ndarray | None = None  # (N,) bool: top-1 at the query is B
    loss: np.ndarray | None = None  # (N,) cross-entropy of B at the query
    icl: np.ndarray | None = None  # (n_prefix,) first-occurrence minus repeat mean loss
    norm_pos0: np.ndarray | None = None  # (N, L + 1) streams in `norm_streams` order
    norm_median: np.ndarray | None = None  # (N, L + 1)


@dataclass(frozen=True)
class Behaviour:
    """One revision's behaviour: the values with their intervals, the per-stream norms, the replicates."""

    values: dict[str, float]  # top1, top1_lo, top1_hi, loss_b, ..., icl_score_hi (NaN where not measured)
    norms: dict[str, list[float]]  # norm_pos0 / norm_median / norm_ratio -> one value per stream
    streams: list[str]  # "embed", "l0", ...
    n: int  # sequences top1 and loss_b average over (the whole induction batch)
    n_prefix: int  # sequences of the ICL score
    n_boot: int  # resamples behind the intervals (0: no intervals)
    boot_seed: int
    replicates: np.ndarray | None = None  # (n_boot, 3) top1, loss_b, icl_score per resample (BEHAVIOUR_VALUES)

    def summary(self) -> dict:
        """The record sidecar's `behaviour` block (store.write_record)."""
        return {"n": self.n, "n_prefix": self.n_prefix, "n_boot": self.n_boot, "boot_seed": self.boot_seed,
                "sequences": "top1 and loss_b: all n sequences of the induction batch (as ablation.metrics); "
                             "icl_score: the n_prefix repeated sequences",
                **{k: _num(v) for k, v in self.values.items()},
                "norm_streams": list(self.streams), **{k: [_num(x) for x in v] for k, v in self.norms.items()}}


def _num(x) -> float | None:
    x = float(x)
    return None if np.isnan(x) else x  # JSON has no NaN


def summarise(seqs: SequenceBehaviour, *, n_boot: int, boot_seed: int, level: float = INTERVAL_LEVEL) -> Behaviour:
    """Point values, intervals and replicates from per-sequence values (module docstring: which resamples)."""
    values: dict[str, float] = {}
    columns: list[np.ndarray] = []
    n = len(seqs.correct) if seqs.correct is not None else 0
    m = len(seqs.icl) if seqs.icl is not None else 0
    w_batch = resample_weights(n, n_boot, boot_seed) if n_boot and n else None  # (B, N) the selectivities' draws
    w_prefix = resample_weights(m, n_boot, boot_seed) if n_boot and m else None  # (B, n_prefix) the prefix batch's
    for name, per_seq, w in (("top1", seqs.correct, w_batch), ("loss_b", seqs.loss, w_batch),
                             ("icl_score", seqs.icl, w_prefix)):
        x = None if per_seq is None else np.asarray(per_seq, dtype=np.float64)
        point = float(x.mean()) if x is not None and len(x) else np.nan
        reps = (w @ x) / w.sum(1) if w is not None and x is not None else np.full(n_boot, np.nan)  # (B,)
        lo, hi = (percentile_interval(reps, np.array(point), level=level) if w is not None and x is not None
                  else (np.nan, np.nan))
        values.update({name: point, f"{name}_lo": float(lo), f"{name}_hi": float(hi)})
        columns.append(reps)
    streams: list[str] = []
    norms: dict[str, list[float]] = {}
    if seqs.norm_pos0 is not None and seqs.norm_median is not None:
        pos0 = np.asarray(seqs.norm_pos0, dtype=np.float64).mean(0)  # (L + 1,)
        med = np.asarray(seqs.norm_median, dtype=np.float64).mean(0)
        streams = norm_streams(len(pos0) - 1)
        norms = {"norm_pos0": pos0.tolist(), "norm_median": med.tolist(), "norm_ratio": (pos0 / med).tolist()}
    replicates = np.stack(columns, axis=1) if n_boot else None  # (B, 3)
    return Behaviour(values, norms, streams, n, m, n_boot, boot_seed, replicates)


# ------------------------------------------------------------------------------- binomial interval (ablations)


def wilson_interval(successes, n, *, level: float = INTERVAL_LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of a proportion successes / n (arrays broadcast): the binomial interval for a top-1 on
    a batch of n sequences (no per-sequence resamples needed; good near 0 and 1, where the normal one fails)."""
    from statistics import NormalDist

    k, n = np.asarray(successes, dtype=np.float64), np.asarray(n, dtype=np.float64)
    z = NormalDist().inv_cdf(0.5 + level / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    lo = np.where(k <= 0, 0.0, np.clip(centre - half, 0.0, 1.0))  # exact at the ends, not 1e-17 off
    hi = np.where(k >= n, 1.0, np.clip(centre + half, 0.0, 1.0))
    return lo, hi
