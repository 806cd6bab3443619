"""Session 1 · The probe by hand (notebooks/workshop/01_probe_by_hand.py): the six class targets, the selectivity of
one class, all six against `circuitdev.measure.screen.selectivities`, the toy panel's baseline without A and B."""

from __future__ import annotations

from typing import Callable

import numpy as np

from circuitdev.workshop.checks.base import Fail, as_numpy, exercise, expect
from circuitdev.workshop.checks.synthetic import random_rows, small_batch


def _targets_reference(first_a: int, seq_len: int) -> dict[str, list[int]]:
    from circuitdev.measure.positions import local_positions

    q = seq_len - 1
    return {"induction": [first_a + 1], "previous-token": [q - 1], "duplicate-token": [first_a], "first-token": [0],
            "self": [q], "local": sorted(local_positions(seq_len))}


def _as_positions(value) -> list[int] | None:
    try:
        return sorted(int(v) for v in np.atleast_1d(as_numpy(value)).ravel())
    except (TypeError, ValueError):
        return None


@exercise
def ex_1_1(class_targets) -> str:
    """class_targets(first_a, seq_len) -> {class: key position(s)} for the six classes."""
    from circuitdev.schema import HEAD_CLASSES

    for first_a, t in ((7, 64), (20, 256), (3, 12)):
        got = class_targets(first_a, t)
        want = _targets_reference(first_a, t)
        what = f"class_targets({first_a}, {t})"
        if not isinstance(got, dict):
            raise Fail(f"{what} is a {type(got).__name__}, expected a dict {{class: position(s)}}")
        missing = [c for c in HEAD_CLASSES if c not in got]
        if missing:
            raise Fail(f"{what} lacks the class(es) {missing}; the keys are the six names of "
                       "circuitdev.HEAD_CLASSES, hyphenated")
        causes = {"induction": "induction heads attend to B = first_a + 1, the token after the first A",
                  "duplicate-token": "duplicate-token heads attend to the first A itself (first_a)",
                  "previous-token": "the query is q = T - 1; its previous token is q - 1 = T - 2",
                  "self": "the query attends to itself at q = T - 1",
                  "first-token": "the first token is position 0",
                  "local": "local = the four keys q-2, q-3, q-4, q-5 (q-1 is the previous token)"}
        for c in HEAD_CLASSES:
            g = _as_positions(got[c])
            if g != want[c]:
                raise Fail(f"{what}[{c!r}] is {g if g is not None else got[c]!r}, expected {want[c]}; "
                           f"hint: {causes[c]}")
    return "the six targets are right at T = 64, 256 and 12"


def _one_class_reference(rows, targets, valid, baseline) -> np.ndarray:
    a = as_numpy(rows).astype(np.float64)  # (N, L, H, T)
    n = np.arange(a.shape[0])
    at = a[n, :, :, np.asarray(targets)]  # (N, L, H)
    base = a[..., np.asarray(baseline)].mean(axis=(0, 3))  # (L, H)
    return at[np.asarray(valid)].mean(0) / np.maximum(base, 1e-8)


@exercise
def ex_1_2(selectivity_one_class) -> str:
    """selectivity_one_class(attn_rows, targets, valid, baseline) -> (L, H)."""
    import torch

    from circuitdev.measure.positions import baseline_positions
    from circuitdev.measure.screen import selectivities

    batch = small_batch()
    rows = random_rows(batch.n, 2, 3, batch.seq_len, seed=2)
    base = baseline_positions(batch.seq_len)
    got = selectivity_one_class(rows.clone(), batch.first_a + 1, batch.valid.copy(), base.copy())
    expect(got, selectivities(rows, batch)["induction"], what="the induction selectivity",
           hint="mean attention at the targets (valid sequences) divided by the mean at the baseline positions "
                "(all sequences, all positions)")
    # an independent case: invalid rows, a head that never looks at the baseline (the 1e-8 floor)
    b2 = small_batch(24, 16, seed=3, invalid=(0, 5, 6))
    r2 = random_rows(b2.n, 1, 3, 16, seed=4).numpy()
    p2 = baseline_positions(16, 6)
    r2[:, 0, 2, :] = 0.0
    r2[np.arange(b2.n), 0, 2, b2.first_a + 1] = 1.0  # head 2 puts everything on B
    r2 = torch.tensor(r2)
    args = (b2.first_a + 1, b2.valid.copy(), p2.copy())
    want = _one_class_reference(r2, *args)
    a = r2.double().numpy()
    ratio = a[np.arange(b2.n), :, :, b2.first_a + 1] / np.maximum(a[..., p2].mean(-1), 1e-8)
    causes = [("a mean of per-sequence ratios; the paper divides the means (average first, then divide)",
               ratio[b2.valid].mean(0)),
              ("the target mean is over every sequence; average it over the valid ones only",
               _one_class_reference(r2, b2.first_a + 1, np.ones(b2.n, bool), p2)),
              ("no floor on the baseline: divide by max(baseline, 1e-8)",
               a[np.arange(b2.n), :, :, b2.first_a + 1][b2.valid].mean(0) / a[..., p2].mean(axis=(0, 3))),
              ("the baseline is averaged over the valid sequences only; the paper uses all of them",
               a[np.arange(b2.n), :, :, b2.first_a + 1][b2.valid].mean(0)
               / np.maximum(a[b2.valid][..., p2].mean(axis=(0, 3)), 1e-8))]
    expect(selectivity_one_class(r2.clone(), *[x.copy() for x in args]), want,
           what="the selectivity (3 invalid rows, a head with no baseline attention)", causes=causes)
    return "matches circuitdev.measure.screen.selectivities and an independent case (invalid rows, the floor)"


