"""Training tokens in words, for tables and sentences of any layer: 6.29e9 -> "6.29B". The book's display module
re-exports these (`circuitdev.book.display.fmt_tokens`)."""

from __future__ import annotations

import math
from typing import Any


def _missing(value: Any) -> bool:
    try:
        return value is None or math.isnan(float(value))
    except (TypeError, ValueError):
        return value is None


def fmt_tokens(tokens: float) -> str:
    """A token count -> "6.29B", "2.05M", "3.05T", "500", "0" ("n/a" when missing). Callers holding billions
    (`tokens_b`) pass tokens_b * 1e9."""
    if _missing(tokens):
        return "n/a"
    x = float(tokens)
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.3g}{unit}"
    return f"{x:.3g}"


def fmt_tokens_b(tokens_b: float) -> str:
    """A count in billions of tokens (the developmental table's `tokens_b`) -> "6.29B" (see `fmt_tokens`)."""
    return "n/a" if _missing(tokens_b) else fmt_tokens(float(tokens_b) * 1e9)
