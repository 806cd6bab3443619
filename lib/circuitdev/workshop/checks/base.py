"""The check machinery: verdicts, the registry, the `@exercise` decorator and the comparisons that name a difference.

A check is a function `ex_<session>_<number>` whose parameters are named after the function(s) the participant
writes; its body calls them (wrapped: an exception becomes one line naming their cell's line), compares with the
library through `expect` / `expect_column`, raises `Fail` with a phrase on anything else, and returns the success
message. `@exercise` registers it once, under the id its name carries ("1.2" for `ex_1_2`), and turns it into what the
sessions call: `ex_1_2(fn) -> Verdict`.

    @exercise
    def ex_9_1(double) -> str:
        expect(double(2), 4, what="double(2)", causes=[("2 + 2 is not 2 * 2 for every number", 4)])
        return "doubles"
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

_LIBRARY = Path(__file__).resolve().parents[2]  # lib/circuitdev: frames inside it are not the participant's
_CHECK_NAME = re.compile(r"ex_(?P<session>[1-9]\d*)_(?P<number>[1-9]\d*)")


def strict() -> bool:
    """`circuitdev.workshop.checks.STRICT` (set by `workshop.setup()`), read at each verdict: when set, a failed check
    raises `ExerciseFailed` and a stub's NotImplementedError propagates (so "run all" stops there)."""
    return bool(getattr(sys.modules.get(__package__), "STRICT", False))


class ExerciseFailed(AssertionError):
    """A check that failed, in strict mode; its message is the verdict line."""


class Fail(Exception):
    """A mismatch or an error of the participant's function, already phrased as the verdict's message."""


@dataclass(frozen=True)
class Verdict:
    exercise: str
    ok: bool
    message: str

    def line(self) -> str:
        return f"{'✔' if self.ok else '✘'} Exercise {self.exercise} · {self.message}"

    def __str__(self) -> str:
        return self.line()

    def __repr__(self) -> str:
        return self.line()

    def __bool__(self) -> bool:
        return self.ok

    def _ipython_display_(self) -> None:  # a cell ending with a check shows the one line, no Out[] repr
        print(self.line())


@dataclass(frozen=True)
class Check:
    exercise: str
    functions: tuple[str, ...]  # what the participant defines in the exercise's cell
    run: Callable[..., Verdict]


# ----------------------------------------------------------------------------------------------------- registry

CHECKS: dict[str, Check] = {}  # exercise id ("1.2") -> its check, in registration (= session) order


def exercise(body: Callable[..., str]) -> Callable[..., Verdict]:
    """Register `ex_<session>_<number>` as that exercise's check; return the callable the sessions use.

    The body's parameters name the participant's function(s) (`Check.functions`, what the exercise's cell must
    define); it returns the success message or raises `Fail`. A second check for one exercise is an error."""
    match = _CHECK_NAME.fullmatch(body.__name__)
    if match is None:
        raise ValueError(f"a check is named ex_<session>_<number> (e.g. ex_1_2), not {body.__name__!r}")
    exercise_id = f"{match['session']}.{match['number']}"
    if exercise_id in CHECKS:
        raise ValueError(f"exercise {exercise_id} has two checks ({body.__module__}.{body.__name__} and "
                         f"{CHECKS[exercise_id].run.__module__}.{CHECKS[exercise_id].run.__name__})")
    functions = tuple(inspect.signature(body).parameters)

    @functools.wraps(body)
    def run(*fns) -> Verdict:
        if len(fns) != len(functions):
            raise TypeError(f"{body.__name__}() checks {len(functions)} function(s) ({', '.join(functions)}), "
                            f"got {len(fns)}")
        return _run(exercise_id, fns, body)

    CHECKS[exercise_id] = Check(exercise_id, functions, run)
    return run


def check(exercise: str, *fns) -> Verdict:
    """Run exercise `exercise`'s check ("1.2") on the participant's function(s)."""
    if exercise not in CHECKS:
        raise KeyError(f"no check for exercise {exercise!r}; the exercises are {', '.join(CHECKS)}")
    return CHECKS[exercise].run(*fns)


@dataclass(frozen=True)
class Hint:
    """An exercise's hint (markdown), shown as markdown in a notebook and as text elsewhere."""

    exercise: str
    text: str

    def _repr_markdown_(self) -> str:
        return f"**Hint for exercise {self.exercise}.** {self.text}"

    def __repr__(self) -> str:
        return f"Hint for exercise {self.exercise}: {self.text}"


def hint(exercise: str) -> Hint:
    """Exercise `exercise`'s hint ("2.1"), from its session's source -- the same text the notebook folds under the
    exercise (`circuitdev.workshop.session.hint`)."""
    from circuitdev.workshop.session import hint as hint_of

    return Hint(exercise, hint_of(exercise))


# ---------------------------------------------------------------------------------------------------- running


def _where(err: BaseException) -> str:
    """'line N: `code`' of the deepest frame that is the participant's (not the library's, not a dependency's)."""
    frames = traceback.extract_tb(err.__traceback__)
    mine = [f for f in frames if "site-packages" not in f.filename and "dist-packages" not in f.filename
            and not str(Path(f.filename).resolve()).startswith(str(_LIBRARY))]
    if not mine:
        return ""
    f = mine[-1]
    code = (f.line or "").strip()
    return f" (line {f.lineno} of your cell: `{code}`)" if code else f" (line {f.lineno} of your cell)"


