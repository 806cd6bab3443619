"""The book builds with any subset of the tiers (issue 33): `jupyter-book build -W` passes on the small book

- with **no** copy of the authors' files (the toy and measured tiers only: the offline default of a workshop room),
- with the authors' files but **no** toy panel (and no measured one),

so that a glue key or a figure label that only one tier can produce fails the suite, not the user. Each page then says
which tier is missing (its note) and the prose quoting that tier reads "not in this build". The chapter layer owns
this (`book.chapter.Chapter.finish`); the unit tests below pin its parts on the real page sources. The two builds take
about 3-4 minutes each on 2 cores.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import PUBLISHED, write_tiny_panel
from test_book import TINY_PROBE, pipeline_config, text_of

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
NO_DATA_NOTE = re.compile(r"No (published|toy panel|measured)")


def build_small_book(root: Path, *, panels: dict[str, str], published: Path | None) -> tuple[Path, list[str]]:
    """The small book of tests/test_book.py with only `panels` ({name: family}) and `published` (None: no copy);
    returns the built HTML folder and the build's warnings (the build runs with -W --keep-going)."""
    for name, family in panels.items():
        write_tiny_panel(root / "data" / "panels", family, 3, name, probe=TINY_PROBE)
    (root / "data").mkdir(exist_ok=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(REPO / name, root / name)
    (root / "book").mkdir()
    for page in [*(REPO / "book").glob("*.md"), *(REPO / "book").glob("*.bib")]:
        shutil.copy(page, root / "book" / page.name)
    shutil.copytree(REPO / "book" / "_static", root / "book" / "_static")
    config = pipeline_config(root)
    config.update(panels=list(panels), published_dir=str(published) if published else None)
    refinement = next(n for n in config["notebooks"] if n["name"] == "refinement")
    refinement["parameters"] = {"panel": next(iter(panels))} if panels else {}
    (root / "book.yaml").write_text(yaml.safe_dump(config))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CIRCUITDEV_DATA": str(root / "data"), "OMP_NUM_THREADS": "1",
           "CIRCUITDEV_PUBLISHED": str(published) if published else "none"}
    proc = subprocess.run([str(BIN / "snakemake"), "notebooks", "-s", str(REPO / "Snakefile"), "-d", str(root),
                           "--cores", "2", "--configfile", str(root / "book.yaml")], capture_output=True, text=True,
                          env=env, timeout=900)
    logs = "\n".join(p.read_text()[-3000:] for p in (root / "logs").rglob("*.log")) if proc.returncode else ""
    assert proc.returncode == 0, proc.stderr[-5000:] + logs
    proc = subprocess.run([str(BIN / "jupyter-book"), "build", str(root), "--all", "-W", "--keep-going"],
                          capture_output=True, text=True, env=env, timeout=600)
    warnings = [line for line in proc.stdout.splitlines() + proc.stderr.splitlines() if "WARNING" in line]
    return root / "_build" / "html", warnings + ([] if proc.returncode == 0 else [proc.stdout[-3000:]])


@pytest.mark.slow
def test_book_builds_without_the_authors_files(tmp_path):
    html, warnings = build_small_book(tmp_path, panels={"toy-tiny": "gpt_neox", "tiny-olmoe": "olmoe"},
                                      published=None)
    assert not warnings, "\n".join(warnings)
    f1 = text_of((html / "book" / "_generated" / "f1_floor.html").read_text()).replace("’", "'")
    assert "No published (authors' files) data" in f1  # the page says which tier is missing ...
    assert "published fetch" in f1  # ... and how to add it
    assert "not in this build (no published (authors' files) data" in f1  # the prose quoting that tier
    robustness = (html / "book" / "_generated" / "robustness.html").read_text()
    assert 'id="fig-rob-map-published"' in robustness and "Not in this build" in robustness


@pytest.mark.slow
@pytest.mark.skipif(not PUBLISHED.is_dir(), reason="no copy of the authors' files on this machine "
                                                   "(CIRCUITDEV_PUBLISHED or data/published): that build needs one")
def test_book_builds_with_the_authors_files_and_no_toy_panel(tmp_path):
    html, warnings = build_small_book(tmp_path, panels={}, published=PUBLISHED)
    assert not warnings, "\n".join(warnings)
    f1 = text_of((html / "book" / "_generated" / "f1_floor.html").read_text()).replace("’", "'")
    assert "No toy panel (trained here) data" in f1 and "make book" in f1  # which tier is missing, how to add it
    toy = (html / "book" / "_generated" / "toy_panel.html").read_text()
    assert "No toy panel" in toy.replace("&#8217;", "'")


