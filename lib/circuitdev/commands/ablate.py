"""`circuitdev ablate`: zero-ablate a panel's final induction circuit -- at its final revision with controls, or at
every revision (`--over-training`); thin over `circuitdev.sources.run.ablate_final_circuit` and
`circuitdev.sources.ablate.ablate_over_training`."""

from __future__ import annotations

import argparse

from circuitdev.commands.probe import add_job_arguments, add_panel_argument, add_results_argument, panel_and_results

FINAL_GROUPS = 5  # random groups per control at the final revision: the model pages' (book.model_ablation)

EPILOG = """\
examples:
  circuitdev ablate --panel toy-pythia                      # the final circuit at the final revision, with controls
                                                            # (the model pages' rows: measure.ablation.circuit_conditions)
  circuitdev ablate --panel toy-pythia --over-training      # ... at every probed revision -> a table per panel
  circuitdev ablate --panel toy-olmo --over-training --random-groups 20 --out results/

Without --over-training: the final revision's circuit beside its controls, the rows the model pages show
(`measure.ablation.circuit_conditions`: no ablation, the circuit, up to G distinct matched random groups -- the
circuit's layers and per-layer counts, heads outside it; a row saying so where a layer has none -- as many random
groups from any layer, and the whole layers), all in batched forwards.

--over-training writes OUT/<panel>/ablation_over_training.parquet (one row per revision: top-1 with nothing, the
final circuit, matched random groups (same layers) and random groups (any layer) ablated; the circuit's Wilson
interval, each control's 95% interval over its groups, and excess_drop: the circuit's drop beyond the control's,
with its interval -- "necessary" when that interval lies above 0) and its sidecar (.json: the circuit, the groups
and their seeds, which control the excess drop uses, what each row measured). It resumes after an interruption
and recomputes rows whose record, circuit or configuration changed; `revision_table.load_revision_table`
merges it. The
panel's records must be complete (`circuitdev probe` first). The circuit: heads with induction selectivity >=
--threshold (default: the records' induction_threshold, the paper's 50x) at the last revision in token order.
exit status: 0 success (also: no head reaches the threshold, said), 2 a user error (unknown panel, missing
records, the final checkpoint unavailable, a bad option: checked before any model loads), 130 interrupted.
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "ablate", help="zero-ablate the final induction circuit (final revision, or --over-training)",
        description="Causal check of the final induction circuit: top-1 at the query with the circuit zero-ablated, "
        "against matched random controls, on the records' own induction batch.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_panel_argument(p)
    p.add_argument("--over-training", action="store_true",
                   help="ablate the final circuit at every probed revision and store the table (resumable)")
    p.add_argument("--random-groups", type=int, default=None, metavar="G",
                   help=f"distinct random groups per control (default 10 with --over-training, {FINAL_GROUPS} at the "
                   "final revision, as the model pages)")
    p.add_argument("--threshold", type=float, default=None, metavar="X",
                   help="induction selectivity of the circuit (default: the records' induction_threshold)")
    add_results_argument(p)
    add_job_arguments(p, force="recompute every row (--over-training)")
    p.set_defaults(func=run)


def check_job_options(args) -> None:
    """Bad options fail before any model loads (exit 2): a batch size below 1, a device this machine lacks."""
    from circuitdev.errors import ConfigError
    from circuitdev.sources.loading import resolve_device

    if args.batch_size is not None and args.batch_size < 1:
        raise ConfigError(f"--batch-size must be >= 1 sequences per forward pass, got {args.batch_size}")
    if args.device is not None:
        resolve_device(args.device)  # raises: unknown device, or CUDA / MPS asked for where there is none


def run(args) -> int:
    import pandas as pd

    from circuitdev.errors import ConfigError

    check_job_options(args)
    if args.random_groups is not None and args.random_groups < 1:
        raise ConfigError(f"--random-groups must be >= 1, got {args.random_groups}")
    if args.threshold is not None and not args.threshold > 0:
        raise ConfigError(f"--threshold must be > 0 (an induction selectivity, e.g. 50), got {args.threshold}")
    panel, out = panel_and_results(args)
    if args.over_training:
        from circuitdev.sources.ablate import DEFAULT_RANDOM_GROUPS, ablate_over_training

        print(f"ablate {panel.name} over training: {len(panel.revisions)} revision(s) -> {out}")
        run_ = ablate_over_training(panel, results_dir=out, n_random=args.random_groups or DEFAULT_RANDOM_GROUPS,
                                    threshold=args.threshold, batch_size=args.batch_size, device=args.device,
                                    force=args.force, progress=not args.no_progress, log=print)
        meta = run_.sidecar
        print(f"circuit at {meta['final_revision']} (induction >= {meta['threshold']:g}x): "
              f"{' '.join(meta['circuit']) or 'none'}")
        if meta.get("excess_control"):
            which = {"random": "matched random (same layers)", "random_any": "any-layer random"}[meta["excess_control"]]
            print(f"excess_drop: the circuit's top-1 drop minus the {which} groups' mean drop; necessary where its "
                  "95% interval (excess_drop_lo .. _hi) lies above 0")
        cols = ["revision", "baseline_top1", "ablated_top1", "top1_drop", "random_top1", "random_any_top1",
                "excess_drop", "excess_drop_lo", "excess_drop_hi"]
        with pd.option_context("display.width", 200, "display.max_rows", 500):
            print(run_.table[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        print(f"done: {len(run_.computed)} computed, {len(run_.kept)} kept -> {run_.paths.parquet}")
        return 0
    from circuitdev.schema import INDUCTION_THRESHOLD
    from circuitdev.sources.records import PanelRecords
    from circuitdev.sources.run import ablate_final_circuit

    read = PanelRecords.open(out, panel).read()
    threshold = args.threshold or read.config.get("induction_threshold", INDUCTION_THRESHOLD)
    table, why = ablate_final_circuit(panel, read.table, config=read.config, threshold=threshold,
                                      groups=args.random_groups or FINAL_GROUPS, batch_size=args.batch_size or 8,
                                      device=args.device, strict=True)  # no checkpoint: an error (exit 2)
    if table is None:  # no circuit to ablate: a finding, not an error
        print(f"{panel.name}: {why}")
        return 0
    show = table.drop(columns=["label", "drawn_for", "spec", "mode"])
    with pd.option_context("display.width", 200, "display.max_colwidth", 80):
        print(show.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    return 0
