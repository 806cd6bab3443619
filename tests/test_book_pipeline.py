"""The pipeline's page and session lists (`circuitdev.book.pipeline`), which the Snakefile builds from."""

from __future__ import annotations

from pathlib import Path

import pytest

from circuitdev.book.build import read_pipeline_config
from circuitdev.book.pipeline import notebook_specs, page_panel, workshop_sessions
from circuitdev.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]


def test_the_shipped_configuration_lists_every_page(monkeypatch):
    monkeypatch.chdir(REPO)
    config = read_pipeline_config()
    panels = ["toy-pythia", "toy-olmo", "toy-olmoe"]
    specs, missing = notebook_specs(config, panels=panels, panel_files={},
                                    published_models=config["published_models"])
    assert missing == []
    assert [n for n in specs if n.startswith("model-")] == [f"model-{p}" for p in
                                                            [*panels, *config["published_models"]]]
    assert specs["model-toy-olmo"]["panels"] == ["toy-olmo"] and specs["model-pythia-1b"]["panels"] == []
    assert specs["model-toy-olmo"]["parameters"] == {"panel": "toy-olmo"}
    pages = {nb["name"] for nb in config["notebooks"]}
    assert pages <= set(specs) and specs["audit"]["panels"] == [] and specs["f2_shapes"]["panels"] == panels
    assert all((REPO / s["source"]).is_file() for s in specs.values())


def test_missing_sources_are_skipped_or_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = {"notebooks": [{"name": "gone", "source": "notebooks/gone.py"}]}
    specs, missing = notebook_specs(config, panels=[], panel_files={}, published_models=[])
    assert specs == {} and missing == ["gone"]
    with pytest.raises(ConfigError, match="notebooks/gone.py"):
        notebook_specs({**config, "skip_missing_notebooks": False}, panels=[], panel_files={}, published_models=[])
    twice = {"model_notebook": {"source": "m.py"}, "notebooks": [{"name": "model-a", "source": "x.py"}]}
    with pytest.raises(ConfigError, match="used twice"):
        notebook_specs(twice, panels=["a"], panel_files={}, published_models=[])


def test_a_panel_outside_the_data_folder_is_named_by_its_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data" / "panels").mkdir(parents=True)
    inside = tmp_path / "data" / "panels" / "mine.yaml"
    assert page_panel("mine", {"mine": str(inside)}, "data") == "mine"
    assert page_panel("other", {"other": str(tmp_path / "elsewhere" / "other.yaml")}, "data") == "elsewhere/other.yaml"


def test_workshop_sessions_follow_the_table_of_contents(tmp_path):
    sessions, missing = workshop_sessions(book_root=REPO, generated_dir=REPO / "book" / "_generated",
                                          sources=REPO / "notebooks" / "workshop")
    assert missing == [] and len(sessions) == 5 and list(sessions)[0] == "01_probe_by_hand"
    assert all(Path(s).is_file() for s in sessions.values())
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n"
                                       "  - file: gen/workshop/01_a\n  - file: gen/workshop/02_b\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "01_a.py").write_text("")
    sessions, missing = workshop_sessions(book_root=tmp_path, generated_dir=tmp_path / "gen", sources=tmp_path / "src")
    assert list(sessions) == ["01_a"] and missing == ["02_b"]
    assert workshop_sessions(book_root=tmp_path / "none", generated_dir="gen", sources="src") == ({}, [])


# ------------------------------------------------------------------------------------------ the workflow's inputs


def small_config(tmp_path, **more):
    from circuitdev.book.pipeline import Pipeline

    config = {"data_dir": "data", "results_dir": "data/results", "toy_families": ["gpt_neox", "olmo"],
              "toy_seeds": [0, 1], "published_dir": None, "notebooks": [], "book_root": str(tmp_path),
              "refine": [{"panel": "toy-pythia", "metric": "bos_fraction", "max_new": 2},
                         {"panel": "toy-pythia", "metric": "induction_3_heads", "max_new": 3}], **more}
    return Pipeline(config, REPO)


def test_the_pipeline_names_each_jobs_files(tmp_path, monkeypatch):
    from types import SimpleNamespace

    monkeypatch.chdir(tmp_path)
    p = small_config(tmp_path)
    assert p.toy_panels == ["toy-pythia", "toy-olmo", "toy-pythia-s1", "toy-olmo-s1"] and p.hub_panels == []
    assert p.records("toy-olmo") == ["data/results/toy-olmo/panel.done"]
    first, second = p.refines("toy-pythia")
    assert (first, second) == ("data/results/toy-pythia/refine-bos_fraction-2.done",
                               "data/results/toy-pythia/refine-induction_3_heads-3.done")
    # the second refinement waits for the first; the first for nothing but the probe
    assert p.refine_before(SimpleNamespace(panel="toy-pythia", metric="induction_3_heads", k="3")) == [first]
    assert p.refine_before(SimpleNamespace(panel="toy-pythia", metric="bos_fraction", k="2")) == []
    assert p.probed("toy-pythia") == ["data/results/toy-pythia/panel.done", first, second]
    assert p.ablations("toy-olmo") == ["data/results/toy-olmo/ablation_over_training.parquet"]
    assert p.published_target() == [] and p.published_models == []
    assert p.all_records() == [*(f"data/results/{n}/panel.done" for n in p.toy_panels[:1]), first, second,
                               *(f"data/results/{n}/panel.done" for n in p.toy_panels[1:])]


