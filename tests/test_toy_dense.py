"""The toy trainer's dense checkpoints (the candidates of `circuitdev refine`) and seed replicas (issue 14): the dense
grid changes no weight and no recipe hash, is listed under `candidates:`, and `--seeds 0 1` trains replicas under
their own panel names."""

from __future__ import annotations

import hashlib

import yaml

from circuitdev.cli import main
from circuitdev.sources.panels import load_panel
from circuitdev.sources.refine import candidate_revisions
from circuitdev.toy import Mixture, ToyRecipe, train_family

TINY = ToyRecipe(corpus_words=20_000, lexicon_size=300, vocab_size=320, n_layer=2, n_head=2, d_model=16, d_ff=32,
                 seq_len=32, batch_size=4, steps=12, warmup=2, checkpoint_steps=(0, 1, 4, 12), probe_seq_len=32,
                 probe_n=16, mixture=Mixture(text=0.4, periodic=0.4, backcopy=0.2), dense_every=3)


def weights(folder) -> str:
    return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()


def test_dense_checkpoints_change_no_weight_and_are_candidates(tmp_path):
    assert TINY.dense_grid() == (3, 6, 9)
    assert TINY.recipe_hash() == TINY.replace(dense_every=0).recipe_hash() == TINY.replace(dense_every=50).recipe_hash()
    train_family("gpt_neox", TINY, tmp_path / "a", progress=False)
    train_family("gpt_neox", TINY.replace(dense_every=0), tmp_path / "b", progress=False)
    a, b = tmp_path / "a" / "toy" / "toy-pythia", tmp_path / "b" / "toy" / "toy-pythia"
    assert all(weights(a / f"step{s}") == weights(b / f"step{s}") for s in TINY.grid())  # training unchanged
    assert {p.name for p in a.iterdir() if p.is_dir()} == {f"step{s}" for s in (0, 1, 3, 4, 6, 9, 12)}
    panel = load_panel(tmp_path / "a" / "panels" / "toy-pythia.yaml")
    assert panel.revision_names == ["step0", "step1", "step4", "step12"]
    assert [r.name for r in panel.candidates] == ["step3", "step6", "step9"] and panel.candidates[0].tokens == 3 * 128
    assert [r.name for r in candidate_revisions(panel, results_dir=tmp_path / "r")] == ["step3", "step6", "step9"]
    assert "candidates" not in yaml.safe_load((tmp_path / "b" / "panels" / "toy-pythia.yaml").read_text())
    # a panel trained before the dense grid existed (same recipe hash, no dense folders) is retrained, not reused
    (b / "step3").mkdir()
    assert train_family("gpt_neox", TINY, tmp_path / "b", progress=False)["reused"] is False
    assert train_family("gpt_neox", TINY, tmp_path / "b", progress=False)["reused"] is True


def test_seeds_train_replicas_under_their_own_names(tmp_path, capsys):
    sets = {"corpus_words": 20000, "lexicon_size": 300, "vocab_size": 320, "n_layer": 1, "n_head": 2, "d_model": 16,
            "d_ff": 32, "seq_len": 32, "batch_size": 4, "warmup": 2, "probe_seq_len": 32, "probe_n": 16,
            "checkpoint_steps": [0, 6], "dense_every": 0}
    args = ["toy", "train", "--family", "gpt_neox", "--steps", "6", "--seeds", "0", "1", "--jobs", "2",
            "--no-progress", "--data-dir", str(tmp_path), *[f"--set={k}={v}" for k, v in sets.items()]]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "toy-pythia:" in out and "toy-pythia-s1:" in out  # the two seeds train side by side, in one pool
    s0, s1 = (load_panel(tmp_path / "panels" / f"{n}.yaml") for n in ("toy-pythia", "toy-pythia-s1"))
    assert s0.revision_names == s1.revision_names == ["step0", "step6"]
    assert weights(tmp_path / "toy" / "toy-pythia" / "step6") != weights(tmp_path / "toy" / "toy-pythia-s1" / "step6")
    assert main([*args, "--seed", "2"]) == 2  # --seed and --seeds together: a user error


def test_negative_seeds_are_refused_before_any_training(tmp_path, capsys):
    for bad in (["--seeds", "0", "-1"], ["--seed", "-3"]):
        assert main(["toy", "train", "--family", "gpt_neox", *bad, "--data-dir", str(tmp_path), "--no-progress"]) == 2
        assert "training seeds are >= 0" in capsys.readouterr().err
    assert not (tmp_path / "toy").exists()  # refused before anything was written
