"""`circuitdev notebook list|run|sweep`: the book's pages as commands; thin over `circuitdev.book.execute`."""

from __future__ import annotations

import argparse
from pathlib import Path

EPILOG = """\
examples:
  circuitdev notebook list                                    # every page, its parameters, types, defaults, meaning
  circuitdev notebook run f2_shapes -p bos_threshold 20 --html    # -> runs/f2_shapes-<hash>/f2_shapes.{ipynb,html}
  circuitdev notebook run model -p panel toy-olmo --out out/     # -> out/model.ipynb
  circuitdev notebook sweep f2_shapes --grid bos_threshold=10,30,100 --out sweep/   # + sweep/summary.csv

  circuitdev notebook sweep f1_floor --grid 'floor_layers=[0],[0,1]' -p rule best-class   # a list-valued grid

Values are YAML: 20, 0.5, true, null, "[0, 1]"; text that YAML reads otherwise (yes, no, on, a: b) is quoted
inside the shell's quotes: -p rule '"yes"'. --grid KEY=V1,V2,... splits on commas outside brackets and quotes, so
each [...] is one value of a list parameter; a value given twice runs once. The folders (probe records, the
authors' files, the data folder, the panels) come from config/pipeline.yaml, as in `make book`;
CIRCUITDEV_RESULTS / CIRCUITDEV_PUBLISHED / CIRCUITDEV_DATA or `-p results_dir DIR` etc. override them. An unknown,
ill-typed or out-of-range parameter (`notebook list` shows the ranges), an --out that is a file or not writable, a
missing --cwd or an unknown --kernel exits 2 before anything runs; a failed page leaves nothing in the output
folder, and the failed notebook is kept where the error says until the page next succeeds. A sweep reuses a point
only when its parameters (grid and -p), the page and the folders it read are unchanged (out/<point>/point.json);
summary.csv lists the grid and the -p parameters, then what the page glued.
"""


def register(subparsers) -> None:
    p = subparsers.add_parser("notebook", help="list, run or sweep the book's pages with new parameters",
                              description="The book's pages (notebooks/*.py) as commands.", epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="notebook_command", metavar="ACTION", required=True)
    ls = sub.add_parser("list", help="every page and its parameters (from its parameters cell)")
    ls.add_argument("name", nargs="?", help="only this page")
    ls.set_defaults(func=run_list)

    def common(q) -> None:
        q.add_argument("name", metavar="NAME", help="a page (see `list`) or the path of a jupytext .py source")
        q.add_argument("--out", type=Path, default=None, metavar="DIR", help="output folder (default: see below)")
        q.add_argument("--kernel", default="python3", help="Jupyter kernel (default: python3)")
        q.add_argument("--cwd", type=Path, default=None, help="the kernel's working directory (default: the repository)")
        q.add_argument("--allow-partial", action="store_true",
                       help="let the page read an incomplete copy of the authors' files (refused by default); "
                            "the page says it is partial")

    r = sub.add_parser("run", help="execute one page with papermill", epilog="default --out: runs/<NAME>-<hash of "
                       "the parameters>/", formatter_class=argparse.RawDescriptionHelpFormatter)
    common(r)
    r.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"),
                   help="a parameter value (YAML), repeatable")
    r.add_argument("--parameters", default=None, metavar="YAML", help="parameters as one YAML/JSON mapping "
                   "(what the pipeline passes); -p values win")
    r.add_argument("--as", dest="output_name", default=None, metavar="NAME",
                   help="name of the output notebook (default: the page's name)")
    r.add_argument("--html", action="store_true", help="also write a standalone HTML page next to the notebook")
    r.set_defaults(func=run_run)
    s = sub.add_parser("sweep", help="execute one page at every point of a parameter grid, with a summary table",
                       epilog="default --out: runs/<NAME>-sweep-<hash of the grid>/", 
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    common(s)
    s.add_argument("--grid", action="append", required=True, metavar="KEY=V1,V2,...",
                   help="a parameter and its values (comma-separated YAML; commas inside [...] or quotes do not "
                        "split: 'sources=[published],[toy,measured]' is two lists); repeat for a cartesian product")
    s.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"),
                   help="a fixed parameter value for every point")
    s.add_argument("--jobs", type=int, default=1, help="pages executed at once (default 1)")
    s.set_defaults(func=run_sweep)


def _parameters(args) -> dict:
    """The page parameters of --parameters and -p (the -p values win)."""
    import yaml

    from circuitdev.book.execute import parse_cli_value
    from circuitdev.errors import ConfigError

    given = {}
    if getattr(args, "parameters", None):
        try:
            given = yaml.safe_load(args.parameters) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"--parameters: not a YAML mapping ({err})") from None
        if not isinstance(given, dict):
            raise ConfigError("--parameters must be a mapping, e.g. '{bos_threshold: 20}'")
    given.update({k: parse_cli_value(v) for k, v in args.parameter})
    return given


def run_list(args) -> int:
    from circuitdev.book.execute import page_sources, source_of
    from circuitdev.book.parameters import BUILD_PARAMETERS, read_parameters, type_name

    pages = {args.name: source_of(args.name)} if args.name else page_sources()
    for name, source in pages.items():
        title = next((line.lstrip("# ").strip() for line in source.read_text().splitlines()
                      if line.startswith("# # ")), "")
        print(f"{name}  —  {title}")
        for d in read_parameters(source):
            print(f"    {d.name}: {d.annotation} = {d.default_text}" + (f"  # in {d.bounds}" if d.bounds else ""))
            if d.comment:
                print(f"        {d.comment}")
    print("\nevery page also takes the build's folders: " + ", ".join(
        f"{k} ({type_name(t)})" for k, t in BUILD_PARAMETERS.items()) + " — default: config/pipeline.yaml")
    return 0


def run_run(args) -> int:
    from circuitdev.book.build import current_folders
    from circuitdev.book.execute import check_page_parameters, execute_page, parameters_hash, source_of
    from circuitdev.paths import relative_to_repo

    source = source_of(args.name)
    parameters = check_page_parameters(source, _parameters(args), texts=dict(args.parameter))
    out = args.out or Path("runs") / f"{source.stem}-{parameters_hash(parameters)}"
    path = execute_page(source, out / f"{args.output_name or source.stem}.ipynb", parameters,
                        folders=current_folders(), cwd=args.cwd, kernel=args.kernel,
                        allow_partial=args.allow_partial)
    print(f"wrote {relative_to_repo(path)}")
    if args.html:
        from circuitdev.book.export import write_html

        print(f"wrote {relative_to_repo(write_html(path))}")
    return 0


def run_sweep(args) -> int:
    from circuitdev.book.build import current_folders
    from circuitdev.book.execute import check_page_parameters, check_run_options, parameters_hash, source_of
    from circuitdev.book.sweep import parse_grid, sweep
    from circuitdev.paths import relative_to_repo

    source = source_of(args.name)
    grid = parse_grid(args.grid)
    fixed = check_page_parameters(source, _parameters(args), texts=dict(args.parameter))
    check_run_options(args.cwd, args.kernel)
    out = args.out or Path("runs") / f"{source.stem}-sweep-{parameters_hash({'grid': grid, 'fixed': fixed})}"
    summary = sweep(source, grid, out, fixed=fixed, folders=current_folders(), jobs=args.jobs, cwd=args.cwd,
                    kernel=args.kernel, allow_partial=args.allow_partial, log=print)
    print(f"wrote {len(summary)} page(s) and {relative_to_repo(out / 'summary.csv')}")
    return 0
