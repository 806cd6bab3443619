import pandas as pd
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
    """Bit-identical for the dense families; OLMoE's last MLP, run at the query only, routes one position through
    its experts and takes other matmul shapes: within 1e-6."""
    model = tiny_model(family)
    with torch.no_grad():
        plain = model(torch.as_tensor(BATCH.tokens)).logits[:, -1].float()
    ours = query_logits(model, BATCH, {}, batch_size=8)
    torch.testing.assert_close(ours, plain, rtol=0, atol=1e-6 if family == "olmoe" else 0)


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
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-6 if family == "olmoe" else 0)  # OLMoE: as above
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
    """The CLI's suite is `circuit_conditions`' rows: the same controls as the model pages."""
    model = tiny_model("gpt_neox")
    df = ablation_suite(model, BATCH, {1: [0]}, n_groups=2)
    assert df["condition"].tolist() == ["baseline", "screen", "matched_random", "matched_random", "random_any",
                                        "random_any", "upper_bound"]
    assert df["n_ablated"].tolist() == [0, 1, 1, 1, 1, 1, 4]
    assert df.loc[df["condition"] == "matched_random", "seed"].tolist() == [123, 124]
    assert {"loss", "acc_top1", "acc_top5", "mean_logit_B"} <= set(df.columns)
    with pytest.raises(ConfigError, match="outside the model's 2 layers"):
        query_logits(model, BATCH, {5: [0]})
    with pytest.raises(ConfigError, match="outside the model's 4 heads"):
        query_logits(model, BATCH, {0: [9]})
    with pytest.raises(ConfigError, match="mode"):
        query_logits(model, BATCH, {0: [0]}, mode="resample")
    with pytest.raises(ConfigError, match="batch_size"):
        query_logits(model, BATCH, {0: [0]}, batch_size=0)


def test_suite_notes_a_layer_without_heads_outside_the_set():
    """A set that fills its layer leaves the matched-random control nothing to draw there: the row says so and
    ablates nothing; the any-layer control draws as many heads elsewhere."""
    model = tiny_model("gpt_neox")
    df = ablation_suite(model, BATCH, {1: [0, 1, 2, 3]})
    row = df[df["condition"] == "matched_random"].iloc[0]
    assert row["n_ablated"] == 0 and row["note"] == "not possible: layer(s) 1 hold no head outside the circuit"
    assert pd.isna(row["acc_top1"])
    assert df.loc[df["condition"] == "random_any", "heads"].tolist() == ["L0H0 L0H1 L0H2 L0H3"]
    assert (df.loc[df["condition"] != "matched_random", "note"] == "").all()
    assert ablation_suite(model, BATCH, {1: [0]}).loc[2, "note"] == ""


# ------------------------------------------------- the model appendix's ablation: the circuit's own controls (issue 25)


def final_table(spec: dict[int, list[int]], n_layers: int = 2, n_heads: int = 4):
    """A one-revision developmental table whose induction circuit at 50x is `spec`."""
    import pandas as pd

    return pd.DataFrame([{"revision": "step1", "tokens_b": 1e-6, "layer": l, "head": h,
                          "sel_induction": 80.0 if h in spec.get(l, []) else 2.0}
                         for l in range(n_layers) for h in range(n_heads)])


def test_final_ablation_draws_distinct_controls_for_the_circuit_itself(make_tiny_panel):
    from circuitdev.book.model_ablation import ablation_text, final_ablation
    from circuitdev.measure.ablation import evaluate
    from circuitdev.measure.behaviour import wilson_interval
    from circuitdev.measure.probe import batch_for
    from circuitdev.sources.loading import load_revision
    from circuitdev.sources.panels import load_panel

    panel = load_panel(make_tiny_panel("gpt_neox", revisions=2))
    ab, why = final_ablation(panel, final_table({1: [0]}), groups=5)
    assert why == "" and ab["n"].eq(16).all()
    layer = ab[ab["condition"] == "matched_random"]
    # the circuit's own control: layer 1, one head, never head 0; only 3 distinct groups exist, so 3 rows, not 5
    assert len(layer) == 3 and len(set(layer["heads"])) == 3 and layer["drawn_for"].str.startswith("induction").all()
    assert all(h.startswith("L1H") and h != "L1H0" for h in layer["heads"]) and layer["note"].eq("").all()
    short, _ = final_ablation(panel, final_table({1: [0, 1, 2]}), groups=5)  # one head of layer 1 is outside
    assert short.loc[short["condition"] == "matched_random", "heads"].tolist() == ["L1H3"]
    assert "layer 1 holds 1 head outside the circuit against 3 in it" in ablation_text(short)
    anywhere = ab[ab["condition"] == "random_any"]
    assert len(anywhere) == 5 and len(set(anywhere["heads"])) == 5 and "L1H0" not in " ".join(anywhere["heads"])
    assert ab.loc[ab["condition"] == "upper_bound", "heads"].item() == "L1H0 L1H1 L1H2 L1H3"
    # top-1 is the plain evaluation of each head set, its interval the Wilson interval on the batch's 16 sequences
    model = load_revision(panel, "step1", dtype="fp32", progress=False)
    batch = batch_for(panel.probe_config())
    row = layer.iloc[0]
    spec = {1: [int(row["heads"].split("H")[1])]}
    assert row["acc_top1"] == evaluate(model, batch, spec)["acc_top1"]
    lo, hi = wilson_interval(round(row["acc_top1"] * 16), 16)
    assert (row["acc_top1_lo"], row["acc_top1_hi"]) == pytest.approx((float(lo), float(hi)))


