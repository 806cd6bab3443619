"""One ablation, batched (issues 28 and 34): `circuit_conditions` draws the controls, `condition_outcomes` runs every
condition of a revision in the same forwards, `null_prs` every null draw; each equals the one-condition (one-draw)
at a time path it replaced, kept here only, as the independent reference (nnsight traces, one per condition)."""

import json

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from nnsight import NNsight

from circuitdev.measure.ablation import circuit_conditions, condition_outcomes
from circuitdev.measure.batch import induction_batch
from circuitdev.measure.capture import as_token_tensor, envoy
from circuitdev.measure.families import family_of
from tiny_models import FAMILIES, tiny_model

BATCH = induction_batch(n=24, seq_len=32, vocab_range=(3, 120))


def one_at_a_time_logits(model, batch, spec, batch_size):
    """The old path: one nnsight trace per chunk and condition, the heads zeroed in place at W_O's input."""
    layout = family_of(model)
    ids = as_token_tensor(batch.tokens, model)
    wrapped, dh, out = NNsight(model), layout.head_dim, []
    with torch.no_grad():
        for start in range(0, ids.shape[0], batch_size):
            with wrapped.trace(input_ids=ids[start:start + batch_size]):
                for layer in sorted(spec):
                    z = envoy(wrapped, layout.out_proj_path(layer)).input
                    for h in spec[layer]:
                        z[..., h * dh:(h + 1) * dh] = 0
                logits = wrapped.output.logits[:, batch.query].save()
            out.append(logits.float().cpu())
    return torch.cat(out)


@pytest.mark.parametrize("family", FAMILIES)
def test_batched_conditions_equal_one_condition_at_a_time(family):
    """Every condition of a circuit's ablation, stacked in one batch, the layers below a condition's first ablated
    layer reused from the unablated forward (and that layer's attention: its kept W_O input), the last layer's MLP
    run at the query only, gives the logits of its own forward. Tolerance: bit-identical for the dense families
    where every forward has as many rows as the reference's (batch_size 8); OLMoE's expert matmuls take other
    shapes when its last MLP sees one position (logits within 1e-6; measured <= 3e-8); where chunks straddle
    conditions and leave a few rows over (batch_size 10), a small chunk can take another BLAS kernel: logits within
    1e-6 (measured: <= 7.5e-8), top-1 identical. The loss from the logits, to 1e-5."""
    model = tiny_model(family)
    layout = family_of(model)
    cc = circuit_conditions({1: [0, 2]}, n_layers=layout.n_layers, n_heads=layout.n_heads, n_groups=3)
    specs = [c.spec for c in cc.measured()]
    assert len(specs) == 2 + 1 + 3 + 1  # baseline, circuit, the one matched group that exists, 3 any-layer, upper
    assert {min(s) for s in specs if s} == {0, 1}  # conditions that reuse layer 0 and conditions that do not
    target = torch.as_tensor(BATCH.target)
    refs = [one_at_a_time_logits(model, BATCH, spec, batch_size=8) for spec in specs]
    for ours, ref in zip(condition_outcomes(model, BATCH, specs, batch_size=8, logits=True), refs):
        torch.testing.assert_close(ours, ref, rtol=0, atol=1e-6 if family == "olmoe" else 0)
    straddling = condition_outcomes(model, BATCH, specs, batch_size=10, logits=True)
    for ours, ref, outcome in zip(straddling, refs, condition_outcomes(model, BATCH, specs, batch_size=10)):
        torch.testing.assert_close(ours, ref, rtol=0, atol=1e-6)
        assert torch.equal(outcome.correct, ref.argmax(-1) == target)
        torch.testing.assert_close(outcome.loss, F.cross_entropy(ref, target, reduction="none"), rtol=0, atol=1e-5)
    assert not torch.equal(straddling[0], straddling[1])  # the circuit's condition did ablate something


