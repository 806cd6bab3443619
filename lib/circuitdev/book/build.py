"""The build a page belongs to: where its records, the authors' files and the panels are.

A page takes them, in this order, from the build parameters it was given (papermill `-p results_dir ...`), from the
environment that the pipeline and `circuitdev notebook run` set for it (CIRCUITDEV_RESULTS, CIRCUITDEV_PUBLISHED,
CIRCUITDEV_DATA, CIRCUITDEV_PANELS), or from the defaults of `circuitdev.paths` -- so a page run by hand in Jupyter
reads the same folders as `make book`. CIRCUITDEV_PUBLISHED=none (or `published_dir=None`) leaves the authors' files
out on purpose.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from circuitdev import paths
from circuitdev.errors import ConfigError
from circuitdev.schema import replica_suffix

PANELS_ENV = "CIRCUITDEV_PANELS"  # a JSON list of the record panels a build reads
NO_PUBLISHED = "none"


@dataclass(frozen=True)
class BuildFolders:
    results_dir: Path
    data_dir: Path
    published_dir: Path | None  # None: this build leaves the authors' files out
    panels: list[str] | None  # None: every panel with records in results_dir

    def environment(self) -> dict[str, str]:
        """The same folders as environment variables (for a kernel or a job started from here)."""
        return {paths.RESULTS_ENV: str(self.results_dir), paths.DATA_ENV: str(self.data_dir),
                paths.PUBLISHED_ENV: str(self.published_dir) if self.published_dir else NO_PUBLISHED,
                **({PANELS_ENV: json.dumps(self.panels)} if self.panels is not None else {})}


def _published(value: Any) -> Path | None:
    if value is None or str(value).strip().lower() in (NO_PUBLISHED, "null", ""):
        return None
    return Path(value).expanduser().resolve()


def build_folders(given: dict[str, Any] | None = None) -> BuildFolders:
    """The folders of the current build: `given` build parameters, else the environment, else the defaults."""
    given = given or {}
    if "data_dir" in given and given["data_dir"]:
        os.environ[paths.DATA_ENV] = str(Path(given["data_dir"]).expanduser().resolve())  # panel files live there
    results = Path(given["results_dir"]).expanduser() if given.get("results_dir") else paths.results_dir()
    if "published_dir" in given:
        published = _published(given["published_dir"])
    elif paths.PUBLISHED_ENV in os.environ:
        published = _published(os.environ[paths.PUBLISHED_ENV])
    else:
        published = paths.published_dir()
    if "panels" in given:
        panels = given["panels"]
    elif os.environ.get(PANELS_ENV):
        try:
            panels = json.loads(os.environ[PANELS_ENV])
        except json.JSONDecodeError as err:
            raise ConfigError(f"{PANELS_ENV} must be a JSON list of panel names ({err})") from None
    else:
        panels = None
    return BuildFolders(results.resolve(), paths.data_dir(), published, panels)


# ------------------------------------------------------------------------------------- the pipeline's configuration

PIPELINE_CONFIG = paths.REPO_ROOT / "config" / "pipeline.yaml"


def read_pipeline_config(path: str | os.PathLike = PIPELINE_CONFIG) -> dict[str, Any]:
    import yaml

    try:
        return yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"{path}: cannot read the pipeline configuration ({err})") from None


def _under(base: Path, value: Any, default: str) -> Path:
    """A configured folder: relative paths are relative to `base` (the pipeline's working directory)."""
    p = Path(str(value or default)).expanduser()
    return (p if p.is_absolute() else base / p).resolve()


def config_panels(config: dict[str, Any], *, base: Path | None = None) -> dict[str, str | None]:
    """The panels a build probes, in order: {name: panel file (None for a toy panel, whose file the toy training
    writes)} -- the toy panels of `toy_families` (and of each seed of `toy_seeds` > 0: `<panel>-s<seed>`), then
    `real_panels`, then `panels` (names or YAML files)."""
    from circuitdev.sources.panels import find_panel_file, load_panel
    from circuitdev.toy.recipe import PANEL_NAMES

    base = Path(base or Path.cwd())
    data = _under(base, config.get("data_dir"), "data")
    seeds = [int(s) for s in (config.get("toy_seeds") or [0])]
    out: dict[str, str | None] = {PANEL_NAMES[f] + replica_suffix(s): None
                                  for s in seeds for f in config.get("toy_families") or []}
    for entry in [*(config.get("real_panels") or []), *(config.get("panels") or [])]:
        local = data / "panels" / f"{entry}.yaml"  # a name: <data_dir>/panels first, then the package's data
        given = _under(base, entry, entry)
        file = given if given.is_file() else (
            local.resolve() if local.is_file() else find_panel_file(entry))
        name = load_panel(file, resolve_hub=False).name
        if name in out:
            raise ConfigError(f"panel {name!r} is listed twice in toy_families / real_panels / panels")
        out[name] = str(file)
    return out


def config_published_dir(config: dict[str, Any], *, base: Path | None = None) -> Path | None:
    """`published_dir` of a pipeline configuration: the folder the pages read (default <data_dir>/published, which
    the pipeline's `published` rule fills); null / none: leave the authors' files out."""
    value = config.get("published_dir", "auto")
    base = Path(base or Path.cwd())
    if value in ("auto", "default"):
        return _under(base, config.get("data_dir"), "data") / "published"
    return None if _published(value) is None else _under(base, value, "")


def config_published_from(config: dict[str, Any], *, base: Path | None = None) -> Path | None:
    """Where the `published` rule takes the files from: `published_from` (a local copy), auto -> the copy named by
    $CIRCUITDEV_PUBLISHED when set; None -> download them at the pinned commits ($CIRCUITDEV_PUBLISHED_URL)."""
    value = config.get("published_from", "auto")
    if value == "auto":
        value = os.environ.get(paths.PUBLISHED_ENV, "").strip() or None
    if value is None or str(value).strip().lower() in (NO_PUBLISHED, "null", "", "download"):
        return None
    return _under(Path(base or Path.cwd()), value, "")


def folders_from_config(config: dict[str, Any] | None = None, *, base: Path | None = None) -> BuildFolders:
    """The folders of a build with this pipeline configuration: what the Snakefile gives every page (its config,
    relative to its working directory), and what `circuitdev notebook run` gives a page run on its own
    (config/pipeline.yaml, relative to the repository)."""
    if config is None:
        config, base = read_pipeline_config(), base or paths.REPO_ROOT
    base = Path(base or Path.cwd())
    return BuildFolders(results_dir=_under(base, config.get("results_dir"), "data/results"),
                        data_dir=_under(base, config.get("data_dir"), "data"),
                        published_dir=config_published_dir(config, base=base),
                        panels=list(config_panels(config, base=base)))


def current_folders() -> BuildFolders:
    """The folders for a page run from the command line: config/pipeline.yaml (as `make book`), with each of
    CIRCUITDEV_RESULTS / CIRCUITDEV_DATA / CIRCUITDEV_PUBLISHED / CIRCUITDEV_PANELS that is set taking precedence
    (the pipeline sets them for its jobs)."""
    base = folders_from_config()
    env = build_folders() if any(k in os.environ for k in (paths.RESULTS_ENV, paths.DATA_ENV, paths.PUBLISHED_ENV,
                                                           PANELS_ENV)) else None
    if env is None:
        return base
    return BuildFolders(
        results_dir=env.results_dir if paths.RESULTS_ENV in os.environ else base.results_dir,
        data_dir=env.data_dir if paths.DATA_ENV in os.environ else base.data_dir,
        published_dir=env.published_dir if paths.PUBLISHED_ENV in os.environ else base.published_dir,
        panels=env.panels if PANELS_ENV in os.environ else base.panels)


WORKSHOP_EDITIONS = ("instructors", "participants")  # the book with the workshop's solutions folded / left out


def book_config(repository_url: str | None, *, workshop_edition: str = "instructors",
                source: Path = paths.REPO_ROOT / "_config.yml", out: Path | None = None) -> Path:
    """The Jupyter Book configuration to build with: `_config.yml` itself for the default book, else a copy (written to
    `out`) with

    - a repository: the repository, its buttons and the Binder / Colab launch buttons. The launch buttons open a
      page's notebook from the repository, so they work where the executed notebooks are published with it;
    - workshop_edition="participants": sphinx-exercise's `hide_solutions: true`, the participants' edition (every
      solution block of the Workshop part left out; the exercises, their hints and checks stay).
      `make book WORKSHOP_EDITION=participants` builds it."""
    import yaml

    from circuitdev.atomic import write_atomic

    if workshop_edition not in WORKSHOP_EDITIONS:
        raise ConfigError(f"workshop_edition {workshop_edition!r} is not one of {', '.join(WORKSHOP_EDITIONS)} "
                          "(make book WORKSHOP_EDITION=participants builds the book without the workshop's solutions)")
    if not repository_url and workshop_edition == "instructors":
        return source
    config = yaml.safe_load(source.read_text())
    if repository_url:
        config["repository"] = {"url": str(repository_url), "branch": "main"}
        config.setdefault("html", {}).update(use_repository_button=True, use_issues_button=True)
        config["launch_buttons"] = {"notebook_interface": "jupyterlab", "binderhub_url": "https://mybinder.org",
                                    "colab_url": "https://colab.research.google.com"}
    if workshop_edition == "participants":
        config.setdefault("sphinx", {}).setdefault("config", {})["hide_solutions"] = True
    return write_atomic(out or paths.REPO_ROOT / "_build" / "_config.generated.yml",
                        yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
