"""Where a build's time goes: wall time and job-seconds per rule, from a Snakemake log (issue 34).

Reads the log Snakemake writes for every run (.snakemake/log/<time>.snakemake.log; the newest one by default), or
runs a build first (`--run`: `make book` with the given make arguments, then reads that build's log). Prints, per
rule, the jobs, their job-seconds (the sum of each job's start-to-finish time: on two cores two jobs run at once, so
the sum can exceed the wall time), the shortest and longest job, then `ablate_toy` and `null_pr_toy` as ratios to
`probe_toy` (in all, and per toy panel) -- the issue's targets are <= 2x and <= 0.5x -- and how long 0, 1, 2, ...
jobs ran at once (on two cores, the time with fewer than two is the critical path's idle core). Since the toy
probes measure the PR null in their own load (config `null_pr_draws`), `probe_toy` includes it and `null_pr_toy`
reads it; the records' timings (`null_pr_s`) say how much of a probe it is.

    .venv/bin/python bench/pipeline.py                          # the newest log under .snakemake/log/
    .venv/bin/python bench/pipeline.py path/to/x.snakemake.log  # a given log
    .venv/bin/python bench/pipeline.py --run PUBLISHED_DIR=/path/to/published   # a build, then its log

A fresh build is the honest measurement (nothing cached: rm -rf data/toy data/results book/_generated first, on a
quiet machine). Timestamps in the log have one-second resolution: read the ratios of jobs that take minutes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STAMP_RE = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
START_RE = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):$")
JOBID_RE = re.compile(r"^\s+jobid: (\d+)$")
WILDCARDS_RE = re.compile(r"^\s+wildcards: (.*)$")
# Snakemake 9: "Finished jobid: 7 (Rule: toy)"; 7 and 8: "Finished job 7."
FINISHED_RE = re.compile(r"^Finished job(?:id:)? (\d+)")
ELAPSED_RE = re.compile(r"^Elapsed time: (\d+):(\d\d):(\d\d(?:\.\d+)?)$")
BASE = "probe_toy"
RATIOS = ("ablate_toy", "null_pr_toy")


@dataclass
class Job:
    jobid: int
    rule: str
    wildcards: str
    start: dt.datetime
    end: dt.datetime | None = None

    @property
    def seconds(self) -> float | None:
        return None if self.end is None else (self.end - self.start).total_seconds()

    @property
    def panel(self) -> str | None:
        m = re.search(r"(?:^|, )panel=([^,]+)", self.wildcards)
        return m.group(1) if m else None


@dataclass
class Build:
    jobs: list[Job]
    wall_s: float | None  # Snakemake's "Elapsed time", else first start to last finish

    def finished(self) -> list[Job]:
        return [j for j in self.jobs if j.end is not None]


def parse_log(text: str) -> Build:
    """The jobs of one Snakemake log: rule, wildcards, start (the stamp above its `rule X:` block) and end (the stamp
    above its `Finished job` line); a job that never finished keeps end None."""
    jobs: dict[int, Job] = {}
    stamp: dt.datetime | None = None
    pending: tuple[str, dt.datetime] | None = None  # a rule block seen, its jobid not yet
    current: Job | None = None
    elapsed = None
    for line in text.splitlines():
        if m := STAMP_RE.match(line.strip()):
            stamp = dt.datetime.strptime(" ".join(m.group(1).split()), "%a %b %d %H:%M:%S %Y")
            current = None
        elif (m := START_RE.match(line)) and stamp is not None:
            pending, current = (m.group(1), stamp), None
        elif (m := JOBID_RE.match(line)) and pending is not None:
            current = jobs[int(m.group(1))] = Job(int(m.group(1)), pending[0], "", pending[1])
            pending = None
        elif (m := WILDCARDS_RE.match(line)) and current is not None:
            current.wildcards = m.group(1).strip()
        elif (m := FINISHED_RE.match(line)) and stamp is not None and int(m.group(1)) in jobs:
            jobs[int(m.group(1))].end = stamp
        elif m := ELAPSED_RE.match(line.strip()):
            elapsed = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
    done = [j for j in jobs.values() if j.end is not None]
    if elapsed is None and done:
        elapsed = (max(j.end for j in done) - min(j.start for j in jobs.values())).total_seconds()
    return Build(sorted(jobs.values(), key=lambda j: (j.start, j.jobid)), elapsed)


def per_rule(build: Build) -> dict[str, dict[str, float]]:
    """rule -> {jobs, job_s, min_s, max_s} over the finished jobs, the costliest rule first."""
    out: dict[str, dict[str, float]] = {}
    for j in build.finished():
        row = out.setdefault(j.rule, {"jobs": 0, "job_s": 0.0, "min_s": float("inf"), "max_s": 0.0})
        row["jobs"] += 1
        row["job_s"] += j.seconds
        row["min_s"], row["max_s"] = min(row["min_s"], j.seconds), max(row["max_s"], j.seconds)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["job_s"]))


def ratios(build: Build) -> dict[str, dict[str, float]]:
    """For each of RATIOS: its job-seconds / probe_toy's, in all ("all") and per toy panel both ran for."""
    seconds: dict[str, dict[str, float]] = {}
    for j in build.finished():
        if j.rule in (BASE, *RATIOS):
            seconds.setdefault(j.rule, {}).setdefault(j.panel or "?", 0.0)
            seconds[j.rule][j.panel or "?"] += j.seconds
    base = seconds.get(BASE, {})
    out = {}
    for rule in RATIOS:
        mine = seconds.get(rule, {})
        row = {p: mine[p] / base[p] for p in sorted(mine) if base.get(p)}
        if mine and sum(base.values()):
            row = {"all": sum(mine.values()) / sum(base.values()), **row}
        out[rule] = row
    return out


