"""`circuitdev doctor`: check this environment (Python, the pinned packages, which torch build, the Jupyter kernel,
free disk), one line per check; exit 0 when nothing failed (warnings included), 2 when a check failed.

The check sets are composed here and only here: `circuitdev.doctor.BASE_CHECKS`, then with `--workshop` the
workshop's (`circuitdev.workshop.doctor.WORKSHOP_CHECKS`; `circuitdev workshop doctor` runs the same list)."""

from __future__ import annotations

import argparse

from circuitdev import doctor

MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "doctor", help="check the environment: Python, packages, torch build (CPU/CUDA/MPS), kernel, disk",
        description="One line per check (ok / WARN / FAIL) with a fix under each warning or failure. "
                    "Exit status 0 when no check failed (warnings allowed), 2 when one did.")
    p.add_argument("--workshop", action="store_true",
                   help="also the workshop's checks: toy checkpoints present or trainable in time, session 2's live "
                        "training, a 10-second probe, records, the authors' files, a Jupyter front end")
    p.set_defaults(func=run)


def checks_to_run(*, workshop: bool = False) -> list[doctor.Check]:
    """The base checks; workshop=True: the base checks then the workshop's (`circuitdev doctor --workshop`)."""
    if workshop:
        from circuitdev.workshop.doctor import WORKSHOP_CHECKS

        return [*doctor.BASE_CHECKS, *WORKSHOP_CHECKS]
    return list(doctor.BASE_CHECKS)


def run(args: argparse.Namespace) -> int:
    return report(checks_to_run(workshop=bool(getattr(args, "workshop", False))))


def report(checks: list[doctor.Check]) -> int:
    """Run `checks`, print one line each (and the fix under a warning or failure) and a count; the exit status."""
    results = doctor.run_checks(checks)
    width = max(len(r.name) for r in results)
    for r in results:
        print(f"{MARK[r.status]}  {r.name:<{width}}  {r.message}")
        if r.fix and r.status != "ok":
            print(f"      {'':<{width}}  fix: {r.fix}")
    counts = {s: sum(r.status == s for r in results) for s in doctor.STATUSES}
    print(f"doctor: {counts['ok']} ok, {counts['warn']} warning(s), {counts['fail']} failed")
    return doctor.exit_code(results)
