"""Execute a page: jupytext source -> papermill (with parameters) -> an executed notebook, written atomically.

One executor for the pipeline (`make book`), `circuitdev notebook run` and the tests. Parameters are checked
against the page's `parameters` cell before a kernel starts (an unknown or ill-typed one is a ConfigError naming it
and the valid names); the page checks them again as it runs. The build's folders reach the kernel as environment
variables (`book.build`), so the executed page shows only the parameters that differ from its defaults. The
injected-parameters cell is tagged `remove-cell`: the page shows its parameters in a folded block of its own.
The output is written only when the whole page ran: a failed run leaves the output path untouched; the failed
notebook is kept in one place (`failed_dir`, default `$TMPDIR/circuitdev-failed/`), named in the error, and removed
by the page's next successful run. Before a kernel starts: the parameters (types and ranges), the output folder
(not a file, writable), the working directory and the kernel are checked (ConfigError, exit 2). The kernel writes
nothing to stderr of its own (`_kernel_options`); the page's temporary folder goes when the run ends, and one a
killed run left goes at the next run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

import yaml

from circuitdev.atomic import write_atomic
from circuitdev.book.build import BuildFolders
from circuitdev.book.parameters import BUILD_PARAMETERS, check_bounds, check_parameters, read_parameters
from circuitdev.errors import CircuitdevError, ConfigError
from circuitdev.paths import REPO_ROOT

NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
TEMP_PREFIX = "circuitdev-page-"  # + <pid>-<random>: a page's temporary folder
FAILED_DIR = Path(tempfile.gettempdir()) / "circuitdev-failed"  # where a failed page is kept (default)


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


def check_page_parameters(source: Path, parameters: dict[str, Any], *,
                          texts: dict[str, str] | None = None) -> dict[str, Any]:
    """`parameters` checked against the page's declared types and ranges (and the build parameters); normalised.
    `texts`: the command-line text of each value (for a quoting hint when YAML changed its type)."""
    docs = read_parameters(source)
    bad = [d.name for d in docs if d.type is None]
    if bad:
        raise ConfigError(f"{source}: cannot evaluate the type of parameter(s) {bad}")
    spec = {**{d.name: d.type for d in docs}, **BUILD_PARAMETERS}
    checked = check_parameters(parameters, spec, required=False, where=f"page {source.stem}", texts=texts)
    check_bounds(checked, docs, where=f"page {source.stem}")
    return checked


def check_output(output: Path) -> None:
    """The page's output path can be written: its folder is a folder (or can be made), and writable."""
    if output.is_dir():
        raise ConfigError(f"{output} is a folder; the output notebook needs a file name")
    folder = output.parent
    existing = next(p for p in [folder, *folder.parents] if p.exists())
    if not existing.is_dir():
        raise ConfigError(f"--out {folder}: {existing} is a file, not a folder; name a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {folder}: {existing} is not writable; name a folder you can write to")


def check_run_options(cwd: str | os.PathLike | None, kernel: str) -> None:
    """The kernel's working directory exists and the kernel is installed (else a ConfigError naming the choices)."""
    if cwd is not None and not Path(cwd).is_dir():
        raise ConfigError(f"--cwd {cwd}: no such folder (the kernel's working directory)")
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    manager = KernelSpecManager()
    try:
        manager.get_kernel_spec(kernel)
    except NoSuchKernel:
        known = ", ".join(sorted(manager.find_kernel_specs())) or "none"
        raise ConfigError(f"--kernel {kernel!r} is not installed; the kernels here: {known} "
                          "(`jupyter kernelspec list`)") from None


def failed_path(output: Path, failed_dir: str | os.PathLike | None = None) -> Path:
    """Where a failed run of `output` is kept: `failed_dir/<name>`, else one file per output path in FAILED_DIR."""
    if failed_dir is not None:
        return Path(failed_dir) / output.name
    tag = hashlib.sha256(str(output.resolve()).encode()).hexdigest()[:8]
    return FAILED_DIR / f"{output.stem}-{tag}{output.suffix}"


def _remove_stale_temp_folders() -> None:
    """Remove the page folders of runs that were killed (their process is gone); only this user's."""
    for folder in Path(tempfile.gettempdir()).glob(f"{TEMP_PREFIX}*-*"):
        pid = folder.name.removeprefix(TEMP_PREFIX).split("-")[0]
        try:
            if not pid.isdigit() or folder.stat().st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue


def _kernel_options() -> dict[str, Any]:
    """papermill's kernel settings for a page: CurveZMQ encryption where pyzmq and the kernel support it (else
    ipykernel warns about plain TCP on stderr), and a kernel manager that does not interrupt the kernel before
    shutting it down (nothing runs then -- the page finished or failed -- and that SIGINT races the kernel's last
    reply: "KeyboardInterrupt caught in kernel" on stderr)."""
    import zmq
    from jupyter_client.manager import AsyncKernelManager
    from traitlets.config import Config

    class PageKernelManager(AsyncKernelManager):
        async def _async_interrupt_kernel(self) -> None:
            if getattr(self, "shutting_down", False):
                return
            await super()._async_interrupt_kernel()

    config = Config()
    if zmq.has("curve"):
        config.KernelManager.transport_encryption = "auto"
    return {"config": config, "kernel_manager_class": PageKernelManager}


