"""Fault class: the pipeline's configuration, checked before any work (issue 31, item 6).

A misspelt key is named with the closest known one instead of being ignored; bad seeds, refine metrics, panels,
probe fields, devices and cluster values are refused before Snakemake plans a job -- not when their job runs.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from circuitdev.book.config_schema import check_pipeline_config, pipeline_config_problems
from circuitdev.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
SHIPPED = yaml.safe_load((REPO / "config" / "pipeline.yaml").read_text())


def with_(**changes) -> dict:
    config = copy.deepcopy(SHIPPED)
    config.update(changes)
    return config


def test_the_shipped_configuration_is_valid():
    assert pipeline_config_problems(SHIPPED) == []
    assert check_pipeline_config(SHIPPED) is SHIPPED


@pytest.mark.parametrize("changes, needle", [
    ({"toy_seed": [1]}, "unknown key `toy_seed` (did you mean `toy_seeds`?)"),
    ({"toy_seeds": [-1]}, "toy_seeds[0]: must be an integer >= 0, got -1"),
    ({"toy_seeds": [0, 0]}, "names a seed twice"),
    ({"toy_seeds": "3"}, "toy_seeds: must be a list"),
    ({"toy_families": ["gpt-neox"]}, "(did you mean `gpt_neox`?)"),
    ({"refine": [{"panel": "toy-pythia", "metric": "bos_fractio", "max_new": 6}]},
     "refine[0].metric: 'bos_fractio' is not a refine metric (did you mean `bos_fraction`?)"),
    ({"refine": [{"panel": "toy-pythia", "metric": "bos_fraction", "max_new": 0}]}, "refine[0].max_new"),
    ({"refine": [{"panel": "../x", "metric": "bos_fraction"}]}, "neither a panel name"),
    ({"probe": {"n_null": 3}}, "probe: unknown key `n_null` (did you mean `n_nulls`?)"),
    ({"probe": {"n": -5}}, "n and n_pr must be >= 1"),
    ({"probe_panel": {"toy-pythia": {"batch_size": 0}}}, "probe_panel.toy-pythia: batch_size must be >= 1"),
    ({"device": "gpu"}, "device: 'gpu' is not a device"),
    ({"panels": ["../../etc/passwd"]}, "neither a panel name"),
    ({"cluster": {"partion": "short"}}, "cluster: unknown key `partion` (did you mean `partition`?)"),
    ({"cluster": {"mem_mb": "lots"}}, "cluster.mem_mb: must be an integer"),
    ({"workshop": {"execute": "sometimes"}}, "workshop.execute"),
    ({"notebooks": [{"name": "a/b", "source": "notebooks/f1_floor.py"}]}, "is not a plain name"),
    ({"book": "yes"}, "book: 'yes' is not one of auto, true, false"),
])
def test_each_bad_value_is_named_with_its_fix(changes, needle):
    problems = pipeline_config_problems(with_(**changes))
    assert any(needle in p for p in problems), problems
    with pytest.raises(ConfigError, match="the pipeline configuration has"):
        check_pipeline_config(with_(**changes))


def test_every_problem_is_listed_at_once():
    problems = pipeline_config_problems(with_(toy_seed=[1], device="gpu", probe={"n_null": 1}))
    assert len(problems) == 3


def test_snakemake_stops_before_planning_a_job(tmp_path):
    """The dry run itself fails, naming the key: a misspelt key used to be ignored and a bad seed to pass."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "lib"), "OMP_NUM_THREADS": "1"}
    snakemake = Path(sys.executable).parent / "snakemake"
    if not snakemake.exists():
        pytest.skip(f"no snakemake beside {sys.executable}")
    done = subprocess.run([str(snakemake), "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "-n", "--cores", "1",
                           "--configfile", str(REPO / "config" / "pipeline.yaml"), "--config", "toy_seed=[1]",
                           "toy_seeds=[-1]"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert "unknown key `toy_seed` (did you mean `toy_seeds`?)" in out and "toy_seeds[0]" in out
    assert "Job stats" not in out and not (tmp_path / "data").exists()
