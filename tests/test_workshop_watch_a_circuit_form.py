"""Session 2 · Watch a circuit form: each check passes on the instructor's solution (run from the session source)
and fails on one deliberately wrong answer, naming the likely cause in one line; other right answers pass too."""

from __future__ import annotations

import numpy as np
from workshop_sessions import check_tests

from circuitdev.workshop import checks

SESSION = "02_watch_a_circuit_form"

WRONG = {
    # one deliberately wrong implementation per check, and a phrase its verdict must contain
    "2.1": (lambda sel, t: (np.asarray(sel) >= t).argmax(0), "never reaches the threshold gets -1"),
    "2.2": (lambda steps, sel, t, k: (lambda c: int(steps[np.flatnonzero(c >= k)[0]]) if (c >= k).any() else None)(
        (np.maximum.accumulate(np.asarray(sel) >= t, axis=0)).reshape(len(steps), -1).sum(1)),
            "a head that fell back does not count"),
    "2.3": (lambda attn: (lambda a, h: a[:, :, np.arange(h, 2 * h), np.arange(0, h)].mean(axis=(0, 2)))(
        np.asarray(attn, float), np.asarray(attn).shape[-1] // 2), "the token AFTER the earlier copy"),
}

(test_each_check_passes_on_the_instructor_solution, test_there_is_a_wrong_answer_for_every_check,
 test_each_check_fails_on_a_wrong_answer_and_says_what_differs) = check_tests(SESSION, WRONG)


def test_other_right_answers_pass_too():
    """An answer a participant wrote cold, not the instructor's: a step returned as a numpy integer must not fail."""
    def milestone(steps, sel, threshold, k):  # counts per revision, then the first
        counts = (np.asarray(sel) >= threshold).reshape(len(steps), -1).sum(1)
        ok = np.flatnonzero(counts >= k)
        return None if len(ok) == 0 else steps[ok[0]]

    verdict = checks.check("2.2", milestone)
    assert verdict.ok, verdict.line()
