import numpy as np
import pytest

import circuitdev
from circuitdev.measure.batch import default_first_a_range, induction_batch, repeated_batch, valid_mask


def reference_batch(n, seed=42):
    """An independent transcription of the authors' build_induction_batch (method reference §1), loop for loop."""
    rng = np.random.RandomState(seed)
    out, abs_ = [], []
    for _ in range(n):
        tok = rng.randint(100, 10000, size=256)
        A, B = rng.choice(np.arange(100, 10000), size=2, replace=False)
        ab = rng.randint(20, 128)
        tok[ab] = A
        tok[ab + 1] = B
        for k in range(256):
            if tok[k] == A and k != ab:
                tok[k] = rng.randint(100, 10000)
        for k in range(256):
            if tok[k] == B and k != ab + 1:
                tok[k] = rng.randint(100, 10000)
        tok[255] = A
        out.append(tok)
        abs_.append(ab)
    return np.array(out), np.array(abs_)


def test_matches_independent_transcription():
    b = induction_batch(n=60)
    tokens, ab = reference_batch(60)
    np.testing.assert_array_equal(b.tokens, tokens)
    np.testing.assert_array_equal(b.first_a, ab)


def test_public_interface_and_invariants():
    b = circuitdev.induction_batch(n=200, seq_len=256, seed=42, vocab_range=(100, 10000))
    assert b.tokens.dtype == np.int64 and b.tokens.shape == (200, 256)
    assert b.query == 255 and b.first_a.shape == (200,) and b.target.shape == (200,)
    rows = np.arange(200)
    assert (b.tokens[:, 255] == b.tokens[rows, b.first_a]).all()  # second A == first A
    assert (b.target == b.tokens[rows, b.first_a + 1]).all()
    assert ((b.first_a >= 20) & (b.first_a <= 127)).all()
    assert ((b.tokens >= 100) & (b.tokens < 10000)).all()
    assert b.valid.all()  # the paper reports 2000/2000 valid
    # A occurs only at first_a and the query; B only at first_a + 1
    a_counts = (b.tokens == b.tokens[:, [255]]).sum(1)
    assert (a_counts == 2).all()


def test_first_500_rows_are_the_pr_batch_and_deterministic():
    big = induction_batch(n=520)
    small = induction_batch(n=500)
    np.testing.assert_array_equal(big.tokens[:500], small.tokens)
    np.testing.assert_array_equal(big.head(500).tokens, small.tokens)
    np.testing.assert_array_equal(induction_batch(n=50).tokens, induction_batch(n=50).tokens)
    assert not np.array_equal(induction_batch(n=50, seed=1).tokens, induction_batch(n=50).tokens)


def test_short_context_rule():
    assert default_first_a_range(256) == (20, 128)
    assert default_first_a_range(64) == (5, 32)
    b = induction_batch(n=100, seq_len=64, vocab_range=(3, 500))
    assert ((b.first_a >= 5) & (b.first_a < 32)).all() and b.query == 63


def test_valid_mask_detects_repeated_b():
    tokens = np.array([[5, 7, 8, 7, 5], [5, 7, 8, 9, 5]])
    assert valid_mask(tokens, np.array([7, 7])).tolist() == [False, True]


def test_repeated_batch_halves():
    r = repeated_batch(4, 32, 0, (3, 50))
    np.testing.assert_array_equal(r[:, :16], r[:, 16:])


def test_first_token_overwrites_position_zero_only():
    """A BOS at position 0 (models trained with one) leaves the paper's draw -- A/B, filler, query -- untouched."""
    plain = induction_batch(n=80, seq_len=64, vocab_range=(3, 500))
    bos = induction_batch(n=80, seq_len=64, vocab_range=(3, 500), first_token=0)
    assert (bos.tokens[:, 0] == 0).all()
    np.testing.assert_array_equal(bos.tokens[:, 1:], plain.tokens[:, 1:])
    np.testing.assert_array_equal(bos.first_a, plain.first_a)
    np.testing.assert_array_equal(bos.target, plain.target)
    r = repeated_batch(4, 32, 0, (3, 50), first_token=1)
    assert (r[:, 0] == 1).all()
    np.testing.assert_array_equal(r[:, :16], r[:, 16:])  # still an exact repeat


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(seq_len=8), "too short"),
        (dict(seq_len=64, first_a_range=(20, 60)), "does not fit"),
        (dict(vocab_range=(5, 6)), "at least 3 ids"),
        (dict(vocab_range=(-5, 60)), "below 0"),
        (dict(n=0), "n must be"),
    ],
)
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        induction_batch(**kwargs)
