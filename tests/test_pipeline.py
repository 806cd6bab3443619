"""The Snakefile: a dry run of the full real panels (30 probe jobs), the default toy DAG, and a real run on a tiny
local panel (probe -> notebooks -> book) with the re-run rules: nothing to do after a finished build, a notebook
parameter re-runs only that notebook and the book, a probe setting re-runs the probes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from circuitdev.sources.panels import load_panel
from conftest import write_tiny_panel

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).parent / "snakemake"
REAL = ["pythia-1b", "olmo-1b-0724", "olmoe-1b-7b-0924"]


def snakemake(workdir: Path, *args: str, configfile: Path | None = None, timeout: int = 400):
    cmd = [str(SNAKEMAKE), "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--cores", "2"]
    if configfile is not None:
        cmd += ["--configfile", str(configfile)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=workdir)


def job_counts(output: str) -> dict[str, int]:
    """Parse Snakemake's 'Job stats' table into {rule: count} (without the total)."""
    counts, inside = {}, False
    for line in output.splitlines():
        if line.startswith("Job stats"):
            inside, counts = True, {}
            continue
        if inside:
            m = re.match(r"^(\w+)\s+(\d+)$", line.strip())
            if m and m.group(1) != "total":
                counts[m.group(1)] = int(m.group(2))
            elif line.strip().startswith("total"):
                inside = False
    return counts


def test_dry_run_of_the_real_panels(tmp_path):
    panels = json.dumps(REAL)
    proc = snakemake(tmp_path, "-n", "-p", "--config", f"real_panels={panels}", "toy_families=[]")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    out = proc.stdout + proc.stderr
    assert job_counts(out) == {"published": 1, "probe_hub": 30, "all": 1}  # the authors' files are made complete
    for name in REAL:  # one job per revision, each writing the contract's record path
        for rev in load_panel(name).revisions:
            assert f"data/results/{name}/{rev.name}.parquet" in out
            assert f"--revision {rev.name} " in out
    assert "resources: tmpdir=/tmp, gpu=1" in out


def test_the_same_authors_files_given_another_way_rerun_nothing(tmp_path):
    """`make book PUBLISHED_DIR=...` then `make pdf` (no PUBLISHED_DIR): the folder already holds every pinned file,
    so the `published` job -- and every page reading its status -- is not run again; an emptied folder with no copy
    to fill it from is a change (the tier goes), and runs it."""
    from circuitdev.sources.fetch import is_complete
    from conftest import PUBLISHED

    if PUBLISHED is None or not is_complete(PUBLISHED):
        pytest.skip("needs a complete copy of the authors' files (CIRCUITDEV_PUBLISHED)")
    status = "data/published.status.json"
    first = snakemake(tmp_path, status, "--config", f"published_from={PUBLISHED}", "toy_families=[]")
    assert first.returncode == 0, first.stderr + first.stdout
    assert json.loads((tmp_path / status).read_text())["complete"] is True
    for given in ("published_from=download", f"published_from={PUBLISHED}"):
        again = snakemake(tmp_path, status, "-n", "--config", given, "toy_families=[]")
        assert again.returncode == 0, again.stderr + again.stdout
        assert "Nothing to be done" in again.stdout + again.stderr, again.stdout
    for f in (tmp_path / "data" / "published").rglob("*.json"):
        f.unlink()
    gone = snakemake(tmp_path, status, "-n", "--config", "published_from=download", "toy_families=[]")
    assert job_counts(gone.stdout + gone.stderr) == {"published": 1}


def test_dry_run_default_builds_the_toy_panel_first(tmp_path):
    proc = snakemake(tmp_path, "-n")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    out = proc.stdout + proc.stderr
    # the authors' files; one training job per toy panel, then its probe job (notebook sources and _toc.yml are
    # absent here), then the default refinements of toy-pythia (config/pipeline.yaml `refine:`), one after the other
    assert job_counts(out) == {"published": 1, "toy": 3, "probe_toy": 3, "refine": 2, "all": 1}
    seeds = snakemake(tmp_path, "-n", "-p", "--config", "toy_seeds=[0,1]", "refine=[]")
    assert job_counts(seeds.stdout + seeds.stderr) == {"published": 1, "toy": 6, "probe_toy": 6, "all": 1}
    # each panel trains alone, one thread, so its probe starts when its own training ends
    assert "toy train --family gpt_neox --seeds 1 --data-dir data --jobs 1 --threads 1" in seeds.stdout
    assert "output: data/toy/toy-pythia-s1/recipe.json\n" in seeds.stdout