def test_final_ablation_says_when_the_circuit_fills_its_layer(make_tiny_panel):
    """No matched random head exists where the circuit is the whole layer: a row says so and nothing is ablated as
    "matched random"; the any-layer control draws as many heads elsewhere (here only one such group exists)."""
    from circuitdev.book.model_ablation import ablation_summary, ablation_text, final_ablation
    from circuitdev.sources.panels import load_panel

    panel = load_panel(make_tiny_panel("gpt_neox", revisions=2))
    ab, _ = final_ablation(panel, final_table({1: [0, 1, 2, 3]}), groups=5)
    layer = ab[ab["condition"] == "matched_random"]
    assert len(layer) == 1 and layer["acc_top1"].isna().all() and layer["n_ablated"].item() == 0
    assert layer["note"].item() == "not possible: layer(s) 1 hold no head outside the circuit"
    anywhere = ab[ab["condition"] == "random_any"]
    assert anywhere["heads"].tolist() == ["L0H0 L0H1 L0H2 L0H3"]
    text = ablation_text(ab, prev_heads=["L0H2"])
    assert "No matched random control" in text and "(1 of its 1 groups hold a head of the previous-token" in text
    summary = ablation_summary(ab)
    assert list(summary.columns[:4]) == ["heads zeroed", "drawn for", "heads", "top-1 at the query (95% interval)"]
    assert summary.loc[summary["heads zeroed"] == "matched random set", "top-1 at the query (95% interval)"].item() \
        == "no such control"


def test_authors_controls_are_labelled_with_the_set_they_were_drawn_for():
    from circuitdev.sources.published_ablations import control_target

    top6, circuit = {0: {1, 7}, 1: {0}, 3: {5, 6, 7}}, {4: {4}, 7: {0, 1}}
    sets = {"ablate_induction_screen": circuit, "ablate_top6_by_integral": top6}
    assert control_target("matched_random", {0: {4, 5}, 1: {5}, 3: {1, 3, 4}}, sets) == "ablate_top6_by_integral"
    assert control_target("upper_bound", {l: set(range(8)) for l in (0, 1, 3)}, sets) == "ablate_top6_by_integral"
    assert control_target("matched_random", {4: {1}, 7: {2, 3}}, sets) == "ablate_induction_screen"
    assert control_target("matched_random", {4: {4}, 7: {2, 3}}, sets) == ""  # shares a head: drawn for neither
    assert control_target("other", top6, sets) == ""


def test_binomial_and_difference_intervals():
    import numpy as np
    import pandas as pd

    from circuitdev.analysis.uncertainty import binomial_intervals, difference_interval

    out = binomial_intervals(pd.DataFrame({"p": [0.0, 0.5, np.nan], "n": [16, 16, 16]}), "p", "n")
    assert out["p_lo"].iloc[0] == 0 and out["p_hi"].iloc[0] == pytest.approx(1.96 ** 2 / (16 + 1.96 ** 2), abs=1e-4)
    assert out["p_lo"].iloc[1] == pytest.approx(1 - out["p_hi"].iloc[1]) and np.isnan(out["p_lo"].iloc[2])
    # Newcombe (1998), method 10, his worked example: 56/70 - 48/80 -> (0.0524, 0.3339)
    w = binomial_intervals(pd.DataFrame({"p": [56 / 70, 48 / 80], "n": [70, 80]}), "p", "n")
    lo, hi = difference_interval(w["p"][0], w["p_lo"][0], w["p_hi"][0], w["p"][1], w["p_lo"][1], w["p_hi"][1])
    assert (round(float(lo), 4), round(float(hi), 4)) == (0.0524, 0.3339)
