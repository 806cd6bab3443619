"""`circuitdev reanalyse --published DIR --out OUT`: F1-F6, sensitivities and the paper-vs-data audit as CSVs."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from circuitdev.errors import DataError
from circuitdev.analysis.findings import NULL_COLUMNS
from circuitdev.paths import published_dir, relative_to_repo


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "reanalyse", help="re-derive every finding from the authors' published files and audit the paper",
        description="Run F1-F6, the threshold sensitivity and the audit over a published directory; write one CSV per "
                    "table (bos_fraction, layer_counts, milestones, recall, audit, ...).")
    p.add_argument("--published", type=Path, default=None,
                   help="folder with per_revision/ and pr_trajectory/ (default: $CIRCUITDEV_PUBLISHED or "
                        "data/published)")
    p.add_argument("--out", type=Path, default=None, help="output folder for the CSVs (default: data/reanalysis)")
    p.add_argument("--nulls", type=Path, default=None,
                   help=f"optional CSV of null-selectivity draws for F6 (columns: panel, {', '.join(NULL_COLUMNS)})")
    p.add_argument("--claims", type=Path, default=None,
                   help="claims file for the audit (default: data/claims.yaml, the paper's numeric claims)")
    p.add_argument("--allow-partial", action="store_true",
                   help="read an incomplete copy of the authors' files (refused by default): the tables cover only "
                        "the files present, partial.csv lists the others")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import warnings

    from circuitdev.analysis.reanalysis import reanalyse  # heavy imports only when the command runs
    from circuitdev.sources.published import PartialCopyWarning

    start = time.perf_counter()
    nulls = None
    if args.nulls is not None:
        try:
            nulls = pd.read_csv(args.nulls)
        except (OSError, pd.errors.ParserError) as err:
            raise DataError(f"{args.nulls}: cannot read the null-selectivity table ({err})") from err
    from circuitdev.paths import data_dir

    published = args.published if args.published is not None else published_dir()
    out = args.out if args.out is not None else data_dir() / "reanalysis"
    with warnings.catch_warnings():  # said below, in one line
        warnings.simplefilter("ignore", PartialCopyWarning)
        tables = reanalyse(published, out, nulls=nulls, claims=args.claims, allow_partial=args.allow_partial or None)
    if "partial" in tables:
        print(f"PARTIAL: {len(tables['partial'])} of the authors' files missing or changed (listed in "
              f"{relative_to_repo(out / 'partial.csv')}); every table below covers only the files present")
    audit = tables["audit"]
    counts = audit["status"].value_counts()
    finals = tables["bos_fraction"].groupby("model", sort=False).tail(1)
    print("final BOS fraction: " + ", ".join(f"{m} {100 * f:.1f}%" for m, f in zip(finals["model"],
                                                                                  finals["bos_fraction"])))
    bounds = counts.get("consistent (bound)", 0) + counts.get("differs (bound)", 0)
    print(f"audit: {len(audit) + len(tables['audit_unverified'])} claims: {counts.get('match', 0)} match, "
          f"{counts.get('differs', 0)} differ, " + (f"{bounds} are bounds ({counts.get('consistent (bound)', 0)} "
                                                    "consistent), " if bounds else "")
          + f"{len(tables['audit_unverified'])} not checkable from these data")
    print(f"wrote {len(tables) - 1} tables to {relative_to_repo(out)} in {time.perf_counter() - start:.1f} s")
    return 0
