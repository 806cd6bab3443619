"""`circuitdev doctor`: is this environment able to build the book? A list of small checks, one line each.

A check is a function of no arguments returning a `Result` (name, status "ok" | "warn" | "fail", a one-line message,
a fix hint). `run_checks(checks)` runs them, turning a check that raises into a "fail" result, and `exit_code(results)`
is 0 unless one failed (2). `BASE_CHECKS` are the environment checks below. A later check set builds on this module
(e.g. the workshop's, `circuitdev.workshop.doctor.WORKSHOP_CHECKS`: toy checkpoints present or trainable in time, a
10-second probe) and never the other way round: the command layer composes the sets (`circuitdev.commands.doctor`).

Standard library only at import; torch and jupyter_client are imported inside their checks.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

STATUSES = ("ok", "warn", "fail")
MIN_PYTHON = (3, 10)
MIN_FREE_GB = 5.0
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
CPU_BUILD_MB = 200  # the torch 2.13.0+cpu wheel is 192 MB (README, "Two commands")


@dataclass(frozen=True)
class Result:
    name: str
    status: str  # "ok" | "warn" | "fail"
    message: str
    fix: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {self.status!r}")


Check = Callable[[], Result]


def run_checks(checks: Iterable[Check]) -> list[Result]:
    """Each check's result, in order; a check that raises becomes a "fail" naming the exception."""
    results = []
    for check in checks:
        try:
            result = check()
        except Exception as err:  # noqa: BLE001 - a broken check is a finding, not a crash
            name = getattr(check, "__name__", "check").removeprefix("check_")
            result = Result(name, "fail", f"the check itself failed: {type(err).__name__}: {err}")
        results.append(result)
    return results


def exit_code(results: Iterable[Result]) -> int:
    """0 when every result is ok or warn, 2 when one failed (the CLI's user-error code)."""
    return 2 if any(r.status == "fail" for r in results) else 0


def repo_root() -> Path | None:
    """The checkout this package runs from (lib/circuitdev/ -> ../..), when its pyproject.toml is there."""
    root = Path(__file__).resolve().parents[2]
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and re.search(r'^name\s*=\s*"circuitdev"', pyproject.read_text(), re.M):
        return root
    return None


# --- Python ---------------------------------------------------------------------------------------------------


def check_python(version_info: tuple = tuple(sys.version_info[:3]), executable: str = sys.executable) -> Result:
    version = ".".join(map(str, version_info))
    if tuple(version_info[:2]) < MIN_PYTHON:
        return Result("python", "fail", f"Python {version} ({executable}); circuitdev needs >= 3.10",
                      "create the environment with a newer Python: `make venv PYTHON=python3.11`")
    return Result("python", "ok", f"Python {version} ({executable})")


# --- the pinned packages ---------------------------------------------------------------------------------------

_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?:==\s*([^\s;,]+))?")


def parse_requirement(text: str) -> tuple[str, str | None]:
    """("name", "pinned version" or None) of a requirement string such as "torch==2.13.0" or "pyyaml"."""
    match = _REQ.match(text)
    if not match:
        raise ValueError(f"not a requirement: {text!r}")
    return match.group(1), match.group(2)


def project_requirements(pyproject: Path | None) -> tuple[list[str], str]:
    """([requirement strings], where they came from): pyproject.toml's [project] dependencies when it is given,
    else the installed circuitdev's metadata (what it was installed with), else []."""
    if pyproject is not None and pyproject.is_file():
        text = pyproject.read_text()
        try:
            import tomllib  # Python >= 3.11

            deps = tomllib.loads(text)["project"]["dependencies"]
        except ModuleNotFoundError:  # Python 3.10: the list between `dependencies = [` and `]`
            block = re.search(r"^dependencies\s*=\s*\[(.*?)^\]", text, re.M | re.S)
            deps = re.findall(r'"([^"]+)"', block.group(1)) if block else []
        return list(deps), str(pyproject)
    try:
        deps = [r for r in (md.requires("circuitdev") or []) if "extra ==" not in r]
        return deps, "the installed circuitdev metadata"
    except md.PackageNotFoundError:
        return [], "nothing (circuitdev is not installed)"


