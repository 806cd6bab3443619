"""Unrendered MyST in the built book: markup that reached the reader as text instead of being rendered.

A page can build without a warning and still show raw markdown: a fence MyST did not take for one (a backtick in a
backtick fence's info string makes it a paragraph, and its closing fence then opens a code block that swallows the
rest of the page), a role inside a block MyST does not parse. `find_unrendered` reads one page's HTML and lists what
it finds; `check_book` reads every page of a built book; `python -m circuitdev.book.html_check _build/html` prints the
findings and exits 1 when there are any (2 when the folder is not a built book).

What counts as rendered text: the page's article, with scripts, styles and MathJax's copies left out, and inline code
(`<code>`, what an author wrote between backticks on purpose) left out. Code blocks (`<pre>`) are read: a swallowed
page lands in one.
"""

from __future__ import annotations

import html as html_lib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

# the kinds of raw markup and how each shows in rendered text
_ROLES = r"glue(?::\w+)?|doc|numref|ref|eq|cite(?::\w+)?|download|term|abbr|math|sub-ref"
_OPTIONS = r"class|name|width|alt|figwidth|align|label|header-rows|widths|open|caption|linenos|emphasize-lines"
PATTERNS: dict[str, re.Pattern] = {
    "fence": re.compile(r"`{3,}|~{3,}\{|:{3,}\{"),  # ``` / ```` (any), ~~~{ / :::{ (a directive's)
    "role": re.compile(r"\{(?:" + _ROLES + r")\}(?:`|\x00)"),  # {glue:text}`key` (\x00: inline code followed)
    "directive option": re.compile(r"(?:^|\s):(?:" + _OPTIONS + r"):(?=\s)", re.M),  # a directive's ":class: ..." line
}
_CODE = "\x00"  # stands for an inline code element: a role's target rendered as code still reads as a raw role


@dataclass(frozen=True)
class Unrendered:
    kind: str  # a key of PATTERNS
    excerpt: str  # the markup with some text around it, on one line

    def __str__(self) -> str:
        return f"{self.kind}: …{self.excerpt}…"


def rendered_text(page_html: str) -> str:
    """The text a reader sees in the page's article (see the module's docstring), entities decoded."""
    body = page_html
    for tag in ("article", "main"):
        m = re.search(rf"<{tag}\b.*?</{tag}>", page_html, re.S | re.I)
        if m:
            body = m.group(0)
            break
    body = re.sub(r"<(script|style|mjx-assistive-mml)\b.*?</\1>", " ", body, flags=re.S | re.I)
    body = re.sub(r"<code\b[^>]*>.*?</code>", _CODE, body, flags=re.S | re.I)
    body = re.sub(r"<[^>]+>", "", body)
    return html_lib.unescape(body)


def find_unrendered(page_html: str, context: int = 40) -> list[Unrendered]:
    """Every piece of raw MyST in one page's rendered text: fences, roles, directive options."""
    text = rendered_text(page_html)
    found = []
    for kind, pattern in PATTERNS.items():
        for m in pattern.finditer(text):
            around = text[max(0, m.start() - context):m.end() + context].replace(_CODE, "`…`")
            found.append(Unrendered(kind, re.sub(r"\s+", " ", around).strip()))
    return found


def check_book(html_dir: str | Path) -> dict[str, list[Unrendered]]:
    """{page's path under the build folder: its findings} for every page of a built book that has any."""
    root = Path(html_dir)
    out = {}
    for page in sorted(root.rglob("*.html")):
        if page.relative_to(root).parts[0] in ("_static", "_sources", "_images"):
            continue
        found = find_unrendered(page.read_text(errors="replace"))
        if found:
            out[str(page.relative_to(root))] = found
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]) if args else Path("_build/html")
    if len(args) > 1 or not root.is_dir() or not any(root.rglob("*.html")):
        print(f"html_check: {root} is not a built book (no HTML pages); build it first (make book) or name the "
              "folder: python -m circuitdev.book.html_check _build/html", file=sys.stderr)
        return 2
    found = check_book(root)
    for page, items in found.items():
        for item in items:
            print(f"{page}: {item}")
    n = sum(map(len, found.values()))
    print(f"html_check: {n} piece(s) of unrendered MyST in {len(found)} page(s)" if n
          else "html_check: no unrendered MyST", file=sys.stderr)
    return 1 if n else 0


