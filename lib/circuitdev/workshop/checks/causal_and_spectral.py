"""Session 4 · Causal checks and the spectral signal (notebooks/workshop/04_causal_and_spectral.py): zero ablation of
heads, the paper's matched-random control, the participation ratio, whether PR rises before selectivity."""

from __future__ import annotations

import numpy as np

from circuitdev.schema import MATCHED_RANDOM_SEED
from circuitdev.workshop.checks.base import Fail, exercise, expect
from circuitdev.workshop.checks.synthetic import random_state


@exercise
def ex_4_1(zero_heads) -> str:
    """zero_heads(z (B, T, H * d_head), heads, d_head) -> a copy with those heads' slices set to 0."""
    import torch

    z = torch.tensor(random_state(16).randn(2, 5, 4 * 3), dtype=torch.float32)  # (B, T, H * d_head), H=4, d_head=3
    before = z.clone()
    got = zero_heads(z, [1, 3], 3)
    if not torch.equal(z, before):
        raise Fail("zero_heads changed its input in place; return a modified copy (z.clone() first)")
    want = before.clone().numpy()
    for h in (1, 3):
        want[..., h * 3:(h + 1) * 3] = 0
    wrong = before.clone().numpy()
    for h in (1, 3):
        wrong[..., h * 4:(h + 1) * 4] = 0
    expect(got, want, what="zero_heads(z, [1, 3], d_head=3)",
           causes=[("head h owns columns h*d_head .. (h+1)*d_head - 1 (multiply by d_head, not by the number "
                    "of heads)", wrong)])
    expect(zero_heads(before.clone(), [], 3), before.numpy(), what="zero_heads(z, [], 3)",
           hint="no heads: z unchanged")
    return "zeroes exactly the heads' slices and leaves its input untouched"


def _spec(x) -> dict[int, list[int]] | None:
    if not isinstance(x, dict):
        return None
    try:
        return {int(k): sorted(int(h) for h in v) for k, v in x.items() if len(v)}
    except (TypeError, ValueError):
        return None


@exercise
def ex_4_2(matched_random) -> str:
    """matched_random(spec, n_heads, seed) -> {layer: heads}, the paper's matched-random control."""
    from circuitdev.measure.ablation import matched_random as reference

    seed = MATCHED_RANDOM_SEED
    cases = [({1: [0, 2], 3: [1]}, 4, seed), ({0: [3], 2: [0, 1, 2]}, 6, 7), ({1: [0, 1, 2, 3]}, 4, seed)]
    for spec, n_heads, case_seed in cases:
        raw = matched_random({k: list(v) for k, v in spec.items()}, n_heads, case_seed)
        got, want = _spec(raw), _spec(reference(spec, n_heads, seed=case_seed))
        what = f"matched_random({spec}, {n_heads}, seed={case_seed})"
        if got is None:
            raise Fail(f"{what} is a {type(raw).__name__}, expected a dict {{layer: [heads]}}")
        if got == want:
            continue
        if set(got) - set(spec):
            raise Fail(f"{what} = {got} uses layers {sorted(set(got) - set(spec))} that the spec does not")
        for layer, heads in got.items():
            if set(heads) & set(spec[layer]):
                raise Fail(f"{what} = {got} draws screened heads {sorted(set(heads) & set(spec[layer]))} in "
                           f"layer {layer}; draw from the OTHER heads of the layer")
        counts = {k: len(v) for k, v in got.items()}
        if counts != {k: len(v) for k, v in want.items()}:
            raise Fail(f"{what} = {got}: the counts per layer should be {{layer: min(len(spec heads), other "
                       f"heads)}} = {{{', '.join(f'{k}: {len(v)}' for k, v in want.items())}}}")
        raise Fail(f"{what} = {got}, the paper's draw is {want}: the layers and counts are right, the random "
                   "stream is not; use ONE RandomState(seed) drawn over the layers in the spec's order, "
                   "rng.choice(eligible, size=k, replace=False)")
    return f"the paper's draw (RandomState({seed})) on 3 specs, a fully screened layer included"