MODEL_NB = """\
# %% [markdown]
# # Model {panel}
# %% tags=["parameters"]
panel: str = "none"
# %%
from circuitdev.book.build import build_folders
from circuitdev.sources.panels import load_panel
from circuitdev.sources.records import load_panel_table
name = load_panel(panel, resolve_hub=False).name  # the pipeline passes a folder panel's file, so it can be loaded
table = load_panel_table(build_folders().results_dir, name)  # the build's folders come in the environment
print("MODEL", name, len(table), ",".join(table["revision"].unique()))
"""

FINDING_NB = """\
# %% [markdown]
# # A finding
# %% tags=["parameters"]
threshold: float = 30.0
# %%
from circuitdev.book.build import build_folders
from circuitdev.sources.records import load_panel_table
folders = build_folders()
for p in folders.panels:
    t = load_panel_table(folders.results_dir, p)
    print("FINDING", p, threshold, int((t["best_selectivity"] >= threshold).sum()))
"""


def _config(tmp_path: Path, **changes) -> Path:
    cfg = {
        "toy_families": [],
        "panels": ["tiny.yaml"],
        "results_dir": "results",
        "published_dir": None,
        "model_notebook": {"source": "nb/model.py", "parameters": {}},
        "notebooks": [{"name": "finding", "source": "nb/finding.py", "parameters": {"threshold": 30.0}}],
        "book": True,
        **changes,
    }
    path = tmp_path / f"config-{len(list(tmp_path.glob('config-*')))}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.slow
def test_real_run_on_a_tiny_local_panel(tmp_path):
    write_tiny_panel(tmp_path, "gpt_neox", 2, "tiny", probe={"n": 12, "n_pr": 12, "seq_len": 24,
                                                             "vocab_range": [3, 100], "n_prefix": 0, "n_nulls": 0})
    (tmp_path / "nb").mkdir()
    (tmp_path / "nb" / "model.py").write_text(MODEL_NB)
    (tmp_path / "nb" / "finding.py").write_text(FINDING_NB)
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "intro.md").write_text("# Tiny book\n")
    (tmp_path / "_config.yml").write_text(yaml.safe_dump({
        "title": "tiny", "only_build_toc_files": True, "execute": {"execute_notebooks": "off"},
        "exclude_patterns": ["results/*", "logs/*", "nb/*", "tiny/*", ".snakemake/*"]}))
    (tmp_path / "_toc.yml").write_text(yaml.safe_dump({
        "format": "jb-book", "root": "book/intro",
        "chapters": [{"file": "book/_generated/model-tiny"}, {"file": "book/_generated/finding"}]}))
    config = _config(tmp_path)

    proc = snakemake(tmp_path, configfile=config)
    assert proc.returncode == 0, proc.stderr[-4000:]
    for rev in ("step0", "step1"):
        assert (tmp_path / "results" / "tiny" / f"{rev}.parquet").is_file()
        assert (tmp_path / "results" / "tiny" / f"{rev}.json").is_file()
    model_nb = (tmp_path / "book" / "_generated" / "model-tiny.ipynb").read_text()
    assert "MODEL tiny 16 step0,step1" in model_nb  # 2 revisions x 8 heads, read back from the records
    finding_nb = (tmp_path / "book" / "_generated" / "finding.ipynb").read_text()
    assert "FINDING tiny 30.0" in finding_nb
    assert (tmp_path / "_build" / "html" / "index.html").is_file()
    assert "tiny" in (tmp_path / "_build" / "html" / "book" / "_generated" / "model-tiny.html").read_text()
    # the source stays a one-way input: papermill never rewrote it
    assert (tmp_path / "nb" / "model.py").read_text() == MODEL_NB

    # a finished build: nothing to do
    proc = snakemake(tmp_path, "-n", configfile=config)
    assert proc.returncode == 0 and "Nothing to be done" in proc.stdout + proc.stderr

    # a finding threshold: that notebook and the book, no probe, not the model notebook
    changed = _config(tmp_path, notebooks=[{"name": "finding", "source": "nb/finding.py",
                                            "parameters": {"threshold": 1.0}}])
    proc = snakemake(tmp_path, "-n", configfile=changed)
    assert job_counts(proc.stdout + proc.stderr) == {"notebook": 1, "book": 1, "all": 1}
    outputs = set(re.findall(r"output: (\S+\.ipynb)", proc.stdout + proc.stderr))
    assert outputs == {"book/_generated/finding.ipynb"}

    # a probe setting: both probe jobs and everything downstream
    changed = _config(tmp_path, probe={"n": 10})
    proc = snakemake(tmp_path, "-n", configfile=changed)
    assert job_counts(proc.stdout + proc.stderr) == {"probe_local": 2, "notebook": 2, "book": 1, "all": 1}
