"""The pipeline on a tiny panel, locally or through `--profile profiles/slurm` on the cluster of
tests/slurm_cluster.py, for tests/test_cluster.py and bench/cluster.py.

    config = write_workdir(folder)                          # a 2-revision local-folder panel, two pages, no book
    run = run_snakemake(snakemake_command(folder, cluster=True), folder, log, timeout=420)
    submissions(run.log)                                    # [{rule, wildcards, jobid, slurm_id}, ...]

Every run is killed (SIGKILL to its process group) past its timeout: the SLURM executor can wait forever.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from slurm_cluster import PARTITION, REPO

# ------------------------------------------------------------------------------------------ reading snakemake's log

SUBMITTED = re.compile(r"Job (\d+) has been submitted with SLURM jobid (\d+)")


def submissions(log: str) -> list[dict[str, str]]:
    """The SLURM submissions a snakemake log reports, in order: {rule, wildcards, jobid (snakemake's), slurm_id}.
    The rule and wildcards come from the job's block ("rule probe_local:" ... "jobid: 3" ... "wildcards: ...")."""
    blocks: dict[str, dict[str, str]] = {}
    rule, block = None, None
    for line in log.splitlines():
        s = line.strip()
        m = re.match(r"^(?:local)?rule (\w+):$", s)
        if m:
            rule, block = m.group(1), None
        elif not s:  # a job's block ends at a blank line (an error report repeats "jobid:" without "rule X:")
            rule, block = None, None
        elif rule and s.startswith("jobid:") and s.split(":", 1)[1].strip() not in blocks:
            block = blocks[s.split(":", 1)[1].strip()] = {"rule": rule, "wildcards": ""}
        elif block is not None and s.startswith("wildcards:"):
            block["wildcards"] = s.split(":", 1)[1].strip()
    out = []
    for m in SUBMITTED.finditer(log):
        info = blocks.get(m.group(1), {"rule": "?", "wildcards": ""})
        out.append({**info, "jobid": m.group(1), "slurm_id": m.group(2)})
    return out


# ---------------------------------------------------------------- a small panel's pipeline, locally or on the cluster

SNAKEMAKE = Path(sys.executable).parent / "snakemake"
PROFILE = REPO / "profiles" / "slurm"
# What the test cluster's jobs ask for, through `--config cluster=...` (config/pipeline.yaml's section, not the
# profile): its one partition by name, memory that lets two jobs share its node, one CPU each.
CLUSTER_CONFIG = {"partition": PARTITION, "mem_mb": 2000, "runtime": 15, "max_cpus": 1}
FIRST_POLL = 2  # seconds to the first status poll ($CIRCUITDEV_SLURM_FIRST_POLL; the plugin's default is 40)

MODEL_NB = """\
# %% tags=["parameters"]
panel: str = "none"
# %%
from circuitdev.book.build import build_folders
from circuitdev.sources.panels import load_panel
from circuitdev.sources.records import load_panel_table
name = load_panel(panel, resolve_hub=False).name
table = load_panel_table(build_folders().results_dir, name)
print("MODEL", name, len(table), ",".join(table["revision"].unique()), round(float(table["sel_induction"].sum()), 6))
"""

FINDING_NB = """\
# %% tags=["parameters"]
threshold: float = 2.0
# %%
from circuitdev.book.build import build_folders
from circuitdev.sources.records import load_panel_table
folders = build_folders()
for p in folders.panels:
    t = load_panel_table(folders.results_dir, p)
    print("FINDING", p, threshold, int((t["best_selectivity"] >= threshold).sum()))
"""

BROKEN_NB = """\
# %% tags=["parameters"]
threshold: float = 2.0
# %%
raise RuntimeError("this page fails on purpose")
"""

TINY_PROBE = {"n": 12, "n_pr": 12, "seq_len": 24, "vocab_range": [3, 100], "n_prefix": 0, "n_nulls": 0}


def write_workdir(root: Path, revisions: int = 2) -> Path:
    """A pipeline folder: a tiny local-folder panel `tiny` (`revisions` random gpt_neox checkpoints), a model page
    and a finding page, no book. Returns its configuration file (config.yaml; broken.yaml adds a failing page)."""
    if str(Path(__file__).parent) not in sys.path:  # bench/cluster.py imports this module from outside pytest
        sys.path.insert(0, str(Path(__file__).parent))
    from conftest import write_tiny_panel

    root.mkdir(parents=True, exist_ok=True)
    write_tiny_panel(root, "gpt_neox", revisions, "tiny", probe=TINY_PROBE)
    (root / "nb").mkdir(exist_ok=True)
    (root / "nb" / "model.py").write_text(MODEL_NB)
    (root / "nb" / "finding.py").write_text(FINDING_NB)
    (root / "nb" / "broken.py").write_text(BROKEN_NB)
    pages = [{"name": "finding", "source": "nb/finding.py", "parameters": {}}]
    config = {"toy_families": [], "panels": ["tiny.yaml"], "results_dir": "results", "published_dir": None,
              "model_notebook": {"source": "nb/model.py", "parameters": {}}, "published_models": [],
              "notebooks": pages, "book": False, "refine": []}
    (root / "broken.yaml").write_text(yaml.safe_dump(
        {**config, "notebooks": [*pages, {"name": "broken", "source": "nb/broken.py", "parameters": {}}]}))
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    return root / "config.yaml"


def snakemake_command(workdir: Path, configfile: str = "config.yaml", cluster: bool = False) -> list[str]:
    """The command a user runs: locally `--cores 2`, or through `--profile profiles/slurm` with the cluster's
    resources as `--config cluster=...`."""
    cmd = [str(SNAKEMAKE), "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--configfile", configfile]
    if cluster:
        return [*cmd, "--profile", str(PROFILE), "--config", f"cluster={json.dumps(CLUSTER_CONFIG)}"]
    return [*cmd, "--cores", "2"]


@dataclass
class Run:
    returncode: int
    log: str
    seconds: float


def run_snakemake(cmd: list[str], workdir: Path, log: Path, timeout: float, env: dict | None = None,
                  while_running=None) -> Run:
    """Run snakemake in its own process group with stdout+stderr to `log`; kill the whole group with SIGKILL after
    `timeout` seconds (the SLURM executor can wait forever and ignores SIGTERM). `while_running()` is called every
    0.2 s until the run ends."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CIRCUITDEV_SLURM_FIRST_POLL": str(FIRST_POLL), **(env or {})}
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=workdir, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            while proc.poll() is None:
                if time.perf_counter() - start > timeout:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    raise TimeoutError(f"`{' '.join(cmd)}` ran past {timeout:.0f} s and was killed; its log:\n"
                                       f"{log.read_text(errors='replace')[-6000:]}")
                if while_running is not None:
                    while_running()
                time.sleep(0.2)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return Run(proc.returncode, log.read_text(errors="replace"), time.perf_counter() - start)


def run_id(log: str) -> str | None:
    """The SLURM run ID the executor names every job of one run with (squeue --name)."""
    m = re.search(r"SLURM run ID: (\S+)", log)
    return m.group(1) if m else None
