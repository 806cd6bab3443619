"""`circuitdev toy train`: train (or reuse) the offline toy panel; thin over `circuitdev.toy`."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser("toy", help="the offline toy panel (tiny models trained on CPU)",
                              description="Train the toy developmental panel: one tiny model per family.")
    sub = p.add_subparsers(dest="toy_command", metavar="ACTION")
    t = sub.add_parser("train", help="train the toy models (default: all three, default recipe) and write panel files",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    from circuitdev.toy.recipe import FAMILIES

    t.add_argument("--family", action="append", choices=FAMILIES,
                   help="family to train (repeatable); default: all three")
    t.add_argument("--preset", default="default", help="named recipe: default (the toy-* panels), nobos "
                   "(no BOS, no backcopy windows: induction heads without sinks; panels toy-*-nobos) or mini "
                   "(3 layers, 1,500 steps: induction heads in about a minute per family, for the workshop; "
                   "panels toy-*-mini, e.g. --preset mini --family gpt_neox) or long (issue 32's trial: 30x the "
                   "tokens, T = 256, weight decay 0.3; panels toy-*-long; CPU-hours per family)")
    t.add_argument("--seed", type=int, default=None, help="recipe seed (corpus, data order, init)")
    t.add_argument("--seeds", type=int, nargs="+", metavar="S", default=None,
                   help="train independent replicas, one per seed: seed 0 keeps the panel names (toy-pythia ...), "
                   "seed s > 0 gets panels <name>-s<s> (toy-pythia-s1 ...); e.g. --seeds 0 1 2")
    t.add_argument("--steps", type=int, default=None, help="training steps (the checkpoint grid scales with it)")
    t.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override any ToyRecipe field, value parsed as JSON (e.g. --set d_model=32)")
    t.add_argument("--data-dir", type=Path, default=None, help="data folder (default: the repository's data/)")
    t.add_argument("--jobs", type=int, default=None, help="parallel training processes (default: min(3, CPUs))")
    t.add_argument("--threads", type=int, default=None,
                   help="torch threads per training process (default: all cores when one process trains one family "
                   "of the mini preset, else 1 per process; the thread count changes torch's float results, so the "
                   "other presets keep the 1 thread their panels were trained with)")
    t.add_argument("--force", action="store_true", help="retrain even if matching checkpoints exist")
    t.add_argument("--no-progress", action="store_true", help="no progress bars")
    t.set_defaults(func=_train)
    r = sub.add_parser("trial", help="record a trial of the toy recipe: its sink and induction counts per checkpoint",
                       description="Probe every saved checkpoint of a trial's toy panels and write "
                       "data/toy_trials/<NAME>.csv and .json (circuitdev.toy.trials): the sink heads (layers >= 2 "
                       "and 0/1, both first-token scores) and induction heads per checkpoint, shown on the toy "
                       "recipe page.", formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    r.add_argument("name", help="the trial's name: its files' stem (e.g. long30x)")
    r.add_argument("--panel", action="append", required=True, type=Path, metavar="FILE",
                   help="a panel file of the trial, as `circuitdev toy train --data-dir D` wrote it "
                   "(D/panels/<panel>.yaml; repeatable)")
    r.add_argument("--results", type=Path, required=True, help="where the trial's probe records go (resumable)")
    r.add_argument("--out", type=Path, default=None, help="the trials folder (default: the repository's "
                   "data/toy_trials/)")
    r.add_argument("--grid-only", action="store_true", help="probe the panel's grid only, not its dense "
                   "checkpoints (a run saved every 10 steps, like the default panel's)")
    r.add_argument("--no-progress", action="store_true", help="no progress bars")
    r.set_defaults(func=_trial)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def recipe_from_args(args):
    from circuitdev.errors import ConfigError
    from circuitdev.toy.recipe import PRESETS

    changes = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        try:
            changes[key] = json.loads(value)
        except json.JSONDecodeError:
            changes[key] = value
    if args.seed is not None:
        changes["seed"] = args.seed
    if args.steps is not None:
        changes["steps"] = args.steps
    if args.preset not in PRESETS:
        raise ConfigError(f"unknown preset {args.preset!r}; known: {', '.join(PRESETS)}")
    base = PRESETS[args.preset].to_dict()
    unknown = set(changes) - set(base)
    if unknown:
        raise ConfigError(f"unknown recipe field(s) {sorted(unknown)}; known: {sorted(base)}")
    if isinstance(changes.get("mixture"), dict):
        changes["mixture"] = {**base["mixture"], **changes["mixture"]}
    return type(PRESETS[args.preset]).from_dict({**base, **changes})


def default_threads(preset: str, n_runs: int, jobs: int | None) -> int:
    """`--threads` unset: all cores for an ALL_CORES_PRESETS preset when its runs (seed x family) train one after
    another in one process (one run, or jobs=1), else 1 per process."""
    import os

    from circuitdev.toy.recipe import ALL_CORES_PRESETS

    if preset not in ALL_CORES_PRESETS or (n_runs > 1 and (jobs is None or jobs > 1)):
        return 1
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _train(args) -> int:
    from circuitdev.toy import FAMILIES, train_all

    from circuitdev.errors import ConfigError
    from circuitdev.schema import replica_suffix

    recipe = recipe_from_args(args)
    families = tuple(args.family or FAMILIES)
    if args.seeds and args.seed is not None:
        raise ConfigError("give --seed (one recipe seed, the usual panel names) or --seeds (replicas), not both")
    bad = [s for s in [*(args.seeds or []), *([args.seed] if args.seed is not None else [])] if s < 0]
    if bad:
        raise ConfigError(f"training seeds are >= 0 (seed 0 keeps the panels' usual names), got {bad}")
    recipes = [recipe.replace(seed=s, panel_suffix=recipe.panel_suffix + replica_suffix(s))
               for s in dict.fromkeys(args.seeds)] if args.seeds else [recipe]
    if args.threads is not None and args.threads < 1:
        raise ConfigError(f"--threads must be >= 1, got {args.threads}")
    threads = args.threads or default_threads(args.preset, len(families) * len(recipes), args.jobs)
    t0 = time.time()
    results = train_all(recipes, families, args.data_dir, jobs=args.jobs, progress=not args.no_progress,
                        force=args.force, threads=threads)  # every (seed, family) run in one pool
    for r in results:
        how = "reused" if r["reused"] else f"trained in {r['seconds']:.0f}s, final loss {r['final_loss']:.3f}"
        print(f"{r['panel']}: {how}")
    print(f"toy panel ready (recipe {', '.join(r.recipe_hash() for r in recipes)}) in {time.time() - t0:.0f}s wall; "
          f"probe with `circuitdev probe --panel {results[0]['panel']}`")
    return 0


def _trial(args) -> int:
    from circuitdev.toy.trials import record_trial

    csv, meta = record_trial(args.name, args.panel, results_dir=args.results, out_dir=args.out,
                             dense=not args.grid_only, progress=not args.no_progress, log=print)
    print(f"trial {args.name}: {csv} and {meta}")
    return 0
