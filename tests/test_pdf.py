"""The PDF edition's parts that need no browser (circuitdev.book.pdf): which pages are the paper, the joined print
page, and the messages for bad input. The PDF itself is built and read in test_book.py (headless Chromium)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from circuitdev.book import pdf

TOC = {"format": "jb-book", "root": "book/intro", "parts": [
    {"caption": "Method", "chapters": [{"file": "book/_generated/method"}]},
    {"caption": "The six findings", "chapters": [{"file": "book/_generated/f1_floor"}]},
    {"caption": "Workshop", "chapters": [{"file": "book/workshop_participants"}]},
    {"caption": "Appendices", "chapters": [{"file": "book/_generated/models", "sections": [{"glob": "x"}]},
                                           {"file": "book/references"}]}]}


def page(title: str, body: str, mathjax: str = "") -> str:
    return (f"<html><head>{mathjax}</head><body><nav>menu</nav><main><article class=\"bd-article\" role=\"main\">"
            f"<h1>{title}</h1>{body}</article></main></body></html>")


def write_book(root: Path) -> Path:
    html = root / "_build" / "html"
    (html / "book" / "_generated").mkdir(parents=True)
    (html / "_static").mkdir()
    (html / "_static" / "print.css").write_text("body { color: black; }")
    mj = '<script>window.MathJax = {}</script><script defer src="../_static/mathjax/tex-chtml.js"></script>'
    (html / "book" / "intro.html").write_text(page("Intro", '<p>See <a href="_generated/f1_floor.html#fig-x">Fig</a>'
                                                   ' and <a href="workshop_participants.html">the workshop</a>.</p>',
                                                   mj))
    (html / "book" / "_generated" / "method.html").write_text(page("The method", "<details><summary>P</summary>x"
                                                                   "</details><img src=\"../../_images/a.png\">"))
    (html / "book" / "_generated" / "f1_floor.html").write_text(page("F1", '<figure id="fig-x">f</figure>'))
    (html / "book" / "references.html").write_text(page("References", "<p>refs</p>"))
    (root / "_toc.yml").write_text(yaml.safe_dump(TOC))
    (root / "_config.yml").write_text("title: A book\n")
    return html


def test_paper_pages_leave_out_the_workshop_and_the_appendices_but_the_references():
    assert pdf.paper_pages(TOC) == ["book/intro", "book/_generated/method", "book/_generated/f1_floor",
                                    "book/references"]


def test_print_page_joins_the_articles_in_order(tmp_path):
    html = write_book(tmp_path)
    joined = pdf.print_page(html, TOC, "A book")
    assert joined.index("<h1>Intro") < joined.index("<h1>The method") < joined.index("<h1>F1") \
        < joined.index("<h1>References")
    assert "menu" not in joined and "color: black" in joined  # no navigation; the build's print style sheet
    assert 'href="#fig-x"' in joined  # a link into the PDF stays inside it
    assert f'href="{(html / "book" / "workshop_participants.html").as_uri()}"' in joined  # one out of it: the file
    assert f'src="{(html / "_images" / "a.png").as_uri()}"' in joined
    assert f'src="{(html / "_static" / "mathjax" / "tex-chtml.js").as_uri()}"' in joined
    assert "<details open>" in joined and joined.count('class="print-page"') == 4


def test_bad_input_exits_2_naming_the_fix(tmp_path, capsys, monkeypatch):
    assert pdf.main([str(tmp_path / "nothing")]) == 2
    assert "build the book first" in capsys.readouterr().err
    html = write_book(tmp_path)
    (html / "book" / "references.html").unlink()
    assert pdf.main([str(html), "-o", str(tmp_path / "x.pdf")]) == 2
    assert "not built" in capsys.readouterr().err and not (tmp_path / "x.pdf").exists()
    (html / "book" / "references.html").write_text(page("References", ""))
    monkeypatch.setattr(pdf, "chromium", lambda: None)
    assert pdf.main([str(html), "-o", str(tmp_path / "x.pdf")]) == 2
    assert "apt-get install -y chromium" in capsys.readouterr().err and not (tmp_path / "x.pdf").exists()
