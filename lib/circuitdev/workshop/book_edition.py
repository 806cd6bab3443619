"""The book's edition of a session: sphinx-exercise blocks made from the solutions edition.

Each exercise heading becomes an `exercise` block (its ratings in the title, unnumbered) with the exercise's hint as a
folded `hint` dropdown inside it; each solution cell becomes a folded `solution` block (`:class: dropdown`) holding the
cell's code. With `hide_solutions: true` in the book's configuration the book drops the solution blocks and keeps the
exercises and their hints: the participants' edition (`make book WORKSHOP_EDITION=participants`,
`circuitdev.book.build.book_config`).

A solution cell with outputs is kept as a cell between gated `solution-start` / `solution-end` directives instead --
sphinx-exercise 1.2.1 cannot hide those (hide_solutions leaves the cell and fails on the end node), so the sessions'
solution cells only define functions.
"""

from __future__ import annotations

import copy
import re

from circuitdev.workshop.session import Session, cell_lines, hint_text


def _fence(body: str, minimum: int = 3, char: str = "`") -> str:
    runs = [len(r) for r in re.findall(rf"{re.escape(char)}{{3,}}", body)]
    return char * max(minimum, max(runs, default=0) + 1)


def book_notebook(session: Session, solutions, *, executed: bool = True):
    """The book's edition: exercise blocks (hints folded inside) and folded, gated solution blocks."""
    import nbformat

    nb = copy.deepcopy(solutions)
    by_heading = {ex.heading_cell: ex for ex in session.exercises}
    by_solution = {ex.solution_cell: ex for ex in session.exercises}
    hint_cells = {ex.hint_cell for ex in session.exercises if ex.hint_cell is not None}
    cells = []
    intro_done = False
    for i, cell in enumerate(nb.cells):
        if i in hint_cells:  # inside its exercise's block (below)
            continue
        if i in by_heading:
            ex = by_heading[i]
            body = page_links("\n".join(cell_lines(cell)[1:]).strip("\n"))
            hint = page_links(hint_text(session, ex) or "")
            if hint:
                colons = _fence(hint, char=":")
                body += f"\n\n{colons}{{hint}}\n:class: dropdown\n\n{hint}\n{colons}"
            fence = _fence(body)
            cell.source = (f"### Exercise {ex.id} — {ex.title}\n\n{fence}{{exercise}} {ex.ratings}\n:label: {ex.label}\n"
                           f":nonumber:\n\n{body}\n{fence}")
            cells.append(cell)
            continue
        if i in by_solution:
            ex = by_solution[i]
            label = f":label: sol-{session.number}-{ex.number}\n:class: dropdown\n"
            if cell.get("outputs"):  # keep the executed cell (and its outputs) between the gated directives
                cells.append(nbformat.v4.new_markdown_cell(f"```{{solution-start}} {ex.label}\n{label}```"))
                cells.append(cell)
                cells.append(nbformat.v4.new_markdown_cell("```{solution-end}\n```"))
            else:  # a solution cell that only defines: its code inside one `solution` block
                inner = _fence(cell.source)
                outer = "`" * (len(inner) + 1)
                cells.append(nbformat.v4.new_markdown_cell(
                    f"{outer}{{solution}} {ex.label}\n{label}\n{inner}python\n{cell.source.strip()}\n{inner}\n{outer}"))
            continue
        if cell.cell_type == "markdown":
            cell.source = page_links(cell.source)
        cells.append(cell)
        if not intro_done and cell.cell_type == "markdown" and any(l.startswith("# ") for l in cell_lines(cell)):
            cells.append(nbformat.v4.new_markdown_cell(book_note(session, executed)))
            intro_done = True
    nb.cells = cells
    return nb


# a book page named by its path in a session's prose (`book/toy_recipe.md`): a path in the participants' notebooks
# (they have the repository), a link in the book, whose session pages sit in book/_generated/workshop/
_BOOK_PAGE = re.compile(r"`book/([A-Za-z0-9_-]+)\.md`")


def page_links(markdown: str) -> str:
    """The book pages a session names by path (`book/toy_recipe.md`) as links to them ({doc})."""
    return _BOOK_PAGE.sub(lambda m: f"{{doc}}`book/{m.group(1)}.md <../../{m.group(1)}>`", markdown)


def book_note(session: Session, executed: bool) -> str:
    """The box under a session's title: its exercises, ratings and minutes, and how to do it yourself."""
    rows = "".join(f"\n| {ex.id} | {ex.title} | {ex.ratings.split(' · ')[0].removeprefix('difficulty ')} | "
                   f"{ex.ratings.split(' · ')[1].removeprefix('importance ')} | {ex.minutes} |"
                   for ex in session.exercises)
    ran = "" if executed else ("\n\nThis build rendered the session without running it (the pipeline's `workshop: "
                               "execute: false`): the code is shown without its outputs.")
    return (f":::{{admonition}} Session {session.number} · {len(session.exercises)} exercises · about "
            f"{session.minutes} minutes of exercises\n:class: tip\n"
            "This page is the session: each exercise is a box with a folded *Hint*, and where this edition of the "
            "book has solutions, the *Solution* block under it opens on a click. To do the session yourself, build the "
            "participants' notebooks with "
            "`circuitdev workshop build --out W` and open "
            f"`W/student/{session.name}.ipynb` (the {{doc}}`instructor page <../../workshop_instructor>` says how "
            "to set up a room).\n\n| exercise | what you write | difficulty | importance | minutes |\n"
            f"|---|---|---|---|---|{rows}{ran}\n:::")
