"""One page at every point of a parameter grid, and a summary table of what each run glued.

`sweep(source, {"bos_threshold": [10, 30, 100]}, out)` executes the page once per point of the grid's cartesian
product into `out/<point>/<page>.ipynb` and writes `out/summary.csv`: one row per point, the grid's parameters,
then the fixed ones (`-p`), then every scalar the page glued (its unformatted value where the page glued a number,
else the glued text).

Each point keeps what it was computed from in `out/<point>/point.json`: every parameter (grid and fixed,
normalised), the page source's sha256 and the identity of the folders it read (probe records and the authors'
files: each file's path, size and modification time, hashed). A sweep resumes: a point whose record matches is
reused, any other (other fixed parameters, an edited page, new records or files, a run that never finished) is
recomputed. Duplicate values run once (`10` and `10.0` are one point). A relative folder parameter (`results_dir`,
`published_dir`, `data_dir`) means what it means to the page -- relative to the kernel's working directory (`cwd`,
default the repository) -- and is made absolute before the point's inputs are checked and the page runs, so the
check and the page read the same folder wherever the sweep is started from.

Grid syntax (`parse_grid`): `KEY=V1,V2,...`, each value YAML; commas inside brackets or quotes do not split, so a
list-valued parameter sweeps as `sources=[published],[toy,measured]` (two points).
"""

from __future__ import annotations

import hashlib
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
from circuitdev.book.execute import check_output, check_page_parameters, execute_page, parse_cli_value
from circuitdev.errors import ConfigError

POINT_FILE = "point.json"
FOLDER_PARAMETERS = ("results_dir", "published_dir", "data_dir")


def absolute_folders(parameters: dict[str, Any], base: Path) -> dict[str, Any]:
    """`parameters` with each relative folder parameter made absolute against `base` (the kernel's working
    directory: where the page would resolve it); "none" and empty values stay."""
    out = dict(parameters)
    for key in FOLDER_PARAMETERS:
        value = out.get(key)
        if isinstance(value, str) and value.strip() and value.strip().lower() not in ("none", "null"):
            path = Path(value).expanduser()
            out[key] = str(path if path.is_absolute() else (Path(base) / path).resolve())
    return out


def split_values(text: str) -> list[str]:
    """"10,30" -> ["10", "30"]; "[a, b],[c]" -> ["[a, b]", "[c]"]: commas split only outside brackets and quotes."""
    parts, depth, quote, current = [], 0, "", []
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    if depth or quote:
        raise ConfigError(f"--grid values {text!r}: unbalanced {'quote' if quote else 'brackets'}")
    parts.append("".join(current))
    return parts


