"""What computed a result: the package versions and the git commit of the running code (for sidecars and the
provenance lines of the book's figures)."""

from __future__ import annotations

import functools
import platform
import subprocess
from typing import Any

from circuitdev.paths import REPO_ROOT

RECORDED_PACKAGES = ("circuitdev", "torch", "transformers", "nnsight", "numpy", "pandas", "pyarrow", "huggingface-hub")


@functools.lru_cache(maxsize=1)
def package_versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for pkg in RECORDED_PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "absent"
    return out


@functools.lru_cache(maxsize=1)
def git_state() -> dict[str, Any]:
    """Commit of the code that runs now, and whether lib/ differs from it (None outside a git checkout)."""
    try:
        commit = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10)
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no", "--",
                                "lib"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {
        "commit": commit.stdout.strip() if commit.returncode == 0 else None,
        "dirty": bool(dirty.stdout.strip()) if dirty.returncode == 0 else None,
    }


def code_commit() -> str:
    """The running code's commit for a provenance line: "1a2b3c4d", "1a2b3c4d+dirty" or "uncommitted"."""
    git = git_state()
    if not git.get("commit"):
        return "uncommitted"
    return git["commit"][:8] + ("+dirty" if git.get("dirty") else "")
