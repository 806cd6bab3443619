"""What a page shows: numbers formatted for prose, glue, notes, tables and numbered figures.

Every output carries MyST markdown for the book and an HTML twin for Jupyter (`_config.yml` makes the book prefer
the markdown), so an executed page reads the same in both.
"""

from __future__ import annotations

import base64
import html
import io
import math
import re
import textwrap
from typing import Any, Callable, Literal

import pandas as pd

from circuitdev.analysis.units import fmt_tokens, fmt_tokens_b  # noqa: F401  (re-exported: display.fmt_tokens)


# ------------------------------------------------------------------------------------------------ number formats


def is_missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def fmt_pct(fraction: float, decimals: int = 1) -> str:
    """0.578125 -> "57.8%"."""
    return "n/a" if is_missing(fraction) else f"{100 * float(fraction):.{decimals}f}%"


def fmt_interval(value: Any, lo: Any, hi: Any, fmt: str | Callable[[Any], str] = "{:.3g}") -> str:
    """A value with its 95% interval: "29.9 (95% interval 27.1–33.3)"; the value alone when the interval is missing
    (a tier without per-sequence data), "n/a" when the value is."""
    if is_missing(value):
        return "n/a"
    text = format_value(value, fmt)
    if is_missing(lo) or is_missing(hi):
        return text
    return f"{text} (95% interval {format_value(lo, fmt)}–{format_value(hi, fmt)})"


def with_interval_text(frame: pd.DataFrame, column: str, fmt: str | Callable[[Any], str] = "{:.3g}", *,
                       name: str | None = None) -> pd.DataFrame:
    """`frame` with a text column (`<column>_ci`, or `name`) reading "value (95% interval lo–hi)" from `column` and
    its `_lo` / `_hi` columns (the value alone where they are missing), for glue and tables."""
    lo, hi = (frame[f"{column}_{e}"] if f"{column}_{e}" in frame.columns else [None] * len(frame) for e in ("lo", "hi"))
    texts = [fmt_interval(v, a, b, fmt) for v, a, b in zip(frame[column], lo, hi)]
    return frame.assign(**{name or f"{column}_ci": texts})


def format_value(value: Any, fmt: str | Callable[[Any], str] = "{}", *, absent: str = "n/a") -> str:
    """`value` as prose text: `fmt` is a format string or a function; a missing value gives `absent`."""
    if is_missing(value):
        return absent
    return fmt(value) if callable(fmt) else fmt.format(value)


# ---------------------------------------------------------------------------------------------------------- glue


GLUE_PREFIX = "application/papermill.record/"  # myst-nb's mark of a glued, not displayed, output


def _scalar(value: Any) -> Any:
    """A number or string as JSON (numpy scalars unwrapped); None for anything else."""
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        value = value.item()
    return value if isinstance(value, (bool, int, float, str)) and not is_missing(value) else None


def plain_text(text: str) -> str:
    """Glued text is plain text (the book inserts it verbatim into a sentence): markdown code and emphasis marks
    (`x`, **x**, *x*) are dropped, keeping their content."""
    text = re.sub(r"`([^`]*)`", r"\1", str(text))
    return re.sub(r"(?<![\w*])(\*\*|\*)(?=\S)(.+?)(?<=\S)\1(?![\w*])", r"\2", text)


def glue_text(key: str, text: str, value: Any = None) -> None:
    """Glue `text` under `key` for {glue:text}`key` in this page (`_generated/PAGE.ipynb::key:s` from another).
    The text is glued as plain text (`plain_text`: no markdown marks).

    The output is myst-nb's glue record; its metadata also keeps the unformatted `value` (when it is a scalar), which
    `circuitdev notebook sweep` collects into its summary table."""
    from IPython.display import display

    text = plain_text(text)

    metadata = {"scrapbook": {"name": key, "mime_prefix": GLUE_PREFIX}, "circuitdev": {"value": _scalar(value)}}
    display({GLUE_PREFIX + "text/plain": repr(text)}, raw=True, metadata=metadata)


