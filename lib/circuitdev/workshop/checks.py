"""The checks after each exercise: call the participant's function on small inputs, compare, say what differs.

`ex_N_M(fn)` runs exercise N.M's check and returns a `Verdict`, shown in a notebook as one line:

    ✔ Exercise 1.2 · matches circuitdev.measure.screen.selectivities on 2 batches
    ✘ Exercise 1.2 · the result differs at index (1, 2): 3.12 instead of 2.87 (4 of 6 values); likely cause: ...

The expected values come from the library (`circuitdev.measure.screen`, `spectral`, `ablation`, `analysis.findings`)
or from an independent numpy computation on inputs built here (seeded, a few hundred numbers), never from the
participant's notebook state. A wrong answer is compared with the usual wrong answers ("mean of ratios instead of
a ratio of means", "> instead of >=", ...) to name a likely cause. An exception raised by the participant's function
becomes one line naming its type, message and the line of their cell; NotImplementedError (the student edition's
stub) is re-raised so that "run all" stops at the first exercise not done yet. With `STRICT` (set by
`workshop.setup()`), a failed check raises `ExerciseFailed`, which the notebook shows as its one-line verdict.

`CHECKS` maps each exercise id to its check and the function name(s) the participant writes (the build and the
tests use it).
"""

from __future__ import annotations

import dataclasses
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

STRICT = False  # workshop.setup() sets it: a failed check raises ExerciseFailed (one line in a notebook)
_LIBRARY = Path(__file__).resolve().parents[1]  # lib/circuitdev: frames inside it are not the participant's


class ExerciseFailed(AssertionError):
    """A check that failed, in strict mode; its message is the verdict line."""


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


class _Fail(Exception):
    """A mismatch or an error of the participant's function, already phrased as the verdict's message."""


# ------------------------------------------------------------------------------------------------------ machinery


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
        raise _Fail(f"your function raised {type(err).__name__}: {message}{_where(err)}") from None


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
        if STRICT:
            raise
        verdict = Verdict(exercise, False, f"not done yet ({err})")
    except _Fail as fail:
        verdict = Verdict(exercise, False, str(fail))
    return _finish(verdict)


def _finish(verdict: Verdict) -> Verdict:
    if STRICT and not verdict.ok:
        raise ExerciseFailed(verdict.line())
    return verdict


def _numpy(x) -> Any:
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
    got, want = _numpy(got), _numpy(want)
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


def _expect(got, want, *, what: str = "the result", causes: Sequence[tuple[str, Any]] = (), hint: str = "",
            rtol: float = 1e-4, atol: float = 1e-7) -> None:
    """Raise _Fail naming the first difference and, when `got` equals one of the known wrong answers, its cause."""
    d = difference(got, want, what=what, rtol=rtol, atol=atol)
    if d is None:
        return
    for label, wrong in causes:
        if difference(got, wrong, rtol=rtol, atol=atol) is None:
            raise _Fail(f"{d}; likely cause: {label}")
    raise _Fail(f"{d}{'; hint: ' + hint if hint else ''}")


def _frame_column(got, want, *, keys: Sequence[str], column: str, what: str = "the result",
                  causes: Sequence[tuple[str, Any]] = (), rtol: float = 1e-6, atol: float = 1e-9) -> None:
    """Compare `column` of two DataFrames row by row on `keys` (order-free)."""
    import pandas as pd

    if not isinstance(got, pd.DataFrame):
        raise _Fail(f"{what} is a {type(got).__name__}, expected a DataFrame with columns {[*keys, column]}")
    missing = [c for c in (*keys, column) if c not in got.columns]
    if missing:
        raise _Fail(f"{what} lacks the column(s) {missing} (it has {list(got.columns)})")
    g = got.drop_duplicates(list(keys)).set_index(list(keys))[column]
    w = want.set_index(list(keys))[column]
    absent = [k for k in w.index if k not in g.index]
    if absent:
        raise _Fail(f"{what} has no row for {_key(absent[0])} ({len(absent)} of {len(w)} rows missing)")
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
            raise _Fail(f"{d}; likely cause: {label}")
    raise _Fail(d)


def _key(k) -> str:
    return " ".join(map(str, k)) if isinstance(k, tuple) else str(k)


def _rng(seed: int) -> np.random.RandomState:
    return np.random.RandomState(seed)


