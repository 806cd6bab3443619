"""Execute a page: jupytext source -> papermill (with parameters) -> an executed notebook, written atomically.

One executor for the pipeline (`make book`), `circuitdev notebook run` and the tests. Parameters are checked
against the page's `parameters` cell before a kernel starts (an unknown or ill-typed one is a ConfigError naming it
and the valid names); the page checks them again as it runs. The build's folders reach the kernel as environment
variables (`book.build`), so the executed page shows only the parameters that differ from its defaults. The
injected-parameters cell is tagged `remove-cell`: the page shows its parameters in a folded block of its own.
The output is written only when the whole page ran: a failed run leaves the output path untouched (the failed
notebook is kept next to the log, and the error names it).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

import yaml

from circuitdev.atomic import write_atomic
from circuitdev.book.build import BuildFolders
from circuitdev.book.parameters import check_parameters, spec_of
from circuitdev.errors import CircuitdevError, ConfigError
from circuitdev.paths import REPO_ROOT

NOTEBOOKS_DIR = REPO_ROOT / "notebooks"


class PageFailed(CircuitdevError):
    """A page raised while it ran; the message names the cell's error and where the failed notebook is."""


def page_sources() -> dict[str, Path]:
    """The book's pages: notebooks/<name>.py by name."""
    return {p.stem: p for p in sorted(NOTEBOOKS_DIR.glob("*.py"))}


def source_of(name_or_path: str | os.PathLike) -> Path:
    """A page by name (`f2_shapes`) or by the path of a jupytext source."""
    path = Path(name_or_path)
    if path.suffix == ".py" and path.is_file():
        return path.resolve()
    pages = page_sources()
    if str(name_or_path) in pages:
        return pages[str(name_or_path)]
    raise ConfigError(f"no page named {str(name_or_path)!r}; the pages are {', '.join(pages)} "
                      "(`circuitdev notebook list`), or give the path of a jupytext .py source")


def parse_cli_value(text: str) -> Any:
    """A `-p KEY VALUE` value as YAML: 20 -> 20, 0.5 -> 0.5, null -> None, "[a, b]" -> a list, true -> True."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def format_value_for_cli(value: Any) -> str:
    """The inverse of `parse_cli_value`, quoted for a shell where needed."""
    import shlex

    text = yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()
    text = text.removesuffix("\n...").removesuffix("...").strip()
    return shlex.quote(text)


def check_page_parameters(source: Path, parameters: dict[str, Any]) -> dict[str, Any]:
    """`parameters` checked against the page's declared types (and the build parameters); normalised."""
    return check_parameters(parameters, spec_of(source), required=False, where=f"page {source.stem}")


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def execute_page(source: str | os.PathLike, output: str | os.PathLike, parameters: dict[str, Any] | None = None,
                 *, folders: BuildFolders | None = None, cwd: str | os.PathLike | None = None,
                 kernel: str = "python3", failed_dir: str | os.PathLike | None = None) -> Path:
    """Run page `source` with `parameters` and write the executed notebook to `output` (atomically).

    `folders`: the build's folders, passed to the kernel as environment variables (default: inherit this
    process's). `cwd`: the kernel's working directory (default: the repository). Raises ConfigError for a bad
    parameter (before anything runs) and PageFailed when a cell fails."""
    import jupytext
    import nbformat
    import papermill as pm

    source = Path(source)
    parameters = check_page_parameters(source, dict(parameters or {}))
    output = Path(output)
    notebook = jupytext.read(source)
    env = folders.environment() if folders is not None else {}
    with tempfile.TemporaryDirectory(prefix="circuitdev-page-") as tmp:
        src, out = Path(tmp) / f"{source.stem}.ipynb", Path(tmp) / output.name
        nbformat.write(notebook, src)
        try:
            with _environment(env):
                executed = pm.execute_notebook(str(src), str(out), parameters=parameters, kernel_name=kernel,
                                               language="python", cwd=str(cwd or REPO_ROOT), progress_bar=False)
        except pm.PapermillExecutionError as err:
            kept = Path(failed_dir or tempfile.mkdtemp(prefix="circuitdev-failed-")) / output.name
            kept.parent.mkdir(parents=True, exist_ok=True)
            if out.is_file():
                kept.write_bytes(out.read_bytes())
            raise PageFailed(f"page {source.stem} failed in cell {err.exec_count}: {err.ename}: {err.evalue} "
                             f"(the failed notebook: {kept})") from None
    for cell in executed.cells:
        tags = cell.metadata.setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
    write_atomic(output, nbformat.writes(executed))
    return output


def parameters_hash(parameters: dict[str, Any]) -> str:
    """A short hash of a parameter set (a default output folder per parameter set)."""
    import hashlib

    return hashlib.sha256(json.dumps(parameters, sort_keys=True, default=str).encode()).hexdigest()[:8]