def glue_figure(key: str, fig, *, alt: str = "", close: bool = True) -> None:
    """Glue a figure (PNG, drawn at most MAX_FIGURE_PX wide) under `key`, not shown here, for another page to paste
    with a `{glue}` directive and `:doc: _generated/PAGE.ipynb` (a page of prose showing a build's figure, like the
    toy recipe page). Glued as an HTML image with the PNG inline: myst-nb 1.4 pastes a glued image/png from another
    page as a link to a file it never writes (a broken image), its HTML as it is."""
    import html

    import matplotlib.pyplot as plt
    from IPython.display import display

    data = base64.b64encode(figure_png_fitted(fig)).decode()
    if close:
        plt.close(fig)
    img = f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt, quote=True)}" style="max-width:100%"/>'
    metadata = {"scrapbook": {"name": key, "mime_prefix": GLUE_PREFIX}}
    display({GLUE_PREFIX + "text/html": img, GLUE_PREFIX + "text/plain": f"<figure {key}>"}, raw=True,
            metadata=metadata)


# ------------------------------------------------------------------------------------------ notes, tables, figures


def display_bundle(markdown: str, html_text: str) -> None:
    """One output the book renders as MyST markdown (nb_mime_priority_overrides puts text/markdown first) and
    Jupyter renders as HTML (it prefers text/html)."""
    from IPython.display import display

    display({"text/markdown": markdown, "text/html": html_text, "text/plain": html.unescape(
        html_text.replace("<br>", "\n"))}, raw=True)


NoteKind = Literal["note", "warning", "important", "tip"]


def note(text: str, *, kind: NoteKind = "note", title: str | None = None, folded: bool = False) -> None:
    """A visible admonition (MyST markdown inside; backticks become code). `folded`: closed until clicked."""
    # a backtick in a backtick fence's title unmakes the fence (CommonMark): the title is plain text
    head = f"{{admonition}} {plain_text(title or kind.capitalize())}\n:class: {kind}{' dropdown' if folded else ''}"
    md = f"````{head}\n{text}\n````\n"
    body = html.escape(text).replace("`", "").replace("\n", "<br>")
    box = (f'<div style="border-left:4px solid #4a90d9;padding:0.5em 1em;background:#f3f7fc">'
           f'<b>{html.escape(title or kind.capitalize())}.</b> {body}</div>')
    display_bundle(md, f"<details><summary>{html.escape(title or kind)}</summary>{box}</details>" if folded else box)


def tier_line(shown: list[str], absent: dict[str, str], *, what: str = "this chapter") -> None:
    """One line saying which tiers of evidence the page shows (`shown`: their labels) and which it lacks: `absent`
    maps a missing tier's one-line title ("No measured (...) data in this chapter") to how to add it, folded under
    the line (one click), instead of a box per missing tier on every page."""
    head = f"Evidence in {what}: {', '.join(shown) if shown else 'none in this build'}."
    if not absent:
        display_bundle(f"<p class=\"tier-line\">{html.escape(head, quote=False)}</p>\n",
                        f'<p class="tier-line">{html.escape(head)}</p>')
        return
    title = plain_text(f"{head} {' '.join(t.rstrip('.') + '.' for t in absent)} "
                       f"How to add {'it' if len(absent) == 1 else 'them'}:")
    body = "\n\n".join(f"**{t}.** {text}" for t, text in absent.items())
    md = f"````{{admonition}} {title}\n:class: tier-line dropdown\n{body}\n````\n"
    html_body = "<br>".join(f"<b>{html.escape(t)}.</b> {html.escape(text).replace('`', '')}"
                            for t, text in absent.items())
    display_bundle(md, f'<details class="tier-line"><summary>{html.escape(title)}</summary>{html_body}</details>')


