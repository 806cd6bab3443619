"""Behaviour in the store (issue 23): the record's behaviour block and replicate file, `load_revision_table`,
format-2 records refreshed with byte-identical per-head files, hash neutrality, and the circuit ablation over
training on a tiny panel (values against `ablation.evaluate`, controls outside the circuit, a full layer reported,
resume and recompute)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from circuitdev.cli import main
from circuitdev.errors import DataError
from circuitdev.measure.ablation import evaluate, matched_random, matched_random_groups
from circuitdev.measure.config import ProbeConfig
from circuitdev.measure.probe import batch_for
from circuitdev.sources.ablate import ABLATION_COLUMNS, ablate_over_training, ablation_paths
from circuitdev.sources.loading import load_revision
from circuitdev.sources.panels import load_panel
from circuitdev.sources.records import REVISION_COLUMNS, PanelRecords
from circuitdev.sources.run import probe_panel
from circuitdev.sources.store import read_parquet, record_paths, record_status
from circuitdev.sources.revision_table import load_revision_table
from circuitdev.sources.record_format import BEHAVIOUR_BOOT_COLUMNS, FORMAT
from tiny_models import tiny_model

PROBE = {"n": 40, "n_pr": 12, "seq_len": 32, "vocab_range": [3, 8], "baseline_size": 10, "n_prefix": 8,
         "n_nulls": 2, "n_boot": 30}
CONTRACT = ["revision", "step", "tokens", "top1", "top1_lo", "top1_hi", "loss_b", "icl_score"]


def write_copier_panel(folder: Path, revisions: int = 3, name: str = "toy-copier") -> Path:
    """A folder panel of tiny gpt_neox models whose argmax lands among the batch's ids (top-1 about 1 in 5)."""
    for i in range(revisions):
        model = tiny_model("gpt_neox", seed=200 + i)
        with torch.no_grad():
            w = model.get_output_embeddings().weight
            w[3:8] = torch.randn(5, w.shape[1], generator=torch.Generator().manual_seed(i)) * 3.0
        model.save_pretrained(folder / name / f"step{i}")
    panel = {"name": name, "model": f"./{name}", "family": "gpt_neox", "dtype": "fp32", "tokens_per_step": 1024,
             "probe": PROBE, "revisions": [{"name": f"step{i}", "step": i, "tokens": i * 1024}
                                           for i in range(revisions)]}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(panel, sort_keys=False))
    return path


def as_spec(labels: list[str]) -> dict[int, list[int]]:
    """["L1H2", ...] -> {1: [2], ...}"""
    spec: dict[int, list[int]] = {}
    for lab in labels:
        layer, head = map(int, lab[1:].split("H"))
        spec.setdefault(layer, []).append(head)
    return spec


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """A probed 3-revision copier panel: (panel file, results folder). Read-only: copy before changing it."""
    folder = tmp_path_factory.mktemp("copier")
    path = write_copier_panel(folder)
    out = folder / "results"
    probe_panel(load_panel(path, results_dir=out), results_dir=out, progress=False)
    return path, out


def test_record_holds_the_behaviour_block_and_replicates(probed):
    path, out = probed
    paths = record_paths(out, "toy-copier", "step2")
    meta = json.loads(paths.sidecar.read_text())
    assert meta["format"] == FORMAT == "circuitdev.record/5"
    block = meta["behaviour"]
    assert block["n"] == PROBE["n"] and block["n_prefix"] == PROBE["n_prefix"] and block["n_boot"] == PROBE["n_boot"]
    assert block["norm_streams"] == ["embed", "l0", "l1"] and len(block["norm_ratio"]) == 3
    assert block["top1_lo"] <= block["top1"] <= block["top1_hi"]
    reps = read_parquet(paths.side("behaviour_boot"))
    assert list(reps.columns) == list(BEHAVIOUR_BOOT_COLUMNS) and len(reps) == PROBE["n_boot"]
    assert meta["behaviour_boot"]["rows"] == PROBE["n_boot"]
    assert set(meta["config"]) == set(ProbeConfig().to_dict())  # outputs, not configuration
    read = PanelRecords.open(out, path).read()
    assert read.behaviour_boot()["revision"].tolist() == [f"step{i}" for i in range(3) for _ in range(30)]


