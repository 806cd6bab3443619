"""Each session's diagram: what it builds, from its inputs to its result, with the exercises where they sit.

A diagram is rows of boxes joined by arrows, left to right; a row may branch off a box of the row above (a down
arrow). Box kinds: `data` (what the session reads or computes along the way), `you` (a function the participant
writes: its exercise numbers in the box) and `check` (what the result is compared with). matplotlib only, a PNG in
the notebook and in the book (nothing loaded from a network).

    session_diagram(2)    the Figure of session 2: mini run -> checkpoints -> probe -> trajectories -> ... (at most
                          four boxes a row, so that it stays readable in the book's text column)
    DIAGRAMS[2]           its rows, for the tests (every exercise of a session appears in its diagram)
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Literal

BoxKind = Literal["data", "you", "check"]
COLOURS: dict[str, tuple[str, str]] = {  # kind -> (fill, edge)
    "data": ("#e8f1fb", "#4a7fb5"),
    "you": ("#fff1dc", "#d9822b"),
    "check": ("#e6f4ea", "#3c8d53"),
}
LEGEND = {"data": "data", "you": "you write it (exercise)", "check": "compared with"}


@dataclass(frozen=True)
class Box:
    title: str
    detail: str = ""  # a shape, a formula, a file: one short line, wrapped
    kind: BoxKind = "data"
    exercises: tuple[str, ...] = ()  # exercise ids written in this box ("1.2")


@dataclass(frozen=True)
class Row:
    boxes: tuple[Box, ...]  # at most `COLUMNS`, left to right from the first column
    below: int | None = None  # the box of the row above that this row continues from (an elbow arrow into its first
    # box); None: a row of its own


COLUMNS = 4  # boxes per row at most: the diagram then fits a book's text column (about 7 inches) at a readable size


DIAGRAMS: dict[int, tuple[str, tuple[Row, ...]]] = {
    1: ("Session 1 · the probe by hand", (
        Row((Box("induction batch", "N sequences × T tokens: filler, A B, …, A at the query"),
             Box("toy model", "toy-pythia, final checkpoint"),
             Box("query rows", "attn_rows (N, L, H, T): where the second A looks"),
             Box("class targets", "six key positions per sequence", "you", ("1.1",)))),
        Row((Box("selectivity", "mean at target / mean at baseline → (L, H)", "you", ("1.2", "1.3")),
             Box("the screen", "circuitdev.measure.screen", "check")), below=3),
        Row((Box("baseline without A, B", "the toy panel's variant", "you", ("1.4",)),
             Box("the probe's record", "data/results/toy-pythia", "check")), below=0),
    )),
    2: ("Session 2 · watch a circuit form", (
        Row((Box("your mini run", "trained live here: loss curve, measured time"),
             Box("checkpoints", "the steps the run saves"),
             Box("probe each", "session 1's screen on every checkpoint"),
             Box("trajectories", "selectivity (R, L, H) over training"))),
        Row((Box("first crossing", "when each head forms", "you", ("2.1",)),
             Box("milestones", "first step with k heads ≥ threshold", "you", ("2.2",)),
             Box("the default toy panel", "toy-pythia's milestones, same rule", "check")), below=3),
        Row((Box("repeated sequences", "a random half, then the same half again, on each checkpoint"),
             Box("prefix matching", "attention to the token after the earlier copy", "you", ("2.3",)),
             Box("the library's score", "prefix_matching_scores", "check"))),
    )),
    3: ("Session 3 · sinks, and what selectivity hides", (
        Row((Box("full patterns", "(N, H, T, T) of every layer, probe batch"),
             Box("all-query score", "mass and selectivity of position 0 over every query", "you", ("3.1",)),
             Box("the probe's record", "sel_first_token_allq", "check"))),
        Row((Box("mass on position 0", "m, the rest spread evenly"),
             Box("mass ↔ selectivity", "s = f(m, T) and its inverse", "you", ("3.2",)),
             Box("the screen", "on built rows at T = 64 and 256", "check"))),
        Row((Box("training windows", "text, periodic, repeat, backcopy, probe batch"),
             Box("parking share", "share of queries with > eps on position 0", "you", ("3.3",)),
             Box("active-dormant?", "which heads park on which input"))),
    )),
    4: ("Session 4 · causal checks and the spectral signal", (
        Row((Box("circuit", "heads ≥ threshold at the final checkpoint"),
             Box("zero heads", "their columns of W_O's input, in hooks", "you", ("4.1",)),
             Box("matched random", "as many heads, same layers, drawn elsewhere", "you", ("4.2",)),
             Box("ablation", "top-1 of B per condition; circuitdev.evaluate agrees", "check"))),
        Row((Box("head outputs", "(N, d_head) at the query, per head"),
             Box("participation ratio", "exp(entropy) of squared singular values", "you", ("4.3",)),
             Box("your run's PR and selectivity", "over training (session 2)"),
             Box("PR lead", "elevated before it forms?", "you", ("4.4",)))),
    )),
    5: ("Session 5 · from the toy to the paper", (
        Row((Box("the authors' files", "3 models × 10 revisions × every head (or the toy panels)"),
             Box("developmental table", "panel, revision, layer, head, sel_*"),
             Box("BOS fraction", "share of heads ≥ 30× first-token", "you", ("5.1",)),
             Box("final gap", "dense − MoE at the last revision (pp)", "you", ("5.2",)))),
        Row((Box("every reproducing threshold", "exact intervals, not a grid", "you", ("5.4",)),
             Box("the audit's row", "F2.moe_reduction: the grid's answer", "check")), below=3),
        Row((Box("developmental table", "Pythia's induction selectivity"),
             Box("circuit recall", "share of the final circuit present", "you", ("5.3",)),
             Box("the audit's row", "F4 recall: differs", "check"))),
    )),
}


def session_diagram(session: int, *, width: float = 7.2):
    """The Figure of a session's diagram (rows of boxes and arrows, a legend of the box kinds), `width` inches wide
    (four boxes a row: readable in a book's text column)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch, Patch

    if session not in DIAGRAMS:
        raise KeyError(f"no diagram for session {session}; the sessions are {', '.join(map(str, DIAGRAMS))}")
    title, rows = DIAGRAMS[session]
    if any(len(r.boxes) > COLUMNS for r in rows):
        raise ValueError(f"session {session}'s diagram has a row of more than {COLUMNS} boxes")
    box_w, box_h, gap_x, gap_y = 1.0, 0.8, 0.3, 0.42
    fig, ax = plt.subplots(figsize=(width, 0.5 + len(rows) * 1.3))
    ax.set_xlim(-0.03, COLUMNS * (box_w + gap_x) - gap_x + 0.03)
    ax.set_ylim(-(len(rows) - 1) * (box_h + gap_y) - box_h / 2 - 0.05, box_h / 2 + 0.05)
    ax.axis("off")
    wrap = 19  # characters per line of a box's detail
    arrow = dict(arrowstyle="-|>", color="#555", lw=1.2, shrinkA=0, shrinkB=0)
    centres: list[list[tuple[float, float]]] = []
    for r, row in enumerate(rows):
        y = -r * (box_h + gap_y)
        xs = [c * (box_w + gap_x) for c in range(len(row.boxes))]
        centres.append([(x + box_w / 2, y) for x in xs])
        for c, (x, box) in enumerate(zip(xs, row.boxes)):
            fill, edge = COLOURS[box.kind]
            ax.add_patch(FancyBboxPatch((x, y - box_h / 2), box_w, box_h, boxstyle="round,pad=0.01,rounding_size=0.05",
                                        facecolor=fill, edgecolor=edge, lw=1.3))
            head = textwrap.wrap(box.title, wrap - 2)
            ax.text(x + box_w / 2, y + box_h / 2 - 0.06, "\n".join(head), ha="center", va="top", fontsize=8.5,
                    fontweight="bold", color="#222", linespacing=1.05)
            if box.detail:  # under the title, however many lines it took
                ax.text(x + box_w / 2, y + box_h / 2 - 0.1 - 0.1 * len(head), "\n".join(
                    textwrap.wrap(box.detail, wrap + 3, break_long_words=False)), ha="center", va="top", fontsize=7.5,
                    color="#333", linespacing=1.1)
            if box.exercises:
                label = "exercise" + "s" * (len(box.exercises) > 1) + " " + ", ".join(box.exercises)
                ax.text(x + box_w / 2, y - box_h / 2 + 0.05, label, ha="center", va="bottom", fontsize=8,
                        fontweight="bold", color=edge)
            if c:
                ax.annotate("", xy=(x, y), xytext=(x - gap_x, y), arrowprops=arrow)
        if row.below is not None:  # an elbow from the parent's bottom, along the gap, into this row's first box
            (px, py), (cx, cy) = centres[r - 1][row.below], centres[r][0]
            mid = py - box_h / 2 - gap_y / 2
            ax.plot([px, px, cx], [py - box_h / 2, mid, mid], color="#555", lw=1.2, solid_capstyle="butt")
            ax.annotate("", xy=(cx, cy + box_h / 2), xytext=(cx, mid), arrowprops=arrow)
    handles = [Patch(facecolor=COLOURS[k][0], edgecolor=COLOURS[k][1], label=label) for k, label in LEGEND.items()]
    fig.legend(handles=handles, loc="upper right", fontsize=7.5, frameon=False, ncol=3)
    fig.suptitle(title, x=0.01, ha="left", fontsize=10, y=0.985, va="top")
    fig.subplots_adjust(left=0.01, right=0.99, top=1 - 0.42 / (0.5 + len(rows) * 1.3), bottom=0.01)
    return fig