# ------------------------------------------------------------------------------------------------ the parts


def test_references_are_read_from_the_page_and_the_chapters_quoting_it():
    from circuitdev.book.chapter import page_references

    f1 = page_references("f1_floor")
    assert {"f1-pub-all-where", "f1-pub-all-margin", "f1-toy-verdicts"} <= f1.glue_keys
    assert "f1-pub-held" in f1.glue_keys  # also quoted by the intro as _generated/f1_floor.ipynb::f1-pub-held:s
    assert f1.figure_labels == {"fig-f1-layers", "fig-f1-margin"}
    assert f1.last_code == 'ch.paper_vs_data("F1")'
    assert "fig-rob-map-published" in page_references("robustness").figure_labels


def test_book_chapters_quote_keys_by_page(tmp_path):
    from circuitdev.book.chapter import page_references

    source = tmp_path / "page.py"
    source.write_text('# %% [markdown]\n# A {glue:text}`p-pub-x` and {numref}`Figure <fig-p-toy>`.\n\n'
                      '# %%\nx = 1\n\n# %%\ny = 2\n')
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "intro.md").write_text("{glue:text}`_generated/page.ipynb::p-measured-y:s` and "
                                                "{glue:text}`_generated/other.ipynb::q-pub-z:s`")
    refs = page_references("page", source=source, book_dir=tmp_path / "book")
    assert refs.glue_keys == {"p-pub-x", "p-measured-y"}
    assert refs.figure_labels == {"fig-p-toy"}
    assert refs.last_code == "y = 2"


def test_only_keys_naming_an_absent_tier_are_filled():
    from circuitdev.book.chapter import tier_named_in

    assert tier_named_in("f1-pub-all-where", ["published"]) == "published"
    assert tier_named_in("fig-rob-map-published", ["toy", "published"]) == "published"
    assert tier_named_in("f3-robust-f3-gap-toy-ranges", ["toy"]) == "toy"
    assert tier_named_in("f1-pub-held", ["toy", "measured"]) is None  # a present tier's key: a typo still fails
    assert tier_named_in("f1-threshold", ["published", "toy", "measured"]) is None  # names no tier
    assert tier_named_in("f2-publication", ["published"]) is None  # a part, not a substring


def test_a_tier_without_rows_keeps_the_functions_columns():
    """A findings function that finds nothing in the only present tier still gives the columns a page selects (the
    F5 page's null table failed with a KeyError in a build without the authors' files)."""
    import pandas as pd

    from circuitdev.book.tiers import Tier, Tiers

    tiers = Tiers({"toy": Tier("toy", pd.DataFrame({"panel": ["toy-tiny"]})), "published": Tier("published")})
    out = tiers.apply(lambda table: pd.DataFrame(columns=["panel", "median_lead"]))
    assert list(out.columns) == ["tier", "panel", "median_lead"] and out.empty
    out = tiers.apply(lambda table: table.assign(x=1))
    assert list(out.columns) == ["tier", "panel", "x"] and len(out) == 1


def test_finish_fills_only_what_an_absent_tier_cannot_produce(monkeypatch):
    """`Chapter.finish` glues the missing keys of absent tiers with the "not in this build" words, draws a
    placeholder for a missing figure of an absent tier, and leaves a present tier's missing key alone."""
    import pandas as pd

    from circuitdev.book import display
    from circuitdev.book.build import BuildFolders
    from circuitdev.book.chapter import Chapter, PageReferences, not_in_build
    from circuitdev.book.tiers import Tier, Tiers

    glued, figures = {}, []
    monkeypatch.setattr(display, "glue_text", lambda key, text, value=None: glued.__setitem__(key, text))
    monkeypatch.setattr(display, "show_figure", lambda fig, **kw: figures.append(kw["name"]))
    ch = Chapter("p", "p", {}, BuildFolders(results_dir=Path("r"), data_dir=Path("d"), published_dir=None, panels=None),
                 tiers=Tiers({"toy": Tier("toy", pd.DataFrame({"panel": ["t"]})), "published": Tier("published")}))
    ch.glue("toy-x", 1)
    refs = PageReferences({"p-toy-x", "p-toy-y", "p-pub-z", "p-measured-w"}, {"fig-p-published", "fig-p-toy"}, None)
    ch.finish(refs)
    assert glued["p-pub-z"] == not_in_build("published") and glued["p-measured-w"] == not_in_build("measured")
    assert "p-toy-y" not in glued  # the toy tier is present: a missing toy key is the page's bug, left to fail
    assert figures == ["fig-p-published"]


