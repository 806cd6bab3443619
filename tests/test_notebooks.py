"""The notebooks' helpers and sources: parameter checks (unknown / ill-typed parameters fail at the top with a clear
message), tiers with absent data (notes, never exceptions), provenance, glue, the figures (never an empty axis),
and the notebook sources themselves (jupytext percent format, a documented parameters cell, thin)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Literal, Optional

import matplotlib

matplotlib.use("agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from circuitdev import findings, plots  # noqa: E402
from circuitdev import notebook as nb  # noqa: E402
from circuitdev.errors import ConfigError  # noqa: E402
from circuitdev.schema import HEAD_CLASSES, sel_column  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.py"))
PUBLISHED = REPO.parent / "shared" / "published"
# Every notebook takes these: the pipeline passes them to all of them (Snakefile `notebook_parameters`).
PIPELINE_PARAMETERS = {"results_dir", "published_dir", "data_dir", "panels"}


# --------------------------------------------------------------------------------------------------- parameters

SPEC = {"panel": str, "threshold": float, "seeds": list[int], "rule": Literal["per-class", "best-class"],
        "revisions": Optional[list[str]], "flag": bool}
GOOD = {"panel": "toy-pythia", "threshold": 30, "seeds": (1, 2), "rule": "per-class", "revisions": None,
        "flag": False}


def test_check_parameters_normalises_good_values():
    out = nb.check_parameters(GOOD, SPEC)
    assert out["threshold"] == 30.0 and isinstance(out["threshold"], float)
    assert out["seeds"] == [1, 2]
    assert nb.check_parameters({**GOOD, "revisions": ["step1"]}, SPEC)["revisions"] == ["step1"]


def test_unknown_parameter_names_it_and_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown notebook parameter\(s\) 'treshold'.*threshold \(float\)"):
        nb.check_parameters({**GOOD, "treshold": 3.0}, SPEC)


@pytest.mark.parametrize("name, value, expected", [
    ("threshold", "high", r"'threshold' must be float; got 'high' \(str\)"),
    ("threshold", True, r"'threshold' must be float"),
    ("seeds", [1, "2"], r"'seeds' must be list\[int\]"),
    ("rule", "majority", r"'rule' must be 'per-class' \| 'best-class'; allowed values: 'per-class', 'best-class'"),
    ("revisions", "step1", r"'revisions' must be list\[str\] \| None"),
    ("flag", "yes", r"'flag' must be bool"),
])
def test_ill_typed_parameter_names_type_and_allowed_values(name, value, expected):
    with pytest.raises(ConfigError, match=expected):
        nb.check_parameters({**GOOD, name: value}, SPEC)


def test_check_notebook_parameters_reads_the_annotations_and_new_names():
    namespace = {"In": [], "nb": nb, "_before": None, "Literal": Literal}  # a notebook's globals
    before = set(namespace)
    exec("threshold: float = 30\nrule: Literal['per-class', 'best-class'] = 'per-class'", namespace)
    namespace["threshold"] = 50  # what papermill's injected cell does
    nb.check_notebook_parameters(namespace, before)
    assert namespace["threshold"] == 50.0 and isinstance(namespace["threshold"], float)
    namespace["bogus"] = 1
    with pytest.raises(ConfigError, match="'bogus'"):
        nb.check_notebook_parameters(namespace, before)


# ------------------------------------------------------------------------------------------------ notebook sources


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_source_is_documented_and_thin(path):
    import jupytext

    book = jupytext.read(path)
    assert book.metadata["kernelspec"]["name"] == "python3"  # papermill needs no -l / -k
    assert book.cells[0].cell_type == "markdown" and book.cells[0].source.startswith("# "), "title first"
    tagged = [c for c in book.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one `parameters` cell"
    params = tagged[0].source.splitlines()
    names = [m.group(1) for line in params if (m := re.match(r"^(\w+)\s*:", line))]
    assert PIPELINE_PARAMETERS <= set(names)
    for i, line in enumerate(params):  # each parameter is typed and has a comment right above it
        if re.match(r"^\w+\s*=", line):
            pytest.fail(f"{path.name}: parameter line without a type annotation: {line!r}")
        if re.match(r"^\w+\s*:", line):
            assert i > 0 and params[i - 1].startswith("# "), f"{path.name}: undocumented parameter {line!r}"
            assert line.count("=") == 1, f"{path.name}: papermill cannot parse {line!r}"
    index = book.cells.index(tagged[0])
    check = book.cells[index + 1]
    assert "check_notebook_parameters(globals(), _before)" in check.source, "validation right after parameters"
    code = [c for c in book.cells if c.cell_type == "code"]
    assert all(len(c.source.splitlines()) <= 45 for c in code), "cells stay short: logic belongs in lib/"
    assert not any(re.search(r"^\s*(def|class) ", c.source, re.M) for c in code), "functions belong in lib/"


def run_notebook(name: str, tmp_path: Path, parameters: dict) -> subprocess.CompletedProcess:
    """jupytext -> papermill, as the pipeline runs it."""
    ipynb = tmp_path / f"{name}.ipynb"
    subprocess.run([sys.executable, "-m", "jupytext", "--to", "ipynb", "--output", str(ipynb),
                    str(REPO / "notebooks" / f"{name}.py")], check=True, capture_output=True)
    args = [a for k, v in parameters.items() for a in ("-p", k, str(v))]
    return subprocess.run([sys.executable, "-m", "papermill", str(ipynb), str(tmp_path / f"out-{name}.ipynb"),
                           *args, "--cwd", str(REPO)], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_unknown_and_ill_typed_parameters_stop_a_notebook_at_the_top(tmp_path):
    proc = run_notebook("f1_floor", tmp_path, {"bos_treshold": 10, "published_dir": "none",
                                               "results_dir": str(tmp_path)})
    assert proc.returncode != 0
    assert "ConfigError" in proc.stderr and "unknown notebook parameter(s) 'bos_treshold'" in proc.stderr
    out = (tmp_path / "out-f1_floor.ipynb").read_text()
    assert '"execution_count": null' in out  # nothing after the check ran
    proc = run_notebook("f1_floor", tmp_path, {"bos_threshold": "high", "published_dir": "none"})
    assert proc.returncode != 0 and "'bos_threshold' must be float; got 'high'" in proc.stderr


# ------------------------------------------------------------------------------------------------------- tiers


def dev_table(panel: str, revisions: int = 4, layers: int = 4, heads: int = 4, source: str = "toy",
              seed: int = 0) -> pd.DataFrame:
    """A synthetic developmental table in which sinks grow in layers >= 2 and one induction head forms."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(revisions):
        for layer in range(layers):
            for head in range(heads):
                sel = {sel_column(c): float(rng.uniform(0.5, 2.0)) for c in HEAD_CLASSES}
                if layer >= 2 and head <= r:
                    sel["sel_first_token"] = 40.0 + 10 * r
                if (layer, head) == (1, 0):
                    sel["sel_induction"] = 20.0 * (r + 1)
                rows.append({"panel": panel, "revision": f"step{r}", "tokens_b": r * 1e-3, "step": r,
                             "layer": layer, "head": head, **sel, "pr": 1.0 + r + head, "source": source})
    return pd.DataFrame(rows)