def test_load_revision_table_columns_and_values(probed):
    path, out = probed
    table = load_revision_table(out, path)
    assert list(table.columns[:len(REVISION_COLUMNS)]) == list(REVISION_COLUMNS)
    assert set(CONTRACT) <= set(table.columns) and set(ABLATION_COLUMNS) <= set(table.columns)
    norm = [f"{v}_{s}" for v in ("norm_pos0", "norm_median", "norm_ratio") for s in ("embed", "l0", "l1")]
    assert [c for c in table.columns if c.startswith("norm_")] == norm
    assert table["revision"].tolist() == ["step0", "step1", "step2"] and table["tokens"].tolist() == [0, 1024, 2048]
    for row in table.itertuples():
        block = json.loads(record_paths(out, "toy-copier", row.revision).sidecar.read_text())["behaviour"]
        assert (row.top1, row.loss_b, row.icl_score, row.icl_score_hi) == (
            block["top1"], block["loss_b"], block["icl_score"], block["icl_score_hi"])
        assert row.norm_ratio_l1 == block["norm_ratio"][2]
    for row in table.itertuples():  # Gu et al.'s rate: the per-head share averaged over every head of the revision
        heads = read_parquet(record_paths(out, "toy-copier", row.revision).parquet)
        assert len(heads) == 2 * 4 and row.gu_sink_rate == heads["gu_sink_share"].mean()
    assert table["ablated_top1"].isna().all()  # not computed yet: NaN, the columns still there
    assert 0 < table["top1"].max() < 1
    # the same function from the records module's RecordSet, without the ablation columns
    alone = PanelRecords.open(out, path).read().revision_table()
    pd.testing.assert_frame_equal(table[alone.columns], alone)


def _downgrade(paths, to: str) -> None:
    """Make a record look as an older format wrote it (no behaviour; format 1 also no nulls nor weights)."""
    meta = json.loads(paths.sidecar.read_text())
    meta["format"] = to
    meta.pop("behaviour"), meta.pop("behaviour_boot")
    paths.side("behaviour_boot").unlink()
    if to.endswith("/1"):
        meta.pop("nulls"), meta.pop("weights")
        paths.nulls.unlink()
    paths.sidecar.write_text(json.dumps(meta))


@pytest.mark.parametrize("old", ["circuitdev.record/2", "circuitdev.record/1"])
def test_older_records_stay_readable_and_probe_refreshes_them_byte_identical(probed, tmp_path, old):
    path, out = probed
    shutil.copytree(out, tmp_path, dirs_exist_ok=True)
    paths = record_paths(tmp_path, "toy-copier", "step1")
    before = {k: paths.side(k).read_bytes() for k in ("boot", "nulls")} | {"parquet": paths.parquet.read_bytes()}
    _downgrade(paths, old)
    st = record_status(paths, panel="toy-copier", revision="step1")
    assert st.complete and old in st.outdated and "behaviour" in st.outdated
    table = load_revision_table(tmp_path, path)  # readable: NaN behaviour for that revision
    assert table["top1"].isna().tolist() == [False, True, False]
    results = probe_panel(load_panel(path, results_dir=tmp_path), results_dir=tmp_path, progress=False)
    assert [r.action for r in results] == ["skipped", "computed", "skipped"] and "outdated" in results[1].reason
    assert paths.parquet.read_bytes() == before["parquet"]  # the per-head files, byte for byte
    assert {k: paths.side(k).read_bytes() for k in ("boot", "nulls")} == {k: before[k] for k in ("boot", "nulls")}
    assert load_revision_table(tmp_path, path).equals(load_revision_table(out, path))


def test_hashes_do_not_change():
    assert ProbeConfig(n_boot=0).config_hash() == "1ac1b418616b"  # the paper's defaults, as before
    toy = ProbeConfig(seq_len=64, vocab_range=(258, 1024), n=500, first_token_id=0, n_pr=500,
                      baseline_excludes_ab=True, batch_size=250, dtype="fp32")  # data/panels/toy-pythia.yaml
    assert toy.config_hash() == "7c5956010433"


def test_matched_random_groups_draw_outside_the_circuit():
    spec = {0: [1], 1: [0, 1, 2, 3]}  # layer 1 is full: no matched random head there
    layer = matched_random_groups(spec, 4, 5)
    assert layer.full_layers == [1] and layer.possible == 3 and layer.n_heads == 1
    assert layer.groups[0] == (123, matched_random(spec, 4, seed=123))  # the first is the paper's draw
    groups = [g for _, g in layer.groups]
    assert len(groups) == 3 and len({json.dumps(g) for g in groups}) == 3  # distinct, all that exist
    assert all(set(g) == {0} and 1 not in g[0] for g in groups)
    anywhere = matched_random_groups(spec, 4, 6, scope="any", n_layers=3)
    inside = {(l, h) for l, hs in spec.items() for h in hs}
    for _, g in anywhere.groups:
        heads = {(l, h) for l, hs in g.items() for h in hs}
        assert len(heads) == 5 and not heads & inside
    assert len({json.dumps(g) for _, g in anywhere.groups}) == 6
    assert matched_random_groups({0: [0, 1, 2, 3]}, 4, 3).groups == []  # nothing to draw: said, not ablated
    assert matched_random_groups({0: [0, 1, 2]}, 4, 3).short_layers == {0: (3, 1)}


