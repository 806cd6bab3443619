"""`circuitdev panels`: list the panels, show one panel's revisions, freeze a hub-listed panel; thin over
`circuitdev.sources.panels` (and `circuitdev.sources.records.panel_status` for --status)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EPILOG = """\
examples:
  circuitdev panels                              # every panel in data/panels (name, model, family, dtype, revisions)
  circuitdev panels pythia-1b                    # one panel: its revisions, steps and token counts
  circuitdev panels pythia-1b --status           # ... and which revisions have a complete record in data/results
  circuitdev panels mine.yaml --freeze frozen.yaml   # resolve {log_spaced: N} on the hub once, write the list

a panel file (YAML): name, model (HF id or a folder relative to the file, one sub-folder per revision holding a
`save_pretrained` checkpoint), family (gpt_neox | olmo | olmoe | llama), dtype (fp32 | fp16 | bf16), revisions
(a list of {name, tokens[, step]}, or {log_spaced: N} for a hub model), optional tokens_per_step, description,
source (probe | toy) and probe: (ProbeConfig defaults). See lib/circuitdev/sources/panels.py.
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "panels",
        help="list panels, or show one panel's revisions",
        description="List the panels in data/panels (or $CIRCUITDEV_DATA/panels), or show one panel in detail. "
        "Every panel file is validated as it is read.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("panel", nargs="?", metavar="NAME_OR_FILE", help="show this panel (default: list all)")
    p.add_argument("--status", action="store_true", help="with a panel: the state of each revision's stored record")
    p.add_argument("--out", "--results", dest="out", type=Path, default=None, metavar="DIR",
                   help="results folder for --status (default: data/results of the repository)")
    p.add_argument("--freeze", type=Path, metavar="OUT.yaml",
                   help="with a panel: write it with an explicit revision list (resolves {log_spaced: N} online)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args) -> int:
    import pandas as pd

    from circuitdev.errors import ConfigError
    from circuitdev.sources.panels import load_panel, write_panel

    if args.panel is None:
        if args.status or args.freeze:
            raise ConfigError("--status and --freeze need a panel: `circuitdev panels NAME --status`")
        return _list_panels(args)

    panel = load_panel(args.panel)
    if args.freeze:
        path = write_panel(panel, args.freeze)
        print(f"wrote {path} ({len(panel.revisions)} revisions)")
        return 0
    table = pd.DataFrame([{"revision": r.name, "step": r.step, "tokens": r.tokens, "tokens_b": r.tokens_b}
                          for r in panel.revisions])
    if args.status:
        from circuitdev.paths import results_dir as default_results_dir
        from circuitdev.sources.records import panel_status

        status = panel_status(args.out or default_results_dir(), panel)
        table = table.merge(status[["revision", "state", "config_hash", "reason"]], on="revision")
    if args.json:
        json.dump({**panel.to_dict(), "table": table.to_dict(orient="records")}, sys.stdout, indent=1, default=str)
        print()
        return 0
    print(f"panel {panel.name} ({panel.path})")
    print(f"  model   {panel.model}{' (local folder)' if panel.is_local else ' (Hugging Face hub)'}")
    print(f"  family  {panel.family}   dtype {panel.dtype}   source {panel.source}"
          + (f"   tokens/step {panel.tokens_per_step}" if panel.tokens_per_step else ""))
    if panel.description:
        print(f"  {panel.description}")
    print(f"  probe   {panel.probe or '(ProbeConfig defaults)'}  -> configuration {panel.probe_config().config_hash()}")
    print(table.to_string(index=False))
    return 0


def _list_panels(args) -> int:
    """Every panel file of the panels folder, one line each (or as JSON); a broken file is listed with its error
    and makes the exit status 2."""
    import pandas as pd

    from circuitdev.errors import ConfigError
    from circuitdev.paths import panels_dir
    from circuitdev.sources.panels import load_panel

    panels, rows, broken = [], [], []
    for path in sorted(panels_dir().glob("*.y*ml")):
        try:  # one broken file must not hide the others: list it with its error
            panels.append(load_panel(path, resolve_hub=False))
        except ConfigError as err:
            broken.append(f"{path.name}: {err}")
    rows = [{"name": p.name, "model": _short(p), "family": p.family, "dtype": p.dtype,
             "revisions": len(p.revisions) or "log-spaced", "tokens_b": _span(p), "source": p.source}
            for p in panels]
    if args.json:
        json.dump([p.to_dict() for p in panels], sys.stdout, indent=1)
        print()
    elif rows:
        print(pd.DataFrame(rows).to_string(index=False))
    else:
        print(f"no panel files in {panels_dir()}")
    for line in broken:
        print(f"invalid panel file {line}", file=sys.stderr)
    return 2 if broken else 0


def _short(panel) -> str:
    return panel.model if not panel.is_local else "folder: " + Path(panel.model).name


def _span(panel) -> str:
    if not panel.revisions:
        return "-"
    return f"{panel.revisions[0].tokens_b:.4g} .. {panel.revisions[-1].tokens_b:.4g}"
