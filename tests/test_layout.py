"""The package follows the data flow: measure -> sources -> analysis -> book, each importing only from the stages
before it (lazy imports inside functions included), and reading published data or running the findings never
imports torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "lib" / "circuitdev"
STAGES = ["measure", "sources", "analysis", "book"]
BASICS = {"errors", "schema", "paths", "atomic", "runinfo", "locks"}  # locks: one advisory lock per written folder


def stage_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "circuitdev" or len(parts) < 2:
        return None
    return parts[1]


def imports_of(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names if node.module == "circuitdev"}
    return {m for m in out if m.startswith("circuitdev")}


@pytest.mark.parametrize("path", sorted(LIB.rglob("*.py")), ids=lambda p: str(p.relative_to(LIB)))
def test_no_module_imports_from_a_later_stage(path):
    here = path.relative_to(LIB).parts[0].removesuffix(".py")
    for module in imports_of(path):
        there = stage_of(module)
        if here in BASICS:
            assert there in BASICS or there is None, f"{path.name}: a basic module imports {module}"
        elif here in STAGES and there in STAGES:
            assert STAGES.index(there) <= STAGES.index(here), f"{path}: {here} imports the later stage {module}"
        if here in STAGES[:3]:
            assert there not in ("commands", "cli", "workshop"), f"{path}: imports {module}"


def test_published_data_and_findings_never_import_torch():
    code = ("import sys\nimport circuitdev.sources.published, circuitdev.sources.store, circuitdev.sources.fetch\n"
            "import circuitdev.analysis.findings, circuitdev.analysis.audit\n"
            "import circuitdev.analysis.reanalysis, circuitdev.book.chapter, circuitdev.book.plots\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# what each module directly in lib/circuitdev may import from the package: the basics only basics; the doctor (the
# environment checks) basics too -- no stage, no toy, no workshop: the commands compose its checks with the workshop's
TOP_LEVEL_MAY_IMPORT = {**{b: BASICS for b in BASICS}, "doctor": BASICS, "cli": BASICS | {"commands"}}


def test_top_level_modules_import_only_what_they_may():
    tops = sorted(p for p in LIB.glob("*.py") if p.name != "__init__.py")  # __init__ names its API lazily, as text
    assert {p.stem for p in tops} == set(TOP_LEVEL_MAY_IMPORT), "a new top-level module: say what it may import"
    for path in tops:
        for module in imports_of(path):
            there = stage_of(module)
            assert there is None or there in TOP_LEVEL_MAY_IMPORT[path.stem], f"{path.name} imports {module}"
