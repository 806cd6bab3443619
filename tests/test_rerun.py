"""Re-running the book's pages and getting the authors' files by default: `circuitdev notebook list|run|sweep`
(parameters checked before a kernel starts, nothing half-written left behind, the sweep's summary table),
`circuitdev published ensure` and the pipeline's `published` rule against a loopback server (no external network),
and an explicit null overriding a panel's probe default on every route."""

from __future__ import annotations

import functools
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest
import yaml

from circuitdev.cli import main
from circuitdev.errors import ConfigError
from circuitdev.sources.fetch import read_manifest
from conftest import PUBLISHED, write_tiny_panel
from published_fixtures import write_published

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).parent / "snakemake"


@pytest.fixture
def fixture_env(tmp_path, monkeypatch):
    """The folders of a small build: the synthetic published fixture, no records."""
    monkeypatch.setenv("CIRCUITDEV_PUBLISHED", str(write_published(tmp_path / "published")))
    monkeypatch.setenv("CIRCUITDEV_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("CIRCUITDEV_PANELS", "[]")
    return tmp_path


# ---------------------------------------------------------------------------------------------- circuitdev notebook


def test_notebook_list_reads_the_parameters_cells(capsys):
    assert main(["notebook", "list"]) == 0
    out = capsys.readouterr().out
    assert "f2_shapes  —  F2 · The paper's claim: three shapes of sink emergence" in out
    assert "    bos_threshold: float = 30.0" in out
    assert "a head is a sink head when first-token selectivity ≥ this (paper: 30x)" in out
    assert "    panel: str = 'toy-pythia'" in out  # the model page
    assert "results_dir (str | None)" in out  # the build's folders, said once


def test_a_misspelt_or_ill_typed_parameter_exits_2_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["notebook", "run", "f2_shapes", "-p", "bos_treshold", "20", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "unknown notebook parameter(s) 'bos_treshold'" in err and "bos_threshold (float)" in err
    assert main(["notebook", "run", "f2_shapes", "-p", "rule", "majority", "--out", str(out)]) == 2
    assert "allowed values: 'per-class', 'best-class'" in capsys.readouterr().err
    assert main(["notebook", "run", "f9_nothing", "--out", str(out)]) == 2
    assert "no page named 'f9_nothing'" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_notebook_run_writes_the_page_and_a_standalone_html(fixture_env, capsys):
    out = fixture_env / "run"
    assert main(["notebook", "run", "f2_shapes", "-p", "bos_threshold", "20", "--out", str(out), "--html"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["f2_shapes.html", "f2_shapes.ipynb"]
    page = json.loads((out / "f2_shapes.ipynb").read_text())
    injected = [c for c in page["cells"] if "injected-parameters" in c["metadata"].get("tags", [])]
    assert len(injected) == 1 and "remove-cell" in injected[0]["metadata"]["tags"]
    assert "bos_threshold = 20" in "".join(injected[0]["source"]) and "/" not in "".join(injected[0]["source"])
    html = (out / "f2_shapes.html").read_text()
    assert "{glue" not in html and "τ = 20×" in html and "Parameters of this page" in html
    assert "circuitdev notebook run f2_shapes -p bos_threshold 20.0" in html


@pytest.mark.slow
def test_a_failing_page_leaves_nothing_in_the_output_folder(fixture_env, tmp_path, capsys, monkeypatch):
    from circuitdev.book import execute

    monkeypatch.setattr(execute, "FAILED_DIR", tmp_path / "failed")  # where failed pages are kept ($TMPDIR's)
    out = tmp_path / "fail"
    # a model page for a panel that is nowhere: the page runs, notes it, and succeeds ...
    assert main(["notebook", "run", "model", "-p", "panel", "no-such-panel", "-p", "ablation", "false",
                 "--out", str(out)]) == 0
    # ... while a page whose code fails leaves no notebook behind
    bad = tmp_path / "bad.py"
    bad.write_text((REPO / "notebooks" / "method.py").read_text().replace("ch = chapter(", "1 / 0\nch = chapter("))
    assert main(["notebook", "run", str(bad), "--out", str(tmp_path / "bad-out")]) == 2
    err = capsys.readouterr().err
    assert "failed in cell" in err and "ZeroDivisionError" in err
    assert not (tmp_path / "bad-out").exists() or not list((tmp_path / "bad-out").iterdir())
    kept = execute.failed_path(tmp_path / "bad-out" / "bad.ipynb")
    assert [p.name for p in (tmp_path / "failed").iterdir()] == [kept.name] and str(kept) in err


@pytest.mark.slow
def test_sweep_runs_every_grid_point_and_summarises_what_the_page_glued(fixture_env, capsys):
    from circuitdev.analysis import findings
    from circuitdev.sources.published import load_published

    out = fixture_env / "sweep"
    assert main(["notebook", "sweep", "f2_shapes", "--grid", "bos_threshold=10,30,100", "--out", str(out)]) == 0
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["bos_threshold"]) == [10, 30, 100] and len(summary) == 3
    dev = load_published(os.environ["CIRCUITDEV_PUBLISHED"]).table
    for tau, row in zip([10, 30, 100], summary.to_dict("records")):
        final = findings.trajectory_shape(findings.bos_fraction(dev, threshold=tau)).set_index("panel")["final_pct"]
        assert row["f2-pub-pythia-final-pct"] == pytest.approx(final["pythia-1b"])
        assert row["f2-pub-olmo-final-pct"] == pytest.approx(final["olmo-1b-0724"])
        assert row["f2-pub-olmoe-final-pct"] == pytest.approx(final["olmoe-1b-7b-0924"])
    # a second sweep reuses the pages already there (10 and 10.0 are one point)
    assert main(["notebook", "sweep", "f2_shapes", "--grid", "bos_threshold=10,30,100,10.0", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert said.count("already there, reused") == 3 and "given twice, runs once" in said
    # other fixed parameters: every point recomputed, and the summary says with what
    first = summary
    assert main(["notebook", "sweep", "f2_shapes", "--grid", "bos_threshold=10,30,100", "-p", "rule", "best-class",
                 "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert said.count("running (parameter rule changed)") == 3 and "reused" not in said
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary.columns[:2]) == ["bos_threshold", "rule"] and set(summary["rule"]) == {"best-class"}
    for point in ("bos_threshold=10.0", "bos_threshold=30.0", "bos_threshold=100.0"):
        recorded = json.loads((out / point / "point.json").read_text())
        assert recorded["parameters"]["rule"] == "best-class" and len(recorded["page_sha256"]) == 64
    best = findings.trajectory_shape(findings.bos_fraction(dev, threshold=10, rule="best-class"))
    assert summary.loc[0, "f2-pub-olmo-final-pct"] == pytest.approx(
        best.set_index("panel").loc["olmo-1b-0724", "final_pct"])
    assert not summary.drop(columns="rule").equals(first)  # not the per-class numbers again
    # the data a point read changed: recomputed
    (Path(os.environ["CIRCUITDEV_PUBLISHED"]) / "NOTES.md").write_text("a note")
    assert main(["notebook", "sweep", "f2_shapes", "--grid", "bos_threshold=10", "-p", "rule", "best-class",
                 "--out", str(out)]) == 0
    assert "running (published_dir changed)" in capsys.readouterr().out


@pytest.mark.slow
def test_a_list_valued_parameter_sweeps(fixture_env, capsys):
    out = fixture_env / "sweep-list"
    assert main(["notebook", "sweep", "f1_floor", "--grid", "floor_layers=[0],[0, 1]", "--out", str(out)]) == 0
    summary = pd.read_csv(out / "summary.csv")
    assert summary["floor_layers"].tolist() == ["[0]", "[0, 1]"]
    recorded = sorted(json.loads((p / "point.json").read_text())["parameters"]["floor_layers"]
                      for p in out.iterdir() if p.is_dir())
    assert recorded == [[0], [0, 1]]
    assert "2 page(s)" in capsys.readouterr().out


def test_grid_values_split_outside_brackets_and_run_once():
    from circuitdev.book.sweep import parse_grid, point_id

    grid = parse_grid(["sources=[published],[toy, measured],[published]", "bos_threshold=10,10,30",
                       "rule='per-class','best-class'"])
    assert grid == {"sources": [["published"], ["toy", "measured"]], "bos_threshold": [10, 30],
                    "rule": ["per-class", "best-class"]}
    ids = {point_id({"sources": v}) for v in (["a b"], ["a_b"], "_a b_")}
    assert len(ids) == 3 and all("/" not in i and " " not in i for i in ids)  # never two points in one folder
    for bad, said in [(["x=[1,2"], "unbalanced brackets"), (["x=1,,2"], "an empty value"), (["x"], "KEY=V1,V2")]:
        with pytest.raises(ConfigError, match=said):
            parse_grid(bad)


def test_explicit_null_reaches_a_page(fixture_env):
    """A page parameter given as null arrives as None, also over a value from the configuration."""
    from circuitdev.book.execute import check_page_parameters, source_of

    checked = check_page_parameters(source_of("f5_pr_lead"), {"threshold": None})
    assert "threshold" in checked and checked["threshold"] is None


# ---------------------------------------------------------------------------------- the authors' files by default


class Server:
    """A loopback HTTP server serving the manifest's files at /<commit>/<repo_path> from a local copy."""

    def __init__(self, copy: Path, root: Path):
        for entry in read_manifest():
            dest = root / entry.commit / entry.repo_path
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes((copy / entry.local_path).read_bytes())
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
        handler.log_message = lambda *a, **k: None
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/{{commit}}/{{repo_path}}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def page_config(tmp_path: Path) -> Path:
    nbs = REPO / "notebooks"
    cfg = {"toy_families": [], "results_dir": str(tmp_path / "results"), "data_dir": str(tmp_path / "data"),
           "generated_dir": str(tmp_path / "gen"), "logs_dir": str(tmp_path / "logs"), "book": False,
           "model_notebook": {}, "published_models": [],
           "notebooks": [{"name": "f2_shapes", "source": str(nbs / "f2_shapes.py"), "parameters": {}}]}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def run_pipeline(tmp_path: Path, env: dict) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CIRCUITDEV_")}
    return subprocess.run([str(SNAKEMAKE), "notebooks", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "--cores",
                           "2", "--configfile", str(page_config(tmp_path))], capture_output=True, text=True,
                          env={**clean, **env}, timeout=600)


@pytest.mark.slow
@pytest.mark.skipif(not PUBLISHED.is_dir(), reason=f"no copy of the authors' files at {PUBLISHED} to serve")
def test_the_pipeline_fetches_the_authors_files_and_builds_without_them_offline(tmp_path):
    from circuitdev.sources.fetch import is_complete
    from circuitdev.book.sweep import glued_values

    server = Server(PUBLISHED, tmp_path / "served")
    try:
        proc = run_pipeline(tmp_path, {"CIRCUITDEV_PUBLISHED_URL": server.url})
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    published = tmp_path / "data" / "published"
    assert is_complete(published) and "39 of 39 files downloaded" in proc.stdout + proc.stderr
    glued = glued_values(tmp_path / "gen" / "f2_shapes.ipynb")
    assert glued["f2-pub-olmo-final-pct"] == pytest.approx(80.859375)  # the intro's "80.9%"
    assert round(glued["f2-pub-olmo-largest-jump-pp"], 1) == 62.9
    # a second build does not download again: nothing to do
    again = run_pipeline(tmp_path, {"CIRCUITDEV_PUBLISHED_URL": server.url})
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr

    # offline (the server is gone) and no copy: the build goes on without the tier and says why, in one line
    import shutil

    shutil.rmtree(published)
    proc = run_pipeline(tmp_path, {"CIRCUITDEV_PUBLISHED_URL": server.url})
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [l for l in (proc.stdout + proc.stderr).splitlines() if l.startswith("published: not available")]
    assert len(lines) == 1 and "circuitdev published fetch" in lines[0], proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not published.exists()
    page = (tmp_path / "gen" / "f2_shapes.ipynb").read_text()
    assert "No published (authors' files) data in this chapter" in page and "are not in" in page


def test_ensure_is_all_or_nothing_and_keeps_the_users_files(tmp_path, monkeypatch):
    """A corrupt or partial download is never used; a failed repair leaves the folder as it was (nothing moved or
    deleted); a user's own files survive every repair and a replaced pinned file is kept beside the new one."""
    from circuitdev.sources.fetch import ManifestEntry, ensure_published, is_complete
    import hashlib

    files = {"a.json": b"1", "sub/b.json": b"22"}
    manifest = [ManifestEntry(n, f"r/{n}", "0" * 40, len(d), hashlib.sha256(d).hexdigest()) for n, d in files.items()]

    def flaky(url, timeout):
        if url.endswith("b.json"):
            raise OSError("connection reset")
        return files[url.split("/r/")[1]]

    monkeypatch.setenv("CIRCUITDEV_PUBLISHED_URL", "http://test/{commit}/{repo_path}")
    pub = tmp_path / "pub"
    ok, message = ensure_published(pub, manifest=manifest, download=lambda url, t: files[url.split("/r/")[1]])
    assert ok and is_complete(pub, manifest=manifest) and "2 of 2 files downloaded" in message
    (pub / "README.md").write_text("my notes")
    (pub / "a.json").write_bytes(b"edited")
    ok, message = ensure_published(pub, manifest=manifest, download=flaky)
    assert ok and is_complete(pub, manifest=manifest)  # a.json re-fetched (b.json kept: it was right)
    kept = f"a.json.replaced-{hashlib.sha256(b'edited').hexdigest()[:8]}"
    assert kept in message and (pub / kept).read_bytes() == b"edited"
    (pub / "sub" / "b.json").unlink()
    ok, message = ensure_published(pub, manifest=manifest, download=flaky)
    assert not ok and "connection reset" in message and "1 of 2 files missing (sub/b.json)" in message
    assert sorted(p.name for p in pub.rglob("*")) == sorted(["README.md", "a.json", kept, "sub"])  # as it was
    assert not list(tmp_path.glob(".pub.staging")) and not list(tmp_path.glob("pub.*"))


# ------------------------------------------------------------------------------ null overrides a panel's default


def bos_panel(tmp_path: Path) -> Path:
    return write_tiny_panel(tmp_path, "gpt_neox", 1, "bos-panel", probe={
        "n": 8, "n_pr": 8, "seq_len": 24, "vocab_range": [3, 100], "n_prefix": 0, "n_nulls": 0,
        "first_token_id": 1})


def stored_config(results: Path) -> dict:
    return json.loads((results / "bos-panel" / "step0.json").read_text())["config"]


def test_cli_null_overrides_the_panels_first_token(tmp_path, capsys):
    panel = bos_panel(tmp_path)
    assert main(["probe", "--panel", str(panel), "--out", str(tmp_path / "a"), "--no-progress"]) == 0
    assert stored_config(tmp_path / "a")["first_token_id"] == 1
    assert main(["probe", "--panel", str(panel), "--out", str(tmp_path / "b"), "--set", "first_token_id=null",
                 "--no-progress"]) == 0
    assert stored_config(tmp_path / "b")["first_token_id"] is None
    hashes = {json.loads((tmp_path / d / "bos-panel" / "step0.json").read_text())["config_hash"] for d in "ab"}
    assert len(hashes) == 2  # a different configuration, a different record


@pytest.mark.slow
def test_pipeline_null_overrides_the_panels_first_token(tmp_path):
    panel = bos_panel(tmp_path)
    cfg = {"toy_families": [], "panels": [str(panel)], "results_dir": "results", "book": False,
           "published_dir": None, "model_notebook": {}, "notebooks": [],
           "probe_panel": {"bos-panel": {"first_token_id": None}}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.run([str(SNAKEMAKE), "records", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "--cores",
                           "1", "--configfile", str(tmp_path / "c.yaml")], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert stored_config(tmp_path / "results")["first_token_id"] is None