def test_the_toy_probes_measure_the_pr_null_and_the_mini_runs_sessions_run_in_turn(tmp_path, monkeypatch):
    """Config null_pr_draws goes to the toy panels' probes (not to a hub panel's) and to the null job; the two
    sessions that share the participant's mini run wait for each other (the later one trains it), instead of
    both starting and one holding a core while it waits on the other's lock."""
    from types import SimpleNamespace

    monkeypatch.chdir(REPO)
    p = small_config(REPO, book_root=str(REPO), null_pr_draws=3, real_panels=["pythia-1b"])
    assert p.probe_fields("toy-olmo")["null_pr_draws"] == 3 and "null_pr_draws" not in p.probe_fields("pythia-1b")
    assert p.null_job_draws == 3 and small_config(REPO, null_pr_draws=0).null_job_draws == 5
    assert p.probe_fields("toy-olmo-s1")["null_pr_draws"] == 3
    assert p.mini_run_sessions() == ["04_causal_and_spectral", "02_watch_a_circuit_form"]
    inputs = {s: p.workshop_inputs(SimpleNamespace(session=s))["after"] for s in p.workshop_sessions}
    assert inputs.pop("02_watch_a_circuit_form") == [f"{p.generated}/workshop/04_causal_and_spectral.ipynb"]
    assert all(after == [] for after in inputs.values())


def test_the_pipeline_reads_the_cluster_settings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = small_config(tmp_path, cluster={"partition": "short", "mem_mb": "2000", "gpu": 1, "max_cpus": "2",
                                        "account": "null"})
    assert p.cluster_resources("cpu") == {"slurm_partition": "short", "mem_mb": 2000}
    assert p.cluster_resources("gpu") == {"gpu": 1, "slurm_partition": "short"}
    assert p.cluster_threads(4) == 2 and p.cluster_threads(1) == 1
    with pytest.raises(ConfigError, match="unknown setting"):
        small_config(tmp_path, cluster={"partitions": "short"})
    with pytest.raises(ConfigError, match="whole number"):
        small_config(tmp_path, cluster={"mem_mb": "2G"}).cluster_resources("cpu")


def test_a_stale_published_status_is_forgotten(tmp_path, monkeypatch):
    import json

    monkeypatch.chdir(tmp_path)
    p = small_config(tmp_path, published_dir="pub", published_from="download")
    status = tmp_path / p.published_status
    status.parent.mkdir(parents=True, exist_ok=True)
    status.write_text(json.dumps({"complete": False}))  # offline, no copy: kept, the build does not retry
    p.forget_stale_published_status()
    assert status.is_file()
    status.write_text(json.dumps({"complete": True}))  # says complete, but the files are not there: goes
    p.forget_stale_published_status()
    assert not status.exists()


def test_a_not_available_status_goes_when_a_complete_copy_is_named(tmp_path, monkeypatch):
    """Offline first ("not available"), then `make book PUBLISHED_DIR=<complete copy>`: the status goes, so the
    rule fills the folder; a partial copy, or none, keeps it (no retry). The copy reaches the rule's shell through
    $CIRCUITDEV_PUBLISHED_FROM, set from the build's configuration."""
    import json
    import os
    import shutil

    from circuitdev.book.pipeline import PUBLISHED_FROM_ENV
    from circuitdev.sources.fetch import is_complete
    from conftest import PUBLISHED

    if PUBLISHED is None or not is_complete(PUBLISHED):
        pytest.skip("needs a complete copy of the authors' files (CIRCUITDEV_PUBLISHED)")
    monkeypatch.chdir(tmp_path)
    partial = tmp_path / "partial"
    shutil.copytree(PUBLISHED, partial)
    next(partial.rglob("*.json")).unlink()
    for source, goes in ((None, False), (partial, False), (PUBLISHED, True)):
        p = small_config(tmp_path, published_dir="pub", published_from=str(source) if source else "download")
        status = tmp_path / p.published_status
        status.parent.mkdir(parents=True, exist_ok=True)
        status.write_text(json.dumps({"complete": False}))
        p.forget_stale_published_status()
        assert status.exists() != goes, source
        monkeypatch.setenv(PUBLISHED_FROM_ENV, "stale")
        p.published_from_environment()
        assert os.environ[PUBLISHED_FROM_ENV] == (str(Path(source).resolve()) if source else "")