def test_a_figure_names_only_the_models_it_draws(monkeypatch):
    """Issue 30: the sink-measures norms figure (records only) named the published models in its source line. With
    `drawn`, the line and `drawn_models` (for the caption) name exactly the tiers and panels of the rows drawn."""
    import pandas as pd

    from circuitdev.book import display, drawn_models
    from circuitdev.book.build import BuildFolders
    from circuitdev.book.chapter import Chapter
    from circuitdev.book.tiers import Tier, Tiers

    shown = {}
    monkeypatch.setattr(display, "show_figure", lambda fig, **kw: shown.update(kw))
    table = lambda *panels: pd.DataFrame({"panel": list(panels), "revision": "step1", "tokens_b": 1.0})  # noqa: E731
    ch = Chapter("p", "p", {}, BuildFolders(results_dir=Path("r"), data_dir=Path("d"), published_dir=None, panels=None),
                 tiers=Tiers({"published": Tier("published", table("pythia-1b", "olmo-1b-0724")),
                              "toy": Tier("toy", table("toy-tiny", "toy-small"))}))
    drawn = pd.DataFrame({"tier": ["toy", "toy"], "panel": ["toy-tiny", "toy-tiny"], "value": [1.0, 2.0]})
    ch.figure(None, name="fig-p-x", caption=f"Drawn: {drawn_models(drawn)}.", drawn=drawn)
    assert shown["caption"] == "Drawn: toy-tiny (toy panel)."
    assert "toy — toy-tiny;" in shown["provenance"]
    assert not any(name in shown["provenance"] for name in ("pythia-1b", "olmo-1b-0724", "toy-small", "published"))
    ch.figure(None, name="fig-p-y", caption="", drawn=drawn.iloc[:0])
    assert shown["provenance"].startswith("Source: no data")
    ch.figure(None, name="fig-p-z", caption="")  # without `drawn`: every tier of the page, as before
    assert "pythia-1b" in shown["provenance"] and "toy-small" in shown["provenance"]
    two = pd.DataFrame({"tier": ["toy", "measured"], "panel": ["toy-tiny", "tiny-olmoe"]})
    assert drawn_models(two) == "toy-tiny (toy panel) and tiny-olmoe (measured)"
    assert drawn_models(two.iloc[:0]) == "no model"


def test_a_pages_verdict_and_how_robust_share_one_robustness_table(monkeypatch):
    """Issue 34: the verdict under a findings page's title and its "How robust" block read one robustness table per
    claim (F5's costs seconds); the verdicts equal those computed from scratch (`findings.table_verdicts`)."""
    import pandas as pd

    from circuitdev.analysis import findings
    from circuitdev.analysis.findings import robustness as robustness_module
    from circuitdev.book import display
    from circuitdev.book.build import BuildFolders
    from circuitdev.book.chapter import Chapter
    from findings_fixtures import two_tiers

    calls = []
    real = robustness_module.robustness_table
    counted = lambda dev, **kw: calls.append(kw["claims"]) or real(dev, **kw)  # noqa: E731
    monkeypatch.setattr(robustness_module, "robustness_table", counted)  # where table_verdicts imports it from
    monkeypatch.setattr(findings, "robustness_table", counted)  # where the page's Chapter reads it
    for name in ("glue_text", "note", "show_table", "show_figure"):
        monkeypatch.setattr(display, name, lambda *a, **kw: None)
    tiers = two_tiers()
    ch = Chapter("p", "p", {}, BuildFolders(results_dir=Path("r"), data_dir=Path("d"), published_dir=None, panels=None),
                 tiers=tiers)
    verdicts = ch.verdict("F1.floor")
    ch.how_robust("F1.floor", figure=False)
    assert calls == [["F1.floor"]] * len(tiers.present) and len(verdicts)  # once per tier, not twice
    fresh = pd.concat([findings.claim_verdicts(real(t.table, claims=["F1.floor"])).assign(tier=t.name)
                       for t in tiers.present], ignore_index=True)
    pd.testing.assert_frame_equal(verdicts[fresh.columns].reset_index(drop=True), fresh, check_dtype=False)
