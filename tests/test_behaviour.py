"""Behaviour at a revision (issue 23): top-1 and loss at B, the ICL score and the first-position norms that the probe
reads from its own forward passes, against independent computations on tiny models -- plain HF logits
(`model(input_ids).logits`), `output_hidden_states`, a numpy bootstrap with the same draws -- and the agreement with
`ablation.evaluate`."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from circuitdev.measure.ablation import evaluate
from circuitdev.measure.batch import induction_batch, repeated_batch
from circuitdev.measure.behaviour import summarise, SequenceBehaviour, wilson_interval
from circuitdev.measure.bootstrap import resample_weights
from circuitdev.measure.capture import capture, prefix_pass
from circuitdev.measure.config import ProbeConfig
from circuitdev.measure.families import family_of
from circuitdev.measure.probe import batch_for, probe_model
from tiny_models import FAMILIES, tiny_model

# vocab_range (3, 8): B is one of 5 ids, and `copier` makes the model's argmax one of them too, so top-1 is far
# from 0 on a random model (about 1 in 5) and the comparison below can fail.
CFG = ProbeConfig(n=40, n_pr=12, seq_len=32, vocab_range=(3, 8), baseline_size=10, n_prefix=10, n_nulls=0,
                  n_boot=60, boot_seed=5, batch_size=16)


def copier(family: str, seed: int = 0) -> torch.nn.Module:
    """A tiny random model whose unembedding favours ids 3..7 strongly (its argmax lands among them)."""
    model = tiny_model(family, seed=seed)
    with torch.no_grad():
        out = model.get_output_embeddings().weight  # (V, d)
        out[3:8] = torch.randn(5, out.shape[1], generator=torch.Generator().manual_seed(seed)) * 3.0
    return model


def plain_query(model, cfg: ProbeConfig) -> tuple[np.ndarray, np.ndarray]:
    """Per sequence: top-1 correct and loss of B at the query, from a plain forward's logits."""
    b = batch_for(cfg)
    with torch.no_grad():
        logits = model(torch.as_tensor(b.tokens)).logits[:, -1].double()  # (N, V)
    target = torch.as_tensor(b.target)
    loss = -torch.log_softmax(logits, -1)[torch.arange(b.n), target]
    return (logits.argmax(-1) == target).numpy(), loss.numpy()


def plain_icl(model, tokens: np.ndarray) -> np.ndarray:
    """Per sequence: mean loss predicting x[1..half-1] the first time minus predicting them again in the repeat."""
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.as_tensor(tokens)).logits.double(), -1).numpy()  # (n, T, V)
    half = tokens.shape[1] // 2
    rows = np.arange(len(tokens))[:, None]
    first = -logp[rows, np.arange(0, half - 1), tokens[:, 1:half]]  # position k predicts x[k + 1]
    repeat = -logp[rows, np.arange(half, 2 * half - 1), tokens[:, half + 1:2 * half]]
    assert np.array_equal(tokens[:, 1:half], tokens[:, half + 1:2 * half])  # the same tokens, seen before or not
    return first.mean(1) - repeat.mean(1)


@pytest.mark.parametrize("family", FAMILIES)
def test_top1_and_loss_equal_plain_hf_logits(family):
    model = copier(family)
    result = probe_model(model, CFG, progress=False)
    correct, loss = plain_query(model, CFG)
    assert 0.05 < correct.mean() < 0.95  # a test that can fail: top-1 is neither 0 nor 1
    v = result.behaviour.values
    assert v["top1"] == correct.mean()  # all N sequences, valid or not, as ablation.metrics
    assert v["loss_b"] == pytest.approx(loss.mean(), rel=1e-5)
    assert result.behaviour.n == CFG.n and not result.table.empty


@pytest.mark.parametrize("family", FAMILIES)
def test_top1_is_evaluates_no_ablation_acc_top1(family):
    """At any revision -- here the only one -- the probe's top1 is `ablation.evaluate`'s baseline on the same batch."""
    model = copier(family, seed=1)
    v = probe_model(model, CFG.replace(n_prefix=0), progress=False).behaviour.values
    scores = evaluate(model, batch_for(CFG), {}, batch_size=CFG.batch_size)
    assert round(v["top1"] * CFG.n) == round(scores["acc_top1"] * CFG.n)  # the same count of correct sequences
    assert v["loss_b"] == pytest.approx(scores["loss"], rel=1e-5)


