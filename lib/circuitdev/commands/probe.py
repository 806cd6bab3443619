"""`circuitdev probe`: probe a panel's revisions and store one record each; thin over `circuitdev.sources.run.probe_panel`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

EPILOG = """\
examples:
  circuitdev probe --panel toy-pythia                       # every revision, the panel's probe defaults
  circuitdev probe --panel pythia-1b --revision step3000    # one revision of a real model (GPU advised)
  circuitdev probe --panel my_panel.yaml --n 500 --dtype fp16 --out results/
  circuitdev probe --panel toy-olmo --set n_nulls=0 --set class_threshold=50

records: OUT/<panel>/<revision>.parquet (one row per head) + OUT/<panel>/<revision>.json (configuration and its
hash, versions, git commit, device, dtype, timings, the parquet's sha256). A complete record of the same
configuration is skipped; an interrupted run resumes; a corrupt record is recomputed; a record of another
configuration is moved to OUT/<panel>/by-config/<hash>/ (and restored from there when asked for again).
exit status: 0 success, 2 a user error (bad option, unknown panel, model unavailable/offline), 130 interrupted.
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "probe",
        help="probe a panel's revisions and store per-head records (resumable)",
        description="Screen every head of each revision of a panel (six selectivities, classification, circuits, "
        "PR, alternative metrics) and store one record per revision. Options left out use the panel file's "
        "`probe:` defaults, then the paper's values (ProbeConfig).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_panel_argument(p)
    p.add_argument("--revision", "-r", action="append", metavar="R",
                   help="revision to probe (repeatable); default: all revisions of the panel, in order")
    p.add_argument("--n", type=int, metavar="N", help="sequences in the induction batch (paper: 2000)")
    p.add_argument("--seq-len", type=int, metavar="T", help="sequence length; query at T-1 (paper: 256)")
    p.add_argument("--vocab-range", type=int, nargs=2, metavar=("LO", "HI"),
                   help="token ids of the batch, half-open [LO, HI) (paper: 100 10000)")
    p.add_argument("--batch-size", type=int, metavar="B", help="sequences per forward pass (speed only; default 8)")
    p.add_argument("--dtype", choices=["fp32", "fp16", "bf16"],
                   help="weights dtype (default: the panel's; changes the record's configuration hash)")
    p.add_argument("--device", metavar="D", help="auto (default: CUDA, then MPS, then CPU), cpu, cuda, cuda:1, mps")
    add_results_argument(p)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="any other ProbeConfig field, value parsed as JSON (e.g. --set n_nulls=500)")
    p.add_argument("--probe-config", metavar="JSON_OR_FILE",
                   help="ProbeConfig fields as a JSON object or a YAML/JSON file (what the Snakefile passes); "
                   "explicit options win over it")
    p.add_argument("--force", action="store_true", help="recompute records even if complete")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def add_panel_argument(p, required: bool = True) -> None:
    p.add_argument("--panel", "-p", required=required, metavar="NAME_OR_FILE",
                   help="a panel name (data/panels/NAME.yaml; see `circuitdev panels`) or a panel YAML file")


def add_results_argument(p) -> None:
    p.add_argument("--out", "--results", dest="out", type=Path, default=None, metavar="DIR",
                   help="results folder holding <panel>/<revision>.parquet (default: data/results of the repository)")


def add_job_arguments(p, *, force: str) -> None:
    """The last options of a job over a panel's records (`ablate`, `null-pr`): forward-pass size, device, --force
    (`force`: its help, what it recomputes) and --no-progress."""
    p.add_argument("--batch-size", type=int, metavar="B", help="sequences per forward pass (speed only)")
    p.add_argument("--device", metavar="D", help="auto (default), cpu, cuda, cuda:1, mps")
    p.add_argument("--force", action="store_true", help=force)
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def panel_and_results(args):
    """(the --panel, with the revisions `circuitdev refine` added to the results folder; that folder: --out, default
    data/results) -- what a command that reads or writes a panel's records starts from."""
    from circuitdev.paths import results_dir as default_results_dir
    from circuitdev.sources.panels import load_panel

    out = args.out or default_results_dir()
    return load_panel(args.panel, results_dir=out), out


def check_output_folder(out: Path, panel: str) -> None:
    """The results folder and the panel's folder in it are folders (or can be made): ConfigError otherwise, with
    the fix; an OSError of the machine (read-only, permission, disk) reaches the CLI as exit 2 with its fix."""
    from circuitdev.errors import ConfigError

    for folder, what in ((out, "--out"), (out / panel, f"the panel's folder {panel}/ in --out")):
        if folder.exists() and not folder.is_dir():
            raise ConfigError(f"{what}: {folder} is a file, not a folder; give --out a folder (records go to "
                              f"<out>/{panel}/<revision>.parquet)")
    (out / panel).mkdir(parents=True, exist_ok=True)


def parse_sets(items: list[str]) -> dict:
    from circuitdev.errors import ConfigError

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects KEY=VALUE (a ProbeConfig field), got {item!r}")
        try:
            out[key.strip().replace("-", "_")] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip().replace("-", "_")] = value
    return out


def read_probe_config(text: str | None) -> dict:
    """--probe-config: a JSON object, or a YAML/JSON file of ProbeConfig fields."""
    import yaml

    from circuitdev.errors import ConfigError

    if not text:
        return {}
    path = Path(text)
    try:
        value = yaml.safe_load(path.read_text()) if not text.lstrip().startswith("{") and path.is_file() else json.loads(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        raise ConfigError(f"--probe-config: not a JSON object or a readable YAML/JSON file ({err})") from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError("--probe-config must hold a mapping of ProbeConfig fields, e.g. '{\"n\": 500}'")
    return value


def run(args) -> int:
    from circuitdev.sources.run import probe_panel

    panel, out = panel_and_results(args)
    fields = read_probe_config(args.probe_config)
    fields.update(parse_sets(args.set))
    explicit = {"n": args.n, "seq_len": args.seq_len, "vocab_range": args.vocab_range, "batch_size": args.batch_size,
                "dtype": args.dtype, "device": args.device}
    fields.update({k: v for k, v in explicit.items() if v is not None})
    config = panel.probe_config(**fields)
    revs = panel.select(args.revision)
    check_output_folder(Path(out), panel.name)  # before any model loads: a bad --out fails in a second, not later
    from circuitdev.sources.loading import resolve_device

    resolve_device(config.device)
    print(f"probe {panel.name}: {len(revs)} revision(s), configuration {config.config_hash()}, dtype {config.dtype}, "
          f"-> {Path(out) / panel.name}")
    results = probe_panel(panel, revisions=args.revision, config=config, results_dir=out, force=args.force,
                          progress=not args.no_progress, log=print)
    counts = {a: sum(r.action == a for r in results) for a in ("computed", "skipped", "restored")}
    for r in results:
        if r.action == "computed":
            print(f"  {r.revision}: computed in {r.seconds:.1f}s ({r.reason}) -> {r.paths.parquet}")
    print(f"done: {counts['computed']} computed, {counts['skipped']} already complete, {counts['restored']} restored")
    return 0
