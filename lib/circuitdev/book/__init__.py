"""Stage 4 of the data flow: the book's pages.

A page is a notebook (notebooks/*.py) that opens with `ch = chapter(NAME, globals())` (`book.chapter`: its
parameters, tiers, glue, figures and tables) and then reads like the paper. Underneath: `parameters` (a page's typed
parameters, checked as papermill injects them), `build` (the folders of the build a page belongs to), `tiers` (the
three kinds of evidence), `display` (notes, tables, figures, glue, number formats), `provenance` (the source line
under every figure), `model_page` (one model's appendix), `plots` (the figures) and `execute` (running a page with papermill).

A page imports what it needs from here in its first cell: `from circuitdev.book import chapter, Rule, Source`.
Only functions and type aliases are imported there (see `parameters.check_namespace`).
"""

from __future__ import annotations

from circuitdev.analysis.findings import ElevationRule
from circuitdev.book.chapter import Chapter, chapter, drawn_models, value_of
from circuitdev.book.display import (fmt_interval, fmt_pct, fmt_times, fmt_tokens, fmt_tokens_b, number_text,
                                      significant, tokens_b_text, with_interval_text)
from circuitdev.book.model_page import ModelPage, ModelSource
from circuitdev.book.tiers import TIER_LABELS, TierName
from circuitdev.measure.classify import CountingRule
from circuitdev.schema import AblationMode, HeadClass

Source = TierName  # a page's `sources`: which tiers it shows
Rule = CountingRule  # per-class (the paper's counting) or best-class

__all__ = ["Chapter", "chapter", "drawn_models", "value_of", "fmt_interval", "fmt_pct", "fmt_times", "fmt_tokens",
           "fmt_tokens_b", "number_text", "significant", "tokens_b_text", "with_interval_text", "Source", "Rule", "ModelPage", "ModelSource", "TIER_LABELS", "AblationMode",
           "HeadClass", "ElevationRule"]
