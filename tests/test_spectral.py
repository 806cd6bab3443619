import numpy as np
import pytest
import torch

import circuitdev
from published_fixtures import published_fixture  # noqa: F401  (pytest fixture)
from circuitdev.measure.spectral import head_prs, participation_ratios, trajectory_features


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


def test_participation_ratios_of_one_matrix():
    assert participation_ratios(torch.eye(3)[None]).shape == (1,)


# ------------------------------------------------------------------------------------------ the PR null (issue 23)


def independent_null_pr(model, family: str, *, n: int, seq_len: int, seed: int, first_token=None) -> np.ndarray:
    """(L, H) PR on random ids computed without the probe's capture: each head's output at the last position rebuilt
    from HF's attention probabilities (`output_attentions`) and the value projection's output (a plain forward hook on
    a module the probe never reads), then the PR formula with numpy's SVD."""
    cfg = model.config
    n_heads, d = cfg.num_attention_heads, cfg.hidden_size // cfg.num_attention_heads
    ids = np.random.RandomState(seed).randint(0, cfg.vocab_size, size=(n, seq_len))
    if first_token is not None:
        ids[:, 0] = first_token
    values, hooks = {}, []
    layers = model.gpt_neox.layers if family == "gpt_neox" else model.model.layers
    for i, layer in enumerate(layers):
        module = layer.attention.query_key_value if family == "gpt_neox" else layer.self_attn.v_proj
        hooks.append(module.register_forward_hook(lambda m, a, out, i=i: values.__setitem__(i, out.detach())))
    with torch.no_grad():
        out = model(torch.as_tensor(ids), output_attentions=True)
    for h in hooks:
        h.remove()
    prs = np.zeros((len(layers), n_heads))
    for i, attn in enumerate(out.attentions):
        a = attn[:, :, -1, :].double().numpy()  # (N, H, T): the last query's attention
        v = values[i].double().numpy()
        v = v.reshape(n, seq_len, n_heads, 3, d)[:, :, :, 2] if family == "gpt_neox" else \
            v.reshape(n, seq_len, n_heads, d)  # GPT-NeoX fuses q, k, v per head
        for h in range(n_heads):
            z = np.einsum("nt,ntd->nd", a[:, h], v[:, :, h])  # (N, d): the head's output before W_O
            s = np.linalg.svd(z, compute_uv=False)
            p = s**2 / max((s**2).sum(), 1e-12)
            prs[i, h] = np.exp(-(p * np.log(p + 1e-12)).sum())
    return prs


@pytest.mark.parametrize("family", ["gpt_neox", "olmo", "olmoe"])
def test_null_pr_matches_an_independent_computation(family):
    from circuitdev.measure.config import ProbeConfig
    from circuitdev.measure.probe import null_pr
    from tiny_models import tiny_model

    model = tiny_model(family, seed=1)
    cfg = ProbeConfig(seq_len=24, batch_size=16)
    ours = null_pr(model, cfg, n=40, seed=7, first_token=0)
    np.testing.assert_allclose(ours, independent_null_pr(model, family, n=40, seq_len=24, seed=7, first_token=0),
                               rtol=1e-5)
    paper = null_pr(model, cfg, n=40, seed=7)  # the paper's: position 0 random too
    np.testing.assert_allclose(paper, independent_null_pr(model, family, n=40, seq_len=24, seed=7), rtol=1e-5)
    assert not np.allclose(ours, paper)  # the first token matters, and the test can see it


@pytest.fixture(scope="module")
def probed_tiny(tmp_path_factory):
    """A probed 2-revision folder panel of tiny gpt_neox models (BOS id 0 at position 0, as the toy panels)."""
    import yaml

    from circuitdev.sources.panels import load_panel
    from circuitdev.sources.run import probe_panel
    from tiny_models import tiny_model

    folder = tmp_path_factory.mktemp("nullpr")
    for i in range(2):
        tiny_model("gpt_neox", seed=10 + i).save_pretrained(folder / "tiny-null" / f"step{i}")
    spec = {"name": "tiny-null", "model": "./tiny-null", "family": "gpt_neox", "dtype": "fp32",
            "tokens_per_step": 1024, "probe": {"n": 24, "n_pr": 12, "seq_len": 16, "vocab_range": [3, 60],
                                                "baseline_size": 6, "n_prefix": 0, "n_nulls": 2, "n_boot": 0,
                                                "first_token_id": 0, "baseline_excludes_ab": True},
            "revisions": [{"name": f"step{i}", "step": i, "tokens": i * 1024} for i in range(2)]}
    path = folder / "tiny-null.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    out = folder / "results"
    probe_panel(load_panel(path, results_dir=out), results_dir=out, progress=False)
    return path, out


