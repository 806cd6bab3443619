"""An executed page as one standalone HTML file (no server, no CDN): `circuitdev notebook run ... --html`.

The book renders pages with Sphinx; a page run on its own is turned into HTML here: markdown cells through
markdown-it with the page's MyST roles resolved from the page itself ({glue:text} from its glued values, {numref}
to "Fig. N" in the order the figures appear, {doc} and {cite} as plain text), code cells hidden as in the book
(their outputs shown: HTML, then PNG, then text), figures embedded.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from circuitdev.atomic import write_atomic
from circuitdev.book.display import GLUE_PREFIX

_ROLE = re.compile(r"\{(glue:text|glue|numref|doc|cite:p|cite:t|cite)\}`([^`]*)`")
_FIGURE_NAME = re.compile(r":name: ([^\n]+)")
_STYLE = """body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em;line-height:1.5}
figure{margin:1em 0}img{max-width:100%}table{border-collapse:collapse}td,th{padding:2px 8px}
pre{background:#f6f8fa;padding:.6em;overflow-x:auto}details{margin:1em 0}"""


def _glued(nb) -> dict[str, str]:
    out = {}
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            name = (o.get("metadata", {}).get("scrapbook") or {}).get("name")
            if name:
                text = o.get("data", {}).get(GLUE_PREFIX + "text/plain", "")
                out[name] = text[1:-1] if len(text) > 1 and text[0] == text[-1] and text[0] in "'\"" else text
    return out


def _figures(nb) -> dict[str, int]:
    names = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            md = o.get("data", {}).get("text/markdown", "")
            names += [m.strip() for m in _FIGURE_NAME.findall(md) if md.lstrip("`").startswith("{figure}")]
    return {n: i + 1 for i, n in enumerate(names)}


def _resolve(text: str, glued: dict[str, str], figures: dict[str, int]) -> str:
    def role(m: re.Match) -> str:
        kind, target = m.group(1), m.group(2)
        if kind.startswith("glue"):
            key = target.split("::")[-1].split(":")[0]
            return glued.get(key, f"[{key}]")
        if kind == "numref":
            return f"Fig. {figures[target]}" if target in figures else "the figure"
        if kind == "doc":
            return target.rsplit("/", 1)[-1].replace("_", " ")
        return f"[{target}]"

    return _ROLE.sub(role, text)


def _output_html(o) -> str:
    data = o.get("data", {})
    if any(k.startswith(GLUE_PREFIX) for k in data):
        return ""
    if "text/html" in data:
        return data["text/html"]
    if "image/png" in data:
        return f'<img src="data:image/png;base64,{data["image/png"]}"/>'
    if o.get("output_type") == "stream":
        return f"<pre>{html.escape(o.get('text', ''))}</pre>"
    if "text/plain" in data:
        return f"<pre>{html.escape(data['text/plain'])}</pre>"
    if o.get("output_type") == "error":
        return f"<pre>{html.escape(o.get('ename', ''))}: {html.escape(o.get('evalue', ''))}</pre>"
    return ""


def notebook_html(nb, *, title: str) -> str:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable("table")
    glued, figures = _glued(nb), _figures(nb)
    parts = []
    for cell in nb.cells:
        tags = set(cell.get("metadata", {}).get("tags", []))
        if "remove-cell" in tags:
            continue
        if cell.cell_type == "markdown":
            parts.append(md.render(_resolve(cell.source, glued, figures)))
        elif cell.cell_type == "code":
            if not tags & {"remove-input", "hide-input"}:
                parts.append(f"<pre><code>{html.escape(cell.source)}</code></pre>")
            if "remove-output" not in tags:
                parts += [_output_html(o) for o in cell.get("outputs", [])]
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body>{''.join(parts)}</body></html>\n")


def write_html(notebook_path: str | Path) -> Path:
    """Write `<notebook>.html` next to an executed notebook; returns its path."""
    import nbformat

    path = Path(notebook_path)
    nb = nbformat.read(path, as_version=4)
    return write_atomic(path.with_suffix(".html"), notebook_html(nb, title=path.stem))
