import numpy as np
import pytest
import torch

from circuitdev.measure.batch import induction_batch
from circuitdev.measure.capture import capture, prefix_matching_scores
from circuitdev.errors import ArchitectureError, ConfigError, NumericalError
from circuitdev.measure.families import family_of
from tiny_models import FAMILIES, tiny_model

BATCH = induction_batch(n=10, seq_len=32, vocab_range=(3, 120))


@pytest.mark.parametrize("family", [*FAMILIES, "llama"])
def test_attention_rows_equal_plain_eager_output_attentions(family):
    model = tiny_model(family)
    cap = capture(model, BATCH.tokens, batch_size=4)
    with torch.no_grad():
        out = model(torch.as_tensor(BATCH.tokens), output_attentions=True)
    ref = torch.stack([a[:, :, -1, :] for a in out.attentions], dim=1)  # (N, L, H, T)
    assert cap.attn_rows.shape == (10, 2, 4, 32)
    torch.testing.assert_close(cap.attn_rows, ref, rtol=0, atol=1e-6)
    # all-query statistics from the full patterns, computed independently
    full = torch.stack(out.attentions, dim=1)  # (N, L, H, T, T)
    col0 = full[..., 4:, 0]
    torch.testing.assert_close(cap.mass_first_allq, col0.mean(-1), rtol=1e-5, atol=1e-6)
    base = ((1 - col0) / torch.arange(4, 32)).mean(-1)
    torch.testing.assert_close(cap.base_first_allq, base, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("family", FAMILIES)
def test_head_outputs_equal_a_forward_pre_hook(family):
    model = tiny_model(family)
    layout = family_of(model)
    grabbed = {}
    hooks = [
        model.get_submodule(layout.out_proj_path(l)).register_forward_pre_hook(
            lambda mod, args, l=l: grabbed.__setitem__(l, args[0][:, -1].detach().clone())
        )
        for l in range(layout.n_layers)
    ]
    with torch.no_grad():
        model(torch.as_tensor(BATCH.tokens))
    for h in hooks:
        h.remove()
    cap = capture(model, BATCH.tokens, batch_size=3)
    ref = torch.stack([grabbed[l].reshape(10, 4, 8) for l in range(2)], dim=1)
    torch.testing.assert_close(cap.head_out, ref, rtol=0, atol=0)


def test_chunking_does_not_change_results():
    model = tiny_model("olmo")
    a = capture(model, BATCH.tokens, batch_size=10)
    b = capture(model, BATCH.tokens, batch_size=3)
    torch.testing.assert_close(a.attn_rows, b.attn_rows, rtol=1e-5, atol=1e-7)


def test_prefix_matching_against_full_patterns():
    model = tiny_model("gpt_neox")
    rep = np.tile(np.random.RandomState(0).randint(3, 120, size=(6, 8)), 2)
    scores = prefix_matching_scores(model, rep, batch_size=4)
    with torch.no_grad():
        att = model(torch.as_tensor(rep), output_attentions=True).attentions
    for l in range(2):
        expect = torch.stack([att[l][:, :, i, i - 8 + 1] for i in range(8, 16)], -1).mean(-1).mean(0)
        np.testing.assert_allclose(scores[l], expect.numpy(), rtol=1e-5)


def test_sdpa_model_is_refused_with_the_fix():
    with pytest.raises(ConfigError, match="eager"):
        capture(tiny_model("olmo", attn="sdpa"), BATCH.tokens)


def test_ids_outside_vocabulary():
    with pytest.raises(ConfigError, match="vocab_range"):
        capture(tiny_model("olmo"), induction_batch(n=2).tokens)  # ids up to 10000 vs vocab 128


def test_nan_attention_names_fp32():
    model = tiny_model("olmo")
    with torch.no_grad():
        model.model.layers[0].self_attn.q_proj.weight.fill_(float("nan"))
    with pytest.raises(NumericalError, match="fp32"):
        capture(model, BATCH.tokens)


def test_unknown_architecture_names_paths():
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=50, n_positions=32))
    with pytest.raises(ArchitectureError, match=r"model\.layers\[i\]\.self_attn\.o_proj"):
        family_of(model)