def _call(fn: Callable, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        raise
    except Exception as err:  # noqa: BLE001 - any error of the participant's code becomes one line
        message = str(err).splitlines()[0] if str(err) else ""
        raise Fail(f"your function raised {type(err).__name__}: {message}{_where(err)}") from None


def _run(exercise: str, fns: Sequence[Any], body: Callable[..., str]) -> Verdict:
    """Run a check's body with the participant's function(s) wrapped; turn the outcome into a Verdict."""
    for fn in fns:
        if not callable(fn):
            return _finish(Verdict(exercise, False, f"expected a function, got a {type(fn).__name__}: pass the "
                                                    "function itself (its name, without calling it)"))
    wrapped = [(lambda f: (lambda *a, **k: _call(f, *a, **k)))(fn) for fn in fns]
    try:
        verdict = Verdict(exercise, True, body(*wrapped))
    except NotImplementedError as err:
        if strict():
            raise
        verdict = Verdict(exercise, False, f"not done yet ({err})")
    except Fail as fail:
        verdict = Verdict(exercise, False, str(fail))
    return _finish(verdict)


def _finish(verdict: Verdict) -> Verdict:
    if strict() and not verdict.ok:
        raise ExerciseFailed(verdict.line())
    return verdict


# ------------------------------------------------------------------------------------------------- comparing


def as_numpy(x) -> Any:
    """A torch tensor as a numpy array (detached, on the CPU); anything else unchanged."""
    if hasattr(x, "detach"):  # torch
        return x.detach().cpu().numpy()
    return x


def _fmt(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    try:
        return f"{float(v):.4g}"
    except (TypeError, ValueError):
        return repr(v)


def difference(got, want, *, what: str = "the result", rtol: float = 1e-4, atol: float = 1e-7) -> str | None:
    """None when `got` equals `want` (arrays, scalars, None, dicts of them), else one phrase saying what differs."""
    got, want = as_numpy(got), as_numpy(want)
    if want is None:
        return None if got is None else f"{what} is {_fmt(got)}, expected None"
    if got is None:
        return f"{what} is None: does the function `return` its value?"
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return f"{what} is a {type(got).__name__}, expected a dict with keys {sorted(want)}"
        missing, extra = [k for k in want if k not in got], [k for k in got if k not in want]
        if missing or extra:
            return f"{what} " + "; ".join(([f"lacks the key(s) {missing}"] if missing else []) +
                                          ([f"has unexpected key(s) {extra}"] if extra else []))
        for k in want:
            d = difference(got[k], want[k], what=f"{what}[{k!r}]", rtol=rtol, atol=atol)
            if d:
                return d
        return None
    try:
        g = np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        return f"{what} is a {type(got).__name__}, expected numbers of shape {np.shape(want)}"
    w = np.asarray(want, dtype=float)
    if g.shape != w.shape:
        hint = " (transposed?)" if g.shape == w.shape[::-1] and g.ndim > 1 else \
            " (same number of values: reshape?)" if g.size == w.size else ""
        return f"{what} has shape {g.shape}, expected {w.shape}{hint}"
    close = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return None
    if g.ndim == 0:
        return f"{what} is {_fmt(g)}, expected {_fmt(w)}"
    bad = np.argwhere(~close)
    idx = tuple(int(i) for i in bad[0])
    at = idx[0] if len(idx) == 1 else idx
    return f"{what} differs at index {at}: {_fmt(g[idx])} instead of {_fmt(w[idx])} ({len(bad)} of {g.size} values)"


def expect(got, want, *, what: str = "the result", causes: Sequence[tuple[str, Any]] = (), hint: str = "",
           rtol: float = 1e-4, atol: float = 1e-7) -> None:
    """Raise Fail naming the first difference and, when `got` equals one of the known wrong answers, its cause."""
    d = difference(got, want, what=what, rtol=rtol, atol=atol)
    if d is None:
        return
    for label, wrong in causes:
        if difference(got, wrong, rtol=rtol, atol=atol) is None:
            raise Fail(f"{d}; likely cause: {label}")
    raise Fail(f"{d}{'; hint: ' + hint if hint else ''}")


def expect_column(got, want, *, keys: Sequence[str], column: str, what: str = "the result",
                  causes: Sequence[tuple[str, Any]] = (), rtol: float = 1e-6, atol: float = 1e-9) -> None:
    """Compare `column` of two DataFrames row by row on `keys` (order-free); `causes` are wrong DataFrames."""
    import pandas as pd

    if not isinstance(got, pd.DataFrame):
        raise Fail(f"{what} is a {type(got).__name__}, expected a DataFrame with columns {[*keys, column]}")
    missing = [c for c in (*keys, column) if c not in got.columns]
    if missing:
        raise Fail(f"{what} lacks the column(s) {missing} (it has {list(got.columns)})")
    g = got.drop_duplicates(list(keys)).set_index(list(keys))[column]
    w = want.set_index(list(keys))[column]
    absent = [k for k in w.index if k not in g.index]
    if absent:
        raise Fail(f"{what} has no row for {_key(absent[0])} ({len(absent)} of {len(w)} rows missing)")
    gv = g.loc[w.index].to_numpy(dtype=float)
    wv = w.to_numpy(dtype=float)
    close = np.isclose(gv, wv, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return
    i = int(np.flatnonzero(~close)[0])
    d = f"{what}'s {column} at {_key(w.index[i])} is {_fmt(gv[i])}, expected {_fmt(wv[i])} ({int((~close).sum())} " \
        f"of {len(wv)} rows differ)"
    for label, wrong in causes:
        ww = wrong.set_index(list(keys))[column].loc[w.index].to_numpy(dtype=float)
        if np.isclose(gv, ww, rtol=rtol, atol=atol, equal_nan=True).all():
            raise Fail(f"{d}; likely cause: {label}")
    raise Fail(d)


def _key(k) -> str:
    return " ".join(map(str, k)) if isinstance(k, tuple) else str(k)
