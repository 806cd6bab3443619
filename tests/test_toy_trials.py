"""Recorded toy trials (issue 32): the per-checkpoint counts against an independent count, `circuitdev toy trial`
end to end on a tiny trained toy (a run still training is recorded as far as it has come), clear errors on bad files,
and the trials shipped in data/toy_trials/ are complete and honest about their recipe."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from circuitdev.cli import main
from circuitdev.errors import ConfigError, DataError
from circuitdev.toy import FAMILIES, Mixture, ToyRecipe, train_all, train_family
from circuitdev.toy import trials
from circuitdev.toy.recipe import preset

TINY = ToyRecipe(corpus_words=20_000, lexicon_size=300, vocab_size=320, n_layer=3, n_head=2, d_model=16, d_ff=32,
                 n_experts=4, top_k=2, d_ff_expert=16, seq_len=32, batch_size=4, steps=12, warmup=2,
                 checkpoint_steps=(0, 4, 12), dense_every=8, probe_seq_len=32, probe_n=16,
                 mixture=Mixture(text=0.4, periodic=0.4, backcopy=0.2), panel_suffix="-trial")


def _table(rng: np.random.Generator, revisions=("step0", "step5"), layers=4, heads=3) -> pd.DataFrame:
    rows = []
    for r, rev in enumerate(revisions):
        for layer in range(layers):
            for head in range(heads):
                rows.append({"panel": "p", "revision": rev, "tokens_b": r * 5e-6, "layer": layer, "head": head,
                             "sel_first_token": rng.choice([1.0, 29.9, 30.0, 80.0]),
                             "sel_first_token_allq": rng.choice([2.0, 31.0]),
                             "mass_first_token_allq": rng.uniform(0, 1), "sel_induction": rng.choice([10.0, 50.0])})
    return pd.DataFrame(rows)


def test_counts_match_an_independent_count():
    table = _table(np.random.default_rng(0))
    counts = trials.checkpoint_counts(table)
    for _, row in counts.iterrows():
        g = table[table["revision"] == row["revision"]]
        up, lo = g[g["layer"] >= 2], g[g["layer"] < 2]
        assert row["sinks_upper"] == sum(v >= 30 for v in up["sel_first_token"])  # 30.0 counts, 29.9 does not
        assert row["sinks_upper_allq"] == sum(v >= 30 for v in up["sel_first_token_allq"])
        assert row["sinks_floor"] == sum(v >= 30 for v in lo["sel_first_token"])
        assert row["sinks_floor_allq"] == sum(v >= 30 for v in lo["sel_first_token_allq"])
        assert row["induction"] == sum(v >= 50 for v in g["sel_induction"])
        assert row["max_mass_upper_allq"] == up["mass_first_token_allq"].max()
        either = up[(up["sel_first_token"] >= 30) | (up["sel_first_token_allq"] >= 30)]
        assert row["sink_heads"].split() == [f"L{l}H{h}" for l, h in zip(either["layer"], either["head"])]
        assert row["tokens"] == round(g["tokens_b"].iloc[0] * 1e9)
    last = counts.iloc[-1].copy()
    last[["sinks_upper", "sinks_upper_allq", "sinks_floor", "sinks_floor_allq", "induction"]] = [1, 0, 0, 0, 2]
    assert trials.meets_bar(last)
    last["sinks_floor_allq"] = 1  # a layer-0/1 sink by either score breaks the paper's floor
    assert not trials.meets_bar(last)
    with pytest.raises(DataError, match="sel_first_token_allq"):
        trials.checkpoint_counts(table.drop(columns="sel_first_token_allq"))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    train_all(TINY, ("olmo", "olmoe"), data, jobs=1, progress=False)
    return data


def test_a_trial_is_recorded_end_to_end(trained, tmp_path, capsys):
    panels = [trained / "panels" / f"{TINY.panel_name(f)}.yaml" for f in ("olmo", "olmoe")]
    out, results = tmp_path / "trials", tmp_path / "results"
    args = ["toy", "trial", "tiny", "--results", str(results), "--out", str(out), "--no-progress"]
    assert main([*args, *[a for p in panels for a in ("--panel", str(p))]]) == 0
    counts, meta = trials.read_trials(out)
    # the grid (0, 4, 12) and the dense checkpoint (8), in token order, per panel
    names = (TINY.panel_name("olmo"), TINY.panel_name("olmoe"))
    assert counts.groupby("panel")["step"].apply(list).to_dict() == {p: [0, 4, 8, 12] for p in names}
    assert (counts["tokens"] == counts["step"] * TINY.tokens_per_step).all()
    info = meta["tiny"]["panels"][TINY.panel_name("olmo")]
    assert info["recipe_hash"] == TINY.recipe_hash() and info["finished"] and info["tokens"] == 12 * 128
    assert info["changes"]["n_layer"] == 3 and "panel_suffix" not in info["changes"]
    assert "tokens (" in trials.trial_label(meta["tiny"]) and "n layer 3" in trials.trial_label(meta["tiny"])
    sentence = trials.trial_sentence(counts[counts["panel"] == TINY.panel_name("olmo")])
    assert sentence.startswith(TINY.panel_name("olmo")) and "induction heads" in sentence
    # re-recording reads the stored records (nothing probed twice) and writes the same counts
    before = (out / "tiny.csv").read_text()
    assert main([*args, *[a for p in panels for a in ("--panel", str(p))]]) == 0
    assert (out / "tiny.csv").read_text() == before


def test_a_run_still_training_is_recorded_so_far(trained, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(trained, data)
    panel_dir = data / "toy" / TINY.panel_name("olmo")
    shutil.rmtree(panel_dir / "step12")  # not saved yet
    (panel_dir / "recipe.json").unlink()  # written when training ends
    (panel_dir / "step8" / "model.safetensors").unlink()  # a checkpoint mid-save
    panel_file = data / "panels" / f"{TINY.panel_name('olmo')}.yaml"
    trials.record_trial("partial", [panel_file], results_dir=tmp_path / "r", out_dir=tmp_path / "t")
    counts, meta = trials.read_trials(tmp_path / "t")
    assert list(counts["step"]) == [0, 4]
    assert not meta["partial"]["panels"][TINY.panel_name("olmo")]["finished"]
    assert "unfinished" in trials.trial_label(meta["partial"])
    assert "none of the 0 finished trials" in trials.trials_outcome(counts, meta, families=["olmo"])


def test_bad_trials_are_named(trained, tmp_path):
    with pytest.raises(ConfigError, match="plain file stem"):
        trials.record_trial("../x", [], results_dir=tmp_path)
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "a.csv").write_text("trial,panel\nx,y\n")
    with pytest.raises(DataError, match="no a.json"):
        trials.read_trials(tmp_path / "t")
    (tmp_path / "t" / "a.json").write_text("{}")
    with pytest.raises(DataError, match="lacks column"):
        trials.read_trials(tmp_path / "t")
    assert trials.read_trials(tmp_path / "none")[0].empty


def test_the_shipped_trials_are_complete_and_name_their_recipe():
    counts, meta = trials.read_trials()
    assert {"default", "tokens10x", "long30x"} <= set(meta)
    for name, m in meta.items():
        assert set(m["panels"]) == set(counts.loc[counts["trial"] == name, "panel"]), name
        assert all(p["finished"] for p in m["panels"].values()), f"{name} was recorded before its training ended"
    long = meta["long30x"]["panels"]
    # the long preset is the recipe the thirtyfold trial trained: its hash, so `--preset long` re-trains it
    assert {p["recipe_hash"] for p in long.values()} == {preset("long").recipe_hash()}
    assert {p["family"] for p in long.values()} == {"olmo", "olmoe"}
    assert min(p["tokens"] for p in long.values()) >= 30 * ToyRecipe().steps * ToyRecipe().tokens_per_step
    assert {p["recipe_hash"] for p in meta["default"]["panels"].values()} == {ToyRecipe().recipe_hash()}
    assert set(FAMILIES) >= {p["family"] for m in meta.values() for p in m["panels"].values()}
    # what the toy recipe page's prose says of them (its sentences are glued; these are its words)
    last = trials.final_counts(counts).set_index(["trial", "family"])
    assert (last.loc["long30x", "induction"] == 0).all()  # "neither family formed an induction head"
    assert trials.meets_bar(last.loc[("tokens10x", "olmo")])  # "... and, in the OLMo-like toy, a lasting sink"
    assert not any(trials.meets_bar(last.loc[(t, "olmoe")]) for t in meta if (t, "olmoe") in last.index)
    held = counts[(counts["trial"] == "long30x") & (counts["family"] == "olmoe")]
    assert held["sinks_upper"].max() >= 1  # "the settings that gave the OLMoE-like toy a sink for much of its training"
    assert (held["sinks_upper"] > 0).mean() > 0.4 and held.iloc[-1]["sinks_upper"] == 0  # "(gone again ...)"


@pytest.mark.parametrize("family", ["olmo", "olmoe"])
def test_the_long_trial_re_trains_to_its_recorded_first_checkpoints(family, tmp_path):
    """Recording is checkable: the `long` preset re-trained here for its first grid checkpoints (one thread, as the
    trial was) and probed gives the recorded rows of those checkpoints, every count and score to the digits stored."""
    recorded, _ = trials.read_trials()
    recipe, stop = preset("long"), 480  # the grid's steps 0, 30, 120 and 480
    assert set(recipe.grid()) & set(range(stop + 1)) == {0, 30, 120, 480}
    train_family(family, recipe, tmp_path / "data", progress=False, threads=1, stop_after=stop)
    panel_file = tmp_path / "data" / "panels" / f"{recipe.panel_name(family)}.yaml"
    trials.record_trial("long30x", [panel_file], results_dir=tmp_path / "results", out_dir=tmp_path / "trials")
    again = (tmp_path / "trials" / "long30x.csv").read_text().splitlines()
    ours = recorded[(recorded["trial"] == "long30x") & (recorded["family"] == family) & (recorded["step"] <= stop)]
    shipped = (trials.default_trials_dir() / "long30x.csv").read_text().splitlines()
    assert len(ours) == 4 and again[0] == shipped[0]
    assert again[1:] == [line for line in shipped[1:] if line.split(",")[2] == family
                         and int(line.split(",")[4]) <= stop]


def test_the_recipe_page_never_breaks_on_missing_trials(monkeypatch):
    """Every trial key the toy recipe page quotes is glued, "not recorded" where data/toy_trials/ lacks the trial,
    and the figure is glued (a placeholder when no trial is recorded)."""
    from pathlib import Path

    from circuitdev.book import display, toy_page
    from circuitdev.book.build import BuildFolders
    from circuitdev.book.chapter import Chapter, page_references

    glued, figures = {}, []
    monkeypatch.setattr(display, "glue_text", lambda key, text, value=None: glued.__setitem__(key, text))
    monkeypatch.setattr(display, "glue_figure", lambda key, fig, **kw: figures.append(key))
    ch = Chapter("toy_panel", "toy", {}, BuildFolders(results_dir=Path("r"), data_dir=Path("d"), published_dir=None,
                                                      panels=None))
    toy_page.glue_trials(ch, pd.DataFrame(columns=list(trials.TRIAL_COLUMNS)), {})
    quoted = {k for k in page_references("toy_panel").glue_keys if k.startswith("toy-trial")}
    assert quoted and all(glued[k] == toy_page.TRIAL_ABSENT for k in quoted if k.startswith("toy-trial-"))
    assert glued["toy-trials-outcome"] == "no trial is recorded" and figures == ["toy-trials-figure"]
