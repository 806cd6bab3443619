"""What a page shows, in the forms a reader meets (circuitdev.book.display): the tiers line, notes whose fence
MyST takes, tables that wrap at the page's width, and one rule for numbers written into text."""

from __future__ import annotations

import re

import pandas as pd

from circuitdev.book import display


def capture(monkeypatch) -> list:
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: shown.append(obj))
    return shown


def test_tier_line_is_one_line_with_the_missing_tiers_folded(monkeypatch):
    shown = capture(monkeypatch)
    display.tier_line(["published (authors' files)", "toy panel (trained here)"], {})
    display.tier_line(["toy panel (trained here)"],
                      {"No measured (real models probed here) data in this chapter": "Probe with `circuitdev probe`."})
    plain, folded = (b["text/markdown"] for b in shown)
    assert plain.count("\n") == 1 and "Evidence in this chapter: published (authors' files), toy panel" in plain
    assert "admonition" not in plain  # no box when nothing is missing
    head, options = folded.splitlines()[:2]
    assert head.startswith("````{admonition} Evidence in this chapter: toy panel (trained here). No measured")
    assert "`" not in head[4:] and options == ":class: tier-line dropdown"  # folded; the fence's title plain text
    assert "`circuitdev probe`" in folded and folded.rstrip().endswith("````")


def test_a_note_title_with_code_keeps_its_fence(monkeypatch):
    """A backtick in a backtick fence's title unmakes the fence (the rest of the page rendered raw once)."""
    shown = capture(monkeypatch)
    display.note("Body with `code`.", title="Measured by `bench/cluster.py`")
    head = shown[0]["text/markdown"].splitlines()[0]
    assert head == "````{admonition} Measured by bench/cluster.py"


def test_long_decimals_in_text_follow_the_tables_rule():
    assert display.round_long_decimals("5.07812 and 0.754593, 0.6919999718666077") == "5.08 and 0.755, 0.692"
    assert display.round_long_decimals("torch 2.13.0, 30×, 3.05T, step143000, 0.5, 12.125") == \
        "torch 2.13.0, 30×, 3.05T, step143000, 0.5, 12.125"


def test_tables_wrap_to_the_page_and_name_their_columns_in_words(monkeypatch):
    shown = capture(monkeypatch)
    df = pd.DataFrame({"panel": ["pythia-1b"], "reason": ["a long reason " * 5], "mc_close": [False],
                       "share_head": [0.99], "k_above": [3], "note": ["value 0.754593 here"]})
    display.show_table(df, "t")
    html_text = shown[0].to_html()
    headers = re.findall(r'class="col_heading level0 col\d" >([^<]*)<', html_text)
    assert headers == ["panel", "reason", "close call", "share: head at bar", "heads above null p99", "note"]
    styles = dict(re.findall(r"#T_\w+ (td\.col\d) \{\s*([^}]*?);?\s*\}", html_text))
    assert styles["td.col0"] == "white-space: nowrap" and styles["td.col1"] == "min-width: 10em"
    assert styles["td.col5"] == "white-space: normal"  # a mid-length cell wraps
    assert re.search(r"th \{[^}]*white-space: normal", html_text)  # headers wrap between words
    assert "value 0.755 here" in html_text and 'font-size: 85%' in html_text
    caption = re.search(r"<caption>(.*?)</caption>", html_text, re.S).group(1)
    assert caption.startswith("t. Close call: the share that decides")
    assert "heads above null p99: heads whose" in caption
    wide = pd.DataFrame([[1.5] * 12], columns=[f"c{i}" for i in range(12)])
    display.show_table(wide, "t")
    assert 'font-size: 68%' in shown[1].to_html()


def test_a_wide_figure_is_redrawn_at_the_width_it_is_shown():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 4.2), layout="constrained")
    for ax in axes:
        ax.plot([0, 1], [0, 1], label="a line")
        ax.set_xlabel("training tokens")
    axes[-1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5))  # outside the axes: beyond the figure's size
    fig.suptitle("A title as wide as the figure, wrapped to its width when it is drawn narrower " * 2)
    assert display.png_width(display.figure_png(fig)) > 1300
    data = display.figure_png_fitted(fig)
    assert 800 < display.png_width(data) <= display.MAX_FIGURE_PX
    assert fig.get_size_inches()[1] >= 0.75 * 4.2 and "\n" in fig._suptitle.get_text()
    huge, _ = plt.subplots(1, 4, figsize=(24, 4))  # would crowd its own labels at 1100 px: left as drawn
    assert display.png_width(display.figure_png_fitted(huge)) == display.png_width(display.figure_png(huge))
    small, _ = plt.subplots(figsize=(6, 3))
    assert display.png_width(display.figure_png_fitted(small)) == display.png_width(display.figure_png(small)) < 700
    plt.close("all")


