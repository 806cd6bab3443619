"""`circuitdev workshop build|doctor|list`: the workshop track; thin over `circuitdev.workshop`."""

from __future__ import annotations

import argparse
from pathlib import Path
EPILOG = """\
examples:
  circuitdev workshop list                          # the sessions, their exercises, ratings and minutes
  circuitdev workshop build --out W                 # W/student/NN_*.ipynb and W/solutions/NN_*.ipynb (executed)
  circuitdev workshop build 02 --out W --no-execute # one session, the solutions not run (seconds)
  circuitdev workshop build --out book/_generated/workshop --edition book   # the book's pages (what make book does)
  circuitdev workshop doctor                        # can this machine do the sessions offline? (what to fix;
                                                    # it also measures and stores the torch thread count)

A rebuild into the same --out never overwrites a student or solutions notebook changed since the last build (a
participant's work): it keeps it, writes the new edition beside it (NAME.new.ipynb) and says so; --force replaces it.

The sessions' sources are notebooks/workshop/NN_*.py (jupytext). A student notebook stops at its first exercise with
NotImplementedError naming it; a solution notebook runs anywhere (it finds the toy checkpoints through the library
and trains what is missing).
"""


def register(subparsers) -> None:
    p = subparsers.add_parser("workshop", help="the workshop: build the student / solution notebooks, check a machine",
                              description="Hands-on sessions with exercises, checks and hidden solutions.",
                              epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="workshop_command", metavar="ACTION", required=True)
    b = sub.add_parser("build", help="write the student and solution notebooks (and the book's edition)")
    b.add_argument("sessions", nargs="*", metavar="SESSION",
                   help="sessions by number, name or source path (default: all of notebooks/workshop)")
    b.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="DIR/student/, DIR/solutions/ and (edition book) DIR/NN_*.ipynb")
    b.add_argument("--no-execute", dest="execute", action="store_false",
                   help="do not run the solutions (the solutions and book editions come without outputs)")
    b.add_argument("--edition", action="append", choices=("student", "solutions", "book"), default=None,
                   help="what to write (repeatable; default: student and solutions)")
    b.add_argument("--kernel", default="python3", help="Jupyter kernel (default: python3)")
    b.add_argument("--force", action="store_true",
                   help="replace student / solutions notebooks changed since the last build (default: keep them and "
                        "write the new edition beside them, NAME.new.ipynb)")
    b.set_defaults(func=run_build)
    d = sub.add_parser("doctor", help="check this machine for the workshop: the base checks, toy checkpoints, "
                                      "training and probe speed, the authors' files, a Jupyter front end")
    d.set_defaults(func=run_doctor)
    ls = sub.add_parser("list", help="the sessions and their exercises")
    ls.set_defaults(func=run_list)
    lab = sub.add_parser("lab", help="JupyterLab on the sessions, their .py sources opening as notebooks (jupytext)",
                         description="Starts JupyterLab in notebooks/workshop with jupytext's notebook viewer as the "
                                     "default for .py files (set once in this environment's JupyterLab settings). "
                                     "Needs the `workshop` extra: pip install -e '.[workshop]' (or `make lab`).")
    lab.add_argument("--dir", type=Path, default=None, help="the folder to open (default: notebooks/workshop)")
    lab.add_argument("--dry-run", action="store_true", help="set the default viewer and print the command only")
    lab.set_defaults(func=run_lab)


def run_build(args) -> int:
    from circuitdev.workshop.build import build

    # two builds into one folder run at once; each locks the folder only while it writes (`build`)
    built = build(args.out, args.sessions, editions=args.edition or ("student", "solutions"), run=args.execute,
                  kernel=args.kernel, force=args.force)
    ran = [b for b in built if b.seconds is not None]
    if ran:
        print("solutions executed in " + ", ".join(f"{b.session} {b.seconds:.0f} s" for b in ran)
              + f" (total {sum(b.seconds for b in ran) / 60:.1f} min)")
    return 0


def run_doctor(args) -> int:
    """The base checks, then the workshop's: `circuitdev doctor --workshop` (composed in `commands.doctor`)."""
    from circuitdev.commands.doctor import checks_to_run, report

    return report(checks_to_run(workshop=True))


def run_list(args) -> int:
    from circuitdev.workshop.session import discover, parse_session

    for path in discover():
        s = parse_session(path)
        print(f"{s.name}  —  {s.title}  ({len(s.exercises)} exercises, {s.minutes} min)")
        for ex in s.exercises:
            print(f"    {ex.id:<5} {ex.title:<44} {ex.ratings}")
    return 0


# JupyterLab reads environment-wide setting defaults from <prefix>/share/jupyter/lab/settings/overrides.json
LAB_OVERRIDE = {"@jupyterlab/docmanager-extension:plugin": {"defaultViewers": {"python": "Jupytext Notebook"}}}


def run_lab(args) -> int:
    import importlib.util
    import json
    import os
    import sys

    from circuitdev.errors import ConfigError
    from circuitdev.workshop.session import SESSIONS_DIR

    missing = [m for m in ("jupyterlab", "jupytext") if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(f"{' and '.join(missing)} not installed: `{sys.executable} -m pip install -e '.[workshop]'` "
                          "once while online (or `make lab`, which does it)")
    path = Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    settings = json.loads(path.read_text()) if path.is_file() else {}
    plugin = settings.setdefault("@jupyterlab/docmanager-extension:plugin", {})
    plugin.setdefault("defaultViewers", {}).update(LAB_OVERRIDE["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2))
    command = [sys.executable, "-m", "jupyterlab", f"--notebook-dir={args.dir or SESSIONS_DIR}"]
    print(f"{path}: .py files open as notebooks (jupytext)\n{' '.join(command)}")
    if args.dry_run:
        return 0
    os.execv(sys.executable, command)
    return 0  # not reached
