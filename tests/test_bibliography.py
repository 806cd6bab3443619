"""The book's references: every citation has an entry, every entry's title keeps its capitals, and prose that
names a paper by its authors ("Guo et al. 2024") cites it."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIB = REPO / "book" / "references.bib"
# the book's pages (the workshop sessions are read in Jupyter too, where a {cite} role would show raw)
PROSE = [*sorted((REPO / "book").glob("*.md")), *sorted((REPO / "notebooks").glob("*.py"))]


def entries() -> dict[str, str]:
    """key -> the entry's text."""
    text = BIB.read_text()
    return {m.group(1): m.group(0) for m in re.finditer(r"@\w+\{([^,]+),.*?\n\}", text, re.S)}


def test_every_citation_has_an_entry():
    keys = set(entries())
    cited = {k.strip() for f in PROSE for m in re.finditer(r"\{cite(?::[pt])?\}`([^`]+)`", f.read_text())
             for k in m.group(1).split(",")}
    assert cited and cited <= keys, f"cited without an entry: {sorted(cited - keys)}"


def test_titles_keep_their_capitals():
    """BibTeX styles lower-case a title ("when do attention circuits form? ... 1b-class") unless it is braced."""
    for key, entry in entries().items():
        title = re.search(r"\btitle\s*=\s*(\{.*?\}),?\n\s*\w+\s*=", entry, re.S)
        assert title and title.group(1).startswith("{{"), f"{key}: title not protected by double braces"


def test_papers_named_in_prose_are_cited():
    """A paper named by its first author and year in the book's prose (the .md pages and the pages' markdown) is
    cited with {cite}, so that it reaches the bibliography."""
    surnames = {re.search(r"author\s*=\s*\{+([^,}]+)", e).group(1).split()[-1]: k for k, e in entries().items()
                if re.search(r"author\s*=\s*\{+([^,}]+)", e)}
    for f in PROSE:
        text = f.read_text()
        if f.suffix == ".py":  # only the markdown cells of a page
            text = "\n".join(line[2:] for line in text.splitlines() if line.startswith("# "))
        for m in re.finditer(r"\b([A-Z][a-z]+) et al\.?,? \(?(\d{4})", text):
            assert "{cite" in text[max(0, m.start() - 200):m.end() + 200] or m.group(1) not in surnames, (
                f"{f.relative_to(REPO)}: '{m.group(0)}' is named but not cited")