def _six_reference(rows, batch, valid_for: Callable[[str], np.ndarray]) -> dict[str, np.ndarray]:
    """The six selectivities from `_one_class_reference`, with the rows each class averages over chosen by
    `valid_for(class)` (the paper: the valid rows for induction and duplicate-token, all rows otherwise)."""
    from circuitdev.measure.positions import baseline_positions
    from circuitdev.schema import HEAD_CLASSES

    t = batch.seq_len
    base = baseline_positions(t)
    out = {}
    for c in HEAD_CLASSES:
        per_seq = [_targets_reference(int(fa), t)[c] for fa in batch.first_a]
        targets = [np.array([p[j] for p in per_seq]) for j in range(len(per_seq[0]))]
        out[c] = np.mean([_one_class_reference(rows, tg, valid_for(c), base) for tg in targets], axis=0)
    return out


@exercise
def ex_1_3(six_selectivities) -> str:
    """six_selectivities(attn_rows, batch) -> {class: (L, H)} with the paper's baseline."""
    from circuitdev.measure.screen import selectivities
    from circuitdev.schema import HEAD_CLASSES

    batch = small_batch(40, 32, seed=5, invalid=(1, 2, 30))
    rows = random_rows(batch.n, 2, 2, batch.seq_len, seed=6)
    got = six_selectivities(rows.clone(), batch)
    want = selectivities(rows, batch)
    every = np.ones(batch.n, bool)
    all_rows = _six_reference(rows, batch, lambda c: every)
    valid_rows = _six_reference(rows, batch, lambda c: batch.valid)
    if isinstance(got, dict):
        for c in HEAD_CLASSES:
            if c in got:
                causes = [("induction and duplicate-token average over the valid sequences only", all_rows[c]),
                          ("only induction and duplicate-token skip the invalid sequences; the other four "
                           "classes average over all of them", valid_rows[c]),
                          ("local averages the four keys q-2..q-5 (a mean, not a sum)", want[c] * 4)]
                expect(got[c], want[c], what=f"the {c} selectivity", causes=causes)
    expect(got, want, what="the result")
    return "all six match circuitdev.measure.screen.selectivities (3 invalid rows in the batch)"


@exercise
def ex_1_4(baseline_without_ab) -> str:
    """baseline_without_ab(attn_rows, first_a, positions) -> (L, H)."""
    from circuitdev.measure.positions import baseline_positions
    from circuitdev.measure.screen import baseline_attention

    batch = small_batch(60, 16, seed=7)
    rows = random_rows(batch.n, 2, 3, 16, seed=8)
    positions = baseline_positions(16, 8)
    got = baseline_without_ab(rows.clone(), batch.first_a.copy(), positions.copy())
    want = baseline_attention(rows, batch, positions, excludes_ab=True)
    a = rows.double().numpy()[..., positions]  # (N, L, H, P)
    keep = (positions[None, :] != batch.first_a[:, None]) & (positions[None, :] != batch.first_a[:, None] + 1)
    per_seq = np.stack([a[i][..., keep[i]].mean(-1) for i in range(batch.n)]).mean(0)
    causes = [("a mean of per-sequence means; pool every kept (sequence, position) value and average once", per_seq),
              ("A and B are still in the baseline (that is the paper's baseline, not the variant)",
               baseline_attention(rows, batch, positions)),
              ("only B is dropped; drop both the first A (first_a) and B (first_a + 1)",
               (a * (positions[None, :] != batch.first_a[:, None] + 1)[:, None, None, :]).sum(axis=(0, 3))
               / (positions[None, :] != batch.first_a[:, None] + 1).sum())]
    expect(got, want, what="the baseline", causes=causes)
    return "matches circuitdev.measure.screen.baseline_attention(..., excludes_ab=True)"