def test_branch_plan_gives_each_condition_the_longest_history_it_shares():
    """A golden plan on three layers: conditions sorted by their per-layer head sets; each starts where it first
    differs from the earliest condition sharing its longest history (ROOT: the unablated forward)."""
    from circuitdev.measure.condition_tree import ROOT, Branch, branch_plan, root_runs

    keys = [((), (), ()),          # 0: no ablation = the root's own forward
            ((0,), (), (1,)),      # 1: differs from the root at layer 0
            ((), (2,), ()),        # 2: shares layer 0 with the root
            ((0,), (), (3,)),      # 3: shares layers 0-1 with 1
            ((0,), (1,), ()),      # 4: shares layer 0 with 1 (and with 3, later in order)
            ((0,), (), (1,)),      # 5: the same heads as 1
            ((), (2,), (0,))]      # 6: shares layers 0-1 with 2
    plan = branch_plan(keys)
    assert plan == [Branch(ROOT, 3, (0,)), Branch(ROOT, 1, (2,)), Branch(2, 2, (6,)), Branch(ROOT, 0, (1,)),
                    Branch(1, 3, (5,)), Branch(1, 2, (3,)), Branch(1, 1, (4,))]
    assert root_runs(plan) and not root_runs(branch_plan([((0,), ()), ((1,), ())]))


TREE_SPECS = [{}, {1: [0, 2]}, {1: [0, 2], 3: [1]}, {1: [0, 2], 2: [3]}, {0: [1], 2: [0]}, {0: [1], 2: [1, 2]},
              {0: [1], 2: [0], 3: [3]}, {3: [0, 1, 2, 3]}, {0: [1], 2: [0]}, {2: [1]}]


@pytest.mark.parametrize("family", FAMILIES)
def test_prefix_tree_conditions_equal_one_condition_at_a_time(family):
    """Four layers, conditions branching off each other at layers 0-3, a duplicate, one that ablates only the
    last layer; GPT-NeoX's parallel blocks also reuse the branch layer's MLP. Each condition's logits equal its own
    forward's within 1e-6 (rows meet other matmul shapes), top-1 identical; the same without the baseline in the
    list (no unablated forward to share: layer-0 branches run whole), and in chunks that straddle conditions."""
    from circuitdev.measure.condition_tree import branch_plan, condition_keys

    model = tiny_model(family, layers=4)
    layout = family_of(model)
    assert layout.parallel_residual == (family == "gpt_neox")
    keep = torch.ones(len(TREE_SPECS), 4, layout.n_heads, dtype=torch.bool)
    for c, spec in enumerate(TREE_SPECS):
        for layer, heads in spec.items():
            keep[c, layer, heads] = False
    assert {b.layer for b in branch_plan(condition_keys(keep))} == {0, 1, 2, 3, 4}  # every kind of branch
    refs = [one_at_a_time_logits(model, BATCH, spec, batch_size=8) for spec in TREE_SPECS]
    for specs, batch_size in ((TREE_SPECS, 8), (TREE_SPECS[1:], 8), (TREE_SPECS, 10)):
        offset = len(TREE_SPECS) - len(specs)
        for ours, ref in zip(condition_outcomes(model, BATCH, specs, batch_size=batch_size, logits=True),
                             refs[offset:]):
            torch.testing.assert_close(ours, ref, rtol=0, atol=1e-6)
            assert torch.equal(ours.argmax(-1), ref.argmax(-1))


