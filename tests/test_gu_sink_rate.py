"""Gu et al.'s sink rate, exactly (issue 29 item 6): the probe's per-head `gu_sink_share` against a transcription of
their formula (sail-sg/Attention-Sink, `eval_sink_open_source.py`) on raw eager attention of tiny models.

Their metric for the first key: for each sequence, layer and head, the attention on position 0 averaged over ALL
queries of the sequence (query 0, which can only attend to itself, included); that average thresholded at epsilon
per sequence; the indicator averaged over sequences, layers and heads. Per head, before the mean over heads, that is
the share of sequences in which the head is a sink: `gu_sink_share`; its mean over the heads of a revision is the
revision table's `gu_sink_rate`. Our older all-query mass (queries >= allq_skip, sequences averaged before the
threshold) keeps its own column, `is_sink_mass`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from circuitdev.measure.probe import batch_for, probe_model
from conftest import TINY_PROBE, tiny_model


def gu_share_by_hand(model, tokens: np.ndarray, epsilon: float) -> np.ndarray:
    """(L, H): their formula on `output_attentions` of a plain forward, one layer at a time."""
    with torch.no_grad():
        out = model(input_ids=torch.as_tensor(tokens, dtype=torch.long), output_attentions=True)
    shares = []
    for att in out.attentions:  # (N, H, T, T), post-softmax
        per_sequence = att[:, :, :, 0].double().mean(-1)  # (N, H): every query, query 0 included
        shares.append((per_sequence > epsilon).double().mean(0).numpy())  # threshold per sequence, then average
    return np.stack(shares)  # (L, H)


@pytest.mark.parametrize("family", ["gpt_neox", "olmo", "olmoe"])
@pytest.mark.parametrize("epsilon", [0.3, 0.1])
def test_gu_sink_share_is_their_formula(family, epsilon):
    model = tiny_model(family, seed=7)
    config = dataclasses.replace(TINY_PROBE, sink_rate_epsilon=epsilon, n_boot=0, n_nulls=0, n_prefix=0)
    table = probe_model(model, config, progress=False, behaviour=False).table
    expected = gu_share_by_hand(model, batch_for(config).tokens, epsilon)
    got = table.sort_values(["layer", "head"])["gu_sink_share"].to_numpy().reshape(expected.shape)
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_is_sink_mass_is_our_rule_and_differs_from_theirs():
    """`is_sink_mass` is the older rule by hand (queries >= allq_skip, sequences averaged, then the bar); on this
    tiny model the two rules disagree on some head: query 0 (mass 1) lifts Gu et al.'s per-sequence average, and a
    share of sequences is not a yes / no."""
    model = tiny_model("gpt_neox", seed=7)
    config = dataclasses.replace(TINY_PROBE, sink_rate_epsilon=0.1, n_boot=0, n_nulls=0, n_prefix=0)
    table = probe_model(model, config, progress=False, behaviour=False).table.sort_values(["layer", "head"])
    with torch.no_grad():
        out = model(input_ids=torch.as_tensor(batch_for(config).tokens, dtype=torch.long), output_attentions=True)
    ours = np.stack([att[:, :, config.allq_skip:, 0].double().mean(-1).mean(0).numpy() > 0.1
                     for att in out.attentions]).reshape(-1)
    np.testing.assert_array_equal(table["is_sink_mass"].to_numpy(), ours)
    theirs = table["gu_sink_share"].to_numpy()
    assert (theirs > 0.5).astype(bool).tolist() != ours.tolist() or ((theirs > 0) & (theirs < 1)).any()
