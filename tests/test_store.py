"""The result store: record layout and sidecar, bitwise determinism, resume after an interruption between
revisions and mid-write, corruption detection, configuration switching, the developmental table."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

import circuitdev.atomic as atomic
from circuitdev.errors import DataError
from circuitdev.sources.panels import load_panel
from circuitdev.measure.probe import probe_model
from circuitdev.schema import DEV_KEY_COLUMNS, SEL_COLUMNS
from circuitdev.sources.run import probe_panel
from circuitdev.sources.records import PanelRecords, load_panel_table
from circuitdev.sources.store import read_record, record_paths, record_status
from circuitdev.sources.record_format import RECORD_COLUMNS

REVS = ["step0", "step1", "step2"]


class Counting:
    """probe_fn that records which revisions were computed (the real probe underneath), optionally interrupting."""

    def __init__(self, interrupt_at: int | None = None):
        self.calls = 0
        self.interrupt_at = interrupt_at

    def __call__(self, model, config, progress=True):
        self.calls += 1
        if self.interrupt_at is not None and self.calls == self.interrupt_at:
            raise KeyboardInterrupt
        return probe_model(model, config, progress=False)


def run(panel, out, **kw):
    return probe_panel(load_panel(panel, results_dir=out), results_dir=out, progress=False, **kw)


def record_bytes(out, name="tiny-gptneox") -> dict[str, bytes]:
    return {r: (Path(out) / name / f"{r}.parquet").read_bytes() for r in REVS}


@pytest.fixture(scope="module")
def reference(tiny_panel, tmp_path_factory):
    """An uninterrupted run of the shared tiny panel: {revision: parquet bytes}, and its folder."""
    out = tmp_path_factory.mktemp("reference")
    results = run(tiny_panel, out)
    assert [r.action for r in results] == ["computed"] * 3
    return record_bytes(out), out


def test_record_layout_and_sidecar(reference, tiny_panel):
    _, out = reference
    panel = load_panel(tiny_panel)
    for rev in panel.revisions:
        paths = record_paths(out, panel.name, rev.name)
        table, meta = read_record(out, panel.name, rev.name)
        assert meta == json.loads(paths.sidecar.read_text())
        data = paths.parquet.read_bytes()
        assert meta["parquet"]["sha256"] == hashlib.sha256(data).hexdigest()  # independent re-hash
        assert meta["parquet"]["rows"] == len(table) == 2 * 4  # 2 layers x 4 heads
        assert sorted(zip(table.layer, table["head"])) == [(l, h) for l in range(2) for h in range(4)]
        assert (table.panel == panel.name).all() and (table.revision == rev.name).all()
        assert (table.tokens == rev.tokens).all() and (table.step == rev.step).all()
        assert meta["config_hash"] == panel.probe_config().config_hash() == table.config_hash.iloc[0]
        assert meta["config"]["dtype"] == meta["dtype"] == "fp32" and meta["device"] == "cpu"
        assert {"torch", "transformers", "nnsight", "circuitdev"} <= set(meta["versions"])
        assert {"load_s", "probe_s"} <= set(meta["timings"]) and "commit" in meta["git"]
        assert {"top1", "loss_b", "icl_score", "norm_ratio"} <= set(meta["behaviour"])  # issue 23
        # every stored column is documented, and the contract's columns are there
        assert set(table.columns) <= set(RECORD_COLUMNS), set(table.columns) - set(RECORD_COLUMNS)
        for col in ("layer", "head", *SEL_COLUMNS, "best_class", "classification", "pr"):
            assert col in table.columns


def test_two_cpu_runs_are_bitwise_identical(reference, tiny_panel, tmp_path):
    ref, _ = reference
    run(tiny_panel, tmp_path)
    assert record_bytes(tmp_path) == ref


def test_complete_records_are_skipped(reference, tiny_panel, tmp_path):
    ref, out = reference
    shutil.copytree(out, tmp_path, dirs_exist_ok=True)
    fn = Counting()
    results = run(tiny_panel, tmp_path, probe_fn=fn)
    assert fn.calls == 0 and [r.action for r in results] == ["skipped"] * 3
    results = run(tiny_panel, tmp_path, probe_fn=fn, revisions=["step1"], force=True)
    assert fn.calls == 1 and [r.action for r in results] == ["computed"]
    assert record_bytes(tmp_path) == ref


def test_interrupted_between_revisions_resumes(reference, tiny_panel, tmp_path):
    ref, _ = reference
    with pytest.raises(KeyboardInterrupt):
        run(tiny_panel, tmp_path, probe_fn=Counting(interrupt_at=2))
    states = [record_status(record_paths(tmp_path, "tiny-gptneox", r), panel="tiny-gptneox", revision=r).state
              for r in REVS]
    assert states == ["complete", "missing", "missing"]
    fn = Counting()
    results = run(tiny_panel, tmp_path, probe_fn=fn)
    assert [r.action for r in results] == ["skipped", "computed", "computed"] and fn.calls == 2
    assert record_bytes(tmp_path) == ref


@pytest.mark.parametrize("crash_on", ["parquet", "json"])
def test_interrupted_mid_write_is_never_used(reference, tiny_panel, tmp_path, monkeypatch, crash_on):
    """Crash at the rename that publishes step1's parquet, or between parquet and sidecar."""
    ref, _ = reference
    real_replace = atomic.publish

    def crashing(src, dst):
        if dst.name == f"step1.{crash_on}":
            raise KeyboardInterrupt
        real_replace(src, dst)

    monkeypatch.setattr(atomic, "publish", crashing)
    with pytest.raises(KeyboardInterrupt):
        run(tiny_panel, tmp_path)
    monkeypatch.setattr(atomic, "publish", real_replace)
    folder = tmp_path / "tiny-gptneox"
    assert not list(folder.glob(".*.tmp"))  # temp files are cleaned up
    status = record_status(record_paths(tmp_path, "tiny-gptneox", "step1"), panel="tiny-gptneox", revision="step1")
    assert status.state == ("missing" if crash_on == "parquet" else "corrupt")
    with pytest.raises(DataError, match="step1"):
        read_record(tmp_path, "tiny-gptneox", "step1")
    with pytest.raises(DataError, match="step1"):
        load_panel_table(tmp_path, tiny_panel)
    fn = Counting()
    results = run(tiny_panel, tmp_path, probe_fn=fn)
    assert [r.action for r in results] == ["skipped", "computed", "computed"]
    assert record_bytes(tmp_path) == ref