def _same_version(installed: str, pinned: str) -> bool:
    return installed.split("+")[0] == pinned.split("+")[0]  # 2.13.0+cpu satisfies ==2.13.0


def _normal(dist_name: str) -> str:
    return re.sub(r"[-_.]+", "-", dist_name).lower()  # PEP 503


def _importable(dist_name: str, top_levels: dict[str, list[str]]) -> bool:
    modules = top_levels.get(_normal(dist_name), [])
    return not modules or any(importlib.util.find_spec(m) is not None for m in modules)


def check_packages(pyproject: Path | None = None, version: Callable[[str], str] = md.version,
                   top_levels: dict[str, list[str]] | None = None) -> Result:
    """Every dependency installed and importable; the `==` pins at their versions (listed with them)."""
    if pyproject is None:
        root = repo_root()
        pyproject = root / "pyproject.toml" if root else None
    requirements, source = project_requirements(pyproject)
    if not requirements:
        return Result("packages", "warn", f"no dependency list found (read {source})",
                      "install the project: `make venv` (or `pip install -e .`)")
    if top_levels is None:
        top_levels = {}
        for module, dists in md.packages_distributions().items():
            if module.isidentifier() and not module.startswith("_"):
                for dist in dists:
                    top_levels.setdefault(_normal(dist), []).append(module)
    missing, wrong, pinned, unimportable = [], [], [], []
    for requirement in requirements:
        name, pin = parse_requirement(requirement)
        try:
            installed = version(name)
        except md.PackageNotFoundError:
            missing.append(name)
            continue
        if not _importable(name, top_levels):
            unimportable.append(name)
        if pin is not None and _same_version(installed, pin):
            pinned.append(f"{name} {installed}")
        elif pin is not None:
            wrong.append(f"{name} {installed} (pinned {pin})")
    fix = "re-create the environment: `rm -rf .venv && make venv`"
    if missing or unimportable:
        parts = ([f"missing: {', '.join(missing)}"] if missing else []) + \
                ([f"installed but not importable: {', '.join(unimportable)}"] if unimportable else [])
        return Result("packages", "fail", "; ".join(parts) + f" (from {source})", fix)
    if wrong:
        return Result("packages", "warn", f"not at their pins: {', '.join(wrong)} (from {source})", fix)
    return Result("packages", "ok", f"{len(requirements)} dependencies importable; pinned: {', '.join(pinned)}")


# --- torch: which build --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TorchBuild:
    version: str
    kind: str  # "CPU" | "CUDA 12.8" | "ROCm 6.4"
    gpu_build: bool  # built for CUDA or ROCm
    cuda_available: bool  # a usable GPU (CUDA or ROCm) is there
    mps_available: bool
    devices: tuple[str, ...] = ()


