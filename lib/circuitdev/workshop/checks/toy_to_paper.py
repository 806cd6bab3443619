"""Session 5 · From the toy to the paper (notebooks/workshop/05_toy_to_paper.py): the BOS fraction (F2), the final
gap between two panels in percentage points, the recall of the final induction circuit over training."""

from __future__ import annotations

import numpy as np

from circuitdev.workshop.checks.base import exercise, expect, expect_column
from circuitdev.workshop.checks.synthetic import synthetic_dev


@exercise
def ex_5_1(bos_fraction) -> str:
    """bos_fraction(dev, threshold) -> DataFrame panel, revision, bos_fraction (share of heads >= threshold)."""
    from circuitdev.analysis import findings

    dev = synthetic_dev()
    for threshold in (30.0, 100.0):
        got = bos_fraction(dev.copy(), threshold)
        want = findings.bos_fraction(dev, threshold=threshold)
        causes = [("the paper counts a head whatever its best class (per-class rule): sel_first_token >= "
                   "threshold", findings.bos_fraction(dev, threshold=threshold, rule="best-class")),
                  ("a head at exactly the threshold counts (>=)",
                   findings.bos_fraction(dev, threshold=threshold * (1 + 1e-9)))]
        expect_column(got, want, keys=("panel", "revision"), column="bos_fraction",
                      what=f"bos_fraction(dev, {threshold:g})", causes=causes)
    return "matches circuitdev.analysis.findings.bos_fraction at 30x and 100x (a head at exactly 30x included)"


def _final_gap_reference(dev, a: str, b: str, threshold: float, *, first: bool = False) -> float:
    from circuitdev.analysis import findings

    frac = findings.bos_fraction(dev, threshold=threshold)
    pick = (lambda g: g.iloc[0]) if first else (lambda g: g.iloc[-1])
    value = {p: pick(g.sort_values("tokens_b"))["bos_fraction"] for p, g in frac.groupby("panel")}
    return 100 * (value[a] - value[b])


@exercise
def ex_5_2(final_gap) -> str:
    """final_gap(dev, panel_a, panel_b, threshold) -> percentage points, final revisions."""
    dev = synthetic_dev()
    for threshold in (30.0, 50.0):
        got = final_gap(dev.copy(), "dense", "moe", threshold)
        want = _final_gap_reference(dev, "dense", "moe", threshold)
        causes = [("percentage points: multiply the difference of fractions by 100", want / 100),
                  ("compare the FINAL revisions of the two panels (the last in token order)",
                   _final_gap_reference(dev, "dense", "moe", threshold, first=True)),
                  ("panel_a minus panel_b", -want)]
        expect(got, want, what=f"final_gap(dev, 'dense', 'moe', {threshold:g})",
               causes=[c for c in causes if not np.isclose(c[1], want)])
    return "right at 30x and 50x on a two-panel table"


@exercise
def ex_5_3(circuit_recall) -> str:
    """circuit_recall(dev, panel, threshold) -> DataFrame revision, recall (share of the final circuit present)."""
    import pandas as pd

    from circuitdev.analysis import findings

    dev = synthetic_dev()
    for panel in ("dense", "moe"):
        got = circuit_recall(dev.copy(), panel, 50.0)
        rec = findings.circuit_recall(dev, threshold=50.0)
        want = rec[rec["panel"] == panel][["revision", "recall"]]
        sub = dev[dev["panel"] == panel].sort_values(["tokens_b", "layer", "head"])
        final = sub[sub["tokens_b"] == sub["tokens_b"].max()]
        circuit = {(l, h) for l, h, s in zip(final["layer"], final["head"], final["sel_induction"]) if s >= 50}
        at = sub["sel_induction"] >= 50
        in_circuit = pd.Series([(l, h) in circuit for l, h in zip(sub["layer"], sub["head"])], index=sub.index)
        ever = (at & in_circuit).groupby([sub["layer"], sub["head"]]).cummax()

        def per_revision(hit):
            return hit.groupby(sub["revision"], sort=False).sum().div(len(circuit)).rename("recall").reset_index()

        anyhead, cum = per_revision(at), per_revision(ever)
        causes = [("count only the heads of the FINAL revision's circuit (a head outside it does not count)", anyhead),
                  ("a head counts at a revision only while it is at or above the threshold there", cum)]
        expect_column(got, want, keys=("revision",), column="recall", what=f"circuit_recall(dev, {panel!r}, 50)",
                      causes=causes)
    return "matches circuitdev.analysis.findings.circuit_recall on both panels (a circuit head that falls back)"


