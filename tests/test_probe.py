"""Golden-value integration test: the probe on a tiny model against an independent numpy computation."""

import numpy as np
import pytest
import torch

from circuitdev.measure.batch import induction_batch
from circuitdev.measure.config import ProbeConfig
from circuitdev.errors import ConfigError
from circuitdev.measure.probe import null_pr, probe_model
from circuitdev.measure.screen import baseline_positions
from tiny_models import FAMILIES, tiny_model

CFG = ProbeConfig(n=24, n_pr=12, seq_len=32, vocab_range=(3, 120), n_prefix=8, n_nulls=3, batch_size=12)


@pytest.mark.parametrize("family", FAMILIES)
def test_probe_matches_numpy_reference(family):
    model = tiny_model(family)
    result = probe_model(model, CFG, progress=False)
    table = result.table
    assert len(table) == 8 and table[["layer", "head"]].drop_duplicates().shape[0] == 8
    b = induction_batch(24, 32, 42, (3, 120))
    with torch.no_grad():
        att = model(torch.as_tensor(b.tokens), output_attentions=True).attentions
    a = np.stack([x[:, :, -1, :].numpy() for x in att], 1).astype(np.float64)  # (N, L, H, T)
    base = a[..., baseline_positions(32)].mean(axis=(0, 3))
    ind = a[np.arange(24), :, :, b.first_a + 1].mean(0)
    prev = a[..., 30].mean(0)
    first = a[..., 0].mean(0)
    np.testing.assert_allclose(table["sel_induction"], (ind / base).ravel(), rtol=1e-4)
    np.testing.assert_allclose(table["sel_previous_token"], (prev / base).ravel(), rtol=1e-4)
    np.testing.assert_allclose(table["sel_first_token"], (first / base).ravel(), rtol=1e-4)
    np.testing.assert_allclose(table["mass_first_token"], first.ravel(), rtol=1e-4)
    assert table["pr"].between(1, 8).all()
    for col in ("best_class", "classification", "sel_first_token_allq", "mass_first_token_allq", "prefix_matching",
                "in_induction_circuit", "in_prev_token_circuit", "is_bos", "null_induction_p99"):
        assert col in table
    assert result.nulls.shape == (3, 2, 4) and result.timings["total_s"] > 0 and result.family == family
    summary = result.null_summary  # the whole-model F6 statistics from the draws themselves
    assert summary["n_nulls"] == 3 and summary["null_p99"] == pytest.approx(np.percentile(result.nulls, 99))
    assert summary["real_max"] == table["sel_induction"].max()
    assert summary["k_above_null_p99"] == int((table["sel_induction"] > summary["null_p99"]).sum())
    np.testing.assert_allclose(table["null_induction_p99"], np.percentile(result.nulls, 99, axis=0).ravel())


def test_probe_with_first_token_id_reads_attention_to_that_token():
    """first_token_id puts a BOS at position 0; the first-token columns then measure attention to it."""
    model = tiny_model("gpt_neox")
    table = probe_model(model, CFG.replace(first_token_id=0, n_prefix=0, n_nulls=0), progress=False).table
    b = induction_batch(24, 32, 42, (3, 120))
    tokens = b.tokens.copy()
    tokens[:, 0] = 0
    with torch.no_grad():
        att = model(torch.as_tensor(tokens), output_attentions=True).attentions
    first = np.stack([x[:, :, -1, 0].numpy() for x in att], 1).mean(0)  # (L, H)
    np.testing.assert_allclose(table["mass_first_token"], first.ravel(), rtol=1e-4)
    plain = probe_model(model, CFG.replace(n_prefix=0, n_nulls=0), progress=False).table
    assert not np.allclose(plain["mass_first_token"], table["mass_first_token"])


def test_probe_is_deterministic():
    model = tiny_model("olmoe")
    a = probe_model(model, CFG, progress=False)
    b = probe_model(model, CFG, progress=False)
    assert a.table.equals(b.table) and np.array_equal(a.nulls, b.nulls) and np.array_equal(a.replicates, b.replicates)


@pytest.mark.parametrize("family", ["gpt_neox", "olmo"])
def test_a_dense_models_record_is_the_same_bits_at_any_chunk_that_holds_the_prefix_batch(family):
    """The toy panels' dense families are probed in chunks of 64 (recipe.TOY_PROBE_CHUNK), their records measured
    in 250: every row is computed alike in any chunk, and the prefix batch (n_prefix sequences, summed over chunks)
    is one chunk in both. The same record, null PR and behaviour, bit for bit -- and a chunk that splits the prefix
    batch does change its sums' rounding, so the check can fail."""
    model = tiny_model(family)
    cfg = CFG.replace(null_pr_draws=2)
    runs = {bs: probe_model(model, cfg.replace(batch_size=bs), progress=False) for bs in (24, 8, 5)}
    whole, chunked = runs[24], runs[8]
    assert whole.table.equals(chunked.table) and np.array_equal(whole.null_pr, chunked.null_pr)
    assert np.array_equal(whole.replicates, chunked.replicates) and repr(whole.behaviour) == repr(chunked.behaviour)
    split = runs[5]  # the 8 prefix sequences in two chunks
    assert not split.table["prefix_matching"].equals(whole.table["prefix_matching"])
    np.testing.assert_allclose(split.table["prefix_matching"], whole.table["prefix_matching"], rtol=1e-5)


def test_probe_vocab_range_error():
    with pytest.raises(ConfigError, match="vocab_range"):
        probe_model(tiny_model("olmo"), CFG.replace(vocab_range=(100, 10000)), progress=False)


def test_null_pr_shape():
    prs = null_pr(tiny_model("olmo"), CFG, n=10)
    assert prs.shape == (2, 4) and (prs >= 1).all()


def test_config_errors():
    with pytest.raises(ConfigError, match="positive"):
        ProbeConfig(class_threshold=0)
    with pytest.raises(ConfigError, match="unknown probe parameter"):
        ProbeConfig().replace(thresold=3)
    assert ProbeConfig().config_hash() == ProbeConfig(batch_size=64).config_hash()
    assert ProbeConfig().config_hash() != ProbeConfig(bos_threshold=50).config_hash()
    with pytest.raises(ConfigError, match="first_token_id"):
        ProbeConfig(first_token_id=-1)


def test_first_token_id_keeps_old_hashes():
    """Stored records are keyed by config hash: adding the field must not re-key every existing record."""
    old = ProbeConfig(n_boot=0)  # the paper's defaults without the bootstrap (issue 14) = the records before it
    assert old.config_hash() == "1ac1b418616b"  # the hash before first_token_id (and n_boot) existed
    assert ProbeConfig(first_token_id=0, n_boot=0).config_hash() != old.config_hash()


def test_the_bootstrap_is_part_of_the_hash_and_b0_is_neutral():
    assert ProbeConfig().n_boot == 200 and ProbeConfig().config_hash() != "1ac1b418616b"
    assert ProbeConfig(n_boot=0, boot_seed=7).config_hash() == "1ac1b418616b"  # no resamples: the seed is moot
    assert ProbeConfig(boot_seed=7).config_hash() != ProbeConfig().config_hash()
    assert ProbeConfig(n_boot=100).config_hash() != ProbeConfig().config_hash()
    with pytest.raises(ConfigError, match="n_boot"):
        ProbeConfig(n_boot=-1)
