"""Bars on a grid as the book writes them: the set of runs of neighbouring grid points at which something holds
("2–5×, 75–100×", never "from 2× to 100×" when it breaks in between). The one formatter of ranges of bars: the
audit's diagnostic, F2's shape ranges and the robustness table's ranges all use it."""

from __future__ import annotations

from typing import Iterable, Sequence


def bar_runs(values: Iterable[float], grid: Sequence[float]) -> list[tuple[float, float]]:
    """The grid points among `values` as runs of grid neighbours, each (lowest, highest), in grid order:
    bar_runs([2, 3, 5, 75, 100], (2, 3, 5, 7, 75, 100)) -> [(2, 5), (75, 100)]."""
    hit = set(values)
    runs: list[list[float]] = []
    previous = False
    for tau in sorted(grid):
        if tau in hit:
            if previous:
                runs[-1].append(tau)
            else:
                runs.append([tau])
        previous = tau in hit
    return [(r[0], r[-1]) for r in runs]


def runs_text(runs: Sequence[tuple[float, float]], *, last: str = ", ") -> str:
    """[(2, 5), (50, 50), (75, 100)] -> "2–5×, 50×, 75–100×" (the last two joined by `last`, e.g. " and ");
    "" for no run."""
    parts = [f"{bar_text(a)}×" if a == b else f"{bar_text(a)}–{bar_text(b)}×" for a, b in runs]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + last + parts[-1] if parts else ""


def bar_text(tau: float) -> str:
    """A bar as the book writes it: three significant digits, never an exponent (97.25 -> "97.2", 771.87 -> "772",
    1000 -> "1000")."""
    return f"{tau:.3g}" if abs(tau) < 1000 else f"{tau:.0f}"