if __name__ == "__main__":
    raise SystemExit(main())


# ------------------------------------------------------------------------------------ layout in a browser at a width

_LAYOUT_SCRIPT = """<script>
window.addEventListener("load", () => setTimeout(() => {
  const root = document.querySelector("article") || document.body;
  const text = (el) => (el ? el.textContent : "").replace(/\\s+/g, " ").trim().slice(0, 80);
  const out = {tables: [], images: []};
  root.querySelectorAll("table").forEach((t) => {
    let scroller = t;  // the table itself scrolls (display: block) or a block around it does
    for (let el = t; el && el !== root; el = el.parentElement) {
      if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== "visible") { scroller = el; break; }
    }
    out.tables.push({caption: text(t.querySelector("caption")) || text(t.querySelector("tr")),
                     width: scroller.scrollWidth, visible: scroller.clientWidth});
  });
  root.querySelectorAll("img").forEach((im) => {
    const fig = im.closest("figure");
    out.images.push({caption: text(fig && fig.querySelector("figcaption")) || im.alt.slice(0, 80),
                     natural: im.naturalWidth, shown: im.getBoundingClientRect().width});
  });
  // a box of the text (a verdict, a note) that runs under the right-hand sidebar: its lines there are hidden
  out.covered = [];
  const side = document.querySelector(".bd-sidebar-secondary");
  const s = side ? side.getBoundingClientRect() : null;
  if (s && s.width > 0 && s.height > 0) {
    root.querySelectorAll("div.admonition").forEach((box) => {
      const b = box.getBoundingClientRect();
      const x = Math.min(b.right, s.right) - Math.max(b.left, s.left);
      const y = Math.min(b.bottom, s.bottom) - Math.max(b.top, s.top);
      if (x > 1 && y > 1) out.covered.push({title: text(box.querySelector(".admonition-title")), px: Math.round(x)});
    });
  }
  const pre = document.createElement("pre");
  pre.id = "circuitdev-layout";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 300));
</script>"""


def layout(page: str | Path, *, width: int = 1280, chromium: str | None = None, timeout: int = 120) -> dict:
    """How one built page lays out in headless Chromium at `width` CSS px: {"tables": [{caption, width, visible}],
    "images": [{caption, natural, shown}], "covered": [{title, px}]}: a table needs sideways scrolling when its width
    exceeds what is visible; an image is shown at shown / natural of its own width; a box (admonition) is covered
    when it runs `px` under the right-hand sidebar, which hides its lines there. The page is copied beside itself with a measuring script
    (relative links keep working) and the copy removed."""
    import json
    import shutil
    import subprocess
    import tempfile

    exe = chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        raise FileNotFoundError("headless Chromium is not installed: apt-get install -y chromium")
    page = Path(page).resolve()
    probe = page.with_name(f".layout-{page.name}")
    probe.write_text(page.read_text(errors="replace").replace("</body>", _LAYOUT_SCRIPT + "</body>"))
    try:
        with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
            proc = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                                   "--no-first-run", "--disable-background-networking", "--disable-component-update",
                                   "--disable-sync", f"--user-data-dir={profile}", "--hide-scrollbars",
                                   f"--window-size={width},1000", "--virtual-time-budget=5000", "--dump-dom",
                                   probe.as_uri()], capture_output=True, text=True, timeout=timeout)
    finally:
        probe.unlink(missing_ok=True)
    m = re.search(r'<pre id="circuitdev-layout"[^>]*>(.*?)</pre>', proc.stdout, re.S)
    if not m:
        raise RuntimeError(f"{page.name}: Chromium gave no layout (exit {proc.returncode}): {proc.stderr[-500:]}")
    return json.loads(html_lib.unescape(m.group(1)))