def _integral_columns(df: pd.DataFrame) -> list[str]:
    """Float columns whose every present value is a whole number (steps, counts, thresholds): shown as integers."""
    out = []
    for col in df.columns:
        values = df[col]
        if pd.api.types.is_float_dtype(values) and values.notna().any():
            present = values.dropna()
            if ((present % 1) == 0).all() and (present.abs() < 1e15).all():
                out.append(col)
    return out


# headers that snake_case -> words would leave cryptic: their words and what they mean, which a table's caption
# gets appended for every such column it shows
HEADER_WORDS = {
    "mc_close": ("close call", "the share that decides the verdict is within Monte Carlo error of its cut"),
    "share_head": ("share: head at bar", "the share of bootstrap resamples in which the deciding head reaches "
                                         "the bar"),
    "share_any": ("share: any at bar", "the share of resamples in which some floor head reaches the bar at some "
                                       "revision"),
    "looks": ("looks", "floor heads × revisions looked at"),
    "k_above": ("heads above null p99", "heads whose real induction selectivity exceeds the null's 99th "
                                        "percentile"),
    "value_lo": ("95% lo", ""),
    "value_hi": ("95% hi", ""),
}


def header_notes(columns) -> str:
    """"words: meaning; ..." for the columns of HEADER_WORDS that have a meaning to explain ("" when none)."""
    return "; ".join(f"{HEADER_WORDS[c][0]}: {HEADER_WORDS[c][1]}" for c in map(str, columns)
                     if c in HEADER_WORDS and HEADER_WORDS[c][1])


def _header(column: Any) -> str:
    """A column's name as a reader sees it: `tokens_b` -> "tokens", `first_tokens_b` -> "first tokens",
    `rise_pp` -> "rise pp" (snake_case in words; the frame keeps its names; HEADER_WORDS for the cryptic ones)."""
    text = str(column)
    if text in HEADER_WORDS:
        return HEADER_WORDS[text][0]
    text = re.sub(r"(^|_)tokens_b$", r"\1tokens", text)
    return text.replace("_", " ")


def fmt_times(value: Any) -> str:
    """A selectivity or a ratio as the prose writes it: three significant digits and "×" (47.67 -> "47.7×");
    "—" when missing."""
    return "—" if is_missing(value) else f"{significant(value)}×"


# the participation ratio is a count of directions, not an "x times" ratio
_NOT_TIMES = {"participation_ratio"}


def is_times_column(name: str) -> bool:
    """A column of selectivities (`sel_induction`, `selectivity`) or of ratios (`token_ratio`, `p99_ratio`), which
    a table shows with "×" as the prose does."""
    return name not in _NOT_TIMES and (name == "selectivity" or name.startswith("sel_") or
                                       name.endswith(("_ratio", "_selectivity")))


def _default_formats(df: pd.DataFrame) -> dict[str, Callable[[Any], str]]:
    """Formats a column gets from its name or type unless the caller gives one: token counts in billions as
    "6.29B" / "1.53M", bars ("threshold") as "30×", selectivities and ratios (`is_times_column`) as "47.7×",
    booleans as yes / no."""
    out: dict[str, Callable[[Any], str]] = {}
    for col in df.columns:
        name, values = str(col), df[col]
        present = values.dropna()
        if name == "tokens_b" or name.endswith("_tokens_b"):
            if pd.api.types.is_numeric_dtype(values):
                out[col] = lambda v: "—" if is_missing(v) else fmt_tokens_b(v)
        elif (name == "threshold" or name.endswith("_threshold")) and pd.api.types.is_numeric_dtype(values) \
                and not pd.api.types.is_bool_dtype(values):
            out[col] = lambda v: "—" if is_missing(v) else f"{float(v):g}×"
        elif is_times_column(name) and pd.api.types.is_numeric_dtype(values) \
                and not pd.api.types.is_bool_dtype(values):
            out[col] = fmt_times
        elif len(present) and all(isinstance(v, (bool,)) or type(v).__name__ == "bool_" for v in present):
            out[col] = lambda v: "—" if is_missing(v) else ("yes" if v else "no")
    return out