def _final_selectivities(dev, panel: str) -> np.ndarray:
    p = dev[dev["panel"] == panel]
    return p.loc[p["tokens_b"] == p["tokens_b"].max(), "sel_first_token"].to_numpy(dtype=float)


def _thresholds_reference(dev, a: str, b: str, target: float, tol: float, *, at: str = "hi", merge: bool = True,
                          tail: bool = True) -> list[tuple[float, float]]:
    """The exact intervals (lo, hi] of thresholds with |gap - target| <= tol, from the two final revisions' heads
    (numpy, independent of findings.bos_fraction). at="lo" / merge=False / tail=False: the usual wrong answers."""
    sa, sb = _final_selectivities(dev, a), _final_selectivities(dev, b)

    def gap(t: float) -> float:
        return 100 * (float((sa >= t).mean()) - float((sb >= t).mean()))

    cuts = np.unique(np.concatenate([sa, sb]))
    edges = [0.0, *cuts[cuts > 0], float("inf")]
    out: list[tuple[float, float]] = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        if not np.isfinite(hi) and not tail:
            continue
        value = gap(hi if at == "hi" else lo) if np.isfinite(hi) else 0.0
        if abs(value - target) <= tol:
            if merge and out and out[-1][1] == lo:
                out[-1] = (out[-1][0], hi)
            else:
                out.append((lo, hi))
    return out


def _intervals(x) -> list[tuple[float, float]] | None:
    try:
        pairs = [tuple(float(v) for v in pair) for pair in x]
    except (TypeError, ValueError):
        return None
    return pairs if all(len(p) == 2 for p in pairs) else None


def _fmt_intervals(pairs) -> str:
    return "[" + ", ".join(f"({lo:.4g}, {hi:.4g}]" for lo, hi in pairs) + "]"


@exercise
def ex_5_4(reproducing_thresholds) -> str:
    """reproducing_thresholds(dev, a, b, target, tol) -> sorted, merged intervals (lo, hi] of thresholds with
    |final_gap - target| <= tol."""
    from circuitdev.workshop.checks.base import Fail

    dev = synthetic_dev()
    cuts = set(np.concatenate([_final_selectivities(dev, p) for p in ("dense", "moe")]).tolist()) | {0.0, np.inf}
    cases = [(0.0, 1.0, "a gap of 0: from 0, several intervals, and one with no upper end"),
             (-18.75, 6.25, "neighbouring intervals to merge"), (50.0, 1.0, "no threshold at all")]
    for target, tol, about in cases:
        what = f"reproducing_thresholds(dev, 'dense', 'moe', {target:g}, {tol:g}) ({about})"
        raw = reproducing_thresholds(dev.copy(), "dense", "moe", target, tol)
        got = _intervals(raw)
        if got is None:
            raise Fail(f"{what} is {raw!r}, expected a list of pairs (lo, hi)")
        want = _thresholds_reference(dev, "dense", "moe", target, tol)
        if len(got) == len(want) and all(np.isclose(g, w, rtol=1e-9).all() for g, w in zip(got, want)):
            continue
        shown = f"{what} = {_fmt_intervals(got)}, expected {_fmt_intervals(want)}"
        wrong = [("merge intervals that touch (one's hi is the next one's lo)",
                  _thresholds_reference(dev, "dense", "moe", target, tol, merge=False)),
                 ("on (lo, hi] the gap is the one AT hi, the upper end (a head exactly at the threshold counts)",
                  _thresholds_reference(dev, "dense", "moe", target, tol, at="lo")),
                 ("above the largest selectivity no head counts: the gap is 0 there, up to float('inf')",
                  _thresholds_reference(dev, "dense", "moe", target, tol, tail=False))]
        for label, pairs in wrong:
            if len(got) == len(pairs) and all(np.isclose(g, w, rtol=1e-9).all() for g, w in zip(got, pairs)):
                raise Fail(f"{shown}; likely cause: {label}")
        off = [v for pair in got for v in pair if not any(np.isclose(v, c, rtol=1e-9) for c in cuts)]
        if off:
            raise Fail(f"{shown}; likely cause: {off[0]:.4g} is not a head's selectivity at a final revision -- the "
                       "gap changes only there, so every interval starts and ends at one (a grid misses them)")
        raise Fail(f"{shown}; hint: cut the thresholds at the final revisions' selectivities and evaluate the gap at "
                   "each interval's upper end")
    return "exact on 3 cases (from 0, with no upper end, intervals to merge, none at all)"
