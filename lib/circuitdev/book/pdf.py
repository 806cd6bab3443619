"""The book's print edition: the paper part (intro, method, findings, audit, references) as one PDF.

The built HTML pages are what is printed, so the PDF shows exactly the figures, tables and typeset formulas of the web
book: `print_page` joins the paper's pages (their articles, in the table of contents' order) into one HTML page with a
small print style sheet (book/_static/print.css) and the build's own MathJax; headless Chromium prints it
(`--print-to-pdf`), offline. Jupyter Book's LaTeX builder was the other candidate; it needs a TeX Live of several
hundred MB and cannot take the pages' figures, which are embedded PNGs inside notebook outputs rendered as MyST.

`make pdf` = `python -m circuitdev.book.pdf` after `make book`: `_build/html` -> `_build/pdf/circuitdev-book.pdf`.
Chromium: Debian's `apt-get install -y chromium` (README, "The PDF edition").
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

# the parts of _toc.yml that are not the paper (by their caption); of the appendices only the references are
WORKSHOP_PARTS = ("Workshop",)
APPENDIX_PARTS = ("Appendices",)
APPENDIX_KEEP = ("book/references",)
STYLE = Path(__file__).resolve().parents[3] / "book" / "_static" / "print.css"


class PdfError(Exception):
    """Bad input or a missing tool: the message names the cause and the fix (the command exits 2)."""


def paper_pages(toc: dict) -> list[str]:
    """The paper's pages (toc file names, no suffix) in reading order: the root, every part but the workshop's,
    and of the appendices only the references."""
    pages = [toc["root"]]
    for part in toc.get("parts", []):
        caption = part.get("caption", "")
        if caption in WORKSHOP_PARTS:
            continue
        for chapter in part.get("chapters", []):
            file = chapter.get("file")
            if file and (caption not in APPENDIX_PARTS or file in APPENDIX_KEEP):
                pages.append(file)
    return pages


def _article(page_html: str) -> str:
    """The page's article (its content without the theme's navigation)."""
    m = re.search(r'<article class="bd-article"[^>]*>(.*?)</article>', page_html, re.S)
    if not m:
        m = re.search(r"<main\b[^>]*>(.*?)</main>", page_html, re.S)
    if not m:
        raise PdfError("a page has no <article> or <main>: not a page of a Jupyter Book 1 build")
    return m.group(1)


def _anchor(page: str) -> str:
    return "page-" + re.sub(r"[^a-z0-9]+", "-", page.lower()).strip("-")


def _relink(body: str, page_file: Path, html_dir: Path, anchors: dict[Path, str]) -> str:
    """Relative URLs made absolute (file://) for the joined page; links to a page that is in the PDF go to its place
    in the PDF (its section, or the anchor they name), other links to the web book's file."""
    def fix(m: re.Match) -> str:
        attr, url = m.group(1), m.group(2)
        if re.match(r"^(?:[a-z][a-z0-9+.-]*:|#|//)", url, re.I):
            return m.group(0)
        path, _, frag = url.partition("#")
        if not path:
            return m.group(0)
        target = (page_file.parent / path).resolve()
        if attr == "href" and target in anchors:
            return f'{attr}="#{frag or anchors[target]}"'
        return f'{attr}="{target.as_uri()}{"#" + frag if frag else ""}"'
    return re.sub(r'\b(src|href)="([^"]*)"', fix, body)


def _mathjax_head(page_html: str, page_file: Path) -> str:
    """The page's MathJax configuration and script (the build's own copy: offline), with an absolute script URL."""
    scripts = [s for s in re.findall(r"<script\b[^>]*>.*?</script>", page_html, re.S)
               if "mathjax" in s.lower()]

    def absolute(m: re.Match) -> str:
        url = m.group(1)
        return m.group(0) if re.match(r"^[a-z]+:", url) else f'src="{(page_file.parent / url).resolve().as_uri()}"'
    return "\n".join(re.sub(r'src="([^"]+)"', absolute, s) for s in scripts)


def print_page(html_dir: str | Path, toc: dict, title: str = "") -> str:
    """One HTML page holding the paper's pages in order, for printing (see the module's docstring)."""
    html_dir = Path(html_dir).resolve()
    pages = paper_pages(toc)
    files = {p: html_dir / f"{p}.html" for p in pages}
    missing = [str(f) for f in files.values() if not f.is_file()]
    if missing:
        raise PdfError(f"{len(missing)} page(s) of the paper are not built ({', '.join(missing[:3])}); build the book "
                       "first: make book")
    anchors = {f.resolve(): _anchor(p) for p, f in files.items()}
    sections, head = [], ""
    for page, file in files.items():
        text = file.read_text(errors="replace")
        if not head and "mathjax" in text.lower():
            head = _mathjax_head(text, file)
        body = _relink(_article(text), file, html_dir, anchors)
        body = re.sub(r"<details\b", "<details open", body)  # folded blocks print unfolded (a page cannot click)
        sections.append(f'<section class="print-page" id="{_anchor(page)}">\n{body}\n</section>')
    sheet = html_dir / "_static" / "print.css"  # the build's copy of book/_static/print.css
    style = (sheet if sheet.is_file() else STYLE).read_text() if sheet.is_file() or STYLE.is_file() else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>\n'
            f"<style>\n{style}\n</style>\n{head}\n</head><body>\n"
            + (f'<h1 class="print-title">{title}</h1>\n' if title else "")
            + "\n".join(sections) + "\n</body></html>\n")


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def print_pdf(page: Path, out: Path, *, wait_ms: int = 30000, timeout: int = 300) -> None:
    """Headless Chromium prints `page` to `out` (atomically: a temporary file, then a rename). `wait_ms` of virtual
    time lets MathJax typeset first."""
    exe = chromium()
    if exe is None:
        raise PdfError("headless Chromium is not installed: apt-get install -y chromium (Debian/Ubuntu), then make pdf")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        proc = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                               "--disable-background-networking", "--disable-component-update", "--disable-sync",
                               f"--user-data-dir={profile}", "--no-pdf-header-footer", "--run-all-compositor-stages-"
                               "before-draw", f"--virtual-time-budget={wait_ms}", f"--print-to-pdf={tmp}",
                               page.resolve().as_uri()], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
        tmp.unlink(missing_ok=True)
        raise PdfError(f"Chromium printed no PDF (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    os.replace(tmp, out)


def build_pdf(html_dir: str | Path, out: str | Path, *, toc_file: str | Path | None = None) -> Path:
    """The paper part of the built book `html_dir` (…/_build/html) as the PDF `out`; the table of contents is the
    book's `_toc.yml` (default: two folders above `html_dir`), its title `_config.yml`'s."""
    html_dir, out = Path(html_dir), Path(out)
    if not html_dir.is_dir():
        raise PdfError(f"{html_dir} is not a folder: build the book first (make book) or name its _build/html")
    root = html_dir.resolve().parents[1]
    toc_file = Path(toc_file) if toc_file else root / "_toc.yml"
    if not toc_file.is_file():
        raise PdfError(f"no table of contents at {toc_file}: name the book's _toc.yml with --toc")
    config = root / "_config.yml"
    title = yaml.safe_load(config.read_text()).get("title", "") if config.is_file() else ""
    page = out.with_suffix(".html")  # kept beside the PDF: what was printed, for a look in a browser
    page.parent.mkdir(parents=True, exist_ok=True)
    tmp = page.with_name(f".{page.name}.tmp")
    tmp.write_text(print_page(html_dir, yaml.safe_load(toc_file.read_text()), title))
    os.replace(tmp, page)
    print_pdf(page, out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m circuitdev.book.pdf", description=__doc__.split("\n\n")[0])
    parser.add_argument("html_dir", nargs="?", default="_build/html", help="the built book (default: _build/html)")
    parser.add_argument("-o", "--out", default="_build/pdf/circuitdev-book.pdf", help="the PDF to write")
    parser.add_argument("--toc", default=None, help="the book's _toc.yml (default: beside _build)")
    args = parser.parse_args(argv)
    try:
        out = build_pdf(args.html_dir, args.out, toc_file=args.toc)
    except PdfError as e:
        print(f"pdf: {e}", file=sys.stderr)
        return 2
    print(f"pdf: wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
