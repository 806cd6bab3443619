"""No reference to a path or a module that does not exist: every repository path (`lib/...`, `data/...`) and every
dotted `circuitdev.<...>` name written in config/, data/, _config.yml, _toc.yml, the Snakefile, lib/ and notebooks/
must resolve (a file or folder; an importable module or one of its attributes). Paths of build outputs
(book/_generated, data/results, ...) and placeholders (data/panels/NAME.yaml) are left out."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCANNED = ["config/**/*.yaml", "data/**/*.yaml", "data/*.tsv", "_config.yml", "_toc.yml", "Snakefile",
           "lib/**/*.py", "notebooks/**/*.py"]
_PATH = re.compile(r"(?<![\w/.-])((?:lib|notebooks|book|data|config|tests|bench|tools|profiles)/[A-Za-z0-9_./-]*"
                   r"[A-Za-z0-9_])")
_MODULE = re.compile(r"(?<![\w.])(circuitdev(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?![\w/])")
# written by a build or a command, so absent from a fresh clone
_OUTPUTS = ("book/_generated", "data/results", "data/toy", "data/published", "data/reanalysis", "data/panels/toy")
_PLACEHOLDER = re.compile(r"NAME|NN_|/N\b")
_SUFFIXES = ("", ".md", ".py", ".ipynb")
_FILE_SUFFIXES = {"css", "js", "html", "yaml", "yml", "json", "csv", "parquet", "png", "md", "py", "txt", "pdf"}  # _toc.yml names pages without their suffix


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def _dead_references() -> list[str]:
    dead = []
    for pattern in SCANNED:
        for file in sorted(REPO.glob(pattern)):
            text = file.read_text()
            where = file.relative_to(REPO)
            for m in _PATH.finditer(text):
                path = m.group(1).rstrip(".")
                if path.startswith(_OUTPUTS) or _PLACEHOLDER.search(path):
                    continue
                if not any((REPO / (path + s)).exists() for s in _SUFFIXES):
                    dead.append(f"{where}: path {path}")
            for m in _MODULE.finditer(text):
                if m.group(1).rsplit(".", 1)[-1] in _FILE_SUFFIXES:  # a file name (circuitdev.css), not a module
                    continue
                if not _resolves(m.group(1)):
                    dead.append(f"{where}: name {m.group(1)}")
    return dead


def test_every_path_and_module_named_exists():
    assert _dead_references() == []


def test_the_scan_finds_a_dead_reference(tmp_path, monkeypatch):
    """The check itself can fail: a moved module and a missing file are reported."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "x.yaml").write_text("# see lib/circuitdev/nowhere.py and circuitdev.sources.gone\n"
                                                "# and circuitdev.sources.records.PanelRecords (fine)\n")
    monkeypatch.setattr("test_references.REPO", tmp_path)
    assert _dead_references() == ["config/x.yaml: path lib/circuitdev/nowhere.py",
                                  "config/x.yaml: name circuitdev.sources.gone"]