def test_prefix_tree_mean_ablation_equals_filling_by_hand():
    """Mode "mean": a branch reuses its parent's z before the mask, then fills its own heads with their means."""
    from circuitdev.measure.ablation import head_means

    model = tiny_model("olmo", layers=4)
    layout = family_of(model)
    means = head_means(model, BATCH, layout=layout)
    specs = [{1: [0]}, {1: [0], 2: [3]}, {1: [0], 3: [2]}]
    dh = layout.head_dim
    for spec, ours in zip(specs, condition_outcomes(model, BATCH, specs, mode="mean", means=means, logits=True)):
        hooks = []
        for layer, heads in spec.items():
            def pre(mod, args, heads=heads, layer=layer):
                x = args[0].clone()
                for h in heads:
                    x[..., h * dh:(h + 1) * dh] = means[layer, h * dh:(h + 1) * dh]
                return (x,)
            hooks.append(model.get_submodule(layout.out_proj_path(layer)).register_forward_pre_hook(pre))
        with torch.no_grad():
            ref = model(torch.as_tensor(BATCH.tokens)).logits[:, -1].float()
        for h in hooks:
            h.remove()
        torch.testing.assert_close(ours, ref, rtol=1e-6, atol=1e-6)


def test_circuit_conditions_are_the_one_set_of_controls():
    cc = circuit_conditions({1: [0, 1, 2], 2: [3]}, n_layers=4, n_heads=4, n_groups=5)
    rows = [(c.condition, c.seed) for c in cc.conditions]
    assert rows[:2] == [("baseline", None), ("screen", None)] and rows[-1] == ("upper_bound", None)
    matched = [c for c in cc.conditions if c.condition == "matched_random"]
    inside = {(1, 0), (1, 1), (1, 2), (2, 3)}
    # layer 1 has one head outside the circuit, layer 2 three: 1 * 3 = 3 distinct matched groups exist
    assert cc.matched.possible == 3 and len(matched) == 3
    assert len({json.dumps(c.spec) for c in matched}) == 3
    for c in matched:
        assert c.spec[1] == [3] and len(c.spec[2]) == 1 and 3 not in c.spec[2]
        assert c.note == "layer 1 holds 1 head outside the circuit against 3 in it: the control draws 1 there"
    anywhere = [c for c in cc.conditions if c.condition == "random_any"]
    assert len(anywhere) == 5 and len({json.dumps(c.spec) for c in anywhere}) == 5
    for c in anywhere:
        heads = {(l, h) for l, hs in c.spec.items() for h in hs}
        assert len(heads) == 4 and not heads & inside
    full = circuit_conditions({0: [0, 1, 2, 3]}, n_layers=2, n_heads=4, n_groups=2)
    none = [c for c in full.conditions if c.condition == "matched_random"]
    assert len(none) == 1 and none[0].spec is None and none[0].note.startswith("not possible: layer(s) 0")
    assert [c.condition for c in circuit_conditions({}, n_layers=2, n_heads=4, n_groups=2).conditions] == \
        ["baseline", "screen"]


def one_draw_null_pr(model, seq_len, n, seed, first_token, batch_size):
    """The old path: one draw at a time, W_O's input at the last position read in an nnsight trace."""
    layout = family_of(model)
    vocab = model.get_input_embeddings().num_embeddings
    ids = np.random.RandomState(seed).randint(0, vocab, size=(n, seq_len))
    if first_token is not None:
        ids[:, 0] = first_token
    ids = torch.as_tensor(ids)
    wrapped, rows = NNsight(model), []
    with torch.no_grad():
        for start in range(0, n, batch_size):
            saved = []
            with wrapped.trace(input_ids=ids[start:start + batch_size]):
                for layer in range(layout.n_layers):
                    saved.append(envoy(wrapped, layout.out_proj_path(layer)).input[:, -1].save())
            rows.append(torch.stack([s.float() for s in saved], 1))  # (B, L, H * dh)
    z = torch.cat(rows).reshape(n, layout.n_layers, layout.n_heads, layout.head_dim).double()
    out = np.zeros((layout.n_layers, layout.n_heads))
    for layer in range(layout.n_layers):  # PR = exp(entropy of the shares of z's energy per singular direction)
        for head in range(layout.n_heads):
            x = z[:, layer, head].numpy()
            ev = np.clip(np.linalg.eigvalsh(x.T @ x), 0, None)
            p = ev / ev.sum()
            out[layer, head] = np.exp(-(p[p > 0] * np.log(p[p > 0])).sum())
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_batched_null_draws_equal_one_draw_at_a_time(family):
    from circuitdev.measure.config import ProbeConfig
    from circuitdev.measure.probe import null_pr, null_prs

    model = tiny_model(family)
    cfg = ProbeConfig(seq_len=16, batch_size=7)
    ours = null_prs(model, cfg, n=20, seeds=[5, 6, 7], first_token=2)
    for d, seed in enumerate([5, 6, 7]):
        ref = one_draw_null_pr(model, 16, 20, seed, 2, batch_size=8)
        np.testing.assert_allclose(ours[d], ref, rtol=1e-5)
        np.testing.assert_array_equal(null_pr(model, cfg, n=20, seed=seed, first_token=2), ours[d])


