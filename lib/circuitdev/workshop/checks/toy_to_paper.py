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
