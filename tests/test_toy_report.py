"""The toy panel page's numbers (`circuitdev.toy.report`) and words (`circuitdev.book.toy_page`): events timed with
censoring, the heads at the end, the floor's strongest head, the training runs from recipe.json; and the executed
page glues exactly these (the toy recipe and the introduction quote its keys)."""

from __future__ import annotations

import json

import nbformat
import numpy as np
import pandas as pd
import pytest

from circuitdev.book import toy_page
from circuitdev.toy import report


def revision(panel: str, name: str, tokens_b: float, **columns) -> pd.DataFrame:
    """One revision of a 2-layer x 2-head panel; `columns` give each selectivity per head (4 values)."""
    base = {c: [0.0] * 4 for c in ("sel_induction", "sel_previous_token", "sel_first_token", "sel_first_token_allq",
                                    "mass_first_token", "mass_first_token_allq")}
    return pd.DataFrame({"panel": panel, "revision": name, "tokens_b": tokens_b, "layer": [0, 0, 1, 1],
                         "head": [0, 1, 0, 1], **base, **columns})


@pytest.fixture
def dev() -> pd.DataFrame:
    # listed out of token order on purpose; panel "b" already has its previous-token head at its first revision
    return pd.concat([
        revision("a", "step9", 9e-6, sel_induction=[0, 0, 60, 70], sel_previous_token=[120, 0, 0, 0],
                 sel_first_token=[0, 0, 0, 40], mass_first_token=[0, 0, 0, 0.5],
                 sel_first_token_allq=[31, 0, 0, 90], mass_first_token_allq=[0.3, 0, 0, 0.8],
                 sel_first_token_lo=[25, 0, 0, 35], sel_first_token_hi=[36, 0, 0, 45]),
        revision("a", "step1", 1e-6, sel_previous_token=[2, 0, 0, 0]),
        revision("a", "step5", 5e-6, sel_induction=[0, 0, 55, 0], sel_previous_token=[40, 0, 0, 0]),
        revision("b", "step0", 0.0, sel_previous_token=[0, 35, 0, 0]),
        revision("b", "step3", 3e-6, sel_previous_token=[0, 50, 0, 0]),
    ], ignore_index=True)


def test_first_events_in_token_order_with_censoring(dev):
    ev = report.first_events(dev, report.toy_events(induction=50, sink=30, prev=30)).set_index(["panel", "key"])
    assert ev.loc[("a", "prev-first"), "revision"] == "step5" and ev.loc[("a", "prev-first"), "layers"] == [0]
    assert ev.loc[("a", "induction-first"), "revision"] == "step5"
    assert ev.loc[("a", "induction-3"), "censored"] == "never"  # two heads at most
    assert ev.loc[("a", "sink-first"), "revision"] == "step9" and ev.loc[("a", "sink-first"), "layers"] == [1]
    assert ev.loc[("a", "sink-allq-first"), "layers"] == [0, 1]
    # 10% of 4 heads: one head is enough
    assert ev.loc[("a", "sinks-10pct"), "revision"] == "step9"
    # one censoring rule (findings.milestones'): held at step0, the initialisation, is exact -- nothing came before it
    assert ev.loc[("b", "prev-first"), "censored"] == "" and ev.loc[("b", "prev-first"), "revision"] == "step0"
    assert ev.loc[("b", "sink-first"), "last_revision"] == "step3"
    texts = {k: toy_page.event_text(r) for k, r in zip(ev.index, ev.to_dict("records"))}
    assert texts[("b", "prev-first")] == "step0 (0 tokens; layer 0)"
    assert texts[("a", "induction-3")] == "not by step9"
    assert texts[("a", "sink-allq-first")] == "step9 (9k tokens; layers 0, 1)"
    assert toy_page.revisions_list(ev.reset_index(), "prev-first", ["a", "b", "c"]) == \
        "a step5, b step0, c not in this build"
    # held at a first probed revision after initialisation: a bound
    low = report.first_events(dev, report.toy_events(prev=1)).set_index(["panel", "key"]).loc[("a", "prev-first")]
    assert low["censored"] == "first" and toy_page.event_text(low).startswith("≤ step1 (the first probed revision")