def _is_text(values: pd.Series) -> bool:
    return values.dtype == object or pd.api.types.is_string_dtype(values)


_LONG_DECIMAL = re.compile(r"(?<![\w.])(-?\d+\.\d{4,})(?![\w.])")


def round_long_decimals(text: str) -> str:
    """Numbers written into text with four or more decimals ("5.07812", "0.6919999718666077") get the tables' rule,
    three significant digits (`significant`): "5.08", "0.692"; versions ("2.13.0") and names are left alone."""
    return _LONG_DECIMAL.sub(lambda m: significant(float(m.group(1))), text)


def number_text(value: Any) -> str:
    """Any value written into prose by the tables' rule: a number, or a number as text (the audit table stores its
    values as text), with three significant digits (`significant`: 0.754593 -> "0.755", "6.291" -> "6.29", 3048 ->
    "3,048"), other text with its long decimals rounded (`round_long_decimals`), "—" when missing."""
    if isinstance(value, (bool,)) or type(value).__name__ == "bool_":
        return str(bool(value)).lower()
    if isinstance(value, (int, float)) or (hasattr(value, "dtype") and getattr(value, "ndim", 1) == 0):
        return significant(value)
    if is_missing(value):
        return "—"
    text = str(value).strip()
    if re.fullmatch(r"-?\d+(\.\d+)?", text):
        return significant(float(text))
    return round_long_decimals(text)


def tokens_b_text(value: Any) -> str:
    """A token count in billions, a number or the text the audit table stores ("6.291"), in the book's one style
    for token counts (`fmt_tokens_b`: "6.29B", "3.05T"); other text as it is, its numbers by `number_text`."""
    try:
        return fmt_tokens_b(float(value))
    except (TypeError, ValueError):
        return number_text(value)


def _cell_markdown(value: Any) -> Any:
    """Inline code in a text cell (`circuitdev toy train`) as code, not as literal backticks; numbers in the text by
    the tables' rule (`round_long_decimals`)."""
    if isinstance(value, str):
        value = round_long_decimals(value)
    if isinstance(value, str) and "`" in value:
        return re.sub(r"`([^`]+)`", lambda m: f"<code>{html.escape(m.group(1))}</code>", value)
    return value


def significant(value: Any, digits: int = 3) -> str:
    """A measured number with `digits` significant digits and no trailing zeros, never in e-notation: 47.67 -> "47.7",
    0.3681 -> "0.368", 4.5 -> "4.5", 2.0 -> "2", 1234.5 -> "1,234"; "—" when missing."""
    if is_missing(value):
        return "—"
    v = float(value)
    if v == 0 or not math.isfinite(v):
        return f"{v:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(v))))
    text = f"{v:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def show_table(df: pd.DataFrame, caption: str = "", *, precision: int | None = None, index: bool = False,
               formats: dict[str, str | Callable[[Any], str]] | None = None) -> None:
    """A table with a caption; floats with three significant digits (`significant`; `precision`: that many decimals
    instead) unless `formats` gives a column its own format
    ("{:.1%}", a callable, ...); float columns holding whole numbers only (steps, counts) as integers; token counts
    (`tokens_b`, `*_tokens_b`) as "6.29B", bars (`threshold`, `*_threshold`) as "30×", selectivities and ratios
    (`sel_*`, `*_ratio`: `is_times_column`) as "47.7×" (`fmt_times`), booleans as yes / no, inline
    code in text cells as code; headers in words (`rise_pp` -> "rise pp"). Missing values show as "—". Short cells
    keep to one line and long text cells wrap; wide tables scroll sideways (book/_static/circuitdev.css)."""
    from IPython.display import display

    text = [i for i in range(df.shape[1]) if _is_text(df.iloc[:, i])]  # positions: names may repeat
    if text:
        df = df.copy()
        for i in text:
            df.isetitem(i, df.iloc[:, i].map(_cell_markdown))
    styler = df.style.format(precision=3 if precision is None else precision, thousands=",", na_rep="—")
    # formats by name need unique names: a table that repeats a name keeps the caller's formats only
    defaults = _default_formats(df) if df.columns.is_unique else {}
    own = {k: v for k, v in {**defaults, **(formats or {})}.items() if k in df.columns}
    if own:  # subset: without it Styler.format resets every other column to its default precision
        styler = styler.format(own, na_rep="—", subset=list(own))
    whole = [c for c in _integral_columns(df) if c not in own]
    if whole:
        styler = styler.format({c: "{:,.0f}" for c in whole}, na_rep="—", subset=whole)
    measured = [c for c in df.columns if pd.api.types.is_float_dtype(df[c]) and c not in own and c not in whole] \
        if precision is None and df.columns.is_unique else []
    if measured:
        styler = styler.format({c: significant for c in measured}, subset=measured)
    styler = styler.format_index(_header, axis=1)
    if not index:
        styler = styler.hide(axis="index")
    notes = header_notes(df.columns)
    if notes:  # the cryptic headers explained
        caption = " ".join(t for t in (caption.rstrip().rstrip(".") + "." if caption else "",
                                         notes[0].upper() + notes[1:] + ".") if t)
    if caption:
        styler = styler.set_caption(_cell_markdown(caption))
    styler = styler.set_table_styles(_table_styles(df, text))
    # a table of many columns is set smaller
    size = "85%" if df.shape[1] <= 8 else "75%" if df.shape[1] <= 11 else "68%"
    display(styler.set_table_attributes(f'style="font-size: {size}"'))