def _flip_byte(path: Path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage,reason",
    [
        (lambda p: _flip_byte(p.parquet), "sha256"),
        (lambda p: p.parquet.write_bytes(p.parquet.read_bytes()[:100]), "sha256"),
        (lambda p: p.sidecar.write_text('{"format": "circuitdev.rec'), "unreadable"),
        (lambda p: p.sidecar.unlink(), "no sidecar"),
        (lambda p: p.parquet.unlink(), "missing but its sidecar exists"),
        (lambda p: shutil.copy(p.sidecar.with_name("step0.json"), p.sidecar), "belongs to tiny-gptneox/step0"),
    ],
)
def test_corrupt_records_are_detected_and_recomputed(reference, tiny_panel, tmp_path, damage, reason):
    ref, out = reference
    shutil.copytree(out, tmp_path, dirs_exist_ok=True)
    paths = record_paths(tmp_path, "tiny-gptneox", "step1")
    damage(paths)
    status = record_status(paths, panel="tiny-gptneox", revision="step1")
    assert status.state == "corrupt" and reason in status.reason
    fn = Counting()
    results = run(tiny_panel, tmp_path, probe_fn=fn)
    assert [r.action for r in results] == ["skipped", "computed", "skipped"] and fn.calls == 1
    assert record_bytes(tmp_path) == ref


