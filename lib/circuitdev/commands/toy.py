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
    t.add_argument("--preset", default="default", help="named recipe: default (the toy-* panels) or nobos "
                   "(no BOS, no backcopy windows: induction heads without sinks; panels toy-*-nobos)")
    t.add_argument("--seed", type=int, default=None, help="recipe seed (corpus, data order, init)")
    t.add_argument("--steps", type=int, default=None, help="training steps (the checkpoint grid scales with it)")
    t.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override any ToyRecipe field, value parsed as JSON (e.g. --set d_model=32)")
    t.add_argument("--data-dir", type=Path, default=None, help="data folder (default: the repository's data/)")
    t.add_argument("--jobs", type=int, default=None, help="parallel training processes (default: min(3, CPUs))")
    t.add_argument("--force", action="store_true", help="retrain even if matching checkpoints exist")
    t.add_argument("--no-progress", action="store_true", help="no progress bars")
    t.set_defaults(func=_train)
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


def _train(args) -> int:
    from circuitdev.toy import FAMILIES, train_all

    recipe = recipe_from_args(args)
    families = tuple(args.family or FAMILIES)
    t0 = time.time()
    results = train_all(recipe, families, args.data_dir, jobs=args.jobs, progress=not args.no_progress,
                        force=args.force)
    for r in results:
        how = "reused" if r["reused"] else f"trained in {r['seconds']:.0f}s, final loss {r['final_loss']:.3f}"
        print(f"{r['panel']}: {how}")
    print(f"toy panel ready (recipe {recipe.recipe_hash()}) in {time.time() - t0:.0f}s wall; "
          f"probe with `circuitdev probe --panel {results[0]['panel']}`")
    return 0
