"""Session 4 · Causal checks and the spectral signal: each check passes on the instructor's solution (run from the
session source) and fails on one deliberately wrong answer, naming the likely cause in one line."""

from __future__ import annotations

import numpy as np
from workshop_sessions import check_tests, session

SESSION = "04_causal_and_spectral"


def _pr_inverse(m):
    s = np.linalg.svd(np.asarray(m, float), compute_uv=False)
    p = s**2 / (s**2).sum()
    return float(1 / (p**2).sum())


def _lead_raw_pr(pr, sel, threshold, level):
    pr, sel = np.asarray(pr, float), np.asarray(sel, float)
    formed = np.flatnonzero(sel >= threshold)
    up = np.flatnonzero(pr >= level * pr.max())  # PR, not PR - 1
    return (int(formed[0]) if len(formed) else None, int(up[0]) if len(up) else None)


def _matched_per_layer_rng(spec, n_heads, seed):
    out = {}
    for layer, heads in spec.items():
        rng = np.random.RandomState(seed)  # a fresh stream per layer
        eligible = [h for h in range(n_heads) if h not in heads]
        k = min(len(heads), len(eligible))
        if k:
            out[layer] = sorted(int(h) for h in rng.choice(eligible, size=k, replace=False))
    return out


def _zero_in_place(z, heads, d_head):
    for h in heads:
        z[..., h * d_head:(h + 1) * d_head] = 0
    return z


WRONG = {
    # one deliberately wrong implementation per check, and a phrase its verdict must contain
    "4.1": (_zero_in_place, "changed its input in place"),
    "4.2": (_matched_per_layer_rng, "the random stream is not"),
    "4.3": (_pr_inverse, "inverse participation ratio"),
    "4.4": (_lead_raw_pr, "the signal is PR - 1"),
}

(test_each_check_passes_on_the_instructor_solution, test_there_is_a_wrong_answer_for_every_check,
 test_each_check_fails_on_a_wrong_answer_and_says_what_differs) = check_tests(SESSION, WRONG)


def test_the_sessions_first_seed_is_the_papers():
    """The parameters cell must hold literals (papermill), so the matched-random seed is written there; it must be
    the one the library and the check use."""
    from circuitdev.book.parameters import read_parameters
    from circuitdev.schema import MATCHED_RANDOM_SEED

    seeds = next(p for p in read_parameters(session(SESSION).source) if p.name == "seeds")
    assert seeds.default[0] == MATCHED_RANDOM_SEED