def _table_styles(df: pd.DataFrame, text: list[int]) -> list[dict]:
    """`show_table`'s CSS: how each column wraps (`text`: the positions of its text columns), then cells, headers
    and caption."""
    lengths = [df.iloc[:, i].astype(str).str.len().max() if len(df) else 0 for i in range(df.shape[1])]
    # at 1280 px every column is in view (the cell is as wide as the figures, book/_static/circuitdev.css): headers
    # wrap between words, and so do cells, except short ones ("pythia-1b", "30×", "L1H0"), which never break inside;
    # long text (claims, reasons, ranges) is never squeezed to a word a line (by position: Styler names each cell's
    # column colN)
    columns = [{"selector": f"td.col{i}", "props": "min-width: 10em" if i in text and n > 40 else
                "white-space: nowrap" if n <= 12 else "white-space: normal"} for i, n in enumerate(lengths)]
    return [*columns,
        {"selector": "td", "props": "max-width: 28em; overflow-wrap: break-word; "
                                    "text-align: left; padding: 2px 6px; vertical-align: top"},
        {"selector": "th", "props": "white-space: normal; text-align: left; padding: 2px 6px; vertical-align: bottom"},
        {"selector": "caption", "props": "caption-side: top; text-align: left; font-style: italic"}]


def figure_png(fig, dpi: int = 110) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


# A book figure is shown in a full-width cell, about 920 px wide at 1280 px: drawn at most this wide it is shown at
# >= 0.84 of its size, so its labels keep their size on the page (a 1700 px figure shown at 0.53x had 5 px labels).
MAX_FIGURE_PX = 1100


def png_width(data: bytes) -> int:
    return int.from_bytes(data[16:20], "big")  # the IHDR chunk's width


# Narrower than this share of its width, a figure's panels crowd their own labels: such a figure keeps its drawing
# (its plot function must lay it out for the page's width instead)
MIN_FIT = 0.7


def laid_out_box(fig, dpi: int = 110):
    """Lay `fig` out (its layout engine run, nothing rasterised) and return the box that savefig's
    bbox_inches="tight" would save, padded as it pads it (inches). int(width * dpi) is the PNG's width."""
    import matplotlib

    before = fig.dpi
    fig.set_dpi(dpi)  # savefig lays the figure out at the PNG's dpi
    try:
        fig.draw_without_rendering()
        box = fig.get_tightbbox(fig.canvas.get_renderer())
    finally:
        fig.set_dpi(before)
    return box.padded(matplotlib.rcParams["savefig.pad_inches"])


