"""Workshop timings next to their budgets: each session's solutions run with papermill (a participant's "run all" of
a solved session), `circuitdev workshop doctor`, and the mini preset's training speed with each torch thread count
(`circuitdev.workshop.machine`: the ratio of each count to the fastest, the choice the sessions would make here). The
tests only guard against a hang (ten times these budgets); this prints how long each takes here and its ratio.

The toy panel and its records are prepared first when missing (not timed), as in tests/test_workshop.py. Run it on
a quiet machine (the budgets assume 2 cores), from the repository root:

    .venv/bin/python bench/workshop.py [SESSION ...] [--no-doctor] [--no-threads] [--json out.json]

Set CIRCUITDEV_WORKSHOP to a scratch folder to keep the measured thread choice and the mini run out of the data
folder.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SESSION_BUDGET_S = 180.0  # a participant's "run all" of a solved session, on 2 cores (session 2 trains live)
DOCTOR_BUDGET_S = 120.0  # `circuitdev workshop doctor` on a participant's laptop


def time_sessions(names: list[str]) -> list[dict]:
    from circuitdev.workshop.build import build

    rows = []
    with tempfile.TemporaryDirectory(prefix="circuitdev-bench-workshop-") as tmp:
        for built in build(Path(tmp), names or None, editions=("solutions",), log=lambda _: None):
            rows.append({"what": built.session, "seconds": built.seconds, "budget_s": SESSION_BUDGET_S})
            print(_line(rows[-1]), flush=True)
    return rows


def time_doctor() -> dict:
    t0 = time.perf_counter()
    subprocess.run([str(Path(sys.executable).parent / "circuitdev"), "workshop", "doctor"], capture_output=True,
                   text=True, check=False)
    row = {"what": "workshop doctor", "seconds": time.perf_counter() - t0, "budget_s": DOCTOR_BUDGET_S}
    print(_line(row), flush=True)
    return row


def time_threads() -> list[dict]:
    """The mini preset's seconds per training step with each candidate thread count (interleaved rounds, medians),
    as the doctor measures them; the ratio is to the fastest count."""
    from circuitdev.workshop import machine

    choice = machine.measure(rounds=3)
    best = choice.seconds_per_step[choice.threads]
    rows = []
    for n, per_step in sorted(choice.seconds_per_step.items()):
        row = {"what": f"mini training, {n} thread{'s' * (n > 1)}", "seconds": per_step * choice.steps,
               "budget_s": best * choice.steps, "versus": "fastest"}
        print(_line(row) + ("   (the choice)" if n == choice.threads else ""), flush=True)
        rows.append(row)
    return rows


def _line(row: dict) -> str:
    versus = row.get("versus", "budget")  # what the ratio is to
    return f"{row['what']:<28} {row['seconds']:7.1f} s   {versus:<7} {row['budget_s']:5.0f} s   ratio " \
           f"{row['seconds'] / row['budget_s']:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sessions", nargs="*", help="sessions by number or name (default: all)")
    parser.add_argument("--no-doctor", action="store_true", help="do not time `circuitdev workshop doctor`")
    parser.add_argument("--no-threads", action="store_true", help="do not time the mini training per thread count")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args(argv)
    from circuitdev.workshop.data import prepare_sessions

    prepare_sessions()  # not timed: what a session trains or probes first when it is missing
    rows = [] if args.no_threads else time_threads()
    rows += time_sessions(args.sessions)
    if not args.no_doctor:
        rows.append(time_doctor())
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
