"""`circuitdev refine`: probe more revisions where a per-revision metric changes most; thin over
`circuitdev.sources.refine.refine_panel` with the metrics of `circuitdev.analysis.findings.REVISION_METRICS`."""

from __future__ import annotations

import argparse

from circuitdev.commands.probe import add_panel_argument, add_results_argument

EPILOG = """\
examples:
  circuitdev refine --panel toy-pythia --metric bos_fraction --max-new 4     # around the sink onset
  circuitdev refine --panel toy-pythia --metric induction_3_heads --max-new 6  # around the F3 milestone
  circuitdev show --panel toy-pythia                                         # the refined revisions are listed

The event window is the adjacent pair of probed revisions with the largest change of the metric; inside it, each
step probes the candidate checkpoint nearest the log-midpoint of the pair with the largest change, until --max-new
revisions are probed or no candidate is left inside. New records use the configuration of the panel's records and
are listed in OUT/<panel>/refined.yaml, so every reader of the panel includes them (delete that file to forget them).
Candidates: a folder panel's `candidates:` list and step<N> checkpoint folders (the toy trainer saves a dense grid);
a hub panel's branches (online, then cached), or Pythia's step grid offline.
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "refine", help="probe extra revisions where a metric changes most (adaptive revision grid)",
        description="Adaptive revision refinement: find the adjacent pair of probed revisions with the largest "
        "change of a per-revision metric and probe the available checkpoints between them, nearest the "
        "log-token midpoint first.", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_panel_argument(p)
    p.add_argument("--metric", "-m", required=True, metavar="M",
                   help="a per-revision metric of analysis.findings.REVISION_METRICS: bos_fraction (share of heads "
                   "with first-token >= 30x), induction_heads (heads with induction >= 50x), prev_token_heads "
                   "(previous-token >= 30x), sink_heads (first-token >= 30x), or an F3 milestone as 0/1 (induction_3_heads, "
                   "bos_50pct, ...: refining on it zooms onto its first revision)")
    p.add_argument("--max-new", "-k", type=int, default=4, metavar="K", help="revisions to probe at most")
    add_results_argument(p)
    p.add_argument("--batch-size", type=int, metavar="B", help="sequences per forward pass (speed only)")
    p.add_argument("--device", metavar="D", help="auto (default), cpu, cuda, cuda:1, mps")
    p.add_argument("--candidates", action="store_true", help="only list the candidate revisions and exit")
    p.set_defaults(func=run)


def run(args) -> int:
    from circuitdev.analysis.findings import revision_metric
    from circuitdev.paths import results_dir as default_results_dir
    from circuitdev.sources.panels import load_panel
    from circuitdev.sources.refine import candidate_revisions, refine_panel

    panel = load_panel(args.panel)
    out = args.out or default_results_dir()
    from circuitdev.analysis.findings import REVISION_METRICS
    from circuitdev.errors import ConfigError

    if args.metric not in REVISION_METRICS:
        raise ConfigError(f"unknown metric {args.metric!r}; use one of {', '.join(REVISION_METRICS)}")
    if args.candidates:
        cands = candidate_revisions(panel, results_dir=out)
        print(f"{panel.name}: {len(cands)} candidate revision(s): {' '.join(r.name for r in cands) or 'none'}")
        return 0
    print(f"refine {panel.name} on {args.metric}: at most {args.max_new} new revision(s) -> {out}")
    steps = refine_panel(panel, metric=lambda dev: revision_metric(dev, args.metric), metric_name=args.metric,
                         max_new=args.max_new, results_dir=out, batch_size=args.batch_size, device=args.device,
                         log=print)
    added = [s.chosen.name for s in steps if s.chosen is not None]
    print(f"done: {len(added)} new revision(s): {' '.join(added) or 'none'}")
    return 0
