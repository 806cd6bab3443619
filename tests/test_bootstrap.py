"""The bootstrap over the batch's sequences (issue 14): intervals against an independent numpy bootstrap, seeds,
lo <= value <= hi, B = 0 keeps the old record and hash, the replicate file's integrity, and the intervals of derived
quantities (F1 verdicts, milestone windows, bands) on constructed tables."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from circuitdev.analysis import findings, uncertainty
from circuitdev.measure.batch import induction_batch
from circuitdev.measure.config import ProbeConfig
from circuitdev.measure.positions import baseline_positions
from circuitdev.measure.probe import probe_model
from circuitdev.schema import HEAD_CLASSES, SEL_COLUMNS, sel_column
from circuitdev.sources.run import probe_panel
from circuitdev.sources.panels import load_panel
from circuitdev.sources.records import load_boot_replicates, load_panel_table
from circuitdev.sources.store import move_record, read_record, record_paths, record_status
from tiny_models import tiny_model

CFG = ProbeConfig(n=24, n_pr=12, seq_len=32, vocab_range=(3, 120), n_prefix=0, n_nulls=0, batch_size=12,
                  n_boot=50, boot_seed=3)


def numpy_bootstrap(model, cfg: ProbeConfig) -> dict[str, np.ndarray]:
    """An independent bootstrap: attention from `output_attentions`, resampled rows, ratio of means per replicate."""
    b = induction_batch(cfg.n, cfg.seq_len, cfg.seed, cfg.vocab_range)
    with torch.no_grad():
        att = model(torch.as_tensor(b.tokens), output_attentions=True).attentions
    a = np.stack([x[:, :, -1, :].numpy() for x in att], 1).astype(np.float64)  # (N, L, H, T)
    q, pos = cfg.seq_len - 1, baseline_positions(cfg.seq_len, cfg.baseline_size)
    draws = np.random.default_rng(cfg.boot_seed).integers(0, cfg.n, size=(cfg.n_boot, cfg.n))  # the same draws
    reps = {c: [] for c in HEAD_CLASSES}
    for idx in draws:
        r = a[idx]
        fa = b.first_a[idx]
        base = r[..., pos].mean(axis=(0, 3))
        targets = {"induction": r[np.arange(cfg.n), :, :, fa + 1].mean(0), "previous-token": r[..., q - 1].mean(0),
                   "duplicate-token": r[np.arange(cfg.n), :, :, fa].mean(0), "first-token": r[..., 0].mean(0),
                   "self": r[..., q].mean(0), "local": r[..., [q - 2, q - 3, q - 4, q - 5]].mean(axis=(0, 3))}
        for c, v in targets.items():
            reps[c].append(v / np.maximum(base, 1e-8))
    return {c: np.percentile(np.array(v), [2.5, 97.5], axis=0) for c, v in reps.items()}  # (2, L, H)


def test_intervals_match_an_independent_numpy_bootstrap():
    model = tiny_model("gpt_neox")
    result = probe_model(model, CFG, progress=False)
    table = result.table
    ref = numpy_bootstrap(model, CFG)  # every batch sequence is valid here, so all classes resample alike
    for c in HEAD_CLASSES:
        col = sel_column(c)
        lo, hi = np.fmin(ref[c][0].ravel(), table[col]), np.fmax(ref[c][1].ravel(), table[col])
        np.testing.assert_allclose(table[col + "_lo"], lo, rtol=1e-4)
        np.testing.assert_allclose(table[col + "_hi"], hi, rtol=1e-4)
        assert (table[col + "_lo"] <= table[col]).all() and (table[col] <= table[col + "_hi"]).all()
        assert (table[col + "_hi"] > table[col + "_lo"]).any()
    assert result.replicates.shape == (50, 6, 2, 4)


def test_same_seed_same_interval_and_excluded_baseline_too():
    model = tiny_model("olmo")
    cfg = CFG.replace(baseline_excludes_ab=True)
    a, b = probe_model(model, cfg, progress=False).table, probe_model(model, cfg, progress=False).table
    cols = [c for c in a.columns if c.endswith(("_lo", "_hi"))]
    assert len(cols) == 12 and a[cols].equals(b[cols])
    other = probe_model(model, cfg.replace(boot_seed=4), progress=False).table
    assert not np.allclose(other[cols], a[cols])
    np.testing.assert_array_equal(a[list(SEL_COLUMNS)], other[list(SEL_COLUMNS)])  # the point values do not depend on it


def test_b0_gives_the_old_record_and_hash(make_tiny_panel, tmp_path):
    panel = make_tiny_panel(revisions=1, probe={"n": 16, "n_pr": 16, "seq_len": 32, "vocab_range": [3, 120],
                                                "baseline_size": 10, "n_prefix": 0, "n_nulls": 0, "n_boot": 0})
    probe_panel(load_panel(panel), results_dir=tmp_path, progress=False)
    rec, meta = read_record(tmp_path, "tiny-gptneox", "step0")
    assert not [c for c in rec.columns if c.endswith(("_lo", "_hi"))]
    assert "boot" not in meta and not record_paths(tmp_path, "tiny-gptneox", "step0").boot.exists()
    assert meta["config_hash"] == ProbeConfig.from_dict(
        {k: v for k, v in meta["config"].items() if k != "n_boot"}).replace(n_boot=0).config_hash()
    assert load_boot_replicates(tmp_path, "tiny-gptneox").empty


def test_replicate_file_is_vouched_for_archived_and_restored(make_tiny_panel, tmp_path):
    panel = make_tiny_panel(revisions=2, probe={"n": 16, "n_pr": 16, "seq_len": 32, "vocab_range": [3, 120],
                                                "baseline_size": 10, "n_prefix": 0, "n_nulls": 0, "n_boot": 30})
    probe_panel(load_panel(panel), results_dir=tmp_path, progress=False)
    paths = record_paths(tmp_path, "tiny-gptneox", "step1")
    meta = json.loads(paths.sidecar.read_text())
    assert meta["boot"]["n_boot"] == 30 and meta["boot"]["rows"] == 30 * 8 and paths.boot.is_file()
    reps = load_boot_replicates(tmp_path, "tiny-gptneox")
    assert len(reps) == 2 * 30 * 8 and list(reps.columns[:6]) == ["panel", "revision", "tokens_b", "replicate",
                                                                   "layer", "head"]
    rec, _ = read_record(tmp_path, "tiny-gptneox", "step1")
    one = reps[reps["revision"] == "step1"]
    lo = one.groupby(["layer", "head"])["sel_induction"].quantile(0.025).to_numpy()
    np.testing.assert_allclose(rec["sel_induction_lo"], np.fmin(lo, rec["sel_induction"]), rtol=1e-9)

    data = paths.boot.read_bytes()
    paths.boot.write_bytes(data[:-8] + b"\0" * 8)  # tampered
    st = record_status(paths, panel="tiny-gptneox", revision="step1")
    assert st.state == "corrupt" and "boot.parquet" in st.reason
    paths.boot.unlink()
    assert "missing" in record_status(paths, panel="tiny-gptneox", revision="step1").reason
    paths.boot.write_bytes(data)
    assert record_status(paths, panel="tiny-gptneox", revision="step1").complete

    archived = record_paths(tmp_path, "tiny-gptneox", "step1", meta["config_hash"])
    move_record(paths, archived)  # archive: every file of the record moves, the sidecar last
    assert not paths.boot.exists() and not paths.sidecar.exists() and archived.boot.exists()
    assert record_status(archived, panel="tiny-gptneox", revision="step1").complete
    move_record(archived, paths)  # restore: the same move back
    assert paths.boot.exists() and record_status(paths, panel="tiny-gptneox", revision="step1").complete
    # a probe interrupted before the sidecar leaves no half record: the next run recomputes it whole
    paths.sidecar.unlink()
    results = probe_panel(load_panel(panel), results_dir=tmp_path, progress=False)
    assert [r.action for r in results] == ["skipped", "computed"]
    assert len(load_panel_table(tmp_path, "tiny-gptneox")) == 16


# ------------------------------------------------------------------------------------- derived quantities


def dev_and_boot(first: dict[tuple[int, int], list[float]], spread: dict[tuple[int, int], float],
                 *, n_boot: int = 200, panel: str = "p") -> tuple[pd.DataFrame, pd.DataFrame]:
    """A table of 3 revisions x 2 layers x 2 heads whose first-token selectivity is `first[(layer, head)][rev]`
    (else 1), and replicates spread uniformly over value * [1 - s, 1 + s]."""
    rng = np.random.default_rng(0)
    rows = []
    for r in range(3):
        for layer in range(2):
            for head in range(2):
                row = {"panel": panel, "revision": f"step{r}", "step": r, "tokens_b": (r + 1) * 1e-6, "layer": layer,
                       "head": head, **{c: 1.0 for c in SEL_COLUMNS}}
                row["sel_first_token"] = first.get((layer, head), [1.0] * 3)[r]
                rows.append(row)
    dev = pd.DataFrame(rows)
    keys = dev[["panel", "revision", "tokens_b", "layer", "head"]]
    reps = []
    for b in range(n_boot):
        s = np.array([spread.get((l, h), 0.0) for l, h in zip(dev["layer"], dev["head"])])
        factor = 1 + s * rng.uniform(-1, 1, len(dev))
        reps.append(keys.assign(replicate=b, **{c: dev[c] * (factor if c == "sel_first_token" else 1)
                                                for c in SEL_COLUMNS}))
    return dev, pd.concat(reps, ignore_index=True)


def test_f1_verdicts_holds_fails_and_within_noise():
    dev, boot = dev_and_boot({(1, 0): [2.0, 10.0, 20.0]}, {(1, 0): 0.1})
    v = findings.floor_verdict(dev, boot=boot).iloc[0]
    assert v["verdict"] == "holds" and v["name"] == "L1H0" and v["value_hi"] < 30

    dev, boot = dev_and_boot({(1, 0): [2.0, 10.0, 29.9]}, {(1, 0): 0.1})  # the toy-pythia case
    v = findings.floor_verdict(dev, boot=boot).iloc[0]
    assert v["verdict"] == "within noise" and v["revision"] == "step2"
    assert v["value_lo"] < 30 <= v["value_hi"] and v["value_lo"] <= 29.9 <= v["value_hi"]
    assert findings.floor_verdict(dev).iloc[0]["verdict"] == "holds"  # the point value alone says "holds"

    dev, boot = dev_and_boot({(0, 1): [2.0, 60.0, 80.0]}, {(0, 1): 0.1})
    v = findings.floor_verdict(dev, boot=boot).iloc[0]
    assert v["verdict"] == "fails" and v["name"] == "L0H1" and v["value_lo"] >= 30
    assert findings.floor_verdict(dev).iloc[0]["verdict"] == "fails"
    assert np.isnan(findings.floor_verdict(dev).iloc[0]["value_lo"])  # no replicates: no interval


def test_bos_fraction_bands_and_tables_without_replicates_get_nan():
    dev, boot = dev_and_boot({(1, 1): [10.0, 29.0, 40.0], (0, 0): [1.0, 31.0, 50.0]}, {(1, 1): 0.2, (0, 0): 0.02})
    frac = findings.bos_fraction(dev, boot=boot)
    assert list(frac["n_bos"]) == [0, 1, 2]
    assert list(frac["n_bos_lo"]) == [0, 1, 2] and list(frac["n_bos_hi"]) == [0, 2, 2]  # step1: L1H1 at 29x +-20%
    assert (frac["bos_fraction_lo"] <= frac["bos_fraction"]).all() and (frac["bos_fraction"] <= frac["bos_fraction_hi"]).all()
    plain = findings.bos_fraction(dev)
    pd.testing.assert_frame_equal(frac[plain.columns], plain)  # the point values are the paper's computation
    other, _ = dev_and_boot({}, {}, panel="q")  # a second panel without replicates
    both = findings.bos_fraction(pd.concat([dev, other], ignore_index=True), boot=boot)
    assert both.loc[both["panel"] == "q", "bos_fraction_lo"].isna().all()
    assert both.loc[both["panel"] == "p", "bos_fraction_lo"].notna().all()


def test_milestone_windows_from_the_replicates():
    # 2 sink heads (50% of 4) reached at step1 by the point values, but one of them only just (30.5x, +-10%)
    dev, boot = dev_and_boot({(1, 0): [1.0, 30.5, 40.0], (1, 1): [1.0, 45.0, 45.0]}, {(1, 0): 0.1})
    spec = findings.Milestone("bos_half", "first-token", 30.0, min_fraction=0.5)
    ms = findings.milestones(dev, specs=[spec], boot=boot).iloc[0]
    assert ms["revision"] == "step1" and ms["revision_lo"] == "step1" and ms["revision_hi"] == "step2"
    assert ms["window_from_revision"] == "step0"
    assert ms["window_tokens_b"] == pytest.approx(3e-6 - 1e-6) and ms["reached_share"] == 1.0
    plain = findings.milestones(dev, specs=[spec])
    assert list(plain.columns) == findings.MILESTONE_COLUMNS  # no window columns without replicates


def test_replicates_round_trip_and_recall_bands():
    dev, boot = dev_and_boot({(1, 0): [1.0, 30.5, 40.0]}, {(1, 0): 0.1})
    reps = uncertainty.Replicates.align(dev, boot)
    assert reps.n_boot == 200 and reps.covered.all() and reps.panels == {"p"}
    back = reps.long().sort_values(["replicate", "revision", "layer", "head"]).reset_index(drop=True)
    ref = boot.sort_values(["replicate", "revision", "layer", "head"]).reset_index(drop=True)
    np.testing.assert_allclose(back["sel_first_token"], ref["sel_first_token"])
    dev = dev.assign(sel_induction=np.where(dev["layer"] == 1, 60.0, 1.0))
    rec = findings.circuit_recall(dev, boot=boot)
    assert {"recall_lo", "recall_hi", "n_circuit_lo"} <= set(rec.columns) and (rec["recall_lo"] == 1).all()


def test_pr_lead_intervals_re_decide_formation_on_the_same_heads():
    from circuitdev.analysis.findings import f5_pr_lead as pr_lead

    dev, boot = dev_and_boot({(1, 0): [1.0, 30.5, 40.0]}, {(1, 0): 0.1})
    dev = dev.assign(pr=1.0 + 4.0 * dev["step"])  # PR rises from the first revision on
    lead = pr_lead.pr_lead(dev, head_class="first-token", threshold=30.0, boot=boot)
    assert list(lead["name"]) == ["L1H0"] and lead["formation_index"].iloc[0] == 1
    assert (lead["formation_index_lo"].iloc[0], lead["formation_index_hi"].iloc[0]) == (1, 2)
    plain = pr_lead.pr_lead(dev, head_class="first-token", threshold=30.0)
    assert "formation_index_lo" not in plain.columns


def test_count_intervals_show_the_boot_mean_and_flag_widening():
    """Heads sitting just below the bar: the point count is 0 but most resamples count some of them, so the
    percentile interval misses the point and is widened to include it -- flagged, with the mean beside it."""
    near = {(layer, head): [29.9, 29.9, 1.0] for layer in range(2) for head in range(2)}
    dev, boot = dev_and_boot(near, {k: 0.1 for k in near})
    boot["sel_first_token"] *= 1.05  # the resamples centre 5% above the point: each head passes in ~72% of them
    frac = findings.bos_fraction(dev, boot=boot)
    step0 = frac.iloc[0]
    assert step0["n_bos"] == 0 and step0["n_bos_lo"] == 0  # widened down to the point
    assert step0["n_bos_widened"] and step0["bos_fraction_widened"]
    assert step0["n_bos_boot_mean"] == pytest.approx(4 * 0.72, abs=0.3)
    last = frac.iloc[2]  # nobody near the bar: centred on the point, not widened
    assert last["n_bos_boot_mean"] == 0 and not last["n_bos_widened"]
    other, _ = dev_and_boot({}, {}, panel="q")  # a panel without replicates: NaN mean, never widened
    both = findings.bos_fraction(pd.concat([dev, other], ignore_index=True), boot=boot)
    q = both[both["panel"] == "q"]
    assert q["n_bos_boot_mean"].isna().all() and not q["n_bos_widened"].any()


def test_widened_percentiles_by_hand():
    values = np.array([[3.0, 0.0], [4.0, 1.0], [5.0, 2.0], [6.0, 3.0]])  # (B = 4, 2 quantities)
    lo, hi, widened = uncertainty.widened_percentiles(values, np.array([1.0, 1.0]), level=0.5)
    assert lo.tolist() == [1.0, 0.0] and hi.tolist() == [6.0, 3.0]  # quantity 0 widened down to its point
    assert widened.tolist() == [True, False]
    np.testing.assert_allclose(uncertainty.boot_mean(values), [4.5, 1.5])
    assert uncertainty.percentiles(values, np.array([1.0, 1.0]), level=0.5)[0].tolist() == [1.0, 0.0]