def test_load_tiers_with_nothing_gives_notes_not_errors(tmp_path):
    tiers = nb.load_tiers(published_dir=None, results_dir=str(tmp_path))
    assert [t.name for t in tiers] == ["published", "toy", "measured"]
    assert tiers.present == []
    assert "PUBLISHED_DIR" in tiers["published"].note
    assert "circuitdev toy train" in tiers["toy"].note
    assert "real_panels" in tiers["measured"].note
    assert tiers.apply(findings.bos_fraction).empty
    assert nb.load_tiers(["published"], published_dir=str(tmp_path / "nope"))["published"].note


def test_load_tiers_reads_records_into_the_right_tier(tmp_path, make_tiny_panel):
    from circuitdev.store import probe_panel

    results = tmp_path / "results"
    toy = make_tiny_panel("gpt_neox", revisions=2, name="toy-tiny")
    real = make_tiny_panel("olmo", revisions=2, name="tiny-olmo")
    for panel in (toy, real):
        probe_panel(panel, results_dir=results, progress=False)
    tiers = nb.load_tiers(["toy", "measured"], results_dir=str(results))
    assert tiers["toy"].panels == ["toy-tiny"] and tiers["measured"].panels == ["tiny-olmo"]
    assert len(tiers["toy"].configs["toy-tiny"]) == 12
    line = tiers.provenance()
    assert line.startswith("Source: toy — toy-tiny; 2 revisions (step0…step1); config ")
    assert "| measured — tiny-olmo" in line and " · code " in line
    nulls = nb.record_nulls(tiers)
    assert set(nulls["panel"]) == {"toy-tiny", "tiny-olmo"} and (nulls["n_nulls"] == 2).all()
    assert findings.noise_floor(nulls[nulls["tier"] == "toy"].drop(columns="tier"))["status"].iloc[0] == "ok"
    # the model page's loader: records first; a panel that is neither recorded nor published says so
    assert nb.model_tier(str(toy), results_dir=str(results)).name == "toy"
    missing = nb.model_tier("nothing-here", results_dir=str(results))
    assert not missing.present and "circuitdev probe --panel nothing-here" in missing.note


