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
from circuitdev.sources.store import RECORD_COLUMNS, load_panel_table, read_record, record_paths, record_status

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
    return probe_panel(panel, results_dir=out, progress=False, **kw)


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
        table = read_record(out, panel.name, rev.name)
        meta = json.loads(paths.sidecar.read_text())
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
    table = read_record(tmp_path, panel.name, "step0", config_hash=other.config_hash())
    assert table.attrs["record"]["config"]["n"] == 12
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
    assert (table.source == "probe").all() and table.attrs["config_hash"] == panel.probe_config().config_hash()
    for rev in REVS:  # the same values as each record read alone
        alone = read_record(out, panel.name, rev)
        part = table[table.revision == rev].reset_index(drop=True)[alone.columns]
        pd.testing.assert_frame_equal(part, alone, check_like=False)
    # without the panel file: read the results folder, ordered by tokens
    assert load_panel_table(out, "tiny-gptneox").revision.unique().tolist() == REVS
    # a missing revision: raise by default, skip on request
    shutil.copytree(out, tmp_path, dirs_exist_ok=True)
    record_paths(tmp_path, panel.name, "step1").sidecar.unlink()
    with pytest.raises(DataError, match=r"step1 \(corrupt"):
        load_panel_table(tmp_path, tiny_panel)
    skipped = load_panel_table(tmp_path, tiny_panel, on_missing="skip")
    assert skipped.revision.unique().tolist() == ["step0", "step2"] and skipped.attrs["missing"]


def test_toy_source_column(make_tiny_panel, tmp_path):
    path = make_tiny_panel("olmoe", revisions=1, name="toy-tinyolmoe")
    run(path, tmp_path / "out")
    assert (load_panel_table(tmp_path / "out", path).source == "toy").all()