class _BuildParameterWarnings:
    """A logging filter for papermill's "Passed unknown parameter: NAME" about the build parameters (results_dir,
    published_dir, data_dir, panels): papermill knows only the page's `parameters` cell, while every page takes
    these too (`check_page_parameters` has checked them; the page reads them in `check_namespace`). Other names
    still warn."""

    def filter(self, record) -> bool:
        message = record.getMessage()
        prefix = "Passed unknown parameter: "
        return not (message.startswith(prefix) and message[len(prefix):] in BUILD_PARAMETERS)


@contextlib.contextmanager
def _quiet_build_parameters() -> Iterator[None]:
    import logging

    logger, quiet = logging.getLogger("papermill"), _BuildParameterWarnings()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


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


# A kernel that dies before it answers its first request ran no cell of the page, so it is started again. Two pages
# starting kernels at once (`make book` runs two jobs) can draw the same free port, and the later one dies with zmq's
# "Address already in use" (seen once in a test build on two cores).
KERNEL_DIED_AT_START = "Kernel died before replying to kernel_info"
KERNEL_START_RETRIES = 2


def execute_page(source: str | os.PathLike, output: str | os.PathLike, parameters: dict[str, Any] | None = None,
                 *, folders: BuildFolders | None = None, cwd: str | os.PathLike | None = None,
                 kernel: str = "python3", failed_dir: str | os.PathLike | None = None,
                 allow_partial: bool = False) -> Path:
    """Run page `source` with `parameters` and write the executed notebook to `output` (atomically).

    `folders`: the build's folders, passed to the kernel as environment variables (default: inherit this
    process's). `cwd`: the kernel's working directory (default: the repository). `failed_dir`: where a failed run
    is kept (default: see `failed_path`). `allow_partial`: the page may read an incomplete copy of the authors'
    files, marked partial (`circuitdev.sources.published.load_published`). Raises ConfigError for a bad parameter,
    output, working directory or kernel (before anything runs) and PageFailed when a cell or the kernel fails."""
    import jupytext
    import nbformat
    import papermill as pm

    from circuitdev.sources.published import PARTIAL_ENV

    source = Path(source)
    parameters = check_page_parameters(source, dict(parameters or {}))
    output = Path(output)
    check_output(output)
    check_run_options(cwd, kernel)
    notebook = jupytext.read(source)
    env = {**(folders.environment() if folders is not None else {}), **({PARTIAL_ENV: "1"} if allow_partial else {})}
    kept = failed_path(output, failed_dir)
    _remove_stale_temp_folders()
    with tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}{os.getpid()}-") as tmp:
        src, out = Path(tmp) / f"{source.stem}.ipynb", Path(tmp) / output.name
        nbformat.write(notebook, src)
        for attempt in range(KERNEL_START_RETRIES + 1):
            try:
                with _environment(env), _quiet_build_parameters():
                    executed = pm.execute_notebook(str(src), str(out), parameters=parameters, kernel_name=kernel,
                                                   language="python", cwd=str(cwd or REPO_ROOT), progress_bar=False,
                                                   **_kernel_options())
                break
            except pm.PapermillExecutionError as err:
                _keep(out, kept)
                raise PageFailed(f"page {source.stem} failed in cell {err.exec_count}: {err.ename}: {err.evalue} "
                                 f"(the failed notebook: {kept})") from None
            except (RuntimeError, OSError) as err:  # the kernel died or could not start
                if attempt < KERNEL_START_RETRIES and KERNEL_DIED_AT_START in str(err):
                    continue  # it ran no cell: a fresh kernel, on fresh ports
                _keep(out, kept)
                raise PageFailed(f"page {source.stem}: the kernel failed ({type(err).__name__}: {err}); the "
                                 f"notebook so far: {kept}") from None
    for cell in executed.cells:
        tags = cell.metadata.setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
    write_atomic(output, nbformat.writes(executed))
    kept.unlink(missing_ok=True)  # this page ran: the last failure is history
    return output


def _keep(out: Path, kept: Path) -> None:
    """Keep the failed notebook (what papermill wrote of it) at `kept`, replacing an older failure."""
    if out.is_file():
        write_atomic(kept, out.read_bytes())
    else:
        kept.unlink(missing_ok=True)


def parameters_hash(parameters: dict[str, Any]) -> str:
    """A short hash of a parameter set (a default output folder per parameter set)."""
    import hashlib

    return hashlib.sha256(json.dumps(parameters, sort_keys=True, default=str).encode()).hexdigest()[:8]
