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

One module per session, named after its source (notebooks/workshop/NN_<name>.py -> checks/<name>.py), on a shared
base:

    base                    Verdict, ExerciseFailed, the `@exercise` decorator and its registry `CHECKS`, `check`,
                            `difference` / `expect` / `expect_column` (what differs, and its likely cause), and
                            `hint("2.1")`: an exercise's hint, from its session's source
    synthetic               the seeded inputs: random_rows, random_patterns, small_batch, synthetic_dev
    probe_by_hand, watch_a_circuit_form, sinks_and_selectivity, causal_and_spectral, toy_to_paper
                            the checks of sessions 1 to 5 (`SESSION_MODULES`)

`CHECKS` maps each exercise id to its check and the function name(s) the participant writes (the build and the
tests use it); a check registers itself there once, by its name (`@exercise def ex_1_2(selectivity_one_class)`).
"""

from __future__ import annotations

import importlib

STRICT = False  # workshop.setup() sets it: a failed check raises ExerciseFailed (one line in a notebook)

from circuitdev.workshop.checks.base import (  # noqa: E402
    CHECKS, Check, ExerciseFailed, Hint, Verdict, check, difference, exercise, hint)
from circuitdev.workshop.checks.synthetic import (  # noqa: E402
    random_patterns, random_rows, small_batch, synthetic_dev)

# one module per session, in session order: importing one registers its checks (notebooks/workshop/NN_<name>.py)
SESSION_MODULES = ("probe_by_hand", "watch_a_circuit_form", "sinks_and_selectivity", "causal_and_spectral",
                   "toy_to_paper")
for _name in SESSION_MODULES:
    importlib.import_module(f"{__name__}.{_name}")
del _name
# what the sessions call, `checks.ex_1_2(fn)`: each registered check under its own name
globals().update({c.run.__name__: c.run for c in CHECKS.values()})

__all__ = ["STRICT", "CHECKS", "SESSION_MODULES", "Check", "ExerciseFailed", "Hint", "Verdict", "check",
           "difference", "exercise", "hint", "random_patterns", "random_rows", "small_batch", "synthetic_dev",
           *(c.run.__name__ for c in CHECKS.values())]