def test_null_pr_over_training_is_stored_vouched_for_and_resumed(probed_tiny, tmp_path):
    """Every revision gets n_draws null PRs per head, each the probe's null_pr of that checkpoint with seed + draw,
    the records' n_pr and first token; a second run computes nothing; a corrupted file is not trusted."""
    import shutil

    from circuitdev.measure.config import ProbeConfig
    from circuitdev.measure.probe import null_pr
    from circuitdev.sources.loading import load_revision
    from circuitdev.sources.null_pr import current_null_pr, null_pr_over_training, null_pr_paths, read_null_pr
    from circuitdev.sources.panels import load_panel

    path, out = probed_tiny
    shutil.copytree(out, tmp_path / "results")
    out = tmp_path / "results"
    panel = load_panel(path, results_dir=out)
    run = null_pr_over_training(panel, results_dir=out, n_draws=2, seed=5, progress=False)
    assert run.computed == ("step0", "step1") and len(run.table) == 2 * 2 * 2 * 4  # revisions x draws x L x H
    table, meta = read_null_pr(out, "tiny-null")
    assert meta["n"] == 12 and meta["first_token"] == 0 and meta["complete"] and set(meta["revisions"]) == {
        "step0", "step1"}
    assert table["tokens_b"].tolist()[:8] == [0.0] * 8 and table["tokens_b"].iloc[-1] == pytest.approx(1024 / 1e9)
    cfg = ProbeConfig(seq_len=16, batch_size=8)
    model = load_revision(panel, "step1", dtype="fp32", progress=False)
    expected = null_pr(model, cfg, n=12, seed=5 + 1, first_token=0)  # draw 1 of step1
    got = table[(table["revision"] == "step1") & (table["draw"] == 1)].sort_values(["layer", "head"])
    np.testing.assert_allclose(got["null_pr"].to_numpy(), expected.reshape(-1), rtol=1e-6)
    again = null_pr_over_training(panel, results_dir=out, n_draws=2, seed=5, progress=False)
    assert again.computed == () and again.kept == ("step0", "step1")
    assert len(current_null_pr(out, "tiny-null")) == len(table)
    paths = null_pr_paths(out, "tiny-null")
    paths.parquet.write_bytes(paths.parquet.read_bytes()[:-3] + b"xyz")
    assert read_null_pr(out, "tiny-null") is None  # not vouched for: never read
    assert null_pr_over_training(panel, results_dir=out, n_draws=2, seed=5, progress=False).computed == (
        "step0", "step1")
    assert null_pr_over_training(panel, results_dir=out, n_draws=3, seed=5, progress=False).computed == (
        "step0", "step1")  # other settings: recomputed


def test_null_pr_measured_in_the_probes_load_is_read_not_recomputed(probed_tiny, tmp_path, monkeypatch):
    """A probe with null_pr_draws keeps the PR null's draws beside its record (same config hash: a by-product);
    `null_pr_over_training` with the same settings reads them without loading a revision, and its table is
    bit-identical to the one it computes itself from records without them. Other settings, or a file that is not
    the one its sidecar vouches for: computed (the record itself is then corrupt and re-probed)."""
    import shutil

    import pandas.testing as pdt

    from circuitdev.sources import loading
    from circuitdev.sources.null_pr import null_pr_over_training
    from circuitdev.sources.panels import load_panel
    from circuitdev.sources.records import PanelRecords
    from circuitdev.sources.run import probe_panel
    from circuitdev.sources.store import record_paths

    path, plain = probed_tiny
    computed_here = tmp_path / "plain"
    shutil.copytree(plain, computed_here)
    reference = null_pr_over_training(load_panel(path, results_dir=computed_here), results_dir=computed_here,
                                      n_draws=2, progress=False).table
    out = tmp_path / "with-null-pr"
    panel = load_panel(path, results_dir=out)
    probe_panel(panel, results_dir=out, config=panel.probe_config(null_pr_draws=2), progress=False)
    read = PanelRecords(out, panel.name, panel).read()
    assert read.config_hash == PanelRecords(plain, panel.name, panel).read().config_hash
    block = read.sidecars["step1"]["null_pr"]
    assert (block["n_draws"], block["n"], block["seed"], block["first_token"]) == (2, 12, 2026, 0)

    def no_load(*args, **kwargs):
        raise AssertionError("a revision was loaded although its record holds the PR null")

    with monkeypatch.context() as m:
        m.setattr(loading, "loaded_revision", no_load)
        run = null_pr_over_training(panel, results_dir=out, n_draws=2, progress=False, force=True)
    pdt.assert_frame_equal(run.table, reference, check_exact=True)
    other = null_pr_over_training(panel, results_dir=out, n_draws=3, progress=False)  # other settings: computed
    assert other.computed == ("step0", "step1") and len(other.table) == 2 * 3 * 2 * 4
    side = record_paths(out, panel.name, "step0").side("null_pr")
    side.write_bytes(side.read_bytes()[:-2] + b"xx")
    assert not PanelRecords(out, panel.name, panel).status_of("step0").complete


