import numpy as np
import pytest
import torch

import circuitdev
from circuitdev.measure.spectral import head_prs, null_pr_stats, participation_ratios, trajectory_features


def test_known_spectra():
    rng = np.random.default_rng(0)
    rank1 = np.outer(rng.normal(size=40), rng.normal(size=16))
    assert circuitdev.participation_ratio(rank1) == pytest.approx(1.0, abs=1e-6)
    q, _ = np.linalg.qr(rng.normal(size=(40, 16)))  # orthonormal columns: all singular values equal
    assert circuitdev.participation_ratio(q) == pytest.approx(16.0, rel=1e-6)
    # two equal singular values and one zero: PR = 2
    assert circuitdev.participation_ratio(np.diag([3.0, 3.0, 0.0])) == pytest.approx(2.0, rel=1e-6)
    assert circuitdev.participation_ratio(np.zeros((5, 4))) == pytest.approx(1.0)  # the 1e-12 floors


def test_uncentred_and_scale_free():
    x = np.random.default_rng(1).normal(size=(30, 8)) + 5.0  # a large mean dominates an uncentred spectrum
    centred = x - x.mean(0)
    assert circuitdev.participation_ratio(x) < circuitdev.participation_ratio(centred)
    assert circuitdev.participation_ratio(7 * x) == pytest.approx(circuitdev.participation_ratio(x))


def test_matches_numpy_formula():
    x = np.random.default_rng(2).normal(size=(25, 6))
    s = np.linalg.svd(x, compute_uv=False)
    p = s**2 / max((s**2).sum(), 1e-12)
    expected = np.exp(-(p * np.log(p + 1e-12)).sum())
    assert circuitdev.participation_ratio(x) == pytest.approx(expected, rel=1e-10)


def test_head_prs_layout():
    z = torch.randn(20, 3, 2, 4)  # (N, L, H, d)
    prs = head_prs(z, n=10)
    assert prs.shape == (3, 2)
    assert prs[1, 0] == pytest.approx(circuitdev.participation_ratio(z[:10, 1, 0]))


def test_trajectory_features_match_authors_pipeline():
    # Pythia L4_H4 from method reference §6 (rounded PRs), with the authors' clip of log tokens at 1B
    pr = np.array([1.96, 1.96, 1.32, 2.58, 27.35, 13.21, 48.05, 35.62, 26.38, 28.29])
    tok = np.array([0.002, 0.008, 0.033, 0.134, 0.536, 1.073, 6.291, 20.971, 79.691, 299.892])
    f = trajectory_features(pr, tok)
    x = np.log(np.maximum(tok, 1.0))
    y = np.maximum(pr - 1, 0)
    manual = sum((x[i + 1] - x[i]) * (y[i] + y[i + 1]) / 2 for i in range(9))
    assert f["integral"] == pytest.approx(manual)
    assert f["integral"] == pytest.approx(177.87, abs=0.05)  # spec: 177.8719582593835 from unrounded PRs
    assert f["spread"] == pytest.approx(48.05 - 1.32)


def test_bad_input():
    with pytest.raises(ValueError, match="2-D"):
        circuitdev.participation_ratio(np.zeros(5))
    with pytest.raises(ValueError, match="revisions"):
        trajectory_features(np.ones(3), np.ones(4))


def test_null_pr_stats():
    s = null_pr_stats(np.array([1.0, 2.0, 3.0]), np.array([0.5, 2.5, 4.0]))
    assert s["null_max"] == 3.0 and s["above_null_max"] == 1 and s["per_head_delta_positive"] == 2
    assert participation_ratios(torch.eye(3)[None]).shape == (1,)
