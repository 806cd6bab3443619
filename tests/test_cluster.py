"""The cluster path, run for real (issue 24): a single-node SLURM cluster started on this machine (munge, slurmctld,
slurmd as root, no systemd, no accounting: tests/slurm_cluster.py), and the pipeline run on a tiny 2-revision
local-folder panel through `--profile profiles/slurm`, its probe and page jobs as SLURM jobs.

- The records are byte for byte those of a local run of the same panel, their sidecars agree on every field that
  must match, and the pages print the same numbers; the job ids the executor reports are the ones squeue lists.
- Faults: one probe job cancelled with `scancel` while it runs -> Snakemake's retry recomputes that revision and the
  sidecar vouches for the new record; a page that fails ends the run non-zero with a message naming the job; the
  same command again submits nothing, and after a record is deleted only that revision's probe (and the pages).
- Resources reach sbatch from `--config cluster=...` (the partition by name), not from the profile.

Needs root. Installs what is missing: the daemons with apt-get, the executor plugin with pip into this venv (the
`slurm` extra's pin). Where root or apt-get is missing it skips, saying exactly why. About 3-4 minutes on 2 cores.
The runs themselves: tests/cluster_runs.py.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

import cluster_runs as cr
import slurm_cluster as sc
from circuitdev.sources.store import record_paths, record_status

pytestmark = pytest.mark.cluster

RUN_TIMEOUT = 420  # seconds: any snakemake run past this is killed (SIGKILL to its process group) and fails the test
REVISIONS = ("step0", "step1")
# Sidecar fields that must agree between the local and the cluster run (not timings, host, creation time, or the
# model folder's absolute path, which differ by run); and the weights' identity (the checkpoints' sha256).
SAME_FIELDS = ("format", "panel", "revision", "step", "tokens", "tokens_b", "family", "source", "config",
               "config_hash", "dtype", "device", "probe_summary", "versions", "parquet", "boot")


_plugins: dict = {}  # pytest's terminal reporter and capture manager: "[cluster]" lines reach the log when tests pass


@pytest.fixture(scope="module", autouse=True)
def _to_the_log(pytestconfig):
    _plugins["reporter"] = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    _plugins["capture"] = pytestconfig.pluginmanager.get_plugin("capturemanager")


def say(text: str) -> None:
    """One line for the log, passed or failed: the job ids SLURM gave, the timings (issue 24: jobs visibly run)."""
    reporter, capture = _plugins.get("reporter"), _plugins.get("capture")
    if reporter is None or capture is None:
        print(text)
        return
    with capture.global_and_fixture_disabled():  # past pytest's output capture, straight to the terminal
        reporter.write_line(text)


@pytest.fixture(scope="module")
def cluster(request):
    reason = sc.why_not()
    if reason:
        pytest.skip(f"no SLURM test cluster: {reason}")
    try:
        installed = sc.install()
    except RuntimeError as err:
        pytest.fail(f"could not install what the cluster path needs: {err}")
    started = sc.Cluster.start()
    request.addfinalizer(started.stop)
    say(f"[cluster] installed: apt {installed['apt']:.1f} s, pip {installed['pip']:.1f} s; daemons up and the "
          f"node idle in {started.seconds:.1f} s ({started.cpus} CPUs, {started.mem_mb} MB, "
          f"partition {sc.PARTITION})")
    return started


@dataclass
class Runs:
    local: Path
    remote: Path
    first: cr.Run
    cancelled: str  # the SLURM id of the probe job cancelled mid-run
    cancelled_revision: str
    partition_seen: str


@pytest.fixture(scope="module")
def runs(cluster, tmp_path_factory):
    """The same panel run locally and on the cluster; one probe job is cancelled while it runs."""
    root = tmp_path_factory.mktemp("cluster")
    local, remote = root / "local", root / "remote"
    cr.write_workdir(local)
    shutil.copytree(local, remote)  # the same checkpoints, byte for byte
    run = cr.run_snakemake(cr.snakemake_command(local), local, root / "local.log", RUN_TIMEOUT)
    assert run.returncode == 0, run.log[-6000:]

    seen: dict[str, str] = {}

    def cancel_one_running_probe():
        if seen:
            return
        for job in cluster.jobs():
            if job["comment"].startswith("rule_probe_local") and job["state"] == "RUNNING":
                done = cluster.cancel(job["id"])
                assert done.returncode == 0, f"scancel {job['id']}: {done.stderr}"
                seen.update(job)
                say(f"[cluster] cancelled probe job {job['id']} ({job['comment']}) while it ran")
                return

    first = cr.run_snakemake(cr.snakemake_command(remote, cluster=True), remote, root / "remote-1.log", RUN_TIMEOUT,
                             while_running=cancel_one_running_probe)
    assert first.returncode == 0, first.log[-8000:]
    assert seen, "no probe job was seen RUNNING in squeue, so none was cancelled"
    say(f"[cluster] local run {run.seconds:.1f} s, cluster run {first.seconds:.1f} s (with one cancelled job)")
    revision = seen["comment"].rsplit("_", 1)[-1]
    return Runs(local, remote, first, seen["id"], revision, seen["partition"])


def _job_ids(log: str) -> list[str]:
    return [s["slurm_id"] for s in cr.submissions(log)]


def test_jobs_ran_on_slurm_with_the_ids_squeue_lists(cluster, runs):
    subs = cr.submissions(runs.first.log)
    say("[cluster] SLURM jobs of the first run: " + ", ".join(f"{s['slurm_id']}={s['rule']}({s['wildcards']})"
                                                         for s in subs))
    assert sorted(s["rule"] for s in subs) == ["notebook", "notebook", "probe_local", "probe_local", "probe_local"]
    uuid = cr.run_id(runs.first.log)
    listed = {j["id"] for j in cluster.jobs() if j["name"] == uuid}
    assert set(_job_ids(runs.first.log)) == listed  # every job the log names, and nothing else, went through SLURM
    assert runs.partition_seen == sc.PARTITION  # `--config cluster={"partition": ...}` reached sbatch -p


def test_a_cancelled_probe_is_retried_and_its_record_is_valid(runs):
    log = runs.first.log
    assert f"SLURM-job '{runs.cancelled}' failed, SLURM status is: 'CANCELLED'" in log
    probes = [s for s in cr.submissions(log) if s["rule"] == "probe_local"]
    again = [s for s in probes if s["wildcards"].endswith(f"revision={runs.cancelled_revision}")]
    assert [s["slurm_id"] for s in again][0] == runs.cancelled and len(again) == 2  # submitted, cancelled, retried
    status = record_status(record_paths(runs.remote / "results", "tiny", runs.cancelled_revision), panel="tiny",
                           revision=runs.cancelled_revision)
    assert status.state == "complete", status.reason


def test_records_are_the_bytes_of_a_local_run(runs):
    for rev in REVISIONS:
        here, there = (record_paths(d / "results", "tiny", rev) for d in (runs.local, runs.remote))
        assert there.parquet.read_bytes() == here.parquet.read_bytes(), rev
        assert record_status(there, panel="tiny", revision=rev).state == "complete"
        a, b = (json.loads(p.sidecar.read_text()) for p in (here, there))
        for key in SAME_FIELDS:
            assert a.get(key) == b.get(key), f"{rev}: sidecar {key!r}: local {a.get(key)!r}, cluster {b.get(key)!r}"
        assert a["weights"]["id"] == b["weights"]["id"], rev


def _printed(page: Path) -> list[str]:
    cells = json.loads(page.read_text())["cells"]
    return [text for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])
            for text in ("".join(o.get("text", "")),) if text]


def test_pages_were_produced_and_say_what_the_local_pages_say(runs):
    for name in ("model-tiny", "finding"):
        here, there = (d / "book" / "_generated" / f"{name}.ipynb" for d in (runs.local, runs.remote))
        assert there.is_file(), name
        assert _printed(there) == _printed(here) and _printed(there), name
    assert any(line.startswith("MODEL tiny 16 step0,step1") for line in _printed(
        runs.remote / "book" / "_generated" / "model-tiny.ipynb"))


def test_the_same_command_again_submits_only_what_is_missing(runs, tmp_path):
    cmd = cr.snakemake_command(runs.remote, cluster=True)
    again = cr.run_snakemake(cmd, runs.remote, tmp_path / "again.log", RUN_TIMEOUT)
    assert again.returncode == 0, again.log[-6000:]
    assert "Nothing to be done" in again.log and cr.submissions(again.log) == []

    gone = record_paths(runs.remote / "results", "tiny", "step1")
    for path in gone.files:  # the parquet, its side files, the sidecar
        path.unlink(missing_ok=True)
    refill = cr.run_snakemake(cmd, runs.remote, tmp_path / "refill.log", RUN_TIMEOUT)
    assert refill.returncode == 0, refill.log[-6000:]
    subs = cr.submissions(refill.log)
    say("[cluster] SLURM jobs after deleting step1's record: " + ", ".join(
        f"{s['slurm_id']}={s['rule']}({s['wildcards']})" for s in subs))
    assert [s["wildcards"] for s in subs if s["rule"] == "probe_local"] == ["panel=tiny, revision=step1"]
    assert sorted(s["wildcards"] for s in subs if s["rule"] == "notebook") == ["name=finding", "name=model-tiny"]
    local = record_paths(runs.local / "results", "tiny", "step1")
    assert gone.parquet.read_bytes() == local.parquet.read_bytes()


def test_a_failing_job_ends_the_run_with_a_clear_message(runs, tmp_path):
    cmd = cr.snakemake_command(runs.remote, "broken.yaml", cluster=True)
    run = cr.run_snakemake(cmd, runs.remote, tmp_path / "broken.log", RUN_TIMEOUT)
    assert run.returncode != 0
    subs = cr.submissions(run.log)
    assert [s["wildcards"] for s in subs] == ["name=broken", "name=broken"]  # the page, and its one retry
    for s in subs:
        assert f"SLURM-job '{s['slurm_id']}' failed, SLURM status is: 'FAILED'" in run.log
    assert "Error in rule notebook" in run.log and "logs/notebooks/broken.log" in run.log
    assert "this page fails on purpose" in (runs.remote / "logs" / "notebooks" / "broken.log").read_text()
    assert not (runs.remote / "book" / "_generated" / "broken.ipynb").exists()
