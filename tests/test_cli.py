"""The `circuitdev` command: help texts, probe / show / panels end to end on a tiny local panel, exit codes, and the
offline error of the installed console script (a fresh process, HF_HUB_OFFLINE=1)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from circuitdev.cli import build_parser, main

CONSOLE = Path(sys.executable).parent / "circuitdev"


@pytest.mark.parametrize(
    "argv,needles",
    [
        ([], ["panels", "probe", "show"]),
        (["probe"], ["--panel", "--revision", "--n", "--seq-len", "--vocab-range", "--batch-size", "--dtype",
                     "--device", "--out", "--force", "exit status"]),
        (["show"], ["--panel", "--revision", "--out", "--sort", "--sidecar"]),
        (["panels"], ["--status", "--freeze", "log_spaced"]),
    ],
)
def test_help_explains_each_subcommand(argv, needles, capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([*argv, "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    for needle in needles:
        assert needle in text, needle


def test_probe_show_panels_end_to_end(make_tiny_panel, tmp_path, capsys):
    panel = str(make_tiny_panel("gpt_neox", revisions=2, name="cli-panel"))
    out = tmp_path / "results"
    args = ["probe", "--panel", panel, "--out", str(out), "--n", "12", "--seq-len", "24", "--vocab-range", "3", "100",
            "--batch-size", "4", "--set", "n_nulls=0", "--no-progress"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "2 computed, 0 already complete" in text
    for rev in ("step0", "step1"):
        assert (out / "cli-panel" / f"{rev}.parquet").is_file() and (out / "cli-panel" / f"{rev}.json").is_file()
    stored = pd.read_parquet(out / "cli-panel" / "step1.parquet")
    assert len(stored) == 8 and stored["null_induction_p99"].isna().all()  # n_nulls=0 reached the probe

    # same options again: nothing to do; one revision forced: recomputed
    assert main(args) == 0 and "0 computed, 2 already complete" in capsys.readouterr().out
    assert main([*args, "--revision", "step1", "--force"]) == 0
    assert "1 computed" in capsys.readouterr().out

    # show: the per-head table, as CSV equal to the stored parquet (read independently)
    assert main(["show", "--panel", panel, "--revision", "step1", "--out", str(out), "--format", "csv",
                 "--columns", "layer", "head", "sel_induction", "pr"]) == 0
    shown = pd.read_csv(io.StringIO(capsys.readouterr().out))
    pd.testing.assert_frame_equal(shown, stored[["layer", "head", "sel_induction", "pr"]], check_dtype=False, rtol=1e-12)
    assert main(["show", str(out / "cli-panel" / "step0.parquet"), "--sort", "pr", "--top", "3"]) == 0
    text = capsys.readouterr().out
    assert "cli-panel / step0" in text and len(text.strip().splitlines()) == 1 + 1 + 3
    assert main(["show", "--panel", panel, "--out", str(out)]) == 0  # per-revision summary
    assert "unclassified" in capsys.readouterr().out
    assert main(["show", "--panel", panel, "--revision", "step0", "--out", str(out), "--sidecar"]) == 0
    assert '"config_hash"' in capsys.readouterr().out

    # panels: list, one panel with the state of its records
    assert main(["panels"]) == 0 and "pythia-1b" in capsys.readouterr().out
    assert main(["panels", panel, "--status", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.count("complete") == 2 and "local folder" in text


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["probe", "--panel", "no-such-panel"], "no panel named 'no-such-panel'"),
        (["probe", "--panel", "pythia-1b", "--revision", "step2"], "no revision 'step2'"),
        (["probe", "--panel", "pythia-1b", "--set", "nope"], "--set expects KEY=VALUE"),
        (["probe", "--panel", "pythia-1b", "--set", "n_layers=3"], "unknown probe parameter(s) ['n_layers']"),
        (["probe", "--panel", "pythia-1b", "--n", "0"], "n and n_pr must be >= 1"),
        (["show", "--panel", "pythia-1b", "--revision", "step1", "--out", "{tmp}"], "is missing: no record"),
        (["show"], "say what to show"),
        (["panels", "--status"], "need a panel"),
    ],
)
def test_user_errors_exit_2_with_a_message(argv, needle, tmp_path, capsys):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_console_script_offline_error(tmp_path):
    """The installed `circuitdev` script, a hub panel, HF_HUB_OFFLINE=1 and an empty cache: our message, exit 2."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    # timeout: a hang guard; how long the start-up takes is bench/timings.py's business
    proc = subprocess.run([str(CONSOLE), "probe", "--panel", "olmo-1b-0724", "--revision", "step2000-tokens4B",
                           "--out", str(tmp_path / "out"), "--no-progress"], env=env, capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 2, proc.stderr
    assert "allenai/OLMo-1B-0724-hf" in proc.stderr and "step2000-tokens4B" in proc.stderr
    assert "offline" in proc.stderr and "local-folder panel" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out" / "olmo-1b-0724" / "step2000-tokens4B.parquet").exists()


def test_panels_lists_valid_files_and_reports_broken_ones(tmp_path, monkeypatch, capsys):
    (tmp_path / "panels").mkdir()
    good = {"name": "good", "model": "org/model", "family": "olmo", "dtype": "fp16",
            "revisions": [{"name": "step1", "tokens": 5}]}
    (tmp_path / "panels" / "good.yaml").write_text(yaml.safe_dump(good))
    (tmp_path / "panels" / "bad.yaml").write_text(yaml.safe_dump({**good, "name": "bad", "family": "rnn"}))
    monkeypatch.setenv("CIRCUITDEV_DATA", str(tmp_path))
    assert main(["panels"]) == 2
    out, err = capsys.readouterr()
    assert "good" in out and "org/model" in out
    assert "bad.yaml" in err and "family 'rnn' is unknown" in err
    frozen = tmp_path / "frozen.yaml"
    assert main(["panels", "good", "--freeze", str(frozen)]) == 0
    assert yaml.safe_load(frozen.read_text())["revisions"] == [{"name": "step1", "tokens": 5, "step": 1}]