def test_heads_at_the_end_and_the_floors_strongest_head(dev):
    ind = report.final_heads(dev, "sel_induction", 50)
    assert list(ind["name"]) == ["L1H1", "L1H0"] and list(ind["panel"]) == ["a", "a"]  # b has none
    assert toy_page.heads_text(ind) == "2 heads: L1H1 70.0×, L1H0 60.0×" and toy_page.heads_text(ind[:0]) == "none"
    sinks = report.final_sinks(dev, 30)
    assert list(sinks["name"]) == ["L1H1", "L0H0"]  # L0H0 by its all-query score alone
    assert toy_page.sinks_text(sinks[:1]) == "L1H1 (second A 40.0×, mass 0.50; all queries 90.0×, mass 0.80)"
    floor = report.strongest(dev, "sel_first_token").set_index("panel")  # layers 0 and 1, over every revision
    row = floor.loc["a"]
    assert (row["name"], row["revision"], row["value"], row["value_lo"], row["value_hi"]) == \
        ("L1H1", "step9", 40.0, 35.0, 45.0)
    assert toy_page.floor_text(row) == "L1H1 40.0× (95% interval 35.0×–45.0×) at step9"
    allq = report.strongest(dev, "sel_first_token_allq", layers=(0,)).set_index("panel")
    assert allq.loc["a", ["name", "revision", "value"]].tolist() == ["L0H0", "step9", 31.0]
    assert np.isnan(allq.loc["a", "value_lo"])  # the records keep no interval of the all-query score
    assert toy_page.floor_text(allq.loc["a"], interval=False) == "L0H0 31.0× at step9"


def test_which_milestone_comes_first():
    def ev(a, b):
        rows = [{"key": k, "revision": r, "tokens_b": t, "censored": c, "last_revision": "step9"}
                for k, (r, t, c) in (("induction-3", a), ("sinks-10pct", b))]
        return toy_page.order_text(pd.DataFrame(rows))

    never = (None, np.nan, "never")
    assert ev(("step1", 1.0, ""), ("step5", 5.0, "")) == "induction first, sinks later"
    assert ev(("step5", 5.0, ""), ("step1", 1.0, "")) == "sinks first, induction later"
    assert ev(("step5", 5.0, ""), ("step5", 5.0, "")).startswith("both at step5")
    assert ev(("step5", 5.0, ""), never) == "induction first; the sink milestone is not reached by step9"
    assert ev(never, never) == "neither milestone is reached by step9"


def test_training_runs_read_recipe_json(tmp_path):
    (tmp_path / "toy-x").mkdir()
    recipe = {"seed": 1, "steps": 100, "batch_size": 4, "seq_len": 8}
    (tmp_path / "toy-x" / "recipe.json").write_text(json.dumps(
        {"hash": "abcdef012345", "family": "olmo", "seconds": 12.6, "final_loss": 3.2, "recipe": recipe}))
    runs = report.training_runs(tmp_path, ["toy-x", "toy-gone"]).set_index("panel")
    assert runs.loc["toy-x", ["trained", "recipe_hash", "seed", "tokens", "seconds"]].tolist() == \
        [True, "abcdef012345", 1, 3200, 12.6]
    assert not runs.loc["toy-gone", "trained"]
    texts = toy_page.panel_texts(["toy-x", "toy-gone"], runs.reset_index(), *[pd.DataFrame(columns=["tier"])] * 5)
    assert texts.loc["toy-x", "seconds"] == "13 s" and texts.loc["toy-x", "hash"] == "abcdef012345"
    assert texts.loc["toy-x", "induction-final"] == toy_page.ABSENT  # trained, but no records in this build
    assert texts.loc["toy-gone", "seconds"].startswith("not recorded")
    corpus = tmp_path / "_corpus" / "c0ffee"
    corpus.mkdir(parents=True)
    np.save(corpus / "stream.npy", np.arange(1234, dtype=np.int32))
    assert report.corpus_tokens(tmp_path, "c0ffee") == 1234 and report.corpus_tokens(tmp_path, "none") is None