def occupancy(build: Build) -> dict[int, float]:
    """Seconds of the build (first start to last finish) during which k jobs ran, per k: on two cores, the seconds
    with fewer than two are where the critical path left a core idle (a serial tail, a job waiting on another)."""
    events = sorted([(j.start, 1) for j in build.finished()] + [(j.end, -1) for j in build.finished()],
                    key=lambda e: (e[0], e[1]))
    out: dict[int, float] = {}
    running, last = 0, None
    for at, step in events:
        if last is not None and at > last:
            out[running] = out.get(running, 0.0) + (at - last).total_seconds()
        running, last = running + step, at
    return dict(sorted(out.items()))


def report(build: Build) -> str:
    lines = [f"wall time: {build.wall_s:.0f} s" if build.wall_s is not None else "wall time: unknown",
             f"{'rule':<14} {'jobs':>5} {'job-s':>8} {'min s':>7} {'max s':>7}"]
    for rule, row in per_rule(build).items():
        lines.append(f"{rule:<14} {row['jobs']:>5.0f} {row['job_s']:>8.0f} {row['min_s']:>7.0f} {row['max_s']:>7.0f}")
    lines.append("jobs running at once: " + ", ".join(f"{k} for {s:.0f} s" for k, s in occupancy(build).items()))
    unfinished = [j for j in build.jobs if j.end is None]
    if unfinished:
        lines.append(f"not finished: {', '.join(f'{j.rule}({j.wildcards})' for j in unfinished)}")
    for rule, row in ratios(build).items():
        if row:
            lines.append(f"{rule} / {BASE}: " + ", ".join(f"{p} {r:.2f}x" for p, r in row.items()))
        else:
            lines.append(f"{rule} / {BASE}: not in this log")
    return "\n".join(lines)


def newest_log(root: Path = REPO) -> Path:
    logs = sorted((root / ".snakemake" / "log").glob("*.snakemake.log"))
    if not logs:
        raise SystemExit(f"no Snakemake log under {root}/.snakemake/log: run a build first, or give a log's path "
                         "(or --run)")
    return logs[-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", nargs="?", type=Path, help="a Snakemake log (default: the newest under .snakemake/log)")
    ap.add_argument("--run", nargs="*", metavar="MAKE_ARG", default=None,
                    help="run `make book MAKE_ARG...` first (e.g. PUBLISHED_DIR=...), then read its log")
    args = ap.parse_args(argv)
    if args.run is not None:
        before = set((REPO / ".snakemake" / "log").glob("*.snakemake.log"))
        proc = subprocess.run(["make", "book", *args.run], cwd=REPO)
        new = sorted(set((REPO / ".snakemake" / "log").glob("*.snakemake.log")) - before)
        if not new:
            print(f"make book exited {proc.returncode} and left no Snakemake log", file=sys.stderr)
            return 2
        path = new[-1]
    else:
        path = args.log or newest_log()
        if not path.is_file():
            print(f"no file {path}: give a Snakemake log (.snakemake/log/*.snakemake.log)", file=sys.stderr)
            return 2
    print(f"log: {path}")
    print(report(parse_log(path.read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