def parse_grid(items: list[str]) -> dict[str, list[Any]]:
    """["bos_threshold=10,30,100", "rule=per-class,best-class"] -> {name: [values]} (each value YAML; see the
    module docstring for lists). A value given twice is kept once."""
    grid: dict[str, list[Any]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not key or not values.strip():
            raise ConfigError(f"--grid expects KEY=V1,V2,..., got {item!r}")
        if key in grid:
            raise ConfigError(f"--grid names {key!r} twice")
        texts = [v.strip() for v in split_values(values)]
        if any(not t for t in texts):
            raise ConfigError(f"--grid {item!r}: an empty value (two commas in a row?)")
        parsed = [parse_cli_value(t) for t in texts]
        grid[key] = [v for i, v in enumerate(parsed) if _key(v) not in {_key(u) for u in parsed[:i]}]
    return grid


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def point_id(point: dict[str, Any]) -> str:
    """A folder name for a grid point: "bos_threshold=10,rule=best-class" (+ a short hash where characters had to
    be replaced, so two points never share a folder)."""
    text = ",".join(f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in point.items())
    safe = re.sub(r"[^A-Za-z0-9._=,+-]", "_", text)
    return safe if safe == text else f"{safe}-{hashlib.sha256(text.encode()).hexdigest()[:6]}"


def folder_identity(folder: Path | None) -> str:
    """A hash of every file under `folder` (relative path, size, modification time): it changes when a file is
    added, removed or rewritten. "absent" when there is no such folder, "none" when no folder is read."""
    if folder is None:
        return "none"
    folder = Path(folder)
    if not folder.is_dir():
        return "absent"
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not _bookkeeping(p)):
        st = path.stat()
        digest.update(f"{path.relative_to(folder)}\t{st.st_size}\t{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def _bookkeeping(path: Path) -> bool:
    """A folder lock (`circuitdev.locks`: rewritten by every run that writes) or a temporary file: not data."""
    return path.name.startswith(".") and path.name.endswith((".lock", ".tmp"))


def point_inputs(source: Path, parameters: dict[str, Any], folders: BuildFolders | None,
                 allow_partial: bool = False, identity: Callable[[Path | None], str] = folder_identity
                 ) -> dict[str, Any]:
    """What a point is computed from: its parameters, the page source, the folders it reads (a `-p results_dir` /
    `-p published_dir` wins over the build's folders, as in the page)."""
    from circuitdev import paths

    results = parameters.get("results_dir") or (folders.results_dir if folders else paths.results_dir())
    if "published_dir" in parameters:
        published = parameters["published_dir"]
        published = None if published in (None, "none", "null", "") else published
    else:
        published = folders.published_dir if folders else paths.published_dir()
    return _as_json({"parameters": parameters, "page_sha256": hashlib.sha256(Path(source).read_bytes()).hexdigest(),
            "allow_partial": allow_partial,
            "results_dir": {"path": str(results), "identity": identity(Path(results))},
            "published_dir": {"path": str(published) if published else None,
                              "identity": identity(Path(published) if published else None)}})


def _as_json(value: Any) -> Any:
    """`value` as it reads back from point.json (so a record compares equal to what it recorded)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _recorded(folder: Path) -> dict | None:
    try:
        return json.loads((folder / POINT_FILE).read_text())
    except (OSError, ValueError):
        return None


def _differences(old: dict | None, new: dict) -> str:
    if old is None:
        return "no record of its inputs"
    changed = [k for k in new if k != "parameters" and old.get(k) != new[k]]
    params = sorted(k for k in {*old.get("parameters", {}), *new["parameters"]}
                    if old.get("parameters", {}).get(k) != new["parameters"].get(k))
    return ", ".join([*(f"parameter {k}" for k in params), *changed])


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
          allow_partial: bool = False, log: Callable[[str], None] = lambda msg: None) -> pd.DataFrame:
    """Execute `source` at every grid point (see the module docstring); returns the summary table."""
    if jobs < 1:
        raise ConfigError(f"--jobs must be >= 1, got {jobs}")
    fixed = dict(fixed or {})
    clash = set(fixed) & set(grid)
    if clash:
        raise ConfigError(f"{sorted(clash)} given both as a grid and as a fixed parameter")
    out = Path(out)
    check_output(out / "summary.csv")
    from circuitdev.paths import REPO_ROOT

    base = Path(cwd) if cwd is not None else REPO_ROOT  # where the page resolves a relative folder
    fixed = absolute_folders(check_page_parameters(source, fixed), base)
    points, seen = [], set()
    for values in itertools.product(*grid.values()):  # every point checked before the first one runs
        checked = absolute_folders(check_page_parameters(source, {**fixed, **dict(zip(grid, values))}), base)
        point = {k: checked[k] for k in grid}
        if _key(point) in seen:
            log(f"{point_id(point)}: given twice, runs once")
            continue
        seen.add(_key(point))
        points.append(point)

    identities: dict[Path | None, str] = {}  # each folder hashed once, before any point runs

    def identity(folder: Path | None) -> str:
        if folder not in identities:
            identities[folder] = folder_identity(folder)
        return identities[folder]

    inputs_of = {_key(p): point_inputs(source, {**fixed, **p}, folders, allow_partial, identity) for p in points}

    def run(point: dict[str, Any]) -> Path:
        folder = out / point_id(point)
        path = folder / f"{source.stem}.ipynb"
        inputs = inputs_of[_key(point)]
        recorded = _recorded(folder)
        if path.is_file() and recorded == inputs:
            log(f"{point_id(point)}: already there, reused")
            return path
        why = f" ({_differences(recorded, inputs)} changed)" if path.is_file() else ""
        log(f"{point_id(point)}: running{why}")
        execute_page(source, path, {**fixed, **point}, folders=folders, cwd=cwd, kernel=kernel,
                     allow_partial=allow_partial)
        write_atomic(folder / POINT_FILE, json.dumps(inputs, indent=1, sort_keys=True, default=str) + "\n")
        return path

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        paths = list(pool.map(run, points))
    rows = [{**{k: _cell(v) for k, v in {**point, **fixed}.items()}, **glued_values(path)}
            for point, path in zip(points, paths)]
    summary = pd.DataFrame(rows)
    write_atomic(out / "summary.csv", summary.to_csv(index=False))
    return summary


def _cell(value: Any) -> Any:
    """A fixed parameter as a summary cell: scalars as they are, lists and mappings as JSON."""
    return json.dumps(value) if isinstance(value, (list, dict)) else value