def test_other_configuration_is_archived_and_restored(reference, tiny_panel, tmp_path):
    ref, out = reference
    shutil.copytree(out, tmp_path, dirs_exist_ok=True)
    panel = load_panel(tiny_panel)
    other = panel.probe_config(n=12)
    fn = Counting()
    results = run(panel, tmp_path, config=other, revisions=["step0"], probe_fn=fn)
    assert [r.action for r in results] == ["computed"] and "stale" in results[0].reason
    _, meta = read_record(tmp_path, panel.name, "step0", config_hash=other.config_hash())
    assert meta["config"]["n"] == 12
    old_hash = panel.probe_config().config_hash()
    assert record_paths(tmp_path, panel.name, "step0", old_hash).parquet.read_bytes() == ref["step0"]
    # the table now mixes configurations across revisions: refuse, or pick one
    with pytest.raises(DataError, match="different probe configurations"):
        load_panel_table(tmp_path, panel)
    assert len(load_panel_table(tmp_path, panel, config=other, on_missing="skip")) == 8
    # asking for the original configuration again restores it without computing
    results = run(panel, tmp_path, probe_fn=fn)
    assert [r.action for r in results] == ["restored", "skipped", "skipped"] and fn.calls == 1
    assert record_bytes(tmp_path) == ref
    assert record_paths(tmp_path, panel.name, "step0", other.config_hash()).parquet.is_file()


def test_load_panel_table(reference, tiny_panel, tmp_path):
    _, out = reference
    panel = load_panel(tiny_panel)
    table = load_panel_table(out, tiny_panel)
    assert list(table.columns[: len(DEV_KEY_COLUMNS) + 6]) == [*DEV_KEY_COLUMNS, *SEL_COLUMNS]
    assert len(table) == 3 * 8 and table.revision.unique().tolist() == REVS
    assert table.tokens_b.tolist() == [r.tokens / 1e9 for r in panel.revisions for _ in range(8)]
    assert (table.source == "probe").all() and (table.config_hash == panel.probe_config().config_hash()).all()
    for rev in REVS:  # the same values as each record read alone
        alone, _ = read_record(out, panel.name, rev)
        part = table[table.revision == rev].reset_index(drop=True)[alone.columns]
        pd.testing.assert_frame_equal(part, alone, check_like=False)
    # without the panel file: read the results folder, ordered by tokens
    assert load_panel_table(out, "tiny-gptneox").revision.unique().tolist() == REVS
    # a missing revision: raise by default, skip on request
    shutil.copytree(out, tmp_path, dirs_exist_ok=True)
    record_paths(tmp_path, panel.name, "step1").sidecar.unlink()
    with pytest.raises(DataError, match=r"step1 \(corrupt"):
        load_panel_table(tmp_path, tiny_panel)
    read = PanelRecords.open(tmp_path, tiny_panel).read(on_missing="skip")
    assert read.table.revision.unique().tolist() == ["step0", "step2"] and read.missing[0].startswith("step1 (corrupt")
    assert list(read.sidecars) == ["step0", "step2"] and read.config_hash == panel.probe_config().config_hash()


def test_toy_source_column(make_tiny_panel, tmp_path):
    path = make_tiny_panel("olmoe", revisions=1, name="toy-tinyolmoe")
    run(path, tmp_path / "out")
    assert (load_panel_table(tmp_path / "out", path).source == "toy").all()


def test_null_draws_are_a_record_file(reference, tiny_panel, tmp_path):
    """The null draws are stored beside the record like the replicates, vouched for by the sidecar, and read back
    as one table; their F6 statistics equal those of the draws the probe returned."""
    from circuitdev.analysis import findings

    _, out = reference
    panel = load_panel(tiny_panel)
    cfg = panel.probe_config()
    paths = record_paths(out, panel.name, "step2")
    meta = json.loads(paths.sidecar.read_text())
    assert cfg.n_nulls > 0 and meta["nulls"]["n_nulls"] == cfg.n_nulls and meta["nulls"]["rows"] == cfg.n_nulls * 8
    read = PanelRecords.open(out, tiny_panel).read()
    nulls = read.nulls()
    assert list(nulls.columns) == ["panel", "revision", "tokens_b", "draw", "layer", "head", "sel_null_induction"]
    assert len(nulls) == 3 * cfg.n_nulls * 8
    stats = findings.null_statistics(read.table, nulls=nulls)
    summary = meta["probe_summary"]["null"]  # what the probe computed from its own draws
    last = stats[stats.revision == "step2"].iloc[0]
    assert (last.n_nulls, last.null_p99, last.null_max, last.real_max, last.k_above) == (
        summary["n_nulls"], summary["null_p99"], summary["null_max"], summary["real_max"], summary["k_above_null_p99"])
    shutil.copytree(out, tmp_path, dirs_exist_ok=True)
    _flip_byte(record_paths(tmp_path, panel.name, "step2").nulls)
    st = record_status(record_paths(tmp_path, panel.name, "step2"), panel=panel.name, revision="step2")
    assert st.state == "corrupt" and "nulls.parquet" in st.reason


