"""`circuitdev published fetch|check`: get the authors' result files at the pinned commits, or verify a copy."""

from __future__ import annotations

import argparse
from pathlib import Path

from circuitdev.errors import ConfigError, DataError
from circuitdev.paths import published_dir
from circuitdev.sources import fetch


def register(subparsers) -> None:
    p = subparsers.add_parser("published", help="fetch or check the authors' published measurements",
                              description="The paper's per-revision JSON files, PR trajectories and ablations "
                                          "(paths, commits and sha256 pinned in data/published_manifest.tsv).")
    sub = p.add_subparsers(dest="published_command", metavar="ACTION", required=True)
    fetch = sub.add_parser("fetch", help="download (or copy with --from) and verify every pinned file",
                           description="Download (or copy) every file of data/published_manifest.tsv that the folder "
                                       "lacks, verify its sha256 and move them in together: all or nothing (a "
                                       "failure leaves the folder as it was). Other files in the folder are left "
                                       "alone; a pinned file with other content is kept beside its replacement. "
                                       "$CIRCUITDEV_PUBLISHED_URL: a mirror, a template with {commit} and "
                                       "{repo_path}; $CIRCUITDEV_PUBLISHED_MANIFEST: another manifest.")
    fetch.add_argument("--to", type=Path, default=None,
                       help="destination (default: $CIRCUITDEV_PUBLISHED or data/published)")
    fetch.add_argument("--from", dest="from_dir", type=Path, default=None,
                       help="copy from a local copy instead of downloading (offline machines)")
    fetch.add_argument("--timeout", type=float, default=30.0,
                       help="seconds for each whole file (connect + every byte), > 0 (default 30)")
    fetch.set_defaults(func=run_fetch)
    ensure = sub.add_parser("ensure", help="make a folder complete (copy or download), or say why it cannot be; "
                                           "never fails the build (what `make book` runs)",
                            description="As `fetch`, but a failed download or copy is one line saying the tier is "
                                        "not available and how to add it, and exit 0; the folder is left as it was "
                                        "(readers refuse an incomplete copy), nothing is deleted or moved.")
    ensure.add_argument("--to", type=Path, required=True, help="the folder the book reads (e.g. data/published)")
    ensure.add_argument("--from", dest="from_dir", type=Path, default=None,
                        help="a local copy to take the files from (default: download at the pinned commits)")
    ensure.add_argument("--timeout", type=float, default=10.0,
                        help="seconds for each whole file (connect + every byte), > 0 (default 10)")
    ensure.add_argument("--status", type=Path, default=None, help="also write the outcome to this JSON file")
    ensure.set_defaults(func=run_ensure)
    check = sub.add_parser("check", help="verify a local copy: sha256 against the manifest, then the JSON schema")
    check.add_argument("--from", dest="from_dir", type=Path, default=None,
                       help="the folder to check (default: $CIRCUITDEV_PUBLISHED or data/published)")
    check.set_defaults(func=run_check)


def _check_timeout(timeout: float) -> None:
    if not timeout > 0:
        raise ConfigError(f"--timeout must be > 0 seconds (it bounds each whole file), got {timeout:g}")


def run_fetch(args: argparse.Namespace) -> int:
    _check_timeout(args.timeout)
    to = args.to if args.to is not None else published_dir()
    done = fetch.fetch_published(to, from_dir=args.from_dir, timeout=args.timeout)
    print(f"{to}: " + ", ".join(f"{n} {action}" for action, n in done.counts().items()) + " (sha256 verified)")
    if done.replaced:
        print(f"{to}: kept the replaced file(s) beside the pinned ones: {', '.join(done.replaced)}")
    return 0


def run_check(args: argparse.Namespace) -> int:
    import warnings

    from circuitdev.sources.published import PartialCopyWarning, load_published

    root = args.from_dir if args.from_dir is not None else published_dir()
    if not root.is_dir():
        raise DataError(f"{root} does not exist; fetch it with `circuitdev published fetch --to {root}`")
    status = fetch.check_published(root)
    bad = status[status["status"] != "ok"]
    for row in bad.itertuples():
        print(f"{root / row.local_path}: {row.status}")
    with warnings.catch_warnings():  # the lines above say what is missing; check the schema of what is there
        warnings.simplefilter("ignore", PartialCopyWarning)
        data = load_published(root, allow_partial=True)  # raises DataError naming file and field
    print(f"{root}: {len(status) - len(bad)}/{len(status)} files match the pinned sha256; "
          f"{len(data.table)} head rows over {data.revisions.shape[0]} revisions load cleanly")
    if len(bad):
        raise DataError(f"{len(bad)} file(s) missing or changed; "
                        f"re-fetch with `circuitdev published fetch --to {root}`")
    return 0


def run_ensure(args: argparse.Namespace) -> int:
    import json

    from circuitdev.atomic import write_atomic

    _check_timeout(args.timeout)
    complete, message = fetch.ensure_published(args.to, from_dir=args.from_dir, timeout=args.timeout)
    print(message)
    if args.status is not None:
        write_atomic(args.status, json.dumps({"complete": complete, "message": message}, indent=1) + "\n")
    return 0
