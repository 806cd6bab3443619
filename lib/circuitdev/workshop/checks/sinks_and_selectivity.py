"""Session 3 · Sinks, and what "selectivity" hides (notebooks/workshop/03_sinks_and_selectivity.py): the all-query
first-token score, the mass-to-selectivity relation and its inverse, the share of queries that park on position 0."""

from __future__ import annotations

import numpy as np

from circuitdev.workshop.checks.base import Fail, as_numpy, exercise, expect
from circuitdev.workshop.checks.synthetic import random_patterns, random_state, small_batch

PARKING_EPS = 0.25  # 3.3's eps: exact in float32 and float64 alike (see ex_3_3)


def _allq_reference(attn, skip: int):
    a = as_numpy(attn).astype(np.float64)  # (N, H, T, T)
    t = a.shape[-1]
    q = np.arange(skip, t)
    col0 = a[:, :, q, 0]  # (N, H, Q)
    mass = col0.mean(axis=(0, 2))
    base = ((1 - col0) / q).mean(axis=(0, 2))
    return mass, mass / np.maximum(base, 1e-8)


@exercise
def ex_3_1(allq_first_token) -> str:
    """allq_first_token(attn (N, H, T, T), skip) -> (mass (H,), selectivity (H,))."""
    attn = random_patterns(5, 3, 20, seed=13, sink=3.0)
    got = allq_first_token(attn.clone(), 4)
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise Fail(f"the result is a {type(got).__name__}, expected a pair (mass, selectivity)")
    mass, sel = _allq_reference(attn, 4)
    a = attn.double().numpy()
    q = np.arange(4, 20)
    col0 = a[:, :, q, 0]
    expect(got[0], mass, what="the mass on position 0",
           causes=[("leave out the first `skip` queries", a[:, :, :, 0].mean(axis=(0, 2)))],
           hint="mean over sequences and queries q >= skip of attn[..., q, 0]")
    causes = [("the other keys of query q are 1..q: q of them, not T - 1",
               mass / ((1 - col0) / 19).mean(axis=(0, 2))),
              ("a mean of per-query ratios; divide the mean mass by the mean baseline",
               (col0 / np.maximum((1 - col0) / q, 1e-8)).mean(axis=(0, 2))),
              ("leave out the first `skip` queries", _allq_reference(attn, 1)[1])]
    expect(got[1], sel, what="the all-query selectivity", causes=causes)
    return "mass and all-query selectivity match the probe's definition (circuitdev.measure.capture)"


@exercise
def ex_3_2(selectivity_from_mass, mass_for_selectivity) -> str:
    """selectivity_from_mass(m, T) and its inverse mass_for_selectivity(s, T)."""
    import torch

    from circuitdev.measure.screen import selectivities

    masses = np.array([0.05, 0.11, 0.32, 0.6, 0.9])
    for t in (64, 256):
        batch = small_batch(4, t, seed=14)
        rows = np.zeros((4, 1, len(masses), t))
        rows[..., 0] = masses
        rows[..., 1:] = ((1 - masses) / (t - 1))[:, None]  # the rest spread evenly over keys 1..T-1
        lib = selectivities(torch.tensor(rows, dtype=torch.float32), batch)["first-token"][0]  # (H,)
        got = np.array([selectivity_from_mass(float(m), t) for m in masses])
        causes = [("spread evenly, the other T - 1 keys get (1 - m) / (T - 1) each: selectivity = m(T-1)/(1-m)",
                   masses * t / (1 - masses)),
                  ("the baseline is the attention per key, (1 - m) / (T - 1), not the whole rest 1 - m",
                   masses / (1 - masses))]
        expect(got, lib, what=f"selectivity_from_mass(m, {t}) for m = {masses.tolist()}", causes=causes,
               rtol=2e-4, hint="the screen of circuitdev on rows with mass m on position 0 and the rest spread "
                               "evenly gives these values")
        back = np.array([mass_for_selectivity(float(s), t) for s in lib])
        expect(back, masses, what=f"mass_for_selectivity(selectivity_from_mass(m, {t}), {t})", rtol=2e-4,
               causes=[("invert s = m(T-1)/(1-m) for m: m = s / (s + T - 1)", lib / (lib + t))])
    return "matches the screen numerically at T = 64 and 256, and the inverse round-trips"


def _parking_reference(attn0, eps: float, skip: int) -> np.ndarray:
    a = as_numpy(attn0)[..., skip:]  # (N, L, H, Q)
    return (a > eps).mean(axis=(0, 3))


@exercise
def ex_3_3(parking_share) -> str:
    """parking_share(attn0 (N, L, H, T), eps, skip) -> (L, H): share of (sequence, query >= skip) above eps."""
    eps = PARKING_EPS
    rng = random_state(15)
    attn0 = rng.beta(0.6, 1.4, size=(10, 2, 3, 24)).astype(np.float32)
    # exactly at eps; 0.25 is exact in float32 and float64 alike, so an answer that converts the float32 input
    # to float64 (or not) compares the same (0.3 would not be: float32(0.3) > 0.3 in float64)
    attn0[:, 1, 2, ::3] = eps
    attn0[..., :4] = 1.0  # the first queries see little else: leave them out
    got = parking_share(attn0.copy(), eps, 4)
    causes = [("the share of queries whose attention on position 0 is ABOVE eps (a mean of booleans), not the "
               "mean attention", attn0[..., 4:].mean(axis=(0, 3))),
              ("leave out the first `skip` queries", _parking_reference(attn0, eps, 0)),
              ("'parks' means attention > eps (strictly)", (attn0[..., 4:] >= eps).mean(axis=(0, 3)))]
    expect(got, _parking_reference(attn0, eps, 4), what=f"parking_share(attn0, {eps:g}, 4)", causes=causes)
    return "right on 6 heads (values exactly at eps, the first queries left out)"
