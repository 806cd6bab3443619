"""bench/pipeline.py reads a Snakemake log into wall time, job-seconds per rule and the ratios of issue 34 (the log
parsing on small fixture logs; the timings themselves are the benchmark's, never a test's)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_pipeline", REPO / "bench" / "pipeline.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def block(stamp: str, rule: str, jobid: int, panel: str | None = None, local: bool = False) -> str:
    wildcards = f"    wildcards: panel={panel}\n" if panel else ""
    return (f"[Fri Dec  4 {stamp} 2026]\n{'local' if local else ''}rule {rule}:\n    output: x\n    jobid: {jobid}\n"
            f"    reason: Missing output files: x\n{wildcards}    resources: tmpdir=/tmp\n")


def finished(stamp: str, jobid: int, rule: str, old: bool = False) -> str:
    line = f"Finished job {jobid}." if old else f"Finished jobid: {jobid} (Rule: {rule})"
    return f"[Fri Dec  4 {stamp} 2026]\n{line}\n1 of 9 steps (11%) done\n"


def fixture_log(old: bool = False) -> str:
    """Two toy panels on two cores: a probe of 60 s and 40 s, the ablation 120 s and 100 s, the PR null 30 s and
    20 s; a page that never finished (a failed build); Snakemake's elapsed time at the end."""
    return "".join([
        "Building DAG of jobs...\nJob stats:\njob  count\n",
        block("10:00:00", "probe_toy", 1, "toy-pythia"), block("10:00:00", "probe_toy", 2, "toy-olmo"),
        finished("10:00:40", 2, "probe_toy", old), block("10:00:40", "ablate_toy", 3, "toy-olmo"),
        finished("10:01:00", 1, "probe_toy", old), block("10:01:00", "null_pr_toy", 4, "toy-pythia"),
        finished("10:01:30", 4, "null_pr_toy", old), block("10:01:30", "ablate_toy", 5, "toy-pythia"),
        finished("10:02:20", 3, "ablate_toy", old), block("10:02:20", "null_pr_toy", 6, "toy-olmo"),
        finished("10:02:40", 6, "null_pr_toy", old), block("10:02:40", "notebook", 7),
        finished("10:03:30", 5, "ablate_toy", old), block("10:03:30", "all", 0, local=True),
        "Error in rule notebook:\n    jobid: 7\n",
        "" if old else "Elapsed time: 0:03:31.5\n",
    ])


@pytest.mark.parametrize("old", [False, True], ids=["snakemake 9", "snakemake 7-8"])
def test_the_log_gives_job_seconds_per_rule_and_the_ratios_to_the_probe(bench, old):
    build = bench.parse_log(fixture_log(old))
    assert [(j.rule, j.panel, j.seconds) for j in build.jobs[:2]] == [("probe_toy", "toy-pythia", 60.0),
                                                                      ("probe_toy", "toy-olmo", 40.0)]
    rules = bench.per_rule(build)
    assert list(rules) == ["ablate_toy", "probe_toy", "null_pr_toy"]  # the costliest first; unfinished jobs left out
    assert rules["ablate_toy"] == {"jobs": 2, "job_s": 220.0, "min_s": 100.0, "max_s": 120.0}
    assert rules["null_pr_toy"]["job_s"] == 50.0
    assert build.wall_s == (210.0 if old else 211.5)  # first start to last finish, else Snakemake's own figure
    ratio = bench.ratios(build)
    assert ratio["ablate_toy"] == {"all": 2.2, "toy-olmo": 2.5, "toy-pythia": 2.0}
    assert ratio["null_pr_toy"] == {"all": 0.5, "toy-olmo": 0.5, "toy-pythia": 0.5}
    text = bench.report(build)
    assert "ablate_toy / probe_toy: all 2.20x, toy-olmo 2.50x, toy-pythia 2.00x" in text
    assert "not finished: notebook(), all()" in text
    # two jobs from the start until 160 s (the last null PR ends), then the last ablation alone
    assert bench.occupancy(build) == {1: 50.0, 2: 160.0}
    assert "jobs running at once: 1 for 50 s, 2 for 160 s" in text


def test_a_log_without_the_probe_says_so(bench, tmp_path, capsys):
    log = tmp_path / "x.snakemake.log"
    log.write_text(block("10:00:00", "toy", 1, "toy-olmo") + finished("10:05:00", 1, "toy"))
    assert bench.main([str(log)]) == 0
    out = capsys.readouterr().out
    assert "toy" in out and "ablate_toy / probe_toy: not in this log" in out and "wall time: 300 s" in out
    assert bench.main([str(tmp_path / "missing.log")]) == 2