def test_ablation_over_training_on_a_tiny_panel(probed, tmp_path, capsys):
    path, out = probed
    shutil.copytree(path.parent, tmp_path / "copy")  # checkpoints too: one is replaced below
    path, tmp_path = tmp_path / "copy" / path.name, tmp_path / "copy" / out.name
    panel = load_panel(path, results_dir=tmp_path)
    final = PanelRecords.open(tmp_path, path).read().table.query("revision == 'step2'")
    lowest = final.groupby("layer")["sel_induction"].min()
    full, threshold = int(lowest.idxmax()), float(lowest.max())  # that layer is all in, the other is not
    run = ablate_over_training(panel, results_dir=tmp_path, n_random=3, threshold=threshold, progress=False)
    meta, table = run.sidecar, run.table
    spec = as_spec(meta["circuit"])
    assert sorted(spec[full]) == [0, 1, 2, 3] and meta["random_full_layers"] == [full]  # reported, not hidden
    inside = set(meta["circuit"])
    for key in ("random_groups", "random_any_groups"):
        assert all(not set(g["heads"]) & inside for g in meta[key])
    assert table["n_random_any_heads"].eq(min(len(inside), 8 - len(inside))).all()
    capped = sum(min(len(h), 4 - len(h)) for layer, h in spec.items() if layer != full)  # the full layer gives none
    assert table["n_random_heads"].eq(capped).all()
    assert table["revision"].tolist() == ["step0", "step1", "step2"] and run.computed == ("step0", "step1", "step2")
    batch = batch_for(panel.probe_config())
    for row in table.itertuples():
        model = load_revision(panel, row.revision, progress=False)
        ablated = evaluate(model, batch, spec, batch_size=16)
        assert round(row.ablated_top1 * batch.n) == round(ablated["acc_top1"] * batch.n)
        assert row.ablated_loss_b == pytest.approx(ablated["loss"], rel=1e-5)
        for prefix in ("random", "random_any"):
            tops = [evaluate(model, batch, as_spec(g["heads"]), batch_size=16)["acc_top1"]
                    for g in meta[f"{prefix}_groups"]]
            assert getattr(row, f"n_{prefix}") == len(tops)
            if tops:
                assert getattr(row, f"{prefix}_top1") == pytest.approx(np.mean(tops), abs=1e-6)
        assert row.ablated_top1_lo <= row.ablated_top1 <= row.ablated_top1_hi
    if len(spec) == 1:  # the circuit is the full layer alone: no matched random group exists
        assert table["n_random"].eq(0).all() and table["random_top1"].isna().all()
    revs = load_revision_table(tmp_path, path)
    assert revs["baseline_top1"].tolist() == revs["top1"].tolist()  # the probe's own top-1 at every revision
    np.testing.assert_allclose(revs["top1_drop"], revs["top1"] - revs["ablated_top1"], atol=1e-12)
    # resume: nothing to do; another record of step0 (retrained weights): that row only, dropped until recomputed
    again = ablate_over_training(panel, results_dir=tmp_path, n_random=3, threshold=threshold, progress=False)
    assert again.computed == () and again.kept == ("step0", "step1", "step2")
    tiny_model("gpt_neox", seed=7).save_pretrained(panel.revision_path("step0"))
    probe_panel(panel, results_dir=tmp_path, progress=False)
    assert load_revision_table(tmp_path, path)["ablated_top1"].isna().tolist() == [True, False, False]
    again = ablate_over_training(panel, results_dir=tmp_path, n_random=3, threshold=threshold, progress=False)
    assert again.computed == ("step0",) and not load_revision_table(tmp_path, path)["ablated_top1"].isna().any()
    # a damaged table is not trusted: recomputed in full
    p = ablation_paths(tmp_path, "toy-copier").parquet
    p.write_bytes(p.read_bytes()[:-10])
    assert load_revision_table(tmp_path, path)["ablated_top1"].isna().all()
    assert main(["ablate", "--panel", str(path), "--over-training", "--out", str(tmp_path), "--random-groups", "3",
                 "--threshold", str(threshold), "--no-progress"]) == 0
    assert "3 computed, 0 kept" in capsys.readouterr().out


def test_ablate_needs_probed_records(tmp_path, capsys):
    path = write_copier_panel(tmp_path, revisions=1, name="toy-unprobed")
    assert main(["ablate", "--panel", str(path), "--over-training", "--out", str(tmp_path / "out")]) == 2
    assert "circuitdev probe" in capsys.readouterr().err
    with pytest.raises(DataError):
        ablate_over_training(load_panel(path), results_dir=tmp_path / "out", progress=False)


def test_reading_the_revision_table_needs_no_torch(probed):
    """Pages read the per-revision values (and the ablation table) without importing torch."""
    import subprocess
    import sys

    path, out = probed
    code = ("import sys\nfrom circuitdev.sources.revision_table import load_revision_table\n"
            f"t = load_revision_table({str(out)!r}, {str(path)!r})\nprint(len(t), 'torch' in sys.modules)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.split() == ["3", "False"]
