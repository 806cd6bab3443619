"""Session 5 · From the toy to the paper: each check passes on the instructor's solution (run from the session
source) and fails on one deliberately wrong answer, naming the likely cause in one line; the harder exercise 5.4
fails on each usual wrong answer and passes on other right ones."""

from __future__ import annotations

import numpy as np
import pytest
from workshop_sessions import check_tests

from circuitdev.workshop import checks

SESSION = "05_toy_to_paper"


def _bos_best_class(dev, threshold):
    hit = dev.assign(bos=(dev["sel_first_token"] >= threshold) & (dev["best_class"] == "first-token"))
    return hit.groupby(["panel", "revision"], as_index=False).agg(bos_fraction=("bos", "mean"))


def _recall_cumulative(dev, panel, threshold):
    p = dev[dev["panel"] == panel].sort_values("tokens_b")
    final = p[p["tokens_b"] == p["tokens_b"].max()]
    circuit = set(zip(final["layer"][final["sel_induction"] >= threshold],
                      final["head"][final["sel_induction"] >= threshold]))
    p = p.assign(hit=[(l, h) in circuit and s >= threshold for l, h, s in zip(p["layer"], p["head"],
                                                                            p["sel_induction"])])
    p["hit"] = p.groupby(["layer", "head"])["hit"].cummax()
    out = p.groupby("revision", as_index=False, sort=False)["hit"].sum()
    return out.assign(recall=out["hit"] / len(circuit))


def _gap_fraction(dev, a, b, threshold):
    from circuitdev.analysis import findings

    f = findings.bos_fraction(dev, threshold=threshold).sort_values("tokens_b").groupby("panel")["bos_fraction"].last()
    return float(f[a] - f[b])  # a fraction, not percentage points


def _gap(dev, a, b, t):
    """A participant's final_gap (5.2): the share of heads >= t at each panel's last revision, a minus b, in pp."""
    frac = dev.assign(bos=dev["sel_first_token"] >= t).groupby(["panel", "tokens_b"], as_index=False)["bos"].mean()
    last = frac.sort_values("tokens_b").groupby("panel")["bos"].last()
    return 100 * float(last[a] - last[b])


def _thresholds(dev, a, b, target, tol, *, at_lo=False, merge=True, tail=True, grid=None):
    """A participant's answer, right by default; the keywords make the usual mistakes."""
    sub = dev[dev["panel"].isin([a, b])]
    finals = sub[sub["tokens_b"] == sub.groupby("panel")["tokens_b"].transform("max")]
    cuts = sorted(set(finals["sel_first_token"].astype(float)))
    edges = [0.0, *cuts, float("inf")] if grid is None else list(grid)
    out = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        if hi == float("inf") and not tail:
            continue
        gap = 0.0 if hi == float("inf") else _gap(dev, a, b, lo if at_lo else hi)
        if abs(gap - target) <= tol:
            out[-1:] = [(out[-1][0], hi)] if merge and out and out[-1][1] == lo else [*out[-1:], (lo, hi)]
    return out


def _thresholds_every_revision(dev, a, b, target, tol):
    """Right, another way: cut at every revision's selectivities (more, finer intervals), evaluate, then merge."""
    cuts = np.unique(dev["sel_first_token"].to_numpy(float))
    edges = np.concatenate([[0.0], cuts, [np.inf]])
    keep = [abs((0.0 if np.isinf(hi) else _gap(dev, a, b, hi)) - target) <= tol for hi in edges[1:]]
    out = []
    for (lo, hi), k in zip(zip(edges[:-1], edges[1:]), keep):
        if k:
            if out and out[-1][1] == lo:
                out[-1][1] = hi
            else:
                out.append([lo, hi])
    return np.array(out)  # an (n, 2) array, not a list of tuples


WRONG = {
    # one deliberately wrong implementation per check, and a phrase its verdict must contain
    "5.1": (_bos_best_class, "whatever its best class"),
    "5.2": (_gap_fraction, "multiply the difference of fractions by 100"),
    "5.3": (_recall_cumulative, "only while it is at or above the threshold"),
    "5.4": (lambda dev, a, b, target, tol: _thresholds(dev, a, b, target, tol, merge=False),
            "merge intervals that touch"),
}

(test_each_check_passes_on_the_instructor_solution, test_there_is_a_wrong_answer_for_every_check,
 test_each_check_fails_on_a_wrong_answer_and_says_what_differs) = check_tests(SESSION, WRONG)


@pytest.mark.parametrize("mistake, phrase", [
    ({"at_lo": True}, "the gap is the one AT hi"),
    ({"tail": False}, "no head counts: the gap is 0 there"),
    ({"grid": [0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 500.0, 1000.0, 5000.0, float("inf")]},
     "is not a head's selectivity at a final revision"),
])
def test_the_harder_exercise_names_each_usual_mistake(mistake, phrase):
    verdict = checks.check("5.4", lambda dev, a, b, target, tol: _thresholds(dev, a, b, target, tol, **mistake))
    assert not verdict.ok and phrase in verdict.line(), verdict.line()


def test_the_harder_exercise_accepts_other_right_answers():
    assert checks.check("5.4", _thresholds).ok
    verdict = checks.check("5.4", _thresholds_every_revision)
    assert verdict.ok, verdict.line()
