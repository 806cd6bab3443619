"""Session 2 · Watch a circuit form (notebooks/workshop/02_watch_a_circuit_form.py): when each head first crosses the
threshold, a milestone (the first step with k heads formed), the prefix-matching score (Olsson et al.)."""

from __future__ import annotations

import numpy as np

from circuitdev.workshop.checks.base import as_numpy, exercise, expect
from circuitdev.workshop.checks.synthetic import random_patterns, random_state


def _first_crossing_reference(sel: np.ndarray, threshold: float) -> np.ndarray:
    hit = np.asarray(sel) >= threshold  # (R, L, H)
    return np.where(hit.any(0), hit.argmax(0), -1)


@exercise
def ex_2_1(first_crossing) -> str:
    """first_crossing(sel (R, L, H), threshold) -> (L, H) int, -1 where never."""
    rng = random_state(11)
    sel = np.exp(rng.uniform(-1, 6, size=(8, 3, 4)))  # (R, L, H), 0.4x .. 400x
    sel[:, 0, 0] = 1.0  # never forms
    sel[:, 1, 2] = [1, 2, 50, 200, 20, 60, 80, 90]  # exactly 50 at revision 2, dips later
    sel[:, 2, 3] = [1, 60, 10, 10, 10, 10, 10, 10]  # crosses once and falls back
    want = _first_crossing_reference(sel, 50.0)
    hit = sel >= 50
    last = np.where(hit.any(0), sel.shape[0] - 1 - hit[::-1].argmax(0), -1)
    strict = _first_crossing_reference(sel + 0 * sel, 50.0 + 1e-9)
    causes = [("the first revision where sel >= threshold (>=, not >)", strict),
              ("the FIRST revision at or above the threshold, not the last", last),
              ("a head that never reaches the threshold gets -1 (argmax alone gives 0)", hit.argmax(0))]
    expect(first_crossing(sel.copy(), 50.0), want, what="first_crossing(sel, 50)", causes=causes)
    expect(first_crossing(sel.copy(), 1e9), np.full((3, 4), -1), what="first_crossing(sel, 1e9)",
           hint="no head reaches 1e9x: every entry is -1")
    return "right on 12 heads (one never forms, one at exactly 50x, one that falls back)"


def _milestone_reference(steps, sel, threshold, k):
    counts = (np.asarray(sel) >= threshold).reshape(len(steps), -1).sum(1)
    hit = np.flatnonzero(counts >= k)
    return int(steps[hit[0]]) if len(hit) else None


@exercise
def ex_2_2(milestone) -> str:
    """milestone(steps (R,), sel (R, L, H), threshold, k) -> first step with >= k heads at >= threshold, else None."""
    steps = np.array([0, 16, 64, 160, 250, 500, 750, 1000])
    sel = np.ones((8, 2, 3))
    sel[2:4, 1, 0] = 80  # one head forms early and falls back
    sel[5:, 1, 1] = [50, 70, 90]
    sel[6:, 1, 2] = [55, 65]
    sel[4, 0, 1] = 60
    cases = [(50.0, 1, 64), (50.0, 2, 750), (50.0, 3, None), (60.0, 2, 1000)]
    for threshold, k, want in cases:
        got = milestone(steps.copy(), sel.copy(), threshold, k)
        ever = np.maximum.accumulate(sel, axis=0)
        causes = [("count the heads at or above the threshold AT each revision (a head that fell back does not "
                   "count)", _milestone_reference(steps, ever, threshold, k)),
                  ("return the step (steps[r]), not the revision index r",
                   None if want is None else int(np.flatnonzero(steps == want)[0])),
                  ("'at least k heads' is count >= k", _milestone_reference(steps, sel, threshold, k + 1))]
        expect(got, want, what=f"milestone(steps, sel, {threshold:g}, k={k})",
               causes=[c for c in causes if c[1] != want])
    return "right on 4 cases (an early head that falls back, a milestone never reached)"


def _prefix_reference(attn) -> np.ndarray:
    a = as_numpy(attn).astype(np.float64)  # (N, H, T, T)
    t = a.shape[-1]
    half = t // 2
    q = np.arange(half, t)
    return a[:, :, q, q - half + 1].mean(axis=(0, 2))


@exercise
def ex_2_3(prefix_matching) -> str:
    """prefix_matching(attn (N, H, T, T)) -> (H,), sequences whose second half repeats the first."""
    attn = random_patterns(6, 3, 16, seed=12)
    got = prefix_matching(attn.clone())
    a = attn.double().numpy()
    half = 8
    q = np.arange(half, 16)
    causes = [("the key is the token AFTER the earlier copy, i - half + 1 (i - half is the copy itself)",
               a[:, :, q, q - half].mean(axis=(0, 2))),
              ("average over the queries of the second half only (positions half .. T-1)",
               np.stack([a[:, :, i, max(i - half + 1, 0)] for i in range(16)], -1).mean(axis=(0, 2))),
              ("the key after the earlier copy of query i is i - half + 1, not i - half - 1",
               a[:, :, q, q - half - 1].mean(axis=(0, 2)))]
    expect(got, _prefix_reference(attn), what="the prefix-matching score", causes=causes)
    return "matches the prefix-matching score (Olsson et al.) on 6 random causal patterns"