def test_in_trace_reduction_per_sequence():
    """capture(target=) against the plain argmax, with targets chosen so half the sequences are right."""
    model = tiny_model("olmo")
    b = induction_batch(12, 32, 42, (3, 120))
    with torch.no_grad():
        logits = model(torch.as_tensor(b.tokens)).logits[:, -1]
    target = logits.argmax(-1).numpy().copy()
    target[1::2] = (target[1::2] + 1) % 128  # wrong on odd rows
    cap = capture(model, b.tokens, batch_size=5, target=target)
    assert cap.query_correct.tolist() == [True, False] * 6
    ref = F.cross_entropy(logits.float(), torch.as_tensor(target), reduction="none")
    torch.testing.assert_close(cap.query_loss, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("first_token", [None, 0])
def test_icl_score_equals_plain_hf_logits(family, first_token):
    model = copier(family)
    cfg = CFG.replace(first_token_id=first_token)
    rep = repeated_batch(cfg.n_prefix, cfg.seq_len, cfg.seed, cfg.vocab_range, first_token=first_token)
    if first_token is not None:  # the BOS starts both halves
        assert (rep[:, 0] == 0).all() and (rep[:, cfg.seq_len // 2] == 0).all()
    ref = plain_icl(model, rep)
    _, per_seq = prefix_pass(model, rep, batch_size=4, icl=True)
    np.testing.assert_allclose(per_seq, ref, rtol=1e-4, atol=1e-5)
    result = probe_model(model, cfg, progress=False)
    assert result.behaviour.values["icl_score"] == pytest.approx(ref.mean(), rel=1e-4, abs=1e-6)
    assert result.behaviour.n_prefix == cfg.n_prefix


@pytest.mark.parametrize("family", FAMILIES)
def test_norms_equal_output_hidden_states(family):
    """hidden_states[0] is the embedding output and hidden_states[i + 1] layer i's output -- except the last, which
    HF returns after the final layer norm: that layer is compared with a forward hook on the layer instead (and
    shown to differ from HF's last hidden state)."""
    model = copier(family)
    layout = family_of(model)
    b = batch_for(CFG)
    grabbed = {}
    hook = model.get_submodule(layout.layer_path(layout.n_layers - 1)).register_forward_hook(
        lambda mod, args, out: grabbed.__setitem__("last", (out[0] if isinstance(out, tuple) else out).clone()))
    with torch.no_grad():
        hs = model(torch.as_tensor(b.tokens), output_hidden_states=True).hidden_states
    hook.remove()
    streams = [*hs[:-1], grabbed["last"]]  # embed, l0, ..., l(L-1) -- all before the final norm
    assert not torch.allclose(grabbed["last"], hs[-1])  # HF's last hidden state is normed: not comparable
    norms = np.stack([h.double().norm(dim=-1).numpy() for h in streams], 1)  # (N, L + 1, T)
    pos0, median = norms[..., 0].mean(0), np.median(norms[..., 1:], axis=-1).mean(0)
    beh = probe_model(model, CFG.replace(n_prefix=0), progress=False).behaviour
    assert beh.streams == ["embed", *(f"l{i}" for i in range(layout.n_layers))]
    np.testing.assert_allclose(beh.norms["norm_pos0"], pos0, rtol=1e-5)
    np.testing.assert_allclose(beh.norms["norm_median"], median, rtol=1e-5)
    np.testing.assert_allclose(beh.norms["norm_ratio"], pos0 / median, rtol=1e-5)  # a ratio of means


def test_median_interpolates_over_an_even_number_of_positions():
    model = tiny_model("gpt_neox")
    tokens = np.random.RandomState(1).randint(3, 120, size=(5, 31))  # positions 1..30: an even count
    cap = capture(model, tokens, batch_size=5, norms=True)
    with torch.no_grad():
        hs = model(torch.as_tensor(tokens), output_hidden_states=True).hidden_states
    ref = np.median(hs[1].double().norm(dim=-1).numpy()[:, 1:], axis=-1)  # numpy averages the two middle values
    np.testing.assert_allclose(cap.norm_median[:, 1].numpy(), ref, rtol=1e-5)


def numpy_interval(per_seq: np.ndarray, n_boot: int, seed: int) -> tuple[float, float, np.ndarray]:
    draws = np.random.default_rng(seed).integers(0, len(per_seq), size=(n_boot, len(per_seq)))  # index draws
    reps = per_seq[draws].mean(1)
    lo, hi = np.percentile(reps, [2.5, 97.5])
    point = per_seq.mean()
    return min(lo, point), max(hi, point), reps


def test_intervals_equal_an_independent_numpy_bootstrap_with_the_same_draws():
    model = copier("gpt_neox")
    result = probe_model(model, CFG, progress=False)
    v, reps = result.behaviour.values, result.behaviour.replicates
    correct, loss = plain_query(model, CFG)
    icl = plain_icl(model, repeated_batch(CFG.n_prefix, CFG.seq_len, CFG.seed, CFG.vocab_range))
    for name, per_seq, col in (("top1", correct.astype(float), 0), ("loss_b", loss, 1), ("icl_score", icl, 2)):
        lo, hi, ref = numpy_interval(per_seq, CFG.n_boot, CFG.boot_seed)
        np.testing.assert_allclose(reps[:, col], ref, rtol=1e-4, atol=1e-6)
        assert (v[f"{name}_lo"], v[f"{name}_hi"]) == pytest.approx((lo, hi), rel=1e-4, abs=1e-6)
        assert v[f"{name}_lo"] <= v[name] <= v[f"{name}_hi"]
    # top1 and loss_b resample exactly as the selectivities do: the library's multiplicities of these index draws
    draws = np.random.default_rng(CFG.boot_seed).integers(0, CFG.n, size=(CFG.n_boot, CFG.n))
    counts = np.stack([np.bincount(d, minlength=CFG.n) for d in draws])
    assert np.array_equal(counts, resample_weights(CFG.n, CFG.n_boot, CFG.boot_seed))
    assert result.replicates.shape[0] == CFG.n_boot  # the selectivities' replicates of the same draws


def test_without_bootstrap_or_prefix_batch_values_are_nan_not_zero():
    model = copier("olmo")
    beh = probe_model(model, CFG.replace(n_boot=0, n_prefix=0), progress=False).behaviour
    assert beh.replicates is None and np.isnan(beh.values["top1_lo"]) and np.isnan(beh.values["icl_score"])
    block = beh.summary()
    assert block["top1_lo"] is None and block["icl_score"] is None and block["top1"] == beh.values["top1"]


def test_behaviour_off_leaves_the_head_table_unchanged():
    model = tiny_model("olmoe")
    on = probe_model(model, CFG, progress=False)
    off = probe_model(model, CFG, progress=False, behaviour=False)
    assert off.behaviour is None and on.table.equals(off.table)
    assert np.array_equal(on.replicates, off.replicates)


def test_summarise_and_wilson_on_constructed_values():
    seqs = SequenceBehaviour(correct=np.array([1, 1, 0, 0, 1], bool), loss=np.arange(5.0), icl=np.array([1.0, 3.0]),
                             norm_pos0=np.array([[4.0, 10.0], [4.0, 30.0]]),
                             norm_median=np.array([[1.0, 1.0], [3.0, 1.0]]))
    beh = summarise(seqs, n_boot=0, boot_seed=0)
    assert (beh.values["top1"], beh.values["loss_b"], beh.values["icl_score"]) == (0.6, 2.0, 2.0)
    assert beh.streams == ["embed", "l0"]
    assert beh.norms["norm_ratio"] == [2.0, 20.0]  # ratio of means: 4/2 and 20/1 (the mean of ratios: 2.67, 20)
    lo, hi = wilson_interval(np.array([0, 5, 10]), 10)
    assert lo[0] == 0 and hi[2] == 1 and lo[1] == pytest.approx(0.2366, abs=1e-4) and hi[1] == pytest.approx(0.7634,
                                                                                                           abs=1e-4)
