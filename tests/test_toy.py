"""The toy panel: a short recipe (tens of steps, tiny sizes) trains each family, saves loadable checkpoints, writes
a valid panel file, is probed end to end, and is deterministic. The full recipe's outcomes are measured by the
pipeline and shown in the book, not tested here."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from circuitdev.toy import FAMILIES, PANEL_NAMES, Mixture, ToyRecipe, default_grid, train_all, train_family
from circuitdev.toy.corpus import WindowSampler, generate_corpus

TINY = ToyRecipe(corpus_words=20_000, lexicon_size=300, vocab_size=320, n_layer=2, n_head=2, d_model=16, d_ff=32,
                 n_experts=4, top_k=2, d_ff_expert=16, seq_len=32, batch_size=4, steps=12, warmup=2,
                 checkpoint_steps=(0, 1, 4, 12), probe_seq_len=32, probe_n=16,
                 mixture=Mixture(text=0.4, periodic=0.4, backcopy=0.2))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    results = train_all(TINY, FAMILIES, data, jobs=1, progress=False)
    return data, results


def test_corpus_and_sampler_are_deterministic():
    assert generate_corpus(3, 2000, 100) == generate_corpus(3, 2000, 100)
    assert generate_corpus(3, 2000, 100) != generate_corpus(4, 2000, 100)
    topics = generate_corpus(3, 2000, 100, n_topics=4)
    assert topics == generate_corpus(3, 2000, 100, n_topics=4) and topics != generate_corpus(3, 2000, 100)
    assert ToyRecipe(n_topics=4).corpus_hash() != ToyRecipe().corpus_hash()
    stream = np.arange(500) % 300
    a = WindowSampler(stream, Mixture(0.3, 0.3, 0.4), 32, (257, 320), seed=1).batch(8)
    b = WindowSampler(stream, Mixture(0.3, 0.3, 0.4), 32, (257, 320), seed=1).batch(8)
    assert a.shape == (8, 32) and (a == b).all()


def test_grid_resolves_the_transition():
    g = default_grid(2500)
    assert g[0] == 0 and g[-1] == 2500 and {1, 4, 16, 64}.issubset(g)
    assert sum(250 <= s <= 1250 for s in g) >= 9  # dense where the curriculum puts the induction transition
    assert 750 in g  # the phase boundary of the shipped recipe (0.3 x 2500)


def test_curriculum_phases():
    from circuitdev.errors import ConfigError

    r = ToyRecipe(steps=100, mixture=Mixture(text=1.0, periodic=0.0, repeat=0.0, backcopy=0.0, bos=False),
                  phases=((0.5, Mixture(text=0.0, periodic=0.0, repeat=1.0, backcopy=0.0, bos=False)),))
    assert r.mixture_at(1) is r.mixture and r.mixture_at(50) is r.mixture and r.mixture_at(51).repeat == 1.0
    assert ToyRecipe.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    assert r.recipe_hash() != r.replace(phases=()).recipe_hash()
    for bad in (((1.2, Mixture()),), ((0.6, Mixture()), (0.4, Mixture()))):
        with pytest.raises(ConfigError, match="phases"):
            ToyRecipe(phases=bad)
    # the sampler switches kinds in place and keeps its random stream
    stream = np.arange(5000) % 300
    s = WindowSampler(stream, r.mixture, 32, (257, 320), seed=1)
    text = s.batch(4)
    assert (np.diff(text, axis=1) == 1).mean() > 0.9  # consecutive stream slices
    s.set_mixture(r.mixture_at(100))
    assert (s.batch(4) >= 257).all()  # repeat windows draw only probe-range ids


def test_bos_and_backcopy_windows():
    """Every window starts with the BOS; after a (gate, trigger) bigram the next token copies the one before the gate
    -- the context-gated Bigram-Backcopy rule that makes the copying head dormant elsewhere."""
    from circuitdev.toy.tokenizer import EOS_ID

    s = WindowSampler(np.arange(5000) % 300, Mixture(text=0, periodic=0, repeat=0, backcopy=1.0), 64, (257, 1024), seed=2)
    x = s.batch(64)
    assert (x[:, 0] == EOS_ID).all() and (x[:, 1:] >= 257).all()
    _, _, triggers, gates = s._bc
    events = [(b, i) for b in range(64) for i in range(3, 63) if x[b, i] in triggers and x[b, i - 1] in gates]
    assert len(events) > 100
    copied = np.mean([x[b, i + 1] == x[b, i - 2] for b, i in events])
    assert copied > 0.95  # the Markov chain can emit a (gate, trigger) bigram by chance, without the copy


def test_probe_defaults_follow_bos():
    from circuitdev.toy.recipe import PRESETS

    assert ToyRecipe().probe_defaults()["first_token_id"] == 0  # trained with a BOS: probed with it at position 0
    nobos = PRESETS["nobos"]
    assert "first_token_id" not in nobos.probe_defaults() and not nobos.trains_with_bos
    assert nobos.panel_name("olmo") == "toy-olmo-nobos"


def test_recipe_round_trip_and_hash():
    r = ToyRecipe()
    assert ToyRecipe.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    assert r.replace(seed=1).recipe_hash() != r.recipe_hash()


def test_cli_overrides_recipe():
    from circuitdev.cli import build_parser
    from circuitdev.commands.toy import recipe_from_args
    from circuitdev.errors import ConfigError

    args = build_parser().parse_args(["toy", "train", "--steps", "10", "--set", "d_model=32",
                                      "--set", 'mixture={"repeat": 0.3}'])
    r = recipe_from_args(args)
    assert (r.steps, r.d_model, r.mixture.repeat, r.mixture.text) == (10, 32, 0.3, ToyRecipe().mixture.text)
    args = build_parser().parse_args(["toy", "train", "--set", 'phases=[[0.5, {"repeat": 1.0, "text": 0, "periodic": 0}]]'])
    assert recipe_from_args(args).phases == ((0.5, Mixture(text=0, periodic=0, repeat=1.0)),)
    with pytest.raises(ConfigError):
        recipe_from_args(build_parser().parse_args(["toy", "train", "--set", "nope=1"]))
    with pytest.raises(ConfigError):
        recipe_from_args(build_parser().parse_args(["toy", "train", "--set", 'mixture={"nope": 1}']))


def test_each_family_trains_saves_and_writes_panel(trained):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    data, results = trained
    assert [r["panel"] for r in results] == [PANEL_NAMES[f] for f in FAMILIES]  # family order, whatever ran first
    classes = {"gpt_neox": "GPTNeoXForCausalLM", "olmo": "OlmoForCausalLM", "olmoe": "OlmoeForCausalLM"}
    for family in FAMILIES:
        panel = PANEL_NAMES[family]
        doc = yaml.safe_load((data / "panels" / f"{panel}.yaml").read_text())
        assert doc["name"] == panel and doc["family"] == family and doc["model"] == f"../toy/{panel}"
        assert [r["name"] for r in doc["revisions"]] == ["step0", "step1", "step4", "step12"]
        assert doc["revisions"][-1]["tokens"] == 12 * 4 * 32
        assert doc["probe"]["seq_len"] == 32 and doc["probe"]["vocab_range"][1] == 320
        final = (data / "panels" / doc["model"] / doc["revisions"][-1]["name"]).resolve()
        model = AutoModelForCausalLM.from_pretrained(final, attn_implementation="eager")
        assert type(model).__name__ == classes[family] and model.config.tie_word_embeddings
        assert AutoTokenizer.from_pretrained(final).vocab_size <= 320


def test_rerun_reuses_checkpoints(trained):
    data, _ = trained
    again = train_family("olmo", TINY, data, progress=False)
    assert again["reused"]


def test_same_seed_same_checkpoint(trained, tmp_path):
    import torch
    from safetensors.torch import load_file

    data, _ = trained
    train_family("gpt_neox", TINY, tmp_path, progress=False)
    a = load_file(data / "toy" / "toy-pythia" / "step12" / "model.safetensors")
    b = load_file(tmp_path / "toy" / "toy-pythia" / "step12" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # a changed recipe retrains from scratch and leaves no checkpoint of the old grid behind
    train_family("gpt_neox", TINY.replace(steps=6, checkpoint_steps=(0, 3, 6)), tmp_path, progress=False)
    assert sorted(p.name for p in (tmp_path / "toy" / "toy-pythia").glob("step*")) == ["step0", "step3", "step6"]


def test_probe_end_to_end(trained):
    """Each toy panel file loads with circuitdev.sources.panels and its final revision is screened by circuitdev.measure.probe."""
    from circuitdev.sources.loading import load_revision
    from circuitdev.sources.panels import load_panel
    from circuitdev.measure.probe import probe_model

    data, _ = trained
    for family in FAMILIES:
        panel = load_panel(data / "panels" / f"{PANEL_NAMES[family]}.yaml")
        assert panel.is_local and panel.family == family
        config = panel.probe_config(n=16, n_pr=16, batch_size=16)
        assert config.seq_len == 32 and tuple(config.vocab_range) == TINY.probe_vocab_range
        assert config.baseline_excludes_ab  # the toy screen's documented variant (screen.induction_ceiling)
        assert config.first_token_id == 0  # trained with a BOS at every window start: probed with it at position 0
        extra = {k: 0 for k in ("n_nulls", "n_prefix") if hasattr(config, k)}
        model = load_revision(panel, panel.revisions[-1], progress=False)
        table = probe_model(model, config.replace(**extra), progress=False).table
        assert len(table) == TINY.n_layer * TINY.n_head
        cols = {"sel_induction", "sel_first_token", "sel_first_token_allq", "mass_first_token_allq", "pr"}
        assert cols <= set(table.columns) and table[sorted(cols)].notna().all().all()
