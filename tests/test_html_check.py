"""The check for unrendered MyST (circuitdev.book.html_check) on small pages: it catches each kind of raw markup and
passes clean pages, including MyST named in inline code on purpose. The built book is checked in test_book.py."""

from __future__ import annotations

import pytest

from circuitdev.book import html_check


def page(body: str) -> str:
    return (f'<html><head><script>var s = "```{{glue}}`x`";</script></head><body><nav>:class: x</nav>'
            f'<main><article>{body}</article></main></body></html>')


CLEAN = page('<h1>Re-run it</h1><p>The value is <span class="pasted-text">12.5%</span>; see '
             '<a href="f1.html">Fig. 3</a> and <a href="#x">F1</a> (Author, 2024).</p>'
             '<div class="highlight"><pre>make book   # {a: 1}\nx[:, :3] = 0\n</pre></div>'
             '<p>Write <code class="docutils literal"><span class="pre">{glue:text}`key`</span></code> or '
             '<code>```{admonition}</code> in a page.</p>'
             '<table><tr><td>mc close</td><td>0.5</td></tr></table><mjx-container>x</mjx-container>')


def test_clean_page_passes():
    assert html_check.find_unrendered(CLEAN) == []


@pytest.mark.parametrize("kind, body", [
    ("fence", "<p>````{admonition} Measured on 2026-12-04</p>"),
    ("fence", '<div class="highlight"><pre>## Changing\n```bash\nmake\n```\n</pre></div>'),
    ("fence", "<p>:::{note}\nText\n:::</p>"),
    ("role", '<pre>adds up to {glue:text}`_generated/toy_panel.ipynb::toy-seconds:s` in this build</pre>'),
    ("role", "<p>see {glue}`k` here</p>"),
    ("role", '<p>see {doc}<code class="docutils literal">intro</code></p>'),
    ("role", "<p>as {numref}`fig-f1` shows</p>"),
    ("role", "<p>as in {cite:p}`paper2026`</p>"),
    ("role", "<p>as in {cite}`paper2026`</p>"),
    ("directive option", "<p>Title\n:class: dropdown historical-log</p>"),
    ("directive option", "<p>:name: fig-f1\n:width: 100%</p>"),
])
def test_each_kind_is_caught(kind, body):
    found = html_check.find_unrendered(page(body))
    assert kind in {f.kind for f in found}, found
    assert all(f.excerpt for f in found)


def test_check_book_and_command(tmp_path, capsys):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "good.html").write_text(CLEAN)
    (tmp_path / "book" / "rerun.html").write_text(page("<pre>```\n{glue:text}`k`</pre>"))
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "x.html").write_text(page("<p>```</p>"))  # a theme's asset, not a page
    found = html_check.check_book(tmp_path)
    assert list(found) == ["book/rerun.html"] and {f.kind for f in found["book/rerun.html"]} == {"fence", "role"}
    assert html_check.main([str(tmp_path)]) == 1
    assert "book/rerun.html: role" in capsys.readouterr().out
    (tmp_path / "book" / "rerun.html").write_text(CLEAN)
    assert html_check.main([str(tmp_path)]) == 0
    assert html_check.main([str(tmp_path / "missing")]) == 2
    assert "not a built book" in capsys.readouterr().err