# ---------------------------------------------- the ablation over training: intervals over groups and the excess drop


def wilson(k, n, z=1.959963984540054):
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (0.0 if k <= 0 else centre - half), (1.0 if k >= n else centre + half)


T975 = {1: 12.706204736, 2: 4.302652730, 3: 3.182446305, 4: 2.776445105, 9: 2.262157163}  # Student t tables


def test_control_interval_and_excess_drop_against_numpy():
    from circuitdev.sources.ablate import control_interval, excess_interval, t_quantile

    for df, t in T975.items():
        assert t_quantile(0.975, df) == pytest.approx(t, abs=1e-7)
    n, ks = 200, np.array([120.0, 95.0, 140.0, 101.0, 133.0])
    mean, sd = ks.mean() / n, ks.std(ddof=1) / n
    half = T975[4] * sd / np.sqrt(5) * np.sqrt(1 - 5 / 30)  # 5 of 30 possible groups: finite population
    assert control_interval(ks, n, 30) == pytest.approx((mean - half, mean + half), abs=1e-9)
    # every possible group measured (or one): the batch's own binomial noise, Wilson on the mean count
    assert control_interval(ks, n, 5) == pytest.approx(wilson(ks.mean(), n), abs=1e-12)
    assert control_interval(ks[:1], n, 1) == pytest.approx(wilson(120.0, n), abs=1e-12)
    # the excess drop: control top-1 - circuit top-1, Newcombe's combination of the two intervals
    c_lo, c_hi = mean - half, mean + half
    k1 = 40
    p1, (l1, h1) = k1 / n, wilson(k1, n)
    d, lo, hi = excess_interval(mean, c_lo, c_hi, p1, l1, h1)
    assert d == pytest.approx(mean - p1)
    assert lo == pytest.approx(d - np.sqrt((mean - c_lo) ** 2 + (h1 - p1) ** 2))
    assert hi == pytest.approx(d + np.sqrt((c_hi - mean) ** 2 + (p1 - l1) ** 2))


