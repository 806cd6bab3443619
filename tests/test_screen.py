import numpy as np
import pandas as pd
import pytest
import torch

from circuitdev.measure.batch import induction_batch
from circuitdev.errors import NumericalError
from circuitdev.schema import HEAD_CLASSES, sel_column
from circuitdev.measure.classify import circuit_memberships, classify, heads_of, is_class
from circuitdev.measure.screen import baseline_positions, null_selectivity, selectivities

PAPER_BASELINE = [10, 22, 26, 30, 32, 33, 37, 40, 48, 59, 68, 71, 73, 78, 80, 82, 83, 88, 89, 100, 104, 116, 118, 128,
                  141, 143, 148, 149, 152, 164, 166, 168, 173, 175, 176, 178, 186, 193, 194, 196, 198, 203, 204, 209,
                  212, 217, 231, 243, 244, 245]


def test_paper_baseline_positions():
    assert baseline_positions(256).tolist() == PAPER_BASELINE
    short = baseline_positions(32)
    assert 0 not in short and not set(short) & {26, 27, 28, 29, 30, 31}


def hand_rows(batch, n_heads=5):
    """Hand-built rows with known answers: head h puts `peak` on one class target, the rest spread evenly."""
    n, t, q = batch.n, batch.seq_len, batch.query
    rows = torch.zeros(n, 1, n_heads, t)
    targets = [batch.first_a + 1, np.full(n, q - 1), batch.first_a, np.zeros(n, int), np.full(n, q)]
    peak = 0.6
    for h in range(n_heads):
        rows[:, 0, h, :] = (1 - peak) / (t - 1)
        rows[np.arange(n), 0, h, targets[h]] = peak
    return rows, peak


def test_selectivity_known_answers():
    batch = induction_batch(n=40, seq_len=64, vocab_range=(3, 500))
    rows, peak = hand_rows(batch)
    sel = selectivities(rows, batch)
    other = (1 - peak) / 63
    for h, cls in enumerate(["induction", "previous-token", "duplicate-token", "first-token", "self"]):
        # the planted bigram can fall on a baseline position for some sequences: compute the expected baseline
        base_pos = baseline_positions(64)
        base = rows[:, 0, h, base_pos].double().mean().item()
        assert sel[cls][0, h] == pytest.approx(peak / base, rel=1e-5)
        assert sel["local"][0, h] == pytest.approx(other / base, rel=1e-5)
    assert sel["induction"][0, 1] == pytest.approx(other / rows[:, 0, 1, baseline_positions(64)].mean().item(), rel=1e-5)


def test_ratio_of_means_not_mean_of_ratios():
    batch = induction_batch(n=2, seq_len=32, vocab_range=(3, 100))
    rows = torch.full((2, 1, 1, 32), 1 / 32)
    rows[0, 0, 0, 0], rows[1, 0, 0, 0] = 0.5, 0.0
    base = baseline_positions(32)
    rows[1, 0, 0, base] = 0.001
    sel = selectivities(rows, batch)["first-token"][0, 0]
    expected = rows[:, 0, 0, 0].mean() / rows[:, 0, 0, base].mean()
    assert sel == pytest.approx(expected.item(), rel=1e-6)


def test_baseline_floor():
    batch = induction_batch(n=3, seq_len=32, vocab_range=(3, 100))
    rows = torch.zeros(3, 1, 1, 32)
    rows[..., 0] = 1.0  # all attention on position 0: baseline exactly 0
    assert selectivities(rows, batch)["first-token"][0, 0] == pytest.approx(1e8)


def test_baseline_excluding_ab_variant():
    batch = induction_batch(n=50, seq_len=64, vocab_range=(3, 500))
    rows, _ = hand_rows(batch, 1)  # induction head: B carries 0.6
    default = selectivities(rows, batch)["induction"][0, 0]
    excl = selectivities(rows, batch, baseline_excludes_ab=True)["induction"][0, 0]
    assert excl > default  # B inside the baseline set inflates the default baseline
    assert excl == pytest.approx(0.6 / (0.4 / 63), rel=1e-5)


def table_of(values):
    df = pd.DataFrame([dict(zip([sel_column(c) for c in HEAD_CLASSES], v)) for v in values])
    df["layer"], df["head"] = 0, range(len(df))
    return df


def test_classify_ties_go_to_the_class_listed_first():
    t = table_of([[40, 40, 1, 1, 1, 1], [1, 1, 1, 50, 50, 50], [1, 2, 3, 4, 5, 29.9], [30, 0, 0, 0, 0, 0]])
    c = classify(t, threshold=30)
    assert c["best_class"].tolist() == ["induction", "first-token", "local", "induction"]
    assert c["second_class"].tolist() == ["previous-token", "self", "self", "previous-token"]
    assert c["classification"].tolist() == ["induction", "first-token", "unclassified", "induction"]


def test_counting_rules_and_circuits():
    # head 0: induction 181.6 best, first-token 85.2 (Pythia L4_H4-like) counts as BOS under the per-class rule only
    t = table_of([[181.6, 1, 1, 85.2, 1, 1], [1, 150, 1, 1, 1, 200], [1, 120, 1, 1, 1, 1], [49.9, 1, 1, 1, 1, 1]])
    t = t.join(classify(t))
    assert is_class(t, "first-token", 30).tolist() == [True, False, False, False]
    assert is_class(t, "first-token", 30, rule="best-class").tolist() == [False] * 4
    m = circuit_memberships(t)
    assert m["in_induction_circuit"].tolist() == [True, False, False, False]
    assert m["in_prev_token_circuit"].tolist() == [False, False, True, False]  # head 1: best class is local
    assert heads_of(t, m["in_induction_circuit"]) == {0: [0]}


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf")])
def test_non_positive_threshold(bad):
    with pytest.raises(ValueError, match="positive"):
        classify(table_of([[1] * 6]), threshold=bad)


