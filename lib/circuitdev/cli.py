"""`circuitdev`: one console script; each subcommand lives in `circuitdev.commands.<name>` and is thin over the library.

A command module defines `register(subparsers)`, which adds its parser and sets `func(args) -> int`.
Exit codes: 0 success, 2 a user error (bad input, missing data, offline), 1 an unexpected failure, 130 interrupted.
No traceback is printed unless CIRCUITDEV_DEBUG=1.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys

from circuitdev.errors import CircuitdevError, user_os_error


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="circuitdev",
        description="When do attention circuits form? Probe checkpoints, re-analyse published data, build the book.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    import circuitdev.commands as commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"circuitdev.commands.{info.name}")
        if hasattr(module, "register"):
            module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):  # a non-UTF-8 file name is printed escaped, never a crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except CircuitdevError as err:
        print(f"circuitdev {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"circuitdev {args.command}: interrupted; completed records are kept, re-run to resume", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - the contract: a message, never a traceback, unless asked for
        if os.environ.get("CIRCUITDEV_DEBUG"):
            raise
        if (mine := user_os_error(err)) is not None:  # the user's machine (disk full, read-only, ...): exit 2
            print(f"circuitdev {args.command}: error: {mine}", file=sys.stderr)
            return 2
        print(
            f"circuitdev {args.command}: unexpected error: {type(err).__name__}: {err}\n"
            "(set CIRCUITDEV_DEBUG=1 to see the traceback; please report it)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