def torch_build(torch) -> TorchBuild:
    """Classify a torch module (or any object shaped like it): the build, and which accelerators it can use."""
    version = str(getattr(torch, "__version__", "?"))
    cuda_version = getattr(torch.version, "cuda", None)
    hip_version = getattr(torch.version, "hip", None)
    if hip_version:
        kind = f"ROCm {hip_version}"
    elif cuda_version:
        kind = f"CUDA {cuda_version}"
    else:
        kind = "CPU"
    gpu_build = kind != "CPU"
    cuda_available = bool(torch.cuda.is_available()) if gpu_build else False
    devices: tuple[str, ...] = ()
    if cuda_available:
        try:
            devices = tuple(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
        except Exception:  # noqa: BLE001 - names are a nicety
            devices = ()
    mps = getattr(getattr(torch, "backends", None), "mps", None)
    mps_available = bool(mps.is_available()) if mps is not None and hasattr(mps, "is_available") else False
    return TorchBuild(version, kind, gpu_build, cuda_available, mps_available, devices)


def gpu_libraries_bytes() -> int:
    """Bytes the installed CUDA libraries take (the nvidia-*, cuda-* and triton distributions, from their RECORD)."""
    total = 0
    for dist in md.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith(("nvidia-", "nvidia_", "cuda-", "cuda_")) or name in ("triton", "pytorch-triton"):
            total += sum(f.size or 0 for f in (dist.files or []))
    return total


def torch_result(build: TorchBuild, gpu_bytes: int = 0) -> Result:
    """The torch line: build and version; a warning for a GPU build on a machine where no GPU answers."""
    accelerators = []
    if build.cuda_available:
        names = ", ".join(build.devices) if build.devices else "GPU"
        accelerators.append(f"{len(build.devices) or 1} GPU(s): {names}")
    if build.mps_available:
        accelerators.append("MPS (Apple GPU) available")
    where = "; ".join(accelerators) if accelerators else "runs on the CPU"
    message = f"torch {build.version}, {build.kind} build; {where}"
    if build.gpu_build and not build.cuda_available:
        size = f"{gpu_bytes / 1e9:.1f} GB of NVIDIA libraries" if gpu_bytes else "with its NVIDIA libraries"
        return Result(
            "torch", "warn",
            f"torch {build.version}: a {build.kind} build of torch ({size}) on a machine without a GPU; "
            f"a CPU build is ~{CPU_BUILD_MB} MB",
            "re-create the environment with the CPU build: `rm -rf .venv && make venv TORCH_INDEX=cpu`; "
            "on a machine that has a GPU, check its driver with `nvidia-smi`",
        )
    return Result("torch", "ok", message)


def check_torch() -> Result:
    try:
        import torch
    except Exception as err:  # noqa: BLE001 - ImportError, or a broken CUDA library load
        return Result("torch", "fail", f"torch does not import: {type(err).__name__}: {err}",
                      "re-create the environment: `rm -rf .venv && make venv`")
    build = torch_build(torch)
    return torch_result(build, gpu_libraries_bytes() if build.gpu_build and not build.cuda_available else 0)


# --- the Jupyter kernel papermill runs ------------------------------------------------------------------------------


def check_kernel(kernel_name: str = "python3") -> Result:
    fix = f"`{sys.executable} -m ipykernel install --sys-prefix --name {kernel_name}` (or `make venv`)"
    try:
        from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    except ImportError as err:
        return Result("kernel", "fail", f"jupyter_client is not installed ({err}); papermill cannot run notebooks",
                      fix)
    try:
        spec = KernelSpecManager().get_kernel_spec(kernel_name)
    except NoSuchKernel:
        return Result("kernel", "fail", f"no Jupyter kernel {kernel_name!r}: papermill cannot execute the notebooks",
                      fix)
    command = spec.argv[0] if spec.argv else "?"
    # jupyter_client starts a kernel whose command is plain `python` with this interpreter (sys.executable).
    runs = sys.executable if command in ("python", "python3", f"python{sys.version_info[0]}.{sys.version_info[1]}") \
        else command
    return Result("kernel", "ok", f"Jupyter kernel {kernel_name!r} ({spec.resource_dir}) runs {runs}")


# --- disk --------------------------------------------------------------------------------------------------------------


def check_disk(path: Path | None = None, min_free_gb: float = MIN_FREE_GB) -> Result:
    path = path or repo_root() or Path.cwd()
    free_gb = shutil.disk_usage(path).free / 1e9
    message = f"{free_gb:.1f} GB free in {path}"
    if free_gb < min_free_gb:
        return Result("disk", "warn", f"{message}; the book, the toy panel and caches want a few GB",
                      "free some space (e.g. `make clean-book`, the Hugging Face cache: `hf cache rm`)")
    return Result("disk", "ok", message)


BASE_CHECKS: list[Check] = [check_python, check_packages, check_torch, check_kernel, check_disk]
