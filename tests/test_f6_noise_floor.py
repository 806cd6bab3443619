"""F6, the stability of the null-selectivity floor, on hand-written null tables, and its figure."""

from __future__ import annotations

import pandas as pd
import pytest

from circuitdev.analysis import findings as F
from circuitdev.book import plots
from circuitdev.errors import DataError
from findings_fixtures import EMPTY, O, P, assert_placeholder, assert_titled


def test_noise_floor_without_data_reports_no_data():
    out = F.noise_floor(None, panels=[P, O])
    assert out["status"].tolist() == ["no data", "no data"] and out["panel"].tolist() == [P, O]
    assert F.noise_floor(pd.DataFrame(), panels=[P])["status"].tolist() == ["no data"]


def test_noise_floor_stability():
    nulls = pd.DataFrame({"revision": ["a", "b", "c"], "tokens_b": [1.0, 10.0, 100.0], "null_p99": [1.5, 2.0, 1.8],
                          "null_max": [10.0, 300.0, 50.0], "real_max": [100.0, 150.0, 180.0],
                          "k_above": [20, 30, 25]})
    out = F.noise_floor(nulls, panels=["", O]).set_index("panel")
    row = out.loc[""]
    assert row["status"] == "ok" and row["n_revisions"] == 3
    assert row["p99_ratio"] == pytest.approx(2.0 / 1.5) and bool(row["p99_stable"])
    assert row["max_ratio"] == pytest.approx(30.0) and not bool(row["max_stable"])
    assert (row["k_above_min"], row["k_above_max"]) == (20, 30)
    assert out.loc[O, "status"] == "no data"
    with pytest.raises(DataError, match="null_p99"):
        F.noise_floor(nulls.drop(columns="null_p99"))


def test_noise_floor_figure_is_titled_and_says_when_empty():
    nulls = pd.DataFrame({"tier": "toy", "panel": "toy-a", "tokens_b": [0.0, 1e-3], "null_p99": [1.1, 1.2],
                          "null_max": [2.0, 3.0], "real_max": [5.0, 60.0]})
    assert_titled(plots.noise_floor(nulls))
    assert_placeholder(plots.noise_floor(EMPTY), "noise_floor")


# ------------------------------------------------------------------------ toy F6 on one scale (issue 21 item 9)


def test_which_format_3_records_are_outdated():
    from circuitdev.sources.record_format import FORMAT, null_baseline, outdated_reason

    nulls = {"file": "x", "n_nulls": 20}
    toy = {"format": "circuitdev.record/3", "config": {"baseline_excludes_ab": True}, "nulls": nulls}
    paper = {"format": "circuitdev.record/3", "config": {"baseline_excludes_ab": False}, "nulls": nulls}
    assert "baseline_excludes_ab" in outdated_reason(toy) and null_baseline(toy) == "paper"  # two scales: refresh
    assert outdated_reason(paper) == "" and null_baseline(paper) == "paper"  # already one scale: left alone
    assert outdated_reason({**toy, "nulls": None}) == "" and null_baseline({**toy, "nulls": None}) is None
    current = {**toy, "format": FORMAT}
    assert outdated_reason(current) == "" and null_baseline(current) == "A/B excluded"
    assert "circuitdev.record/2" in outdated_reason({**paper, "format": "circuitdev.record/2"})


def test_probe_refreshes_a_format_3_toy_record_onto_one_scale(tmp_path):
    """A record whose selectivities exclude A/B but whose nulls a format-3 probe drew on the paper's baseline is
    outdated; `probe` rewrites it (format 4), its null draws now on the selectivities' scale."""
    import json

    import yaml

    from circuitdev.sources.panels import load_panel
    from circuitdev.sources.records import PanelRecords
    from circuitdev.sources.run import probe_panel
    from circuitdev.sources.store import record_paths, record_status
    from circuitdev.sources.record_format import FORMAT, null_baseline
    from tiny_models import tiny_model

    tiny_model("gpt_neox", seed=4).save_pretrained(tmp_path / "tiny-f6" / "step0")
    spec = {"name": "tiny-f6", "model": "./tiny-f6", "family": "gpt_neox", "dtype": "fp32", "tokens_per_step": 1,
            "probe": {"n": 24, "n_pr": 8, "seq_len": 16, "vocab_range": [3, 60], "baseline_size": 6, "n_prefix": 0,
                      "n_nulls": 3, "n_boot": 0, "baseline_excludes_ab": True},
            "revisions": [{"name": "step0", "step": 0, "tokens": 0}]}
    path = tmp_path / "tiny-f6.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "results"
    probe_panel(load_panel(path, results_dir=out), results_dir=out, progress=False)
    paths = record_paths(out, "tiny-f6", "step0")
    meta = json.loads(paths.sidecar.read_text())
    assert meta["format"] == FORMAT and null_baseline(meta) == "A/B excluded"
    meta["format"] = "circuitdev.record/3"  # as the toy records of format 3 were written
    paths.sidecar.write_text(json.dumps(meta))
    assert "baseline_excludes_ab" in record_status(paths, panel="tiny-f6", revision="step0").outdated
    assert PanelRecords.open(out, path).read().outdated() == ["step0"]
    (result,) = probe_panel(load_panel(path, results_dir=out), results_dir=out, progress=False)
    assert result.action == "computed" and "outdated" in result.reason
    assert null_baseline(json.loads(paths.sidecar.read_text())) == "A/B excluded"
    assert PanelRecords.open(out, path).read().outdated() == []


def test_the_f6_page_says_which_scale_each_panel_uses(tmp_path):
    """book.controls.null_scales: a panel whose null draws are on its selectivities' baseline, and one left on two."""
    import json

    import yaml

    from circuitdev.book import controls
    from circuitdev.book.tiers import load_tiers
    from circuitdev.sources.panels import load_panel
    from circuitdev.sources.run import probe_panel
    from circuitdev.sources.store import record_paths
    from tiny_models import tiny_model

    tiny_model("gpt_neox", seed=5).save_pretrained(tmp_path / "tiny-s" / "step0")
    spec = {"name": "tiny-s", "model": "./tiny-s", "family": "gpt_neox", "dtype": "fp32", "tokens_per_step": 1,
            "probe": {"n": 16, "n_pr": 8, "seq_len": 16, "vocab_range": [3, 60], "baseline_size": 6, "n_prefix": 0,
                      "n_nulls": 2, "n_boot": 0, "baseline_excludes_ab": True},
            "revisions": [{"name": "step0", "step": 0, "tokens": 0}]}
    (tmp_path / "tiny-s.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "results"
    probe_panel(load_panel(tmp_path / "tiny-s.yaml", results_dir=out), results_dir=out, progress=False)
    tiers = load_tiers(["measured"], published_dir=None, results_dir=out, panels=["tiny-s"])
    scales = controls.null_scales(tiers, out).set_index("panel")
    assert scales.loc["tiny-s", "text"] == "both on the A/B excluded baseline" and scales.loc["tiny-s", "one_scale"]
    sidecar = record_paths(out, "tiny-s", "step0").sidecar  # the same record as format 3 wrote it
    sidecar.write_text(json.dumps({**json.loads(sidecar.read_text()), "format": "circuitdev.record/3"}))
    scales = controls.null_scales(tiers, out).set_index("panel")
    assert not scales.loc["tiny-s", "one_scale"] and scales.loc["tiny-s", "nulls"] == "paper"
    assert "null draws on the paper one" in scales.loc["tiny-s", "text"]
