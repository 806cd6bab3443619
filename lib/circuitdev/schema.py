"""Names shared by every stage: the six head classes and the columns of the developmental table.

The developmental table is the project's single seam. Everything upstream (our probe runs, the authors' published
files, the toy panel) produces it; everything downstream (findings, audit, notebooks) reads only it.
One row per (panel, revision, layer, head).
"""

from __future__ import annotations

from typing import Literal, get_args

from circuitdev.errors import ConfigError

# The paper's thresholds (method reference §2, §6). Every default in the library that means "the paper's value"
# refers to these.
CLASS_THRESHOLD = 30.0  # a head is classified as its best class when that selectivity reaches this
BOS_THRESHOLD = 30.0  # first-token (sink) heads in the developmental counts (per-class rule)
INDUCTION_THRESHOLD = 50.0  # induction circuit membership
PREV_TOKEN_THRESHOLD = 100.0  # previous-token circuit (with the best-class condition)
INTERVAL_LEVEL = 0.95  # coverage of every bootstrap interval: percentiles (1 - level) / 2 and (1 + level) / 2
# A toy seed replica's panel is <panel>-s<seed> (`circuitdev toy train --seeds`); seed 0 keeps the panel's name.
SEED_SUFFIX = "-s"


def replica_suffix(seed: int) -> str:
    """What a training seed appends to a toy panel's name: "" for seed 0, "-s2" for seed 2
    (`analysis.findings.seeds.seed_of` reads it back)."""
    return f"{SEED_SUFFIX}{int(seed)}" if seed else ""


MATCHED_RANDOM_SEED = 123  # the paper's RandomState seed of the matched-random ablation control (method reference §5)

# Group ablation modes: "zero" (the paper's only one) or "mean" (method reference §5).
AblationMode = Literal["zero", "mean"]

HeadClass = Literal["induction", "previous-token", "duplicate-token", "first-token", "self", "local"]
# Order matters: the paper's best class is a stable descending sort over this list, so an exact tie goes to the
# class listed first.
HEAD_CLASSES: tuple[HeadClass, ...] = get_args(HeadClass)
UNCLASSIFIED = "unclassified"


def sel_column(head_class: str) -> str:
    """Column holding a class's selectivity: "previous-token" -> "sel_previous_token"."""
    check_head_class(head_class)
    return "sel_" + head_class.replace("-", "_")


def check_head_class(head_class: str) -> HeadClass:
    if head_class not in HEAD_CLASSES:
        raise ValueError(
            f"unknown head class {head_class!r}; the classes are {', '.join(HEAD_CLASSES)} "
            "(hyphenated, as in the paper)"
        )
    return head_class  # type: ignore[return-value]


SEL_COLUMNS: tuple[str, ...] = tuple(sel_column(c) for c in HEAD_CLASSES)

# ----------------------------------------------------------------------------------------------------- heads by name
# A set of heads by layer, {layer: [head, ...]} (TransformerLens' LayerToHead): what an ablation zeroes.
LayerToHead = dict[int, list[int]]


def head_name(layer: int, head: int) -> str:
    """The one way a head is written: layer 4, head 4 -> "L4H4"."""
    return f"L{int(layer)}H{int(head)}"


def parse_head(name) -> tuple[int, int]:
    """(layer, head) from "L4H4" (also "L4_H4", "l4h4" or a (4, 4) pair); ConfigError names the forms it takes."""
    if isinstance(name, (tuple, list)):
        return int(name[0]), int(name[1])
    text = str(name).strip().upper().replace("_", "")
    try:
        layer, head = text.removeprefix("L").split("H")
        return int(layer), int(head)
    except ValueError as err:
        raise ConfigError(f"head {name!r}: write heads as 'L4H4', 'L4_H4' or (4, 4)") from err


def heads_text(heads: LayerToHead) -> str:
    """A set of heads as the tables write it: {2: [7, 1], 0: [3]} -> "L0H3 L2H1 L2H7" (by layer, then head)."""
    return " ".join(head_name(layer, h) for layer in sorted(heads, key=int) for h in sorted(heads[layer], key=int))


# Developmental-table columns. Required ones must be present in every source; optional ones may be NaN / absent
# (e.g. the published files carry no all-query sink score, and PR is known only where a trajectory exists).
DEV_KEY_COLUMNS = ("panel", "revision", "tokens_b", "layer", "head")
DEV_REQUIRED_COLUMNS = (*DEV_KEY_COLUMNS, *SEL_COLUMNS)
DEV_OPTIONAL_COLUMNS = (
    "step",  # training step (int) where known
    "pr",  # participation ratio of the head's query-position output (NaN where unknown)
    "best_class",  # argmax class (paper tie rule)
    "classification",  # best_class if its selectivity >= the class threshold, else "unclassified"
    "sel_first_token_allq",  # all-query first-token score (ratio of means), our addition
    "mass_first_token_allq",  # mean attention mass on position 0 over the same queries
    "source",  # "published" | "probe" | "toy"
)
