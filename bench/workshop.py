"""Workshop timings next to their budgets: each session's solutions run with papermill (a participant's "run all" of
a solved session), and `circuitdev workshop doctor`. The tests only guard against a hang (ten times these budgets);
this prints how long each takes here and its ratio to the budget.

The toy panel and its records are prepared first when missing (not timed), as in tests/test_workshop.py. Run it on
a quiet machine (the budgets assume 2 cores), from the repository root:

    .venv/bin/python bench/workshop.py [SESSION ...] [--no-doctor] [--json out.json]
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


def _line(row: dict) -> str:
    return f"{row['what']:<28} {row['seconds']:7.1f} s   budget {row['budget_s']:5.0f} s   ratio " \
           f"{row['seconds'] / row['budget_s']:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sessions", nargs="*", help="sessions by number or name (default: all)")
    parser.add_argument("--no-doctor", action="store_true", help="do not time `circuitdev workshop doctor`")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args(argv)
    from circuitdev.workshop.data import prepare_sessions

    prepare_sessions()  # not timed: what a session trains or probes first when it is missing
    rows = time_sessions(args.sessions)
    if not args.no_doctor:
        rows.append(time_doctor())
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
