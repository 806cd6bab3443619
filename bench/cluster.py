"""Cluster benchmark: the same small panel through the pipeline locally and through a single-node SLURM cluster.

Starts the throw-away cluster of tests/slurm_cluster.py (root; installs slurmctld, slurmd, slurm-client, munge with
apt-get and the executor plugin with pip when missing, and times that), then runs a tiny local-folder panel
(`--revisions` random gpt_neox checkpoints; one probe job per revision and two pages, no book) once locally
(`--cores 2`) and once through `--profile profiles/slurm` for each first-poll interval asked for
($CIRCUITDEV_SLURM_FIRST_POLL; the plugin's default is 40 s), each in a fresh copy of the folder. With --repeats
N the variants take turns N times (so a busy machine slows them alike) and the median is reported. Prints each wall
time and its ratio to the local run; nothing is asserted. Stops every daemon it started.

    sudo .venv/bin/python bench/cluster.py [--revisions 2] [--first-poll 2 40] [--repeats 1]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import cluster_runs as cr  # noqa: E402
import slurm_cluster as sc  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--revisions", type=int, default=2, help="revisions of the tiny panel (= probe jobs)")
    ap.add_argument("--first-poll", type=int, nargs="+", default=[2, 40],
                    help="seconds to the executor's first status poll, one cluster run each")
    ap.add_argument("--repeats", type=int, default=1, help="runs of each variant, taking turns (median reported)")
    ap.add_argument("--timeout", type=float, default=900, help="kill any snakemake run after this many seconds")
    args = ap.parse_args()

    reason = sc.why_not()
    if reason:
        print(f"cannot start a SLURM test cluster here: {reason}", file=sys.stderr)
        return 2
    print(f"machine: {platform.node()}, {platform.platform()}, {sc.node_size()[0]} CPUs, load average "
          f"{os.getloadavg()[0]:.1f} at the start; {datetime.date.today().isoformat()}")
    installed = sc.install()
    print(f"setup: apt-get install {installed['apt']:.1f} s"
          f"{' (already installed)' if not installed['apt'] else ''}, pip plugin {installed['pip']:.1f} s"
          f"{' (already installed)' if not installed['pip'] else ''}")
    cluster = sc.Cluster.start()
    try:
        print(f"setup: munge + slurmctld + slurmd started, node idle: {cluster.seconds:.1f} s")
        root = Path(tempfile.mkdtemp(prefix="circuitdev-bench-cluster-"))
        template = root / "template"
        cr.write_workdir(template, args.revisions)
        variants = [("local", None), *(("cluster", poll) for poll in args.first_poll)]
        times: dict[tuple, list[float]] = {v: [] for v in variants}
        jobs: dict[tuple, int] = {}
        for rep in range(args.repeats):
            for kind, poll in variants:
                work = _fresh(template, root / f"{kind}-{poll}-{rep}")
                log = root / f"{kind}-{poll}-{rep}.log"
                cmd = cr.snakemake_command(work, cluster=kind == "cluster")
                env = {"CIRCUITDEV_SLURM_FIRST_POLL": str(poll)} if poll else None
                run = cr.run_snakemake(cmd, work, log, args.timeout, env=env)
                _check(run, log)
                times[(kind, poll)].append(run.seconds)
                jobs[(kind, poll)] = len(cr.submissions(run.log))
        base = statistics.median(times[("local", None)])
        for (kind, poll), seconds in times.items():
            label = ("local   --cores 2" if kind == "local" else
                     f"cluster --profile profiles/slurm, first poll {poll:3d} s, {jobs[(kind, poll)]} SLURM jobs")
            each = ", ".join(f"{t:.1f}" for t in seconds)
            print(f"{label:<62} {statistics.median(seconds):6.1f} s  {statistics.median(seconds) / base:5.2f}x"
                  f"   (runs: {each})")
        shutil.rmtree(root, ignore_errors=True)
    finally:
        start = time.perf_counter()
        cluster.stop()
        print(f"teardown: {time.perf_counter() - start:.1f} s")
    return 0


def _fresh(template: Path, dest: Path) -> Path:
    shutil.copytree(template, dest)
    return dest


def _check(run: cr.Run, log: Path) -> None:
    if run.returncode != 0:
        raise SystemExit(f"snakemake failed ({run.returncode}); log {log}:\n{run.log[-4000:]}")


if __name__ == "__main__":
    sys.exit(main())
