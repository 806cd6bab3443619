"""The participation-ratio signal (method reference §3) and its trajectory features.

PR of a head = exp(entropy of its normalised squared singular values), from the raw (uncentred, unnormalised)
[N, d_head] matrix of its outputs at the query position. 1 for a rank-1 matrix, d for an isotropic one.
"""

from __future__ import annotations

import numpy as np
import torch

from circuitdev.errors import ConfigError
from circuitdev.measure.pr_integral import pr_integral

_EPS_TOTAL = 1e-12  # floor on the summed energy (all-zero matrix)
_EPS_LOG = 1e-12  # inside the log, as the authors write it


def participation_ratio(x) -> float:
    """PR of a 2-D array [N, d]: exp(-sum p_i log(p_i + 1e-12)), p_i = s_i^2 / max(sum s^2, 1e-12)."""
    m = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x)
    if m.ndim != 2:
        raise ConfigError(f"participation_ratio takes a 2-D [N, d] array, got shape {tuple(m.shape)}")
    return float(participation_ratios(m[None])[0])


def participation_ratios(m: torch.Tensor) -> np.ndarray:
    """Batched PR over leading dims: m is (..., N, d) → (...,). Computed in float64 for a stable spectrum."""
    s = torch.linalg.svdvals(m.double())  # (..., min(N, d))
    energy = s**2
    p = energy / torch.clamp(energy.sum(-1, keepdim=True), min=_EPS_TOTAL)
    entropy = -(p * torch.log(p + _EPS_LOG)).sum(-1)
    return torch.exp(entropy).numpy()


def head_prs(head_out: torch.Tensor, *, n: int | None = None) -> np.ndarray:
    """(L, H) PR per head from captured outputs (N, L, H, d_head); `n` keeps the first n rows (the paper: 500)."""
    z = head_out if n is None else head_out[:n]
    if z.shape[0] < 1:
        raise ConfigError("no rows to compute a participation ratio from")
    return participation_ratios(z.permute(1, 2, 0, 3))  # (L, H, N, d) -> (L, H)


def trajectory_features(pr: np.ndarray, tokens_b: np.ndarray) -> dict[str, np.ndarray]:
    """The authors' static trajectory features over revisions (last axis of `pr`, aligned with `tokens_b`).

    integral = `pr_integral.pr_integral`: the trapezoid of max(PR - 1, 0) over ln(max(tokens_B, 1)) (revisions below
    1B tokens all sit at log 0 and contribute nothing, a quirk of the authors' clip kept for fidelity).
    spread = max - min.
    """
    pr = np.asarray(pr, dtype=float)
    return {
        "integral": pr_integral(pr, tokens_b),
        "spread": pr.max(-1) - pr.min(-1),
        "final_pr": pr[..., -1],
        "max_pr": pr.max(-1),
        "min_pr": pr.min(-1),
    }