def test_unknown_class_name():
    with pytest.raises(ValueError, match="unknown head class 'sink'"):
        is_class(table_of([[1] * 6]), "sink", 30)


def test_nan_rows_suggest_fp32():
    batch = induction_batch(n=2, seq_len=32, vocab_range=(3, 100))
    rows = torch.full((2, 1, 1, 32), float("nan"))
    with pytest.raises(NumericalError, match="fp32"):
        selectivities(rows, batch)


def test_null_selectivity_uniform_is_one():
    batch = induction_batch(n=30, seq_len=32, vocab_range=(3, 100))
    rows = torch.full((30, 2, 3, 32), 1 / 32)
    nulls = null_selectivity(rows, batch, n_nulls=5)
    assert nulls.shape == (5, 2, 3)
    np.testing.assert_allclose(nulls, 1.0, rtol=1e-5)
    np.testing.assert_array_equal(nulls, null_selectivity(rows, batch, n_nulls=5))  # seeded


def test_induction_ceiling_of_the_shared_baseline():
    """A head with all its attention on B scores size / P(B in baseline), computed independently from the batch."""
    from circuitdev.measure.positions import induction_ceiling

    for t in (64, 256):
        batch = induction_batch(4000, t, 42, (300, 1000))
        rows = torch.zeros(batch.n, 1, 1, t)
        rows[torch.arange(batch.n), 0, 0, torch.as_tensor(batch.first_a) + 1] = 1.0  # a perfect induction head
        sel = selectivities(rows, batch)["induction"][0, 0]
        base = set(baseline_positions(t).tolist())
        share = np.mean([fa + 1 in base for fa in batch.first_a])  # all N: the baseline averages over every row
        assert sel == pytest.approx(len(base) / share, rel=1e-4)
        assert sel == pytest.approx(induction_ceiling(t), rel=0.05)  # first_a is uniform over its range
        excl = selectivities(rows, batch, baseline_excludes_ab=True)["induction"][0, 0]
        assert excl > 1e6 and induction_ceiling(t, baseline_excludes_ab=True) == float("inf")
    # the paper's layout leaves room far above the 50x bar; a 64-token context barely clears it
    assert induction_ceiling(256) > 200 and 50 < induction_ceiling(64) < 60


def _numpy_baseline(rows: np.ndarray, batch, *, excludes_ab: bool) -> np.ndarray:
    """The screen's denominator computed by hand: mean attention over every (sequence, baseline position) pair,
    leaving out each sequence's own A and B positions when `excludes_ab`. (L, H)."""
    positions = baseline_positions(batch.seq_len)
    total, count = np.zeros(rows.shape[1:3]), 0
    for i in range(batch.n):
        for p in positions:
            if excludes_ab and p in (batch.first_a[i], batch.first_a[i] + 1):
                continue
            total += rows[i, :, :, p]
            count += 1
    return total / count


def test_null_selectivity_uses_the_selectivities_baseline():
    """Toy F6 on one scale (issue 21): with baseline_excludes_ab the null draws divide by the A/B-excluded baseline,
    as the real selectivities do. Same draws (same seed), so the two nulls differ exactly by the ratio of the two
    baselines, each computed here with numpy."""
    batch = induction_batch(n=60, seq_len=64, vocab_range=(3, 500))
    gen = torch.Generator().manual_seed(0)
    rows = torch.rand(batch.n, 2, 3, batch.seq_len, generator=gen) ** 4
    rows[np.arange(batch.n), :, :, batch.first_a + 1] += 2.0  # much attention on B: the baselines differ clearly
    rows = rows / rows.sum(-1, keepdim=True)
    paper = null_selectivity(rows, batch, n_nulls=4)
    excl = null_selectivity(rows, batch, n_nulls=4, baseline_excludes_ab=True)
    base_paper = _numpy_baseline(rows.numpy(), batch, excludes_ab=False)
    base_excl = _numpy_baseline(rows.numpy(), batch, excludes_ab=True)
    assert not np.allclose(base_paper, base_excl, rtol=1e-3)  # the test can tell the two scales apart
    np.testing.assert_allclose(excl, paper * base_paper / base_excl, rtol=1e-5)
    sel = selectivities(rows, batch, baseline_excludes_ab=True)  # and the selectivities divide by the same one
    np.testing.assert_allclose(sel["first-token"], rows[..., 0].mean(0).numpy() / base_excl, rtol=1e-5)


def test_probe_draws_its_nulls_on_its_own_scale():
    """probe_model passes the record's baseline to the null: excluding A/B moves the nulls and every selectivity
    by the same per-head factor (the baseline is the only shared denominator)."""
    from circuitdev.measure.config import ProbeConfig
    from circuitdev.measure.probe import probe_model
    from tiny_models import tiny_model

    model = tiny_model("gpt_neox", seed=3)
    cfg = ProbeConfig(n=40, seq_len=32, vocab_range=(3, 100), n_pr=8, baseline_size=10, n_prefix=0, n_nulls=3,
                      n_boot=0)
    a = probe_model(model, cfg, progress=False, behaviour=False)
    b = probe_model(model, cfg.replace(baseline_excludes_ab=True), progress=False, behaviour=False)
    factor = (b.table["sel_first_token"] / a.table["sel_first_token"]).to_numpy().reshape(a.nulls.shape[1:])
    assert not np.allclose(factor, 1.0)
    np.testing.assert_allclose(b.nulls / a.nulls, np.broadcast_to(factor, a.nulls.shape), rtol=1e-5)