def test_a_fitted_figure_is_the_png_savefig_draws_at_each_try_but_drawn_once():
    """figure_png_fitted lays each try out and measures it (`laid_out_box`), and draws the PNG once; the reference
    here saves every try with savefig(bbox_inches="tight"), as it did before (issue 34): the same bytes, for a figure
    with a layout engine and one without, and the engine is the figure's again afterwards."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    display.setup()

    def saved_at_each_try(fig, dpi=110, max_px=display.MAX_FIGURE_PX):
        data = display.figure_png(fig, dpi)
        for _ in range(6):
            width = display.png_width(data)
            if width <= max_px:
                break
            w, h = fig.get_size_inches()
            k = max_px / width * 0.95
            fig.set_size_inches(w * k, h * max(0.75, k))
            title = fig._suptitle
            if title is not None:
                title.set_text(textwrap.fill(" ".join(title.get_text().split()), width=max(40, int(w * k * 9.5))))
            data = display.figure_png(fig, dpi)
        return data

    def panels(layout):
        fig, axes = plt.subplots(1, 3, figsize=(11, 4), layout=layout)
        for ax in axes:
            ax.plot([0, 1], [0, 1], label="a line")
            ax.set_xlabel("training tokens")
        axes[-1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5))
        fig.suptitle("A title wrapped to the width of the figure when it is drawn narrower " * 2)
        return fig

    for layout in ("constrained", None):
        reference = saved_at_each_try(panels(layout))
        fig = panels(layout)
        engine = fig.get_layout_engine()
        fitted = display.figure_png_fitted(fig)
        assert display.png_width(fitted) < display.png_width(display.figure_png(panels(layout)))  # it was fitted
        assert fitted == reference, layout
        assert fig.get_layout_engine() is engine
    plt.close("all")


def test_numbers_in_prose_follow_the_tables_rule():
    """Issue 30: F4's "paper 0.3, data 0.754593" and session 4's "0.6919999718666077" were raw floats in prose."""
    import numpy as np

    assert display.number_text(0.754593) == "0.755" and display.number_text(np.float32(0.6919999718666077)) == "0.692"
    assert display.number_text(3048) == "3,048" and display.number_text(np.int64(23)) == "23"
    assert display.number_text("median 2.03244 (range 0 to 5)") == "median 2.03 (range 0 to 5)"
    assert display.number_text("6.291") == "6.29" and display.number_text("2516") == "2,516"  # the audit's text
    assert display.number_text("2-4") == "2-4" and display.number_text("step143000") == "step143000"
    assert display.number_text(True) == "true" and display.number_text(None) == "—"


def test_selectivities_and_ratios_show_times_in_tables(monkeypatch):
    """Issue 30: tables dropped the "×" the prose writes for selectivities and ratios."""
    shown = capture(monkeypatch)
    df = pd.DataFrame({"panel": ["pythia-1b"], "sel_induction": [47.67], "token_ratio": [11.478], "p99_ratio": [1.0],
                       "participation_ratio": [3.25], "share": [0.5], "value": [2.26]})
    display.show_table(df, "t", formats={"value": display.fmt_times})
    cells = re.findall(r'<td id="T_\w+_row0_col\d" class="data row0 col\d" >([^<]*)</td>', shown[0].to_html())
    assert cells == ["pythia-1b", "47.7×", "11.5×", "1×", "3.25", "0.5", "2.26×"]
    assert display.fmt_times(float("nan")) == "—"
    assert not display.is_times_column("participation_ratio") and display.is_times_column("sel_first_token_allq")


def test_parameters_show_not_set_and_rounded_values():
    """Issue 30: the parameters tables showed `None` and `[0.3333333333333333, ...]`."""
    from circuitdev.book.chapter import parameter_text

    assert parameter_text(None) == "not set"
    assert parameter_text([0.3333333333333333, 0.6666666666666666, 1.0]) == "`[0.333, 0.667, 1.0]`"
    assert parameter_text(["published", "toy"]) == "`['published', 'toy']`" and parameter_text(30.0) == "`30.0`"


def test_token_counts_in_prose_have_one_style():
    """Issue 30: "3,048" beside "3.05T" on one page. A count in billions, stored as a number or as the audit's text,
    reads like every token count of the book."""
    assert display.tokens_b_text("3048") == display.tokens_b_text(3048.0) == display.fmt_tokens_b(3048) == "3.05T"
    assert display.tokens_b_text("6.291") == "6.29B" and display.tokens_b_text("n/a") == "n/a"
