"""Session 5 · From the toy to the paper: each check passes on the instructor's solution (run from the session
source) and fails on one deliberately wrong answer, naming the likely cause in one line."""

from __future__ import annotations

from workshop_sessions import check_tests

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


WRONG = {
    # one deliberately wrong implementation per check, and a phrase its verdict must contain
    "5.1": (_bos_best_class, "whatever its best class"),
    "5.2": (_gap_fraction, "multiply the difference of fractions by 100"),
    "5.3": (_recall_cumulative, "only while it is at or above the threshold"),
}

(test_each_check_passes_on_the_instructor_solution, test_there_is_a_wrong_answer_for_every_check,
 test_each_check_fails_on_a_wrong_answer_and_says_what_differs) = check_tests(SESSION, WRONG)