@pytest.mark.skipif(not PUBLISHED.is_dir(), reason=f"published data not found at {PUBLISHED}")
def test_published_tier_and_paper_vs_data():
    tiers = nb.load_tiers(["published"], published_dir=str(PUBLISHED))
    assert tiers["published"].panels == ["pythia-1b", "olmo-1b-0724", "olmoe-1b-7b-0924"]
    audit = nb.paper_vs_data(tiers, ["F1"])
    assert (audit["status"] == "match").all() and len(audit) > 0
    ab = nb.published_ablation(tiers["published"], "pythia-1b")
    assert set(ab["condition"]) >= {"baseline", "screen", "matched_random", "upper_bound"}
    assert ab.loc[ab["condition"] == "screen", "n_ablated"].iloc[0] == 3
    assert nb.model_tier("olmo-1b-0724", published_dir=str(PUBLISHED), results_dir="/nonexistent").name == "published"


def test_glue_formats_and_marks_absent_values(capsys):
    glue = nb.Glue("t")
    glue("pct", 0.578125, nb.fmt_pct)
    glue("missing", float("nan"), "{:.1f}", absent="n/a (no data)")
    glue("tokens", 6.291456, nb.fmt_tokens)
    assert glue.keys == {"t-pct": "57.8%", "t-missing": "n/a (no data)", "t-tokens": "6.29B"}
    assert nb.fmt_tokens(0.002097152) == "2.1M" and nb.fmt_tokens(3048) == "3.05T"


def test_claimed_values_and_milestone_text():
    paper = nb.paper_noise_floor()
    assert list(paper["revision"]) == ["step1000", "step5000", "step20000", "step80000", "step143000"]
    assert paper["tier"].eq("paper").all() and paper["tokens_b"].iloc[0] == pytest.approx(2.097, abs=1e-3)
    assert nb.milestone_text("bos_50pct") == "≥ 50% of heads with first-token selectivity ≥ 30×"
    with pytest.raises(ConfigError):
        nb.claimed("no.such.claim")


# ------------------------------------------------------------------------------------------------------ figures


def tiered(*tables: tuple[str, pd.DataFrame]) -> nb.Tiers:
    return nb.Tiers({name: nb.Tier(name, t, configs={p: "abc" for p in t["panel"].unique()}) for name, t in tables})


