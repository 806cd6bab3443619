"""Session 3 · Sinks, and what "selectivity" hides: each check passes on the instructor's solution (run from the
session source) and fails on one deliberately wrong answer, naming the likely cause in one line; other right answers
pass too."""

from __future__ import annotations

import numpy as np
import torch
from workshop_sessions import check_tests

from circuitdev.workshop import checks

SESSION = "03_sinks_and_selectivity"


def _allq_over_t(attn, skip):
    """The all-query baseline with T - 1 other keys for every query (query q has q)."""
    c0 = np.asarray(attn, float)[:, :, skip:, 0]
    mass = c0.mean(axis=(0, 2))
    return mass, mass / ((1 - c0) / (np.asarray(attn).shape[-1] - 1)).mean(axis=(0, 2))


WRONG = {
    # one deliberately wrong implementation per check, and a phrase its verdict must contain
    "3.1": (_allq_over_t, "q of them, not T - 1"),
    "3.2": ((lambda m, t: m * t / (1 - m), lambda s, t: s / (s + t)), "selectivity = m(T-1)/(1-m)"),
    "3.3": (lambda attn0, eps, skip: np.asarray(attn0)[..., skip:].mean(axis=(0, 3)), "not the mean attention"),
}

(test_each_check_passes_on_the_instructor_solution, test_there_is_a_wrong_answer_for_every_check,
 test_each_check_fails_on_a_wrong_answer_and_says_what_differs) = check_tests(SESSION, WRONG)


def test_other_right_answers_pass_too():
    """An answer a participant wrote cold, not the instructor's: other dtypes and libraries must not fail a check (a
    float64 answer once failed 3.3 on values at eps: float32(0.3) > 0.3)."""
    def parking_share(attn0, eps, skip):  # torch, float64
        a = torch.as_tensor(attn0, dtype=torch.float64)[..., skip:]
        return (a > eps).double().mean(dim=(0, 3)).numpy()

    verdict = checks.check("3.3", parking_share)
    assert verdict.ok, verdict.line()
