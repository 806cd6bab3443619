"""One page at every point of a parameter grid, and a summary table of what each run glued.

`sweep(source, {"bos_threshold": [10, 30, 100]}, out)` executes the page once per point of the grid's cartesian
product into `out/<point>/<page>.ipynb` (a point already there is reused: a sweep resumes) and writes
`out/summary.csv`: one row per point, its parameters, then every scalar the page glued (its unformatted value where
the page glued a number, else the glued text).
"""

from __future__ import annotations

import itertools
import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from circuitdev.atomic import write_atomic
from circuitdev.book.build import BuildFolders
from circuitdev.book.display import GLUE_PREFIX
from circuitdev.book.execute import check_page_parameters, execute_page, parse_cli_value
from circuitdev.errors import ConfigError


def parse_grid(items: list[str]) -> dict[str, list[Any]]:
    """["bos_threshold=10,30,100", "rule=per-class,best-class"] -> {name: [values]} (each value YAML)."""
    grid: dict[str, list[Any]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not key.strip() or not values.strip():
            raise ConfigError(f"--grid expects KEY=V1,V2,..., got {item!r}")
        if key.strip() in grid:
            raise ConfigError(f"--grid names {key.strip()!r} twice")
        grid[key.strip()] = [parse_cli_value(v.strip()) for v in values.split(",")]
    return grid


def point_id(point: dict[str, Any]) -> str:
    """A folder name for a grid point: "bos_threshold=10,rule=best-class"."""
    text = ",".join(f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in point.items())
    return re.sub(r"[^A-Za-z0-9._=,+-]", "_", text)


def glued_values(notebook_path: Path) -> dict[str, Any]:
    """Every value a page glued, by key: the unformatted scalar where one was kept, else the glued text."""
    import nbformat

    out = {}
    for cell in nbformat.read(notebook_path, as_version=4).cells:
        for output in cell.get("outputs", []):
            name = (output.get("metadata", {}).get("scrapbook") or {}).get("name")
            if not name:
                continue
            value = (output.get("metadata", {}).get("circuitdev") or {}).get("value")
            if value is None:
                text = output.get("data", {}).get(GLUE_PREFIX + "text/plain", "")
                value = text[1:-1] if len(text) > 1 and text[0] == text[-1] and text[0] in "'\"" else text
            out[name] = value
    return out


def sweep(source: Path, grid: dict[str, list[Any]], out: Path, *, fixed: dict[str, Any] | None = None,
          folders: BuildFolders | None = None, jobs: int = 1, cwd: Path | None = None, kernel: str = "python3",
          log: Callable[[str], None] = lambda msg: None) -> pd.DataFrame:
    """Execute `source` at every grid point (see the module docstring); returns the summary table."""
    if jobs < 1:
        raise ConfigError(f"--jobs must be >= 1, got {jobs}")
    fixed = dict(fixed or {})
    clash = set(fixed) & set(grid)
    if clash:
        raise ConfigError(f"{sorted(clash)} given both as a grid and as a fixed parameter")
    points = [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    for point in points:  # every point checked before the first one runs
        check_page_parameters(source, {**fixed, **point})

    def run(point: dict[str, Any]) -> Path:
        path = Path(out) / point_id(point) / f"{source.stem}.ipynb"
        if path.is_file():
            log(f"{point_id(point)}: already there, reused")
            return path
        log(f"{point_id(point)}: running")
        return execute_page(source, path, {**fixed, **point}, folders=folders, cwd=cwd, kernel=kernel)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        paths = list(pool.map(run, points))
    rows = [{**point, **glued_values(path)} for point, path in zip(points, paths)]
    summary = pd.DataFrame(rows)
    write_atomic(Path(out) / "summary.csv", summary.to_csv(index=False))
    return summary