def test_every_figure_draws_from_two_tiers_and_says_when_empty():
    tiers = tiered(("toy", dev_table("toy-a")), ("measured", dev_table("real-b", seed=1, source="probe")))
    frac = tiers.apply(findings.bos_fraction)
    ms = tiers.apply(findings.milestones)
    gaps = tiers.apply(lambda d: findings.milestone_gap(findings.milestones(d), start="induction_3_heads",
                                                        end="bos_10pct"))
    recall = tiers.apply(findings.circuit_recall)
    traj = tiers.apply(findings.head_trajectories)
    layers = tiers.apply(findings.layer_counts)
    sens = tiers.apply(findings.threshold_sensitivity, final_only=True)
    counts = pd.concat([findings.layer_counts(dev_table("x"), head_class=c).assign(head_class=c)
                        for c in HEAD_CLASSES])
    nulls = pd.DataFrame({"tier": "toy", "panel": "toy-a", "tokens_b": [0.0, 1e-3], "null_p99": [1.1, 1.2],
                          "null_max": [2.0, 3.0], "real_max": [5.0, 60.0]})
    ab = pd.DataFrame({"condition": ["baseline", "screen", "matched_random", "matched_random", "upper_bound"],
                       "n_ablated": [0, 1, 1, 1, 4], "acc_top1": [0.5, 0.1, 0.45, 0.5, 0.0]})
    figures = [plots.bos_fraction_lines(frac), plots.milestone_timeline(ms, gaps), plots.recall_curves(recall),
               plots.pr_selectivity(traj), plots.bos_layer_heatmaps(layers), plots.threshold_sensitivity(sens),
               plots.class_count_heatmaps(counts, title="t"), plots.noise_floor(nulls),
               plots.ablation_bars(ab, title="t"), plots.batch_layout(30, 64, [5, 9, 40])]
    for fig in figures:
        assert isinstance(fig, Figure) and fig.axes
        assert all(ax.get_title() or fig._suptitle for ax in fig.axes if ax.axison)
        assert len(nb.figure_png(fig)) > 1000
    empty = pd.DataFrame(columns=["tier", "panel"])
    for fn in (plots.bos_fraction_lines, plots.recall_curves, plots.pr_selectivity, plots.bos_layer_heatmaps,
               plots.threshold_sensitivity, plots.noise_floor, plots.audit_status):
        fig = fn(empty)
        assert not fig.axes[0].axison and fig.axes[0].texts, f"{fn.__name__}: a placeholder says why"
    assert plots.milestone_timeline(empty).axes[0].texts


def test_show_figure_emits_a_numbered_myst_figure_and_an_html_twin(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, raw=False: shown.append(obj))
    nb.show_figure(plots.placeholder("x"), name="fig-test", caption="A caption.", provenance="Source: test")
    (bundle,) = shown
    md = bundle["text/markdown"]
    assert md.startswith("```{figure} data:image/png;base64,") and ":name: fig-test" in md
    assert "A caption." in md and "<small>Source: test</small>" in md
    assert bundle["text/html"].startswith("<figure><img src=\"data:image/png;base64,")


def test_screen_settings_names_the_baseline_and_the_first_token():
    from types import SimpleNamespace

    toy = SimpleNamespace(name="records", probe_configs={"toy-pythia": {"seq_len": 64, "baseline_excludes_ab": True,
                                                                        "first_token_id": 0}})
    text = nb.screen_settings(toy, "toy-pythia")
    assert "T = 64" in text and "left out of the baseline" in text and "BOS token (id 0" in text
    real = SimpleNamespace(name="records", probe_configs={"pythia-1b": {"seq_len": 256, "first_token_id": None}})
    text = nb.screen_settings(real, "pythia-1b")
    assert "shared 50-position baseline" in text and "BOS" not in text
