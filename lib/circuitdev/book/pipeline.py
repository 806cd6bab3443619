"""What the pipeline builds, from its configuration: the pages (notebooks) and the workshop's sessions.

The Snakefile asks these two questions and nothing else of the configuration's page lists:

    specs, missing = notebook_specs(config, panels=ALL_PANELS, panel_files=PANEL_FILES, published_models=[...])
    sessions, missing = workshop_sessions(toc, generated_dir=GEN, book_root=BOOK_ROOT, sources=FOLDER)

A page spec is {"source": notebooks/<page>.py, "parameters": {...}, "panels": [record panels it reads]}: one model
page `model-<panel>` per probed panel and per published model, then the per-finding pages of `notebooks:`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator, Sequence

from circuitdev.errors import ConfigError

Spec = dict[str, Any]


def page_panel(name: str, panel_files: dict[str, str], data_dir: str | os.PathLike) -> str:
    """How a model page names its panel: by name when the data folder holds its file (or it is a toy or published
    panel), else by the file's path relative to the working directory."""
    file = panel_files.get(name)
    if file is None or Path(file).resolve() == (Path(data_dir) / "panels" / f"{name}.yaml").resolve():
        return name
    return os.path.relpath(file)


def notebook_specs(config: dict[str, Any], *, panels: Sequence[str], panel_files: dict[str, str],
                   published_models: Sequence[str], data_dir: str | os.PathLike = "data"
                   ) -> tuple[dict[str, Spec], list[str]]:
    """The pages of a build, by output name, and the names left out because their source does not exist (when
    `skip_missing_notebooks` is true; else a missing source is an error)."""
    specs: dict[str, Spec] = {}
    model = config.get("model_notebook") or {}
    if model.get("source"):
        for name in [*panels, *[m for m in published_models if m not in panels]]:
            specs[f"model-{name}"] = {"source": model["source"],
                                      "parameters": {**(model.get("parameters") or {}),
                                                     "panel": page_panel(name, panel_files, data_dir)},
                                      "panels": [name] if name in panels else []}
    for nb in config.get("notebooks") or []:
        if nb["name"] in specs:
            raise ConfigError(f"notebook name {nb['name']!r} is used twice")
        specs[nb["name"]] = {"source": nb["source"], "parameters": dict(nb.get("parameters") or {}),
                             "panels": list(nb.get("panels", panels))}
    missing = [n for n, s in specs.items() if not Path(s["source"]).is_file()]
    if missing and not config.get("skip_missing_notebooks", True):
        raise ConfigError(f"notebook source(s) missing: {', '.join(specs[n]['source'] for n in missing)}")
    return {n: s for n, s in specs.items() if n not in missing}, missing


def _toc_files(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        yield from ([node["file"]] if isinstance(node.get("file"), str) else [])
        for value in node.values():
            yield from _toc_files(value)
    elif isinstance(node, list):
        for value in node:
            yield from _toc_files(value)


def workshop_sessions(*, book_root: str | os.PathLike, generated_dir: str | os.PathLike,
                      sources: str | os.PathLike) -> tuple[dict[str, str], list[str]]:
    """Session name -> source (`sources`/<name>.py) for the pages <book_root>/_toc.yml lists under
    <generated_dir>/workshop/ (the table of contents decides which exist), and the listed names without a source."""
    import yaml

    toc = Path(book_root) / "_toc.yml"
    if not toc.is_file():
        return {}, []
    prefix = os.path.relpath(Path(generated_dir) / "workshop", book_root).replace(os.sep, "/") + "/"
    names = [f[len(prefix):] for f in _toc_files(yaml.safe_load(toc.read_text())) if f.startswith(prefix)]
    folder = Path(sources)
    missing = [n for n in names if not (folder / f"{n}.py").is_file()]
    return {n: str(folder / f"{n}.py") for n in names if n not in missing}, missing
