"""The pictures the sessions share: one sequence's attention rows and the live view of a training run (each
session's diagram: `circuitdev.workshop.diagrams.session_diagram`).

matplotlib only (PNG in the notebook, no JavaScript, nothing from a CDN): every picture works offline and in the book.
"""

from __future__ import annotations

import html
import io
import time

import numpy as np


def attention_rows(rows, *, first_a: int, title: str = "", marks: dict[int, str] | None = None):
    """Heatmap of the query row of every head for one sequence: rows (L, H, T) -> a Figure, one line per head, with
    the first token, A, B and the previous token marked."""
    import matplotlib.pyplot as plt

    a = np.asarray(rows.detach().cpu() if hasattr(rows, "detach") else rows, dtype=float)  # (L, H, T)
    n_layers, n_heads, t = a.shape
    marks = marks or {0: "first", first_a: "A", first_a + 1: "B", t - 2: "prev"}
    # rows tall enough, and labels large enough, to read when the book shrinks the figure to its column
    fig, ax = plt.subplots(figsize=(10, 0.36 * n_layers * n_heads + 1.6))
    im = ax.imshow(a.reshape(n_layers * n_heads, t), aspect="auto", cmap="magma", vmin=0, vmax=1,
                   interpolation="nearest")
    for x, label in marks.items():
        ax.axvline(x, color="#4fc3f7", lw=0.8, alpha=0.7)
        # adjacent marks (A and B) lean apart instead of printing over each other
        ha = "right" if x + 1 in marks else "left" if x - 1 in marks else "center"
        ax.text(x, -0.9, label, ha=ha, va="bottom", fontsize=11, color="#0277bd")
    ax.set_yticks(range(n_layers * n_heads), [f"L{l}H{h}" for l in range(n_layers) for h in range(n_heads)],
                  fontsize=11)
    for boundary in range(n_heads, n_layers * n_heads, n_heads):
        ax.axhline(boundary - 0.5, color="white", lw=1.2)
    ax.set_xlabel("key position (the query is the last position, the second A)", fontsize=11)
    ax.grid(False)
    fig.colorbar(im, ax=ax, label="attention", fraction=0.03, pad=0.01)
    if title:
        ax.set_title(title, pad=24)
    fig.tight_layout()
    return fig


def figure_png(fig, dpi: int = 100) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


class _Bar:
    """A progress bar as HTML (<progress>, no JavaScript) with a text twin."""

    def __init__(self, fraction: float, text: str):
        self.fraction, self.text = max(0.0, min(1.0, fraction)), text

    def _repr_html_(self) -> str:
        return (f'<div style="font-family:monospace"><progress value="{self.fraction:.3f}" max="1" '
                f'style="width:45%;vertical-align:middle"></progress> {html.escape(self.text)}</div>')

    def __repr__(self) -> str:
        k = round(30 * self.fraction)
        return f"[{'#' * k}{'.' * (30 - k)}] {self.text}"


class _Text:
    """A line of text (HTML and plain) for a display slot."""

    def __init__(self, text: str):
        self.text = text

    def _repr_html_(self) -> str:
        return f'<div style="font-family:monospace;color:#555">{html.escape(self.text)}</div>'

    def __repr__(self) -> str:
        return self.text


class LiveTraining:
    """A progress bar and a loss curve that redraw while a model trains (at most every `every_s` seconds)."""

    def __init__(self, panel: str, total_steps: int, *, every_s: float = 1.5,
                 phase_starts: tuple[tuple[float, str], ...] = ()):
        from circuitdev.workshop import in_notebook

        self.panel, self.total, self.every_s = panel, total_steps, every_s
        self.phase_starts = phase_starts or self._phases(panel)
        self.t0 = time.time()
        self.last = 0.0
        self.steps: list[int] = []
        self.losses: list[float] = []
        self.notebook = in_notebook()
        self.bar = self.plot = None
        if self.notebook:
            from IPython.display import display

            self.bar = display(_Bar(0, f"{panel}: starting ..."), display_id=True)
            self.plot = display(_Text("the loss curve appears after the first steps"), display_id=True)

    @staticmethod
    def _phases(panel: str) -> tuple[tuple[float, str], ...]:
        """(step, label) where each curriculum phase starts, naming the kinds of window that join there."""
        try:
            from circuitdev.toy.recipe import WINDOW_KINDS, recipe_of

            recipe = recipe_of(panel)[1]
            marks, before = [], recipe.mixture
            for i, (start, mix) in enumerate(recipe.phases, start=2):
                new = [k for k in WINDOW_KINDS if getattr(mix, k) > 0 and getattr(before, k) == 0]
                marks.append((start * recipe.steps, f" phase {i}" + (f": {' + '.join(new)} windows join" if new else "")))
                before = mix
            return tuple(marks)
        except Exception:  # noqa: BLE001 - the phase marks are a nicety
            return ()

    def _status(self, step: int) -> str:
        elapsed = time.time() - self.t0
        left = elapsed / max(step, 1) * (self.total - step)
        loss = f" · loss {self.losses[-1]:.3f}" if self.losses else ""
        return f"{self.panel}: step {step}/{self.total}{loss} · {elapsed:.0f} s elapsed, ~{left:.0f} s left"

    def update(self, step: int, loss: float) -> None:
        self.steps.append(int(step))
        self.losses.append(float(loss))
        now = time.time()
        if now - self.last < self.every_s and step < self.total:
            return
        self.last = now
        if self.notebook:
            self.bar.update(_Bar(step / self.total, self._status(step)))
            self._draw()
            # redrawing costs CPU the training needs: keep it under ~10% of the time (a busy machine draws less often)
            self.every_s = max(self.every_s, 10 * (time.time() - now))
        elif now - self.t0 > 0 and int(now - self.t0) % 10 == 0:
            print(self._status(step), flush=True)

    def _draw(self, title: str | None = None) -> None:
        import matplotlib.pyplot as plt
        from IPython.display import Image

        fig, ax = plt.subplots(figsize=(8, 3))
        ax.plot(self.steps, self.losses, lw=1.2, color="#1f77b4")
        for start, label in self.phase_starts:
            ax.axvline(start, color="#d62728", ls="--", lw=1)
            ax.text(start, ax.get_ylim()[1], label, color="#d62728", fontsize=8, va="top")
        ax.set_xlim(0, self.total)
        ax.set_xlabel("training step")
        ax.set_ylabel("training loss")
        ax.set_title(title or f"{self.panel}: training loss (live)")
        self.plot.update(Image(data=figure_png(fig)))

    def finish(self, run) -> None:
        """The final state: the bar at 100% and the whole curve (a reused run shows its stored curve)."""
        self.steps, self.losses = list(run.steps), list(run.losses)
        how = "reused (trained earlier" + (f" in {run.seconds:.0f} s)" if run.seconds else ")") if run.reused else \
            f"trained in {run.seconds:.0f} s"
        text = f"{self.panel}: {self.total} steps, {how}" + (f", final loss {self.losses[-1]:.3f}" if self.losses
                                                              else "")
        if self.notebook:
            self.bar.update(_Bar(1.0, text))
            if self.steps:
                self._draw(f"{self.panel}: training loss")
            else:
                self.plot.update(_Text("no loss curve stored with these checkpoints (they were trained outside the "
                                       "workshop); retrain=True trains them again, live"))
        else:
            print(text)
