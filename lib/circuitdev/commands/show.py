"""`circuitdev show`: print a stored record as a table (or a panel's records as a developmental summary); thin over
`circuitdev.sources.store` and `sources.records`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DEFAULT_COLUMNS = ["layer", "head", "sel_induction", "sel_previous_token", "sel_duplicate_token", "sel_first_token",
                   "sel_self", "sel_local", "best_class", "classification", "pr"]

EPILOG = """\
examples:
  circuitdev show --panel toy-pythia --revision step2000          # the per-head table of one record
  circuitdev show --panel pythia-1b --revision step143000 --sort sel_induction --top 10
  circuitdev show --panel toy-olmo                                # one line per revision: head counts per class
                                                                  # (revisions added by `circuitdev refine` marked)
  circuitdev show data/results/toy-olmo/step0.parquet --sidecar   # a record file and its metadata
  circuitdev show --panel toy-olmo --revision step0 --format csv > step0.csv

A record is verified (sha256 and row count from its sidecar) before it is shown; a missing or corrupt record is an
error (exit 2) that says how to compute it.
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "show",
        help="show a stored record (per-head table) or a panel's records (summary)",
        description="Print a stored probe record as a table. With --panel and no --revision: one row per revision "
        "with the number of heads per classification and circuit.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("record", nargs="?", type=Path, metavar="FILE",
                   help="a record's .parquet (or .json sidecar) file, instead of --panel/--revision")
    p.add_argument("--panel", "-p", metavar="NAME_OR_FILE", help="panel name or file (see `circuitdev panels`)")
    p.add_argument("--revision", "-r", metavar="R", help="revision of the panel (default: a summary of all)")
    p.add_argument("--out", "--results", dest="out", type=Path, default=None, metavar="DIR",
                   help="results folder (default: data/results of the repository)")
    p.add_argument("--columns", "-c", nargs="+", metavar="COL",
                   help=f"columns to print (default: {' '.join(DEFAULT_COLUMNS)}); 'all' for every column")
    p.add_argument("--sort", metavar="COL", help="sort rows by this column, descending")
    p.add_argument("--top", type=int, metavar="K", help="print only the first K rows (after sorting)")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table", help="output format")
    p.add_argument("--sidecar", action="store_true", help="print the record's sidecar (metadata) instead")
    p.set_defaults(func=run)


def run(args) -> int:
    import pandas as pd

    from circuitdev.analysis.devtable import revision_summary
    from circuitdev.errors import ConfigError, DataError
    from circuitdev.sources.panels import load_panel
    from circuitdev.paths import results_dir as default_results_dir
    from circuitdev.sources.records import PanelRecords
    from circuitdev.sources.refined import refined_revisions
    from circuitdev.sources.store import read_record

    if args.record is not None:
        if args.panel or args.revision:
            raise ConfigError("give either a record FILE or --panel/--revision, not both")
        path = args.record.with_suffix(".parquet")
        if not path.is_file() and not args.record.with_suffix(".json").is_file():
            raise DataError(f"no record at {path}: give a .parquet written by `circuitdev probe`")
        results, panel_name, revision = path.parent.parent, path.parent.name, path.stem
    elif args.panel:
        results = args.out or default_results_dir()
        panel = load_panel(args.panel, results_dir=results, resolve_hub=False)
        panel_name = panel.name
        revision = panel.revision(args.revision).name if args.revision else None
        if revision is None:
            if args.sidecar:
                raise ConfigError("--sidecar needs a --revision")
            read = PanelRecords(results, panel.name, panel).read(on_missing="skip")
            if read.missing:  # never a silent gap: the summary below lacks these rows (none at all: read raised)
                print(f"circuitdev show: note: {len(read.missing)} of {len(panel.revisions)} revisions left out, no "
                      f"usable record: {_some(read.missing)}; compute them with `circuitdev probe --panel "
                      f"{args.panel} --out {results}`", file=sys.stderr)
            summary = revision_summary(read.table)
            refined = {r.name for r in refined_revisions(results, panel.name)}
            if refined:  # the revisions `circuitdev refine` added to the panel's own grid
                summary.insert(2, "refined", summary["revision"].isin(refined).map({True: "yes", False: ""}))
            return _emit(summary, args, pd)
    else:
        raise ConfigError("say what to show: a record FILE, or --panel NAME [--revision R]")

    table, meta = read_record(results, panel_name, revision)
    if args.sidecar:
        json.dump(meta, sys.stdout, indent=2)
        print()
        return 0
    cols = DEFAULT_COLUMNS if not args.columns else (list(table.columns) if args.columns == ["all"] else args.columns)
    unknown = [c for c in cols if c not in table.columns]
    if unknown:
        raise ConfigError(f"unknown column(s) {unknown}; this record has: {', '.join(table.columns)}")
    if args.sort:
        if args.sort not in table.columns:
            raise ConfigError(f"--sort {args.sort!r}: no such column; this record has: {', '.join(table.columns)}")
        table = table.sort_values(args.sort, ascending=False, kind="stable")
    if args.format == "table":
        print(f"{meta['panel']} / {meta['revision']}  (step {meta.get('step')}, {meta['tokens_b']:.4g}B tokens, "
              f"configuration {meta['config_hash']}, {meta.get('dtype')} on {meta.get('device')}, "
              f"{len(table)} heads)")
    return _emit(table[cols], args, pd)


def _some(items, shown: int = 4) -> str:
    return "; ".join(items[:shown]) + (f"; and {len(items) - shown} more" if len(items) > shown else "")


def _emit(frame, args, pd) -> int:
    if args.top is not None:
        frame = frame.head(args.top)
    if args.format == "csv":
        frame.to_csv(sys.stdout, index=False)
    elif args.format == "json":
        print(frame.to_json(orient="records", indent=1))
    else:
        with pd.option_context("display.max_rows", None, "display.width", 200, "display.float_format", "{:.4g}".format):
            print(frame.to_string(index=False))
    return 0
