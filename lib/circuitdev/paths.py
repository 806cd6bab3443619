"""Where things live: the repository, its data folder, the probe records and the authors' published files.

One lookup each, used by the library, the command line, the Snakefile and the notebooks. An environment variable
overrides each default (the pipeline sets them for every job it runs, so a notebook finds the folders of the build
that executes it):

    CIRCUITDEV_DATA        the data folder: panels/, toy/ ...       default <repository>/data
    CIRCUITDEV_RESULTS     probe records <panel>/<revision>.*       default <data>/results
    CIRCUITDEV_PUBLISHED   the authors' published files             default <data>/published

Nothing here guesses a folder outside the repository: a copy of the published files elsewhere is named with
CIRCUITDEV_PUBLISHED (or `make book PUBLISHED_DIR=...`).
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]  # lib/circuitdev/paths.py -> the repository
DATA_ENV, RESULTS_ENV, PUBLISHED_ENV = "CIRCUITDEV_DATA", "CIRCUITDEV_RESULTS", "CIRCUITDEV_PUBLISHED"


def _from_env(name: str) -> Path | None:
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    path = Path(value).expanduser().resolve()
    if path.exists() and not path.is_dir():  # say so here: "missing" later would send the user looking elsewhere
        from circuitdev.errors import ConfigError

        raise ConfigError(f"{name}={value} names a file, not a folder; set {name} to a folder (or unset it for the "
                          "default)")
    return path


def data_dir() -> Path:
    """The data folder: $CIRCUITDEV_DATA, else the repository's data/."""
    return _from_env(DATA_ENV) or REPO_ROOT / "data"


def panels_dir() -> Path:
    """Panel files: <data>/panels (the shipped real panels and the toy panels written by `circuitdev toy train`)."""
    return data_dir() / "panels"


def toy_dir() -> Path:
    """Toy checkpoints and their corpus: <data>/toy."""
    return data_dir() / "toy"


def results_dir() -> Path:
    """Probe records: $CIRCUITDEV_RESULTS, else <data>/results."""
    return _from_env(RESULTS_ENV) or data_dir() / "results"


def published_dir() -> Path:
    """The authors' published files: $CIRCUITDEV_PUBLISHED, else <data>/published (their default home, filled by
    `circuitdev published fetch` or by `make book`). The folder may not exist: callers say what that means."""
    return _from_env(PUBLISHED_ENV) or data_dir() / "published"


def relative_to_repo(path: str | os.PathLike | None) -> str | None:
    """A path as a reader should see it: relative to the repository when inside it, else unchanged."""
    if path is None:
        return None
    p = Path(path).expanduser()
    try:
        return str(p.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)