def test_ablation_over_training_rows_equal_the_one_at_a_time_path(make_tiny_panel, tmp_path, capsys):
    """Same statistics as before the speed-up: each row's counts are those of one condition at a time (the nnsight
    reference), its intervals the numpy ones above; `circuitdev ablate --over-training` prints the excess drop."""
    from circuitdev.cli import main
    from circuitdev.measure.probe import batch_for
    from circuitdev.sources.ablate import ablate_over_training
    from circuitdev.sources.loading import load_revision
    from circuitdev.sources.panels import load_panel
    from circuitdev.sources.records import PanelRecords
    from circuitdev.sources.run import probe_panel

    path = make_tiny_panel("olmo", revisions=2)
    panel, out = load_panel(path), tmp_path / "out"
    probe_panel(panel, results_dir=out, progress=False)
    final = PanelRecords.open(out, path).read().table.query("revision == 'step1'")
    threshold = float(final["sel_induction"].nlargest(2).iloc[-1])  # a two-head circuit
    run = ablate_over_training(panel, results_dir=out, n_random=4, threshold=threshold, progress=False)
    meta = run.sidecar
    spec = _spec_of(meta["circuit"])
    batch = batch_for(panel.probe_config())
    target = torch.as_tensor(batch.target)
    n = batch.n
    for row in run.table.to_dict("records"):
        model = load_revision(panel, row["revision"], progress=False)
        count = lambda s: int((one_at_a_time_logits(model, batch, s, 8).argmax(-1) == target).sum())  # noqa: E731
        k0, k1 = count({}), count(spec)
        assert (row["baseline_top1"], row["ablated_top1"]) == (k0 / n, k1 / n)
        assert (row["ablated_top1_lo"], row["ablated_top1_hi"]) == pytest.approx(wilson(k1, n))
        for prefix in ("random", "random_any"):
            groups = meta[f"{prefix}_groups"]
            ks = np.array([count(_spec_of(g["heads"])) for g in groups], dtype=float)
            assert row[f"n_{prefix}"] == len(groups)
            if not len(groups):
                continue
            assert row[f"{prefix}_top1"] == pytest.approx(ks.mean() / n)
            assert (row[f"{prefix}_top1_min"], row[f"{prefix}_top1_max"]) == (ks.min() / n, ks.max() / n)
        ctrl = meta["excess_control"]
        assert ctrl in ("random", "random_any")
        c, c_lo, c_hi = row[f"{ctrl}_top1"], row[f"{ctrl}_top1_lo"], row[f"{ctrl}_top1_hi"]
        p1, (l1, h1) = k1 / n, wilson(k1, n)
        assert row["excess_drop"] == pytest.approx(row["top1_drop"] - row[f"{ctrl}_drop"])
        assert row["excess_drop_lo"] == pytest.approx(c - p1 - np.hypot(c - c_lo, h1 - p1))
        assert row["excess_drop_hi"] == pytest.approx(c - p1 + np.hypot(c_hi - c, p1 - l1))
    assert main(["ablate", "--panel", str(path), "--over-training", "--out", str(out), "--random-groups", "4",
                 "--threshold", str(threshold), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "excess_drop_lo" in printed and "0 computed, 2 kept" in printed


def test_the_final_revisions_conditions_are_stored_for_the_model_page(make_tiny_panel, tmp_path):
    """`ablate_over_training` keeps the final revision's conditions one by one (whole layers too), from the forwards
    of its row; the model page reads them cut to its groups: the rows of `ablate_final_circuit`, which loads the
    checkpoint (eager there, sdpa here: top-1 equal, loss within 1e-5). Another threshold, more groups than stored,
    mean ablation, or a re-probed final record: not these rows (None: the page computes them)."""
    from circuitdev.book.model_ablation import final_ablation
    from circuitdev.sources.ablate import ablate_over_training, read_final_ablation
    from circuitdev.sources.panels import load_panel
    from circuitdev.sources.records import PanelRecords
    from circuitdev.sources.run import ablate_final_circuit, probe_panel

    path = make_tiny_panel("olmo", revisions=2)
    panel, out = load_panel(path), tmp_path / "out"
    probe_panel(panel, results_dir=out, progress=False)
    read = PanelRecords(out, panel.name, panel).read()
    threshold = float(read.table.query("revision == 'step1'")["sel_induction"].nlargest(2).iloc[-1])
    ablate_over_training(panel, results_dir=out, n_random=4, threshold=threshold, progress=False)
    stored = read_final_ablation(out, read, threshold=threshold, groups=3)
    live, _ = ablate_final_circuit(panel, read.table, config=read.config, threshold=threshold, groups=3)
    assert list(stored["condition"]) == list(live["condition"]) and list(stored["heads"]) == list(live["heads"])
    assert stored["spec"].tolist() == live["spec"].tolist() and "upper_bound" in set(stored["condition"])
    pd.testing.assert_series_equal(stored["acc_top1"], live["acc_top1"])
    np.testing.assert_allclose(stored["loss"], live["loss"], rtol=0, atol=1e-5)
    page, why = final_ablation(panel, read.table, config=read.config, threshold=threshold, groups=3, results_dir=out)
    assert why == "" and page["acc_top1"].tolist() == stored["acc_top1"].tolist()
    assert read_final_ablation(out, read, threshold=threshold * 1.01, groups=3) is None
    assert read_final_ablation(out, read, threshold=threshold, groups=5) is None
    assert read_final_ablation(out, read, threshold=threshold, groups=3, mode="mean") is None
    from tiny_models import tiny_model

    tiny_model("olmo", seed=99).save_pretrained(panel.revision_path("step1"))  # the final checkpoint retrained
    probe_panel(panel, results_dir=out, revisions=["step1"], progress=False)
    again = PanelRecords(out, panel.name, panel).read()
    assert read_final_ablation(out, again, threshold=threshold, groups=3) is None


def _spec_of(names):
    spec = {}
    for name in names:
        layer, head = map(int, name[1:].split("H"))
        spec.setdefault(layer, []).append(head)
    return spec


def test_ablate_and_null_pr_refuse_bad_options_before_loading(make_tiny_panel, tmp_path, capsys):
    """Exit 2 with the cause, before any model loads: a batch size below 1, a GPU this machine lacks, a final
    checkpoint that is not there, null-pr's --n below 2 or negative --seed."""
    from circuitdev.cli import main
    from circuitdev.sources.panels import load_panel
    from circuitdev.sources.run import probe_panel

    path = make_tiny_panel("gpt_neox", revisions=2)
    out = tmp_path / "out"
    probe_panel(load_panel(path), results_dir=out, progress=False)
    base = ["--panel", str(path), "--out", str(out), "--no-progress"]
    assert main(["ablate", *base, "--batch-size", "0"]) == 2
    assert "--batch-size must be >= 1" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert main(["ablate", *base, "--device", "cuda"]) == 2
        assert "no CUDA GPU" in capsys.readouterr().err
    assert main(["null-pr", *base, "--n", "1"]) == 2
    assert "--n must be >= 2" in capsys.readouterr().err
    assert main(["null-pr", *base, "--seed", "-1"]) == 2
    assert "--seed" in capsys.readouterr().err
    assert main(["null-pr", *base, "--batch-size", "0"]) == 2
    capsys.readouterr()
    # the final checkpoint gone: the final-revision ablation cannot run -> an error, not "done"
    final = load_panel(path).revision_path("step1")
    for f in final.iterdir():
        f.unlink()
    assert main(["ablate", *base, "--threshold", "0.001"]) == 2
    assert "step1" in capsys.readouterr().err


def test_final_ablation_summary_gives_random_groups_their_interval_over_groups():
    """The model pages' random-group rows: the mean's interval covers the spread between groups (t over groups, no
    finite-population factor: the table does not say how many groups exist), not a Wilson interval on the mean."""
    from circuitdev.book.model_ablation import ablation_summary

    tops = [0.30, 0.50, 0.45]
    ab = pd.DataFrame({"condition": ["baseline", *["matched_random"] * 3], "label": ["no ablation",
                       *["matched random set"] * 3], "drawn_for": ["", *["induction circuit"] * 3],
                       "seed": [None, 123, 124, 125], "n_ablated": [0, 2, 2, 2],
                       "heads": ["", "L1H1 L1H2", "L1H0 L1H3", "L1H1 L1H3"], "n": 100, "acc_top1": [0.8, *tops],
                       "acc_top1_lo": 0.0, "acc_top1_hi": 1.0, "loss": 1.0, "note": ""})
    row = ablation_summary(ab).iloc[1]
    half = T975[2] * np.std(tops, ddof=1) / np.sqrt(3)
    mean = np.mean(tops)
    assert row["top-1 at the query (95% interval)"] == \
        f"{100 * mean:.1f}% (95% interval {100 * (mean - half):.1f}%–{100 * (mean + half):.1f}%)"
