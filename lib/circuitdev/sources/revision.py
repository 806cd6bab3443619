"""A training revision (checkpoint) of a panel: its name, the training tokens seen, its optimizer step.

Its own module because three readers build Revisions -- the panel file (`sources.panels`), the hub's branches
(`sources.hub_revisions`) and the revisions `circuitdev refine` added (`sources.refined`) -- and the panel loader uses
the other two. `as_int` is how all three read a count from a config value, `NAME_RE` what a name may be.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from circuitdev.errors import ConfigError

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # panel and revision names become file names


@dataclass(frozen=True)
class Revision:
    name: str  # hub branch (e.g. "step3000", "step1000-tokens2B") or sub-folder of a folder model
    tokens: int  # training tokens seen at this checkpoint
    step: int | None = None  # optimizer step, where known

    @property
    def tokens_b(self) -> float:
        """Tokens in billions, exact (tokens / 1e9; the authors' files truncate to 0.001)."""
        return self.tokens / 1e9


def as_int(value: Any, where: str, *, minimum: int = 0) -> int:
    """A whole number from a config value (an int, or a float with no fraction); `where` names it in the error."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not value.is_integer()):
        raise ConfigError(f"{where} must be an integer, got {value!r} (write e.g. 2097152, not 2.1e6 or '2M')")
    if value < minimum:
        raise ConfigError(f"{where} must be >= {minimum}, got {value!r}")
    return int(value)