def _softmax_rows(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def random_rows(n: int, layers: int, heads: int, seq_len: int, *, seed: int = 0, sharp: float = 2.0):
    """(N, L, H, T) float32 torch attention rows of the last query (rows sum to 1), peaked at random keys."""
    import torch

    logits = _rng(seed).randn(n, layers, heads, seq_len) * sharp
    return torch.tensor(_softmax_rows(logits), dtype=torch.float32)


def random_patterns(n: int, heads: int, seq_len: int, *, seed: int = 0, sharp: float = 2.0, sink: float = 0.0):
    """(N, H, T, T) float32 torch causal attention patterns (row q spreads over keys 0..q); `sink` adds that many
    logits to key 0 of every head but the first."""
    import torch

    logits = _rng(seed).randn(n, heads, seq_len, seq_len) * sharp
    logits[:, 1:, :, 0] += sink
    mask = np.triu(np.ones((seq_len, seq_len), dtype=bool), k=1)
    logits[..., mask] = -np.inf
    return torch.tensor(_softmax_rows(logits), dtype=torch.float32)


def small_batch(n: int = 48, seq_len: int = 32, *, seed: int = 1, invalid: Sequence[int] = ()):
    """An induction batch of the paper's construction at a short length; rows listed in `invalid` marked invalid."""
    from circuitdev.measure.batch import induction_batch

    batch = induction_batch(n=n, seq_len=seq_len, seed=seed, vocab_range=(3, 200))
    if invalid:
        valid = batch.valid.copy()
        valid[list(invalid)] = False
        batch = dataclasses.replace(batch, valid=valid)
    return batch


# ---------------------------------------------------------------------------------------- session 1: the probe


def _targets_reference(first_a: int, seq_len: int) -> dict[str, list[int]]:
    from circuitdev.measure.positions import local_positions

    q = seq_len - 1
    return {"induction": [first_a + 1], "previous-token": [q - 1], "duplicate-token": [first_a], "first-token": [0],
            "self": [q], "local": sorted(local_positions(seq_len))}


def _as_positions(value) -> list[int] | None:
    try:
        return sorted(int(v) for v in np.atleast_1d(_numpy(value)).ravel())
    except (TypeError, ValueError):
        return None


def ex_1_1(class_targets) -> Verdict:
    """class_targets(first_a, seq_len) -> {class: key position(s)} for the six classes."""
    from circuitdev.schema import HEAD_CLASSES

    def body(fn):
        for first_a, t in ((7, 64), (20, 256), (3, 12)):
            got = fn(first_a, t)
            want = _targets_reference(first_a, t)
            what = f"class_targets({first_a}, {t})"
            if not isinstance(got, dict):
                raise _Fail(f"{what} is a {type(got).__name__}, expected a dict {{class: position(s)}}")
            missing = [c for c in HEAD_CLASSES if c not in got]
            if missing:
                raise _Fail(f"{what} lacks the class(es) {missing}; the keys are the six names of "
                            "circuitdev.HEAD_CLASSES, hyphenated")
            causes = {"induction": "induction heads attend to B = first_a + 1, the token after the first A",
                      "duplicate-token": "duplicate-token heads attend to the first A itself (first_a)",
                      "previous-token": "the query is q = T - 1; its previous token is q - 1 = T - 2",
                      "self": "the query attends to itself at q = T - 1",
                      "first-token": "the first token is position 0",
                      "local": "local = the four keys q-2, q-3, q-4, q-5 (q-1 is the previous token)"}
            for c in HEAD_CLASSES:
                g = _as_positions(got[c])
                if g != want[c]:
                    raise _Fail(f"{what}[{c!r}] is {g if g is not None else got[c]!r}, expected {want[c]}; "
                                f"hint: {causes[c]}")
        return "the six targets are right at T = 64, 256 and 12"

    return _run("1.1", [class_targets], body)


def _one_class_reference(rows, targets, valid, baseline) -> np.ndarray:
    a = _numpy(rows).astype(np.float64)  # (N, L, H, T)
    n = np.arange(a.shape[0])
    at = a[n, :, :, np.asarray(targets)]  # (N, L, H)
    base = a[..., np.asarray(baseline)].mean(axis=(0, 3))  # (L, H)
    return at[np.asarray(valid)].mean(0) / np.maximum(base, 1e-8)


def ex_1_2(selectivity_one_class) -> Verdict:
    """selectivity_one_class(attn_rows, targets, valid, baseline) -> (L, H)."""
    import torch

    from circuitdev.measure.positions import baseline_positions
    from circuitdev.measure.screen import selectivities

    def body(fn):
        batch = small_batch()
        rows = random_rows(batch.n, 2, 3, batch.seq_len, seed=2)
        base = baseline_positions(batch.seq_len)
        got = fn(rows.clone(), batch.first_a + 1, batch.valid.copy(), base.copy())
        _expect(got, selectivities(rows, batch)["induction"], what="the induction selectivity",
                hint="mean attention at the targets (valid sequences) divided by the mean at the baseline positions "
                     "(all sequences, all positions)")
        # an independent case: invalid rows, a head that never looks at the baseline (the 1e-8 floor)
        b2 = small_batch(24, 16, seed=3, invalid=(0, 5, 6))
        r2 = random_rows(b2.n, 1, 3, 16, seed=4).numpy()
        p2 = baseline_positions(16, 6)
        r2[:, 0, 2, :] = 0.0
        r2[np.arange(b2.n), 0, 2, b2.first_a + 1] = 1.0  # head 2 puts everything on B
        r2 = torch.tensor(r2)
        args = (b2.first_a + 1, b2.valid.copy(), p2.copy())
        want = _one_class_reference(r2, *args)
        a = r2.double().numpy()
        ratio = a[np.arange(b2.n), :, :, b2.first_a + 1] / np.maximum(a[..., p2].mean(-1), 1e-8)
        causes = [("a mean of per-sequence ratios; the paper divides the means (average first, then divide)",
                   ratio[b2.valid].mean(0)),
                  ("the target mean is over every sequence; average it over the valid ones only",
                   _one_class_reference(r2, b2.first_a + 1, np.ones(b2.n, bool), p2)),
                  ("no floor on the baseline: divide by max(baseline, 1e-8)",
                   a[np.arange(b2.n), :, :, b2.first_a + 1][b2.valid].mean(0) / a[..., p2].mean(axis=(0, 3))),
                  ("the baseline is averaged over the valid sequences only; the paper uses all of them",
                   a[np.arange(b2.n), :, :, b2.first_a + 1][b2.valid].mean(0)
                   / np.maximum(a[b2.valid][..., p2].mean(axis=(0, 3)), 1e-8))]
        _expect(fn(r2.clone(), *[x.copy() for x in args]), want, what="the selectivity (3 invalid rows, a head with "
                "no baseline attention)", causes=causes)
        return "matches circuitdev.measure.screen.selectivities and an independent case (invalid rows, the floor)"

    return _run("1.2", [selectivity_one_class], body)


def _six_reference(rows, batch, valid_for: Callable[[str], np.ndarray]) -> dict[str, np.ndarray]:
    """The six selectivities from `_one_class_reference`, with the rows each class averages over chosen by
    `valid_for(class)` (the paper: the valid rows for induction and duplicate-token, all rows otherwise)."""
    from circuitdev.measure.positions import baseline_positions
    from circuitdev.schema import HEAD_CLASSES

    t = batch.seq_len
    base = baseline_positions(t)
    out = {}
    for c in HEAD_CLASSES:
        per_seq = [_targets_reference(int(fa), t)[c] for fa in batch.first_a]
        targets = [np.array([p[j] for p in per_seq]) for j in range(len(per_seq[0]))]
        out[c] = np.mean([_one_class_reference(rows, tg, valid_for(c), base) for tg in targets], axis=0)
    return out


def ex_1_3(six_selectivities) -> Verdict:
    """six_selectivities(attn_rows, batch) -> {class: (L, H)} with the paper's baseline."""
    from circuitdev.measure.screen import selectivities
    from circuitdev.schema import HEAD_CLASSES

    def body(fn):
        batch = small_batch(40, 32, seed=5, invalid=(1, 2, 30))
        rows = random_rows(batch.n, 2, 2, batch.seq_len, seed=6)
        got = fn(rows.clone(), batch)
        want = selectivities(rows, batch)
        every = np.ones(batch.n, bool)
        all_rows = _six_reference(rows, batch, lambda c: every)
        valid_rows = _six_reference(rows, batch, lambda c: batch.valid)
        if isinstance(got, dict):
            for c in HEAD_CLASSES:
                if c in got:
                    causes = [("induction and duplicate-token average over the valid sequences only",
                               all_rows[c]),
                              ("only induction and duplicate-token skip the invalid sequences; the other four "
                               "classes average over all of them", valid_rows[c]),
                              ("local averages the four keys q-2..q-5 (a mean, not a sum)", want[c] * 4)]
                    _expect(got[c], want[c], what=f"the {c} selectivity", causes=causes)
        _expect(got, want, what="the result")
        return "all six match circuitdev.measure.screen.selectivities (3 invalid rows in the batch)"

    return _run("1.3", [six_selectivities], body)


def ex_1_4(baseline_without_ab) -> Verdict:
    """baseline_without_ab(attn_rows, first_a, positions) -> (L, H)."""
    from circuitdev.measure.positions import baseline_positions
    from circuitdev.measure.screen import baseline_attention

    def body(fn):
        batch = small_batch(60, 16, seed=7)
        rows = random_rows(batch.n, 2, 3, 16, seed=8)
        positions = baseline_positions(16, 8)
        got = fn(rows.clone(), batch.first_a.copy(), positions.copy())
        want = baseline_attention(rows, batch, positions, excludes_ab=True)
        a = rows.double().numpy()[..., positions]  # (N, L, H, P)
        keep = (positions[None, :] != batch.first_a[:, None]) & (positions[None, :] != batch.first_a[:, None] + 1)
        per_seq = np.stack([a[i][..., keep[i]].mean(-1) for i in range(batch.n)]).mean(0)
        causes = [("a mean of per-sequence means; pool every kept (sequence, position) value and average once",
                   per_seq),
                  ("A and B are still in the baseline (that is the paper's baseline, not the variant)",
                   baseline_attention(rows, batch, positions)),
                  ("only B is dropped; drop both the first A (first_a) and B (first_a + 1)",
                   (a * (positions[None, :] != batch.first_a[:, None] + 1)[:, None, None, :]).sum(axis=(0, 3))
                   / (positions[None, :] != batch.first_a[:, None] + 1).sum())]
        _expect(got, want, what="the baseline", causes=causes)
        return "matches circuitdev.measure.screen.baseline_attention(..., excludes_ab=True)"

    return _run("1.4", [baseline_without_ab], body)


# ------------------------------------------------------------------------------- session 2: watch a circuit form


def _first_crossing_reference(sel: np.ndarray, threshold: float) -> np.ndarray:
    hit = np.asarray(sel) >= threshold  # (R, L, H)
    return np.where(hit.any(0), hit.argmax(0), -1)


def ex_2_1(first_crossing) -> Verdict:
    """first_crossing(sel (R, L, H), threshold) -> (L, H) int, -1 where never."""

    def body(fn):
        rng = _rng(11)
        sel = np.exp(rng.uniform(-1, 6, size=(8, 3, 4)))  # (R, L, H), 0.4x .. 400x
        sel[:, 0, 0] = 1.0  # never forms
        sel[:, 1, 2] = [1, 2, 50, 200, 20, 60, 80, 90]  # exactly 50 at revision 2, dips later
        sel[:, 2, 3] = [1, 60, 10, 10, 10, 10, 10, 10]  # crosses once and falls back
        want = _first_crossing_reference(sel, 50.0)
        hit = sel >= 50
        last = np.where(hit.any(0), sel.shape[0] - 1 - hit[::-1].argmax(0), -1)
        strict = _first_crossing_reference(sel + 0 * sel, 50.0 + 1e-9)
        causes = [("the first revision where sel >= threshold (>=, not >)", strict),
                  ("the FIRST revision at or above the threshold, not the last", last),
                  ("a head that never reaches the threshold gets -1 (argmax alone gives 0)", hit.argmax(0))]
        _expect(fn(sel.copy(), 50.0), want, what="first_crossing(sel, 50)", causes=causes)
        _expect(fn(sel.copy(), 1e9), np.full((3, 4), -1), what="first_crossing(sel, 1e9)",
                hint="no head reaches 1e9x: every entry is -1")
        return "right on 12 heads (one never forms, one at exactly 50x, one that falls back)"

    return _run("2.1", [first_crossing], body)


def _milestone_reference(steps, sel, threshold, k):
    counts = (np.asarray(sel) >= threshold).reshape(len(steps), -1).sum(1)
    hit = np.flatnonzero(counts >= k)
    return int(steps[hit[0]]) if len(hit) else None


def ex_2_2(milestone) -> Verdict:
    """milestone(steps (R,), sel (R, L, H), threshold, k) -> first step with >= k heads at >= threshold, else None."""

    def body(fn):
        steps = np.array([0, 16, 64, 160, 250, 500, 750, 1000])
        sel = np.ones((8, 2, 3))
        sel[2:4, 1, 0] = 80  # one head forms early and falls back
        sel[5:, 1, 1] = [50, 70, 90]
        sel[6:, 1, 2] = [55, 65]
        sel[4, 0, 1] = 60
        cases = [(50.0, 1, 64), (50.0, 2, 750), (50.0, 3, None), (60.0, 2, 1000)]
        for threshold, k, want in cases:
            got = fn(steps.copy(), sel.copy(), threshold, k)
            ever = np.maximum.accumulate(sel, axis=0)
            causes = [("count the heads at or above the threshold AT each revision (a head that fell back does not "
                       "count)", _milestone_reference(steps, ever, threshold, k)),
                      ("return the step (steps[r]), not the revision index r",
                       None if want is None else int(np.flatnonzero(steps == want)[0])),
                      ("'at least k heads' is count >= k", _milestone_reference(steps, sel, threshold, k + 1))]
            _expect(got, want, what=f"milestone(steps, sel, {threshold:g}, k={k})",
                    causes=[c for c in causes if c[1] != want])
        return "right on 4 cases (an early head that falls back, a milestone never reached)"

    return _run("2.2", [milestone], body)


def _prefix_reference(attn) -> np.ndarray:
    a = _numpy(attn).astype(np.float64)  # (N, H, T, T)
    t = a.shape[-1]
    half = t // 2
    q = np.arange(half, t)
    return a[:, :, q, q - half + 1].mean(axis=(0, 2))


def ex_2_3(prefix_matching) -> Verdict:
    """prefix_matching(attn (N, H, T, T)) -> (H,), sequences whose second half repeats the first."""

    def body(fn):
        attn = random_patterns(6, 3, 16, seed=12)
        got = fn(attn.clone())
        a = attn.double().numpy()
        half = 8
        q = np.arange(half, 16)
        causes = [("the key is the token AFTER the earlier copy, i - half + 1 (i - half is the copy itself)",
                   a[:, :, q, q - half].mean(axis=(0, 2))),
                  ("average over the queries of the second half only (positions half .. T-1)",
                   np.stack([a[:, :, i, max(i - half + 1, 0)] for i in range(16)], -1).mean(axis=(0, 2))),
                  ("the key after the earlier copy of query i is i - half + 1, not i - half - 1",
                   a[:, :, q, q - half - 1].mean(axis=(0, 2)))]
        _expect(got, _prefix_reference(attn), what="the prefix-matching score", causes=causes)
        return "matches the prefix-matching score (Olsson et al.) on 6 random causal patterns"

    return _run("2.3", [prefix_matching], body)


# ------------------------------------------------------------------------------------- session 3: sinks


def _allq_reference(attn, skip: int):
    a = _numpy(attn).astype(np.float64)  # (N, H, T, T)
    t = a.shape[-1]
    q = np.arange(skip, t)
    col0 = a[:, :, q, 0]  # (N, H, Q)
    mass = col0.mean(axis=(0, 2))
    base = ((1 - col0) / q).mean(axis=(0, 2))
    return mass, mass / np.maximum(base, 1e-8)


def ex_3_1(allq_first_token) -> Verdict:
    """allq_first_token(attn (N, H, T, T), skip) -> (mass (H,), selectivity (H,))."""

    def body(fn):
        attn = random_patterns(5, 3, 20, seed=13, sink=3.0)
        got = fn(attn.clone(), 4)
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise _Fail(f"the result is a {type(got).__name__}, expected a pair (mass, selectivity)")
        mass, sel = _allq_reference(attn, 4)
        a = attn.double().numpy()
        q = np.arange(4, 20)
        col0 = a[:, :, q, 0]
        _expect(got[0], mass, what="the mass on position 0",
                causes=[("leave out the first `skip` queries", a[:, :, :, 0].mean(axis=(0, 2)))],
                hint="mean over sequences and queries q >= skip of attn[..., q, 0]")
        causes = [("the other keys of query q are 1..q: q of them, not T - 1",
                   mass / ((1 - col0) / 19).mean(axis=(0, 2))),
                  ("a mean of per-query ratios; divide the mean mass by the mean baseline",
                   (col0 / np.maximum((1 - col0) / q, 1e-8)).mean(axis=(0, 2))),
                  ("leave out the first `skip` queries", _allq_reference(attn, 1)[1])]
        _expect(got[1], sel, what="the all-query selectivity", causes=causes)
        return "mass and all-query selectivity match the probe's definition (circuitdev.measure.capture)"

    return _run("3.1", [allq_first_token], body)


def ex_3_2(selectivity_from_mass, mass_for_selectivity) -> Verdict:
    """selectivity_from_mass(m, T) and its inverse mass_for_selectivity(s, T)."""
    import torch

    from circuitdev.measure.screen import selectivities

    def body(sel_fn, mass_fn):
        masses = np.array([0.05, 0.11, 0.32, 0.6, 0.9])
        for t in (64, 256):
            batch = small_batch(4, t, seed=14)
            rows = np.zeros((4, 1, len(masses), t))
            rows[..., 0] = masses
            rows[..., 1:] = ((1 - masses) / (t - 1))[:, None]  # the rest spread evenly over keys 1..T-1
            lib = selectivities(torch.tensor(rows, dtype=torch.float32), batch)["first-token"][0]  # (H,)
            got = np.array([sel_fn(float(m), t) for m in masses])
            causes = [("spread evenly, the other T - 1 keys get (1 - m) / (T - 1) each: selectivity = m(T-1)/(1-m)",
                       masses * t / (1 - masses)),
                      ("the baseline is the attention per key, (1 - m) / (T - 1), not the whole rest 1 - m",
                       masses / (1 - masses))]
            _expect(got, lib, what=f"selectivity_from_mass(m, {t}) for m = {masses.tolist()}", causes=causes,
                    rtol=2e-4, hint="the screen of circuitdev on rows with mass m on position 0 and the rest spread "
                                    "evenly gives these values")
            back = np.array([mass_fn(float(s), t) for s in lib])
            _expect(back, masses, what=f"mass_for_selectivity(selectivity_from_mass(m, {t}), {t})", rtol=2e-4,
                    causes=[("invert s = m(T-1)/(1-m) for m: m = s / (s + T - 1)", lib / (lib + t))])
        return "matches the screen numerically at T = 64 and 256, and the inverse round-trips"

    return _run("3.2", [selectivity_from_mass, mass_for_selectivity], body)


def _parking_reference(attn0, eps: float, skip: int) -> np.ndarray:
    a = _numpy(attn0)[..., skip:]  # (N, L, H, Q)
    return (a > eps).mean(axis=(0, 3))


def ex_3_3(parking_share) -> Verdict:
    """parking_share(attn0 (N, L, H, T), eps, skip) -> (L, H): share of (sequence, query >= skip) above eps."""

    EPS = 0.25

    def body(fn):
        rng = _rng(15)
        attn0 = rng.beta(0.6, 1.4, size=(10, 2, 3, 24)).astype(np.float32)
        # exactly at eps; 0.25 is exact in float32 and float64 alike, so an answer that converts the float32 input
        # to float64 (or not) compares the same (0.3 would not be: float32(0.3) > 0.3 in float64)
        attn0[:, 1, 2, ::3] = EPS
        attn0[..., :4] = 1.0  # the first queries see little else: leave them out
        got = fn(attn0.copy(), EPS, 4)
        causes = [("the share of queries whose attention on position 0 is ABOVE eps (a mean of booleans), not the "
                   "mean attention", attn0[..., 4:].mean(axis=(0, 3))),
                  ("leave out the first `skip` queries", _parking_reference(attn0, EPS, 0)),
                  ("'parks' means attention > eps (strictly)", (attn0[..., 4:] >= EPS).mean(axis=(0, 3)))]
        _expect(got, _parking_reference(attn0, EPS, 4), what="parking_share(attn0, 0.25, 4)", causes=causes)
        return "right on 6 heads (values exactly at eps, the first queries left out)"

    return _run("3.3", [parking_share], body)


# ------------------------------------------------------------------------ session 4: causal checks, the spectrum


def ex_4_1(zero_heads) -> Verdict:
    """zero_heads(z (B, T, H * d_head), heads, d_head) -> a copy with those heads' slices set to 0."""
    import torch

    def body(fn):
        z = torch.tensor(_rng(16).randn(2, 5, 4 * 3), dtype=torch.float32)  # (B, T, H * d_head), H=4, d_head=3
        before = z.clone()
        got = fn(z, [1, 3], 3)
        if not torch.equal(z, before):
            raise _Fail("zero_heads changed its input in place; return a modified copy (z.clone() first)")
        want = before.clone().numpy()
        for h in (1, 3):
            want[..., h * 3:(h + 1) * 3] = 0
        wrong = before.clone().numpy()
        for h in (1, 3):
            wrong[..., h * 4:(h + 1) * 4] = 0
        _expect(got, want, what="zero_heads(z, [1, 3], d_head=3)",
                causes=[("head h owns columns h*d_head .. (h+1)*d_head - 1 (multiply by d_head, not by the number "
                         "of heads)", wrong)])
        _expect(fn(before.clone(), [], 3), before.numpy(), what="zero_heads(z, [], 3)",
                hint="no heads: z unchanged")
        return "zeroes exactly the heads' slices and leaves its input untouched"

    return _run("4.1", [zero_heads], body)


def _spec(x) -> dict[int, list[int]] | None:
    if not isinstance(x, dict):
        return None
    try:
        return {int(k): sorted(int(h) for h in v) for k, v in x.items() if len(v)}
    except (TypeError, ValueError):
        return None


def ex_4_2(matched_random) -> Verdict:
    """matched_random(spec, n_heads, seed) -> {layer: heads}, the paper's matched-random control."""
    from circuitdev.measure.ablation import matched_random as reference

    def body(fn):
        cases = [({1: [0, 2], 3: [1]}, 4, 123), ({0: [3], 2: [0, 1, 2]}, 6, 7), ({1: [0, 1, 2, 3]}, 4, 123)]
        for spec, n_heads, seed in cases:
            raw = fn({k: list(v) for k, v in spec.items()}, n_heads, seed)
            got, want = _spec(raw), _spec(reference(spec, n_heads, seed=seed))
            what = f"matched_random({spec}, {n_heads}, seed={seed})"
            if got is None:
                raise _Fail(f"{what} is a {type(raw).__name__}, expected a dict {{layer: [heads]}}")
            if got == want:
                continue
            if set(got) - set(spec):
                raise _Fail(f"{what} = {got} uses layers {sorted(set(got) - set(spec))} that the spec does not")
            for layer, heads in got.items():
                if set(heads) & set(spec[layer]):
                    raise _Fail(f"{what} = {got} draws screened heads {sorted(set(heads) & set(spec[layer]))} in "
                                f"layer {layer}; draw from the OTHER heads of the layer")
            counts = {k: len(v) for k, v in got.items()}
            if counts != {k: len(v) for k, v in want.items()}:
                raise _Fail(f"{what} = {got}: the counts per layer should be {{layer: min(len(spec heads), other "
                            f"heads)}} = {{{', '.join(f'{k}: {len(v)}' for k, v in want.items())}}}")
            raise _Fail(f"{what} = {got}, the paper's draw is {want}: the layers and counts are right, the random "
                        "stream is not; use ONE RandomState(seed) drawn over the layers in the spec's order, "
                        "rng.choice(eligible, size=k, replace=False)")
        return "the paper's draw (RandomState(123)) on 3 specs, a fully screened layer included"

    return _run("4.2", [matched_random], body)


def ex_4_3(participation_ratio) -> Verdict:
    """participation_ratio(M (N, d)) -> float."""
    from circuitdev.measure.spectral import participation_ratio as reference

    def body(fn):
        rng = _rng(17)
        mats = {"a rank-1 matrix": np.outer(rng.randn(40), rng.randn(8)),
                "an isotropic matrix": np.linalg.qr(rng.randn(40, 8))[0] * 3.0,
                "a random matrix with a mean": rng.randn(40, 8) * np.linspace(0.2, 2, 8) + 1.5}
        for name, m in mats.items():
            want = reference(m)
            got = fn(m.copy())
            s = np.linalg.svd(m, compute_uv=False)
            p = s**2 / (s**2).sum()
            pc = np.linalg.svd(m - m.mean(0), compute_uv=False) ** 2
            pc = pc / pc.sum()
            q = s / s.sum()
            causes = [("that is the inverse participation ratio (sum s^2)^2 / sum s^4; the paper's PR is exp(entropy)",
                       1 / (p**2).sum()),
                      ("the paper's matrix is not centred: no mean subtraction", np.exp(-(pc * np.log(pc + 1e-12)).sum())),
                      ("the weights are the squared singular values s_i^2 (energy), normalised",
                       np.exp(-(q * np.log(q + 1e-12)).sum()))]
            _expect(got, want, what=f"the PR of {name}", causes=causes, rtol=1e-5)
        return "matches circuitdev.measure.spectral.participation_ratio (rank 1 -> 1, isotropic -> d, a mean kept)"

    return _run("4.3", [participation_ratio], body)


def _lead_reference(pr, sel, threshold: float, level: float):
    from circuitdev.analysis.pr_lead import pr_elevated

    formed = np.flatnonzero(np.asarray(sel) >= threshold)
    up = np.flatnonzero(pr_elevated(np.asarray(pr, dtype=float), level=level))
    return (int(formed[0]) if len(formed) else None, int(up[0]) if len(up) else None)


def ex_4_4(pr_lead) -> Verdict:
    """pr_lead(pr (R,), sel (R,), threshold, level) -> (formation index, elevation index), None where never."""
    from circuitdev.analysis.pr_lead import pr_elevated

    def body(fn):
        cases = [(np.array([1.2, 1.3, 3.0, 6.0, 9.0, 8.0]), np.array([1, 2, 5, 20, 70, 90]), 50.0, 0.5),
                 (np.array([2.0, 2.2, 2.1, 5.0, 5.5]), np.array([1, 60, 80, 90, 99]), 50.0, 0.5),
                 (np.array([1.0, 1.5, 2.5, 4.0]), np.array([1, 2, 3, 4]), 50.0, 0.25),
                 (np.array([3.0, 3.0, 3.0]), np.array([100, 100, 100]), 50.0, 0.5)]
        for pr, sel, threshold, level in cases:
            got = fn(pr.copy(), sel.copy(), threshold, level)
            want = _lead_reference(pr, sel, threshold, level)
            what = f"pr_lead(pr={pr.tolist()}, sel={sel.tolist()}, {threshold:g}, level={level})"
            if not isinstance(got, (tuple, list)) or len(got) != 2:
                raise _Fail(f"{what} is {got!r}, expected a pair (formation index, elevation index)")
            got = tuple(None if g is None else int(g) for g in got)
            if got == want:
                continue
            raw = np.flatnonzero(pr >= level * pr.max())
            causes = {(want[0], int(raw[0]) if len(raw) else None):
                      "elevated means PR - 1 >= level * max(PR - 1): the signal is PR - 1 (PR is 1 at rank 1)"}
            up = pr_elevated(pr, level=level)
            if up.any():
                causes[(want[0], int(np.flatnonzero(up)[-1]))] = "the FIRST elevated revision, not the last"
            hint = causes.get(got, "formation = first index with sel >= threshold; elevation = first index with "
                                   "PR - 1 >= level * max(PR - 1); None where there is none")
            raise _Fail(f"{what} = {got}, expected {want}; {'likely cause' if got in causes else 'hint'}: {hint}")
        return "formation and PR elevation right on 4 trajectories (one never forms, one flat PR)"

    return _run("4.4", [pr_lead], body)


# ----------------------------------------------------------------------------------- session 5: toy to paper


def synthetic_dev(seed: int = 18):
    """A small developmental table (2 panels x 4 revisions x 2 layers x 4 heads) with the library's columns."""
    import pandas as pd

    from circuitdev.measure.classify import classify
    from circuitdev.schema import HEAD_CLASSES, sel_column

    rng = _rng(seed)
    rows = []
    for panel, tokens in (("dense", (1, 2, 8, 30)), ("moe", (1, 3, 9, 40))):
        for r, t in enumerate(tokens):
            for layer in range(2):
                for head in range(4):
                    rows.append({"panel": panel, "revision": f"step{t * 1000}", "step": t * 1000,
                                 "tokens_b": float(t), "layer": layer, "head": head})
    dev = pd.DataFrame(rows)
    for c in HEAD_CLASSES:
        dev[sel_column(c)] = np.exp(rng.uniform(-1, 7, size=len(dev)))
    growth = dev["tokens_b"].rank(method="dense").to_numpy()
    dev["sel_first_token"] *= growth / 2  # sinks grow over training
    dev.loc[dev.index[5], "sel_first_token"] = 30.0  # exactly at the paper's threshold
    dev["sel_induction"] = np.where((dev["layer"] == 1) & (dev["head"] < 3), 20.0 * growth, dev["sel_induction"] / 20)
    h1 = (dev["panel"] == "dense") & (dev["head"] == 1) & (dev["layer"] == 1)
    dev.loc[h1 & (dev["revision"] == "step2000"), "sel_induction"] = 60.0  # a circuit head crosses early ...
    dev.loc[h1 & (dev["revision"] == "step8000"), "sel_induction"] = 10.0  # ... and falls back below 50x
    return dev.join(classify(dev))


def ex_5_1(bos_fraction) -> Verdict:
    """bos_fraction(dev, threshold) -> DataFrame panel, revision, bos_fraction (share of heads >= threshold)."""
    from circuitdev.analysis import findings

    def body(fn):
        dev = synthetic_dev()
        for threshold in (30.0, 100.0):
            got = fn(dev.copy(), threshold)
            want = findings.bos_fraction(dev, threshold=threshold)
            causes = [("the paper counts a head whatever its best class (per-class rule): sel_first_token >= "
                       "threshold", findings.bos_fraction(dev, threshold=threshold, rule="best-class")),
                      ("a head at exactly the threshold counts (>=)",
                       findings.bos_fraction(dev, threshold=threshold * (1 + 1e-9)))]
            _frame_column(got, want, keys=("panel", "revision"), column="bos_fraction",
                          what=f"bos_fraction(dev, {threshold:g})", causes=causes)
        return "matches circuitdev.analysis.findings.bos_fraction at 30x and 100x (a head at exactly 30x included)"

    return _run("5.1", [bos_fraction], body)


def _final_gap_reference(dev, a: str, b: str, threshold: float, *, first: bool = False) -> float:
    from circuitdev.analysis import findings

    frac = findings.bos_fraction(dev, threshold=threshold)
    pick = (lambda g: g.iloc[0]) if first else (lambda g: g.iloc[-1])
    value = {p: pick(g.sort_values("tokens_b"))["bos_fraction"] for p, g in frac.groupby("panel")}
    return 100 * (value[a] - value[b])


def ex_5_2(final_gap) -> Verdict:
    """final_gap(dev, panel_a, panel_b, threshold) -> percentage points, final revisions."""

    def body(fn):
        dev = synthetic_dev()
        for threshold in (30.0, 50.0):
            got = fn(dev.copy(), "dense", "moe", threshold)
            want = _final_gap_reference(dev, "dense", "moe", threshold)
            causes = [("percentage points: multiply the difference of fractions by 100", want / 100),
                      ("compare the FINAL revisions of the two panels (the last in token order)",
                       _final_gap_reference(dev, "dense", "moe", threshold, first=True)),
                      ("panel_a minus panel_b", -want)]
            _expect(got, want, what=f"final_gap(dev, 'dense', 'moe', {threshold:g})",
                    causes=[c for c in causes if not np.isclose(c[1], want)])
        return "right at 30x and 50x on a two-panel table"

    return _run("5.2", [final_gap], body)


def ex_5_3(circuit_recall) -> Verdict:
    """circuit_recall(dev, panel, threshold) -> DataFrame revision, recall (share of the final circuit present)."""
    import pandas as pd

    from circuitdev.analysis import findings

    def body(fn):
        dev = synthetic_dev()
        for panel in ("dense", "moe"):
            got = fn(dev.copy(), panel, 50.0)
            rec = findings.circuit_recall(dev, threshold=50.0)
            want = rec[rec["panel"] == panel][["revision", "recall"]]
            sub = dev[dev["panel"] == panel].sort_values(["tokens_b", "layer", "head"])
            final = sub[sub["tokens_b"] == sub["tokens_b"].max()]
            circuit = {(l, h) for l, h, s in zip(final["layer"], final["head"], final["sel_induction"]) if s >= 50}
            at = sub["sel_induction"] >= 50
            in_circuit = pd.Series([(l, h) in circuit for l, h in zip(sub["layer"], sub["head"])], index=sub.index)
            ever = (at & in_circuit).groupby([sub["layer"], sub["head"]]).cummax()

            def per_revision(hit):
                return hit.groupby(sub["revision"], sort=False).sum().div(len(circuit)).rename("recall").reset_index()

            anyhead, cum = per_revision(at), per_revision(ever)
            causes = [("count only the heads of the FINAL revision's circuit (a head outside it does not count)",
                       anyhead),
                      ("a head counts at a revision only while it is at or above the threshold there", cum)]
            _frame_column(got, want, keys=("revision",), column="recall", what=f"circuit_recall(dev, {panel!r}, 50)",
                          causes=causes)
        return "matches circuitdev.analysis.findings.circuit_recall on both panels (a circuit head that falls back)"

    return _run("5.3", [circuit_recall], body)


# --------------------------------------------------------------------------------------------------- registry

CHECKS: dict[str, Check] = {
    "1.1": Check("1.1", ("class_targets",), ex_1_1),
    "1.2": Check("1.2", ("selectivity_one_class",), ex_1_2),
    "1.3": Check("1.3", ("six_selectivities",), ex_1_3),
    "1.4": Check("1.4", ("baseline_without_ab",), ex_1_4),
    "2.1": Check("2.1", ("first_crossing",), ex_2_1),
    "2.2": Check("2.2", ("milestone",), ex_2_2),
    "2.3": Check("2.3", ("prefix_matching",), ex_2_3),
    "3.1": Check("3.1", ("allq_first_token",), ex_3_1),
    "3.2": Check("3.2", ("selectivity_from_mass", "mass_for_selectivity"), ex_3_2),
    "3.3": Check("3.3", ("parking_share",), ex_3_3),
    "4.1": Check("4.1", ("zero_heads",), ex_4_1),
    "4.2": Check("4.2", ("matched_random",), ex_4_2),
    "4.3": Check("4.3", ("participation_ratio",), ex_4_3),
    "4.4": Check("4.4", ("pr_lead",), ex_4_4),
    "5.1": Check("5.1", ("bos_fraction",), ex_5_1),
    "5.2": Check("5.2", ("final_gap",), ex_5_2),
    "5.3": Check("5.3", ("circuit_recall",), ex_5_3),
}


def check(exercise: str, *fns) -> Verdict:
    """Run exercise `exercise`'s check ("1.2") on the participant's function(s)."""
    if exercise not in CHECKS:
        raise KeyError(f"no check for exercise {exercise!r}; the exercises are {', '.join(CHECKS)}")
    return CHECKS[exercise].run(*fns)