def render_laid_out(fig, box, dpi: int = 110) -> bytes:
    """The PNG of a figure `laid_out_box` has just laid out, cut to `box`: one draw, without the second layout pass
    savefig runs when the figure has a layout engine (the engine is put back afterwards)."""
    import matplotlib

    engine = fig.get_layout_engine()
    with matplotlib.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)  # None with these rc values: no engine at all (not 'none', a placeholder)
    try:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches=box)
        return buf.getvalue()
    finally:
        if engine is not None:
            fig.set_layout_engine(engine)


def figure_png_fitted(fig, dpi: int = 110, max_px: int = MAX_FIGURE_PX) -> bytes:
    """The figure as PNG, redrawn narrower (its text keeps its size) while wider than `max_px`: the width of the
    figure is scaled to fit, its height by less (never below 3/4), as the layout engine re-lays it out. A figure
    that would need less than MIN_FIT of its width is left as drawn. Each try is laid out and measured only
    (`laid_out_box`); the PNG is drawn once, at the width it keeps (`render_laid_out`)."""
    box = laid_out_box(fig, dpi)
    if int(box.width * dpi) * MIN_FIT > max_px:
        return render_laid_out(fig, box, dpi)
    for _ in range(6):  # a legend or title of fixed size beside the panels: the panels shrink more than the whole
        width = int(box.width * dpi)  # the PNG's width: Agg truncates the canvas to whole pixels
        if width <= max_px:
            break
        w, h = fig.get_size_inches()
        k = max_px / width * 0.95
        fig.set_size_inches(w * k, h * max(0.75, k))
        title = getattr(fig, "_suptitle", None)
        if title is not None:  # re-wrapped to the new width (plots.axes.figure_title), else it keeps the old one
            title.set_text(textwrap.fill(" ".join(title.get_text().split()), width=max(40, int(w * k * 9.5))))
        box = laid_out_box(fig, dpi)
    return render_laid_out(fig, box, dpi)


def show_figure(fig, *, name: str, caption: str, provenance: str, width: str = "100%", close: bool = True) -> None:
    """Show a figure as a numbered MyST figure: `name` is its label ({numref}`name`), `caption` one sentence or
    two (MyST markdown), the provenance line folded under it (one click), in smaller print. The image is embedded
    (no side files), drawn at most MAX_FIGURE_PX wide (`figure_png_fitted`)."""
    import matplotlib.pyplot as plt

    data = base64.b64encode(figure_png_fitted(fig)).decode()
    if close:
        plt.close(fig)
    label = name.lower().replace("_", "-")
    md = (f"```{{figure}} data:image/png;base64,{data}\n:name: {label}\n:width: {width}\n:alt: {caption}\n\n"
          f"{caption}\n{_folded_provenance(provenance)}\n```\n")
    html_text = (f'<figure><img src="data:image/png;base64,{data}" style="max-width:{width}"/>'
                 f"<figcaption>{html.escape(caption)}{_folded_provenance(html.escape(provenance))}</figcaption>"
                 "</figure>")
    display_bundle(md, html_text)


def _folded_provenance(provenance: str) -> str:
    """A figure's provenance line (sources, configurations, code), folded under its caption: one click opens it."""
    return (f'<details class="provenance"><summary>Source and code</summary><small>{provenance}</small>'
            "</details>")


def setup(context: str = "notebook") -> None:
    """Plot style and pandas display options shared by every page."""
    import warnings

    import matplotlib
    import seaborn as sns

    warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm in a kernel without ipywidgets
    matplotlib.rcParams.update({"figure.dpi": 110, "savefig.dpi": 110, "axes.titleweight": "bold"})
    sns.set_theme(style="whitegrid", context=context)
    pd.set_option("display.max_columns", 30)
    pd.set_option("display.width", 160)
    pd.set_option("display.max_colwidth", None)  # a printed frame never cuts a claim or a reason short ("…; t...")
