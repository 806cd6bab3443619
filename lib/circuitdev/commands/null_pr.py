"""`circuitdev null-pr`: each head's participation ratio on random tokens at every probed revision of a panel (the
PR null, calibrated over training); thin over `circuitdev.sources.null_pr.null_pr_over_training`."""

from __future__ import annotations

import argparse

from circuitdev.commands.probe import add_job_arguments, add_panel_argument, add_results_argument, panel_and_results

EPILOG = """\
examples:
  circuitdev null-pr --panel toy-pythia                   # every probed revision, 5 random batches each
  circuitdev null-pr --panel toy-olmo --draws 20 --out results/

Writes OUT/<panel>/null_pr.parquet (one row per revision, draw, layer, head: the head's PR on a batch of uniform
random ids, as many sequences as the records' PR uses, their first token where they set one) and its sidecar
null_pr.json. It resumes after an interruption and recomputes the revisions whose record changed. The panel's
records must exist (`circuitdev probe` first). The F5 page reads it (a head's PR against its null over training).
exit status: 0 success, 2 a user error (unknown panel, missing records, model unavailable), 130 interrupted.
"""


def register(subparsers) -> None:
    from circuitdev.sources.null_pr import DEFAULT_DRAWS, DEFAULT_SEED

    p = subparsers.add_parser(
        "null-pr", help="PR of every head on random tokens at every probed revision (the PR null)",
        description="The participation-ratio null of method reference §3 at every probed revision of a panel, "
        "stored beside its records.", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_panel_argument(p)
    add_results_argument(p)
    p.add_argument("--draws", type=int, default=DEFAULT_DRAWS, metavar="D",
                   help=f"random batches per revision (default {DEFAULT_DRAWS})")
    p.add_argument("--n", type=int, default=None, metavar="N",
                   help="random sequences per batch (default: the records' n_pr)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"seed of draw 0 (default {DEFAULT_SEED})")
    p.add_argument("--revision", action="append", default=None, metavar="R", help="only this revision (repeatable)")
    add_job_arguments(p, force="recompute every revision")
    p.set_defaults(func=run)


def run(args) -> int:
    from circuitdev.commands.ablate import check_job_options
    from circuitdev.errors import ConfigError
    from circuitdev.sources.null_pr import null_pr_over_training

    check_job_options(args)  # before any model loads: exit 2 with the cause
    if args.draws < 1:
        raise ConfigError(f"--draws must be >= 1 random batches, got {args.draws}")
    if args.n is not None and args.n < 2:
        raise ConfigError(f"--n must be >= 2 random sequences (a PR over one row is 1 whatever the head), got {args.n}")
    if not 0 <= args.seed <= 2**32 - 1 - args.draws:
        raise ConfigError(f"--seed must lie in [0, 2**32 - 1 - draws] (numpy's RandomState seeds), got {args.seed}")
    panel, out = panel_and_results(args)
    run_ = null_pr_over_training(panel, results_dir=out, n_draws=args.draws, n=args.n, seed=args.seed,
                                 revisions=args.revision, batch_size=args.batch_size, device=args.device,
                                 force=args.force, progress=not args.no_progress, log=print)
    if len(run_.table):
        summary = run_.table.groupby("revision", sort=False)["null_pr"].agg(["median", "max"])
        summary["p99"] = run_.table.groupby("revision", sort=False)["null_pr"].quantile(0.99)
        print(summary.to_string(float_format=lambda v: f"{v:.3f}"))
    print(f"done: {len(run_.computed)} computed, {len(run_.kept)} kept -> {run_.paths.parquet}")
    return 0