# ----------------------------------------------------------------------------------- the spectral top-K (issue 23)


def test_topk_on_the_fixture_by_hand(published_fixture):  # noqa: F811
    """Pythia fixture PRs: L2H3 1.96/27.35/48.05/35.62/28.29, L0H3 1/1/5/9/9, every other head 2.0, over ln(max(
    tokens_B, 1)) = 0, 0, ln 6.291, ln 20.971, ln 299.892. Top 3: L2H3, L0H3, then the first of ten tied flat heads."""
    from circuitdev.analysis import findings as F
    from circuitdev.sources.published import load_published

    dev = load_published(published_fixture).table
    x = np.log([1, 1, 6.291, 20.971, 299.892])
    trap = lambda y: sum((y[i] + y[i + 1]) / 2 * (x[i + 1] - x[i]) for i in range(4))  # noqa: E731
    top = F.topk_heads(dev, k={"pythia-1b": 3, "olmo-1b-0724": 2}).query("panel == 'pythia-1b'")
    assert top["name"].tolist() == ["L2H3", "L0H3", "L0H0"] and top["rank"].tolist() == [1, 2, 3]
    assert top["integral"].tolist() == pytest.approx([trap([0.96, 26.35, 47.05, 34.62, 27.29]),
                                                      trap([0, 0, 4, 8, 8]), trap([1] * 5)])
    counts = F.topk_breakdown(dev, k=3).query("panel == 'pythia-1b'").set_index(["revision", "class"])["count"]
    assert counts["step1"].to_dict() == {**{c: 0 for c in F.TOPK_CLASSES}, "unclassified": 3}
    # step143000: L2H3 induction 181.6 (its first-token 85.2 is second), L0H3 induction 70, L0H0 previous-token 200
    assert counts["step143000"][counts["step143000"] > 0].to_dict() == {"induction": 2, "previous-token": 1}
    dom = F.topk_dominance(F.topk_breakdown(dev, k=3)).set_index("panel")
    assert dom.loc["pythia-1b", "largest"] == "induction" and not dom.loc["pythia-1b", "dominates"]
    assert dom.loc["pythia-1b", "leads_from"] is None


def test_topk_clip_and_scaled_k():
    """A run below 1B tokens is integrated from its first revision with tokens (the authors' 1B clip would zero every
    integral); K follows the paper's share of heads per family."""
    import pandas as pd

    from circuitdev.analysis import findings as F

    rows = [{"panel": "toy-z", "revision": f"s{r}", "tokens_b": t, "layer": 0, "head": h, "pr": pr[r],
             "classification": "unclassified"}
            for h, pr in enumerate([[1, 3, 5], [1, 1, 9]]) for r, t in enumerate([0.0, 1e-3, 2e-3])]
    top = F.topk_heads(pd.DataFrame(rows), k=2)
    assert top["clip_b"].iloc[0] == 1e-3
    assert top["integral"].tolist() == pytest.approx([(0 + 8) / 2 * np.log(2), (2 + 4) / 2 * np.log(2)])
    assert top["name"].tolist() == ["L0H1", "L0H0"]
    clipped = F.topk_heads(pd.DataFrame(rows), k=2, clip_b=1.0)
    assert clipped["integral"].tolist() == [0.0, 0.0]
    assert (F.scaled_k(128, "gpt_neox"), F.scaled_k(256, "olmo"), F.scaled_k(256, "olmoe")) == (45, 45, 45)
    assert (F.scaled_k(16, "gpt_neox"), F.scaled_k(16, "olmo"), F.scaled_k(4, None)) == (6, 3, 1)


def test_the_f5_page_reads_the_null_pr_of_each_record_panel(probed_tiny, tmp_path):
    """book.controls: the calibration of every record panel that has a stored null PR, with its tier; none without."""
    import shutil

    from circuitdev.book import controls
    from circuitdev.book.tiers import load_tiers
    from circuitdev.sources.null_pr import null_pr_over_training
    from circuitdev.sources.panels import load_panel

    path, out = probed_tiny
    shutil.copytree(out, tmp_path / "results")
    out = tmp_path / "results"
    tiers = load_tiers(["toy", "measured"], published_dir=None, results_dir=out, panels=["tiny-null"])
    cal, summary = controls.null_pr_calibration(tiers, out)
    assert cal.empty and summary.empty  # nothing stored yet
    null_pr_over_training(load_panel(path, results_dir=out), results_dir=out, n_draws=2, progress=False)
    cal, summary = controls.null_pr_calibration(tiers, out)
    assert set(cal["tier"]) == {"measured"} and set(cal["draws"]) == {2} and len(cal) == 2 * 8
    assert summary["revision"].tolist() == ["step0", "step1"] and (summary["heads"] == 8).all()
    assert controls.topk_k(tiers)["tiny-null"] == 3  # 8 gpt_neox heads x 45 / 128, rounded