@exercise
def ex_4_3(participation_ratio) -> str:
    """participation_ratio(M (N, d)) -> float."""
    from circuitdev.measure.spectral import participation_ratio as reference

    rng = random_state(17)
    mats = {"a rank-1 matrix": np.outer(rng.randn(40), rng.randn(8)),
            "an isotropic matrix": np.linalg.qr(rng.randn(40, 8))[0] * 3.0,
            "a random matrix with a mean": rng.randn(40, 8) * np.linspace(0.2, 2, 8) + 1.5}
    for name, m in mats.items():
        want = reference(m)
        got = participation_ratio(m.copy())
        s = np.linalg.svd(m, compute_uv=False)
        p = s**2 / (s**2).sum()
        pc = np.linalg.svd(m - m.mean(0), compute_uv=False) ** 2
        pc = pc / pc.sum()
        q = s / s.sum()
        causes = [("that is the inverse participation ratio (sum s^2)^2 / sum s^4; the paper's PR is exp(entropy)",
                   1 / (p**2).sum()),
                  ("the paper's matrix is not centred: no mean subtraction", np.exp(-(pc * np.log(pc + 1e-12)).sum())),
                  ("the weights are the squared singular values s_i^2 (energy), normalised",
                   np.exp(-(q * np.log(q + 1e-12)).sum()))]
        expect(got, want, what=f"the PR of {name}", causes=causes, rtol=1e-5)
    return "matches circuitdev.measure.spectral.participation_ratio (rank 1 -> 1, isotropic -> d, a mean kept)"


def _lead_reference(pr, sel, threshold: float, level: float):
    from circuitdev.analysis.findings.f5_pr_lead import pr_elevated

    formed = np.flatnonzero(np.asarray(sel) >= threshold)
    up = np.flatnonzero(pr_elevated(np.asarray(pr, dtype=float), level=level))
    return (int(formed[0]) if len(formed) else None, int(up[0]) if len(up) else None)


@exercise
def ex_4_4(pr_lead) -> str:
    """pr_lead(pr (R,), sel (R,), threshold, level) -> (formation index, elevation index), None where never."""
    from circuitdev.analysis.findings.f5_pr_lead import pr_elevated

    cases = [(np.array([1.2, 1.3, 3.0, 6.0, 9.0, 8.0]), np.array([1, 2, 5, 20, 70, 90]), 50.0, 0.5),
             (np.array([2.0, 2.2, 2.1, 5.0, 5.5]), np.array([1, 60, 80, 90, 99]), 50.0, 0.5),
             (np.array([1.0, 1.5, 2.5, 4.0]), np.array([1, 2, 3, 4]), 50.0, 0.25),
             (np.array([3.0, 3.0, 3.0]), np.array([100, 100, 100]), 50.0, 0.5)]
    for pr, sel, threshold, level in cases:
        got = pr_lead(pr.copy(), sel.copy(), threshold, level)
        want = _lead_reference(pr, sel, threshold, level)
        what = f"pr_lead(pr={pr.tolist()}, sel={sel.tolist()}, {threshold:g}, level={level})"
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise Fail(f"{what} is {got!r}, expected a pair (formation index, elevation index)")
        got = tuple(None if g is None else int(g) for g in got)
        if got == want:
            continue
        raw = np.flatnonzero(pr >= level * pr.max())
        causes = {(want[0], int(raw[0]) if len(raw) else None):
                  "elevated means PR - 1 >= level * max(PR - 1): the signal is PR - 1 (PR is 1 at rank 1)"}
        up = pr_elevated(pr, level=level)
        if up.any():
            causes[(want[0], int(np.flatnonzero(up)[-1]))] = "the FIRST elevated revision, not the last"
        hint = causes.get(got, "formation = first index with sel >= threshold; elevation = first index with "
                               "PR - 1 >= level * max(PR - 1); None where there is none")
        raise Fail(f"{what} = {got}, expected {want}; {'likely cause' if got in causes else 'hint'}: {hint}")
    return "formation and PR elevation right on 4 trajectories (one never forms, one flat PR)"
