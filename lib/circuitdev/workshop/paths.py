"""Where the workshop writes, and the recipe of the participant's own run.

`workshop_dir()` ($CIRCUITDEV_WORKSHOP, else <data>/toy/_workshop) holds everything a session writes: the mini run
(its checkpoints under toy/, its panel file under panels/, its loss log), its probe records (results/,
`workshop_results_dir()`) and this machine's measured thread count (machine.json, `circuitdev.workshop.machine`).
`mini_recipe()` is the `mini` toy preset session 2 trains. Both the sessions' data (`workshop.data`) and the machine's
measurement (`workshop.machine`) need them, and neither should import the other for it.
"""

from __future__ import annotations

import os
from pathlib import Path

from circuitdev import paths
from circuitdev.toy.recipe import ToyRecipe, preset

MINI_PRESET = "mini"
WORKSHOP_ENV = "CIRCUITDEV_WORKSHOP"  # the workshop's own folder (default <data>/toy/_workshop)


def workshop_dir() -> Path:
    """The workshop's own folder: $CIRCUITDEV_WORKSHOP, else <data>/toy/_workshop (git-ignored with data/toy). The
    participant's mini run, its records and loss log, and this machine's measured thread count live here."""
    value = os.environ.get(WORKSHOP_ENV, "").strip()
    return Path(value).expanduser().resolve() if value else paths.toy_dir() / "_workshop"


def workshop_results_dir() -> Path:
    return workshop_dir() / "results"


def mini_recipe() -> ToyRecipe:
    """Session 2's recipe: the `mini` toy preset (a ConfigError naming the presets where it is missing)."""
    return preset(MINI_PRESET)