def test_onsets_read_as_bounds():
    frame = pd.DataFrame({"panel": ["p", "q", "r"], "revision": ["s1", "s9", None], "revision_index": [0, 3, None],
                          "tokens_b": [6.0, 41.0, np.nan], "bound": ["upper", "exact", "lower"]})
    assert toy_page.onsets_text(frame) == ("p ≤ 6B tokens (its first revision), q 41B tokens, "
                                           "r not by its last revision")


@pytest.mark.slow
def test_the_page_glues_what_the_report_computes(tmp_path, make_tiny_panel):
    """The executed toy panel page on a tiny toy panel named like a family's: every key the toy recipe and the
    introduction quote is glued, with the report's values; the families the build lacks read "not in this build"."""
    from circuitdev.book.build import BuildFolders
    from circuitdev.book.execute import execute_page, page_sources
    from circuitdev.book.sweep import GLUE_PREFIX
    from circuitdev.sources.panels import load_panel
    from circuitdev.sources.records import load_panel_table
    from circuitdev.sources.run import probe_panel

    data, results = tmp_path / "data", tmp_path / "results"
    panel = make_tiny_panel("gpt_neox", revisions=2, name="toy-pythia", folder=data / "panels")
    probe_panel(load_panel(panel), results_dir=results, progress=False)
    (data / "toy" / "toy-pythia").mkdir(parents=True)
    (data / "toy" / "toy-pythia" / "recipe.json").write_text(json.dumps(
        {"hash": "0123456789ab", "family": "gpt_neox", "seconds": 42.4, "final_loss": 1.0,
         "recipe": {"seed": 0, "steps": 1, "batch_size": 1, "seq_len": 1}}))
    out = execute_page(page_sources()["toy_panel"], tmp_path / "toy_panel.ipynb", {"induction_threshold": 1.0},
                       folders=BuildFolders(results_dir=results, data_dir=data, published_dir=None, panels=None))
    glued = {o["metadata"]["scrapbook"]["name"]: o["data"][GLUE_PREFIX + "text/plain"][1:-1]
             for c in nbformat.read(out, as_version=4).cells for o in c.get("outputs", [])
             if "scrapbook" in o.get("metadata", {})}  # the texts as the book shows them
    dev = load_panel_table(results, load_panel(panel))
    assert glued["toy-pythia-seconds"] == "42 s" and glued["toy-recipe-hash"] == "0123456789ab"
    assert glued["toy-pythia-induction-final"] == toy_page.heads_text(report.final_heads(dev, "sel_induction", 1.0))
    assert glued["toy-olmo-induction-final"] == toy_page.ABSENT and glued["toy-seconds-total"] == "0.7 min"
    quoted = {"toy-corpus-tokens", "toy-default-tokens", "toy-mini-tokens", "toy-mini-seconds", "toy-phase-step",
              "toy-ceiling-paper", "toy-ceiling-toy", "toy-seed-spread-induction", "toy-pub-sink-onsets",
              "toy-prev-first-revisions", "toy-induction-first-revisions", "toy-sinks-final-names-list",
              "toy-order-list", "toy-floor-list", "toy-seconds-list", "toy-induction-final-list",
              "toy-sinks-final-list", "toy-induction-first-list", "toy-recipe-hash"}
    assert quoted <= set(glued), quoted - set(glued)
    assert glued["toy-ceiling-paper"] == "235×" and glued["toy-phase-step"] == "step 750"