def test_retrained_weights_make_a_record_stale(make_tiny_panel, tmp_path):
    """A record knows which weights it measured: after the checkpoint is replaced under the same panel name, the
    record is stale (readers skip it, `probe` recomputes it) -- and an unchanged file is not hashed again."""
    from tiny_models import tiny_model

    path = make_tiny_panel(revisions=2)
    out = tmp_path / "out"
    run(path, out)
    panel = load_panel(path)
    meta = json.loads(record_paths(out, panel.name, "step1").sidecar.read_text())
    assert meta["weights"]["kind"] == "sha256" and len(meta["weights"]["id"]) == 64
    assert [r.action for r in run(path, out)] == ["skipped", "skipped"]
    tiny_model("gpt_neox", seed=7).save_pretrained(panel.revision_path("step1"))  # other weights, same name
    st = PanelRecords.open(out, path).status_of("step1")
    assert st.state == "stale" and "other weights" in st.reason
    assert PanelRecords.open(out, path).read(on_missing="skip").missing[0].startswith("step1 (stale")
    fn = Counting()
    assert [r.action for r in run(path, out, probe_fn=fn)] == ["skipped", "computed"] and fn.calls == 1
    assert PanelRecords.open(out, path).status_of("step1").complete


def test_toy_records_know_their_weights_by_content(make_tiny_panel, tmp_path):
    """A toy panel's identity is the sha256 of its weights, as any folder panel's (not its recipe's hash: the same
    recipe retrained can give other weights); a record that stored only the recipe is stale."""
    path = make_tiny_panel(revisions=1, name="toy-tinyrecipe")
    panel = load_panel(path)
    (Path(panel.model) / "recipe.json").write_text(json.dumps({"hash": "aaaaaaaaaaaa"}))
    out = tmp_path / "out"
    run(path, out)
    sidecar = record_paths(out, panel.name, "step0").sidecar
    meta = json.loads(sidecar.read_text())
    assert meta["weights"]["kind"] == "sha256" and len(meta["weights"]["id"]) == 64
    assert PanelRecords.open(out, path).status_of("step0").complete
    meta["weights"] = {"kind": "recipe", "id": "aaaaaaaaaaaa"}  # what earlier versions stored
    sidecar.write_text(json.dumps(meta))
    st = PanelRecords.open(out, path).status_of("step0")
    assert st.state == "stale" and "toy recipe" in st.reason


def test_format_1_records_stay_readable_and_probe_refreshes_them(reference, tiny_panel, tmp_path):
    """A record written before the null draws had their own file (format 1: no nulls file, no weights) still loads;
    `probe` rewrites it in the current format, the per-head table byte-identical."""
    ref, out = reference
    shutil.copytree(out, tmp_path, dirs_exist_ok=True)
    paths = record_paths(tmp_path, "tiny-gptneox", "step0")
    meta = json.loads(paths.sidecar.read_text())
    meta.update(format="circuitdev.record/1")
    meta.pop("nulls"), meta.pop("weights"), meta.pop("behaviour"), meta.pop("behaviour_boot")
    paths.nulls.unlink()
    paths.side("behaviour_boot").unlink()
    paths.sidecar.write_text(json.dumps(meta))
    st = record_status(paths, panel="tiny-gptneox", revision="step0")
    assert st.complete and "circuitdev.record/1" in st.outdated
    read = PanelRecords.open(tmp_path, tiny_panel).read()
    assert read.outdated() == ["step0"] and set(read.nulls()["revision"]) == {"step1", "step2"}
    results = run(tiny_panel, tmp_path)
    assert [r.action for r in results] == ["computed", "skipped", "skipped"] and "outdated" in results[0].reason
    assert record_bytes(tmp_path) == ref and paths.nulls.is_file() and paths.side("behaviour_boot").is_file()
    assert "top1" in json.loads(paths.sidecar.read_text())["behaviour"]
