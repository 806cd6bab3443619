"""The authors' three published models: our panel name, what the prose calls each, its hub id, its file names, and
the rule that turns a revision into the tokens seen (method reference §6). `sources.published` reads their files.

Which function to use: `revision_tokens_b(panel, revision)` for a published revision's tokens (its label or the
panel's rule), `tokens_b_for_step` for the rule alone, `parse_revision` to split a revision name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from circuitdev.errors import DataError

TokensRule = Literal["per-step-truncated", "label", "per-step-floor"]


@dataclass(frozen=True)
class PublishedPanel:
    name: str  # our panel / model name, used in every output table
    short: str  # what the book's prose calls it (and its glue keys): pythia, olmo, olmoe
    hf_id: str  # the `model` field of the authors' JSON files
    file_prefix: str  # per_revision/{file_prefix}_mechinterp_{revision}.json
    trajectory_file: str  # pr_trajectory/{trajectory_file}
    tokens_rule: TokensRule  # how tokens_b follows from the revision (method reference §6)
    tokens_per_step: int


# Token rules (method reference §6): Pythia 2,097,152 tok/step truncated to 0.001 B; OLMo the branch label
# "stepN-tokensTB" (the label wins over 2^21/step, §8.2); OLMoE floor(step * 4,194,304 / 1e9), which equals its label.
PUBLISHED_PANELS: dict[str, PublishedPanel] = {
    p.name: p
    for p in (
        PublishedPanel("pythia-1b", "pythia", "EleutherAI/pythia-1b", "pythia1b", "pythia_1b_phase1_trajectory.json",
                       "per-step-truncated", 2_097_152),
        PublishedPanel("olmo-1b-0724", "olmo", "allenai/OLMo-1B-0724-hf", "olmo", "olmo_phase1_trajectory.json",
                       "label", 2_097_152),
        PublishedPanel("olmoe-1b-7b-0924", "olmoe", "allenai/OLMoE-1B-7B-0924", "olmoe", "olmoe_phase1_trajectory.json",
                       "per-step-floor", 4_194_304),
    )
}
PANELS: tuple[str, ...] = tuple(PUBLISHED_PANELS)

_REVISION_RE = re.compile(r"^step(\d+)(?:-tokens(\d+)B)?$")


# ----------------------------------------------------------------------------------------------------------- tokens


def parse_revision(revision: str) -> tuple[int, int | None]:
    """"step56000-tokens117B" -> (56000, 117); "step3000" -> (3000, None)."""
    m = _REVISION_RE.match(revision)
    if not m:
        raise DataError(f"revision {revision!r} is not of the form 'stepN' or 'stepN-tokensTB'")
    return int(m.group(1)), (int(m.group(2)) if m.group(2) else None)


def tokens_b_for_step(panel: str, step: int) -> float:
    """Tokens (billions) seen at `step` by the panel's tokens-per-step rule (the label is not consulted)."""
    info = published_panel(panel)
    tokens = step * info.tokens_per_step
    if info.tokens_rule == "per-step-floor":
        return float(tokens // 10**9)
    if info.tokens_rule == "per-step-truncated":
        return tokens // 10**6 / 1000
    return round(tokens / 1e9, 3)  # label panels without a label: the unrounded estimate


def revision_tokens_b(panel: str, revision: str) -> float:
    """Tokens (billions) of a published revision, by the panel's rule (method reference §6)."""
    step, label = parse_revision(revision)
    info = published_panel(panel)
    if info.tokens_rule == "label":
        if label is None:
            raise DataError(f"{panel} revision {revision!r} has no '-tokensTB' label, which its token count comes from")
        return float(label)
    tokens = tokens_b_for_step(panel, step)
    if label is not None and info.tokens_rule == "per-step-floor" and label != tokens:
        raise DataError(f"{panel} revision {revision!r}: label says {label}B but the rule gives {tokens:g}B")
    return tokens


def published_panel(panel: str) -> PublishedPanel:
    """The row of PUBLISHED_PANELS of a panel name; DataError naming the published panels for any other name."""
    if panel not in PUBLISHED_PANELS:
        raise DataError(f"unknown published model {panel!r}; the published panels are {', '.join(PANELS)}")
    return PUBLISHED_PANELS[panel]
