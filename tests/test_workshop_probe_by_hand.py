"""Session 1 · The probe by hand: each check passes on the instructor's solution (run from the session source) and
fails on one deliberately wrong answer, naming the likely cause in one line."""

from __future__ import annotations

import numpy as np
import torch
from workshop_sessions import check_tests

SESSION = "01_probe_by_hand"


def _ref_targets(first_a, seq_len):
    q = seq_len - 1
    return {"induction": first_a + 1, "previous-token": q - 1, "duplicate-token": first_a, "first-token": 0,
            "self": q, "local": [q - 2, q - 3, q - 4, q - 5]}


def _wrong_six(rows, batch):
    """Every class averaged over the valid sequences (the paper: only induction and duplicate-token)."""
    from circuitdev.measure.positions import baseline_positions, local_positions

    a = torch.as_tensor(rows, dtype=torch.float64)
    base = a[..., torch.as_tensor(baseline_positions(batch.seq_len))].mean(dim=(0, 3)).clamp(min=1e-8)
    n, v, q = torch.arange(batch.n), torch.as_tensor(batch.valid), batch.seq_len - 1
    fa = torch.as_tensor(batch.first_a)

    def at(pos):
        return (a[n, :, :, pos][v].mean(0) / base).numpy()

    return {"induction": at(fa + 1), "duplicate-token": at(fa), "previous-token": at(torch.full_like(fa, q - 1)),
            "first-token": at(torch.zeros_like(fa)), "self": at(torch.full_like(fa, q)),
            "local": np.mean([at(torch.full_like(fa, p)) for p in local_positions(batch.seq_len)], axis=0)}


WRONG = {
    # one deliberately wrong implementation per check, and a phrase its verdict must contain
    "1.1": (lambda first_a, seq_len: {**_ref_targets(first_a, seq_len), "previous-token": seq_len - 1},
            "previous token is q - 1"),
    "1.2": (lambda rows, targets, valid, base: (
        torch.as_tensor(rows, dtype=torch.float64)[torch.arange(len(targets)), :, :, torch.as_tensor(targets)].mean(0)
        / torch.as_tensor(rows, dtype=torch.float64)[..., torch.as_tensor(base)].mean(dim=(0, 3)).clamp(min=1e-8)
    ).numpy(), "over the valid ones only"),
    "1.3": (_wrong_six, "the other four classes average over all of them"),
    "1.4": (lambda rows, first_a, positions: torch.as_tensor(rows, dtype=torch.float64)[
        ..., torch.as_tensor(positions)].mean(dim=(0, 3)).numpy(), "A and B are still in the baseline"),
}

(test_each_check_passes_on_the_instructor_solution, test_there_is_a_wrong_answer_for_every_check,
 test_each_check_fails_on_a_wrong_answer_and_says_what_differs) = check_tests(SESSION, WRONG)
