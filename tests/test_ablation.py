import pytest
import torch

from circuitdev.measure.ablation import ablation_suite, head_means, matched_random, query_logits, upper_bound
from circuitdev.measure.batch import induction_batch
from circuitdev.errors import ConfigError
from circuitdev.measure.families import family_of
from tiny_models import FAMILIES, tiny_model

BATCH = induction_batch(n=8, seq_len=32, vocab_range=(3, 120))


@pytest.mark.parametrize("family", FAMILIES)
def test_no_ablation_is_bit_identical_to_plain_forward(family):
    model = tiny_model(family)
    with torch.no_grad():
        plain = model(torch.as_tensor(BATCH.tokens)).logits[:, -1].float()
    assert torch.equal(query_logits(model, BATCH, {}, batch_size=8), plain)


def hooked_logits(model, spec, replace):
    layout = family_of(model)
    dh = layout.head_dim
    hooks = []
    for layer, heads in spec.items():
        def pre(mod, args, heads=heads, layer=layer):
            x = args[0].clone()
            for h in heads:
                x[..., h * dh:(h + 1) * dh] = replace(layer, h)
            return (x,)
        hooks.append(model.get_submodule(layout.out_proj_path(layer)).register_forward_pre_hook(pre))
    with torch.no_grad():
        out = model(torch.as_tensor(BATCH.tokens)).logits[:, -1].float()
    for h in hooks:
        h.remove()
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_zero_ablation_equals_zeroing_by_hand(family):
    model = tiny_model(family)
    spec = {0: [1, 3], 1: [2]}
    ours = query_logits(model, BATCH, spec, batch_size=8)
    ref = hooked_logits(model, spec, lambda l, h: 0.0)
    torch.testing.assert_close(ours, ref, rtol=0, atol=0)
    assert not torch.equal(ours, query_logits(model, BATCH, {}, batch_size=8))


def test_mean_ablation_writes_the_head_mean():
    model = tiny_model("olmo")
    means = head_means(model, BATCH, layout=family_of(model))
    spec = {1: [0]}
    ours = query_logits(model, BATCH, spec, mode="mean", means=means)
    ref = hooked_logits(model, spec, lambda l, h: means[l, h * 8:(h + 1) * 8])
    torch.testing.assert_close(ours, ref, rtol=1e-6, atol=1e-6)


def test_matched_random_controls():
    spec = {4: [4], 7: [0, 1]}
    mr = matched_random(spec, 8, seed=123)
    assert {k: len(v) for k, v in mr.items()} == {4: 1, 7: 2}
    assert not set(mr[4]) & {4} and not set(mr[7]) & {0, 1}
    assert mr == matched_random(spec, 8, seed=123)
    assert matched_random({0: [0, 1, 2]}, 4) == {0: [3]}  # capped by the eligible heads
    assert upper_bound(spec, 8) == {4: list(range(8)), 7: list(range(8))}


def test_suite_rows_and_bad_specs():
    model = tiny_model("gpt_neox")
    df = ablation_suite(model, BATCH, {1: [0]}, random_seeds=(123, 7))
    assert df["condition"].tolist() == ["baseline", "screen", "matched_random", "matched_random", "upper_bound"]
    assert df["n_ablated"].tolist() == [0, 1, 1, 1, 4]
    assert {"loss", "acc_top1", "acc_top5", "mean_logit_B"} <= set(df.columns)
    with pytest.raises(ConfigError, match="outside the model's 2 layers"):
        query_logits(model, BATCH, {5: [0]})
    with pytest.raises(ConfigError, match="outside the model's 4 heads"):
        query_logits(model, BATCH, {0: [9]})
    with pytest.raises(ConfigError, match="mode"):
        query_logits(model, BATCH, {0: [0]}, mode="resample")


def test_suite_notes_a_layer_without_heads_outside_the_set():
    """A set that fills its layer leaves the matched-random control nothing to draw there: the row says so."""
    model = tiny_model("gpt_neox")
    df = ablation_suite(model, BATCH, {1: [0, 1, 2, 3]})
    row = df[df["condition"] == "matched_random"].iloc[0]
    assert row["n_ablated"] == 0 and "layer(s) [1] hold no head outside the set" in row["note"]
    assert (df.loc[df["condition"] != "matched_random", "note"] == "").all()
    assert ablation_suite(model, BATCH, {1: [0]}).loc[2, "note"] == ""
