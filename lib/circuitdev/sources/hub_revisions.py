"""A hub model's training revisions: its `step<N>` branches, and N of them log-spaced by step, for a panel that asks
for `revisions: {log_spaced: N}` instead of a list (`sources.panels`)::

    revisions: {log_spaced: 10}          # optional: min_step, max_step, pattern (regex with a (?P<step>) group)

resolved with `huggingface_hub.list_repo_refs` when the panel is loaded (online only). Tokens come from a
`tokensNB` label in the branch name, else from the panel's `tokens_per_step`. Use `circuitdev panels FILE --freeze
OUT` once online to write the resolved list, so later runs (and Snakemake) work offline.

Which function to use: `resolve_log_spaced` for a panel's revisions (`parse_panel` calls it), `pick_log_spaced` for
the choice alone (offline, over given steps), `list_hub_branches` for a model's branches (`sources.refine` draws its
candidates from them).
"""

from __future__ import annotations

import math
import re
from circuitdev.errors import ConfigError, ModelUnavailableError
from circuitdev.sources.revision import Revision, as_int

LOG_SPACED_KEYS = {"log_spaced", "min_step", "max_step", "pattern"}
# a hub checkpoint branch: step<N>, optionally with the tokens seen in billions (OLMo: step1000-tokens2B)
STEP_BRANCH_RE = re.compile(r"^step(?P<step>\d+)(?:-tokens(?P<tokens_b>\d+)B)?$")


def resolve_log_spaced(model: str, spec: dict, *, tokens_per_step: int | None, where: str = "panel") -> tuple[Revision, ...]:
    """N log-spaced revisions (by step) among the hub's `stepN` branches; needs the hub (online)."""
    unknown = set(spec) - LOG_SPACED_KEYS
    if unknown or "log_spaced" not in spec:
        raise ConfigError(
            f"{where}: revisions as a mapping must be {{log_spaced: N}} (optional min_step, max_step, pattern); "
            f"got keys {sorted(spec)}"
        )
    count = as_int(spec["log_spaced"], f"{where}: revisions.log_spaced", minimum=1)
    pattern = re.compile(spec.get("pattern") or STEP_BRANCH_RE.pattern)
    if "step" not in pattern.groupindex:
        raise ConfigError(f"{where}: revisions.pattern needs a (?P<step>\\d+) group")
    branches = list_hub_branches(model)
    found: dict[int, tuple[str, int | None]] = {}
    for b in branches:
        m = pattern.match(b)
        if m:
            tb = m.groupdict().get("tokens_b")
            found[int(m["step"])] = (b, int(tb) * 10**9 if tb else None)
    lo, hi = spec.get("min_step"), spec.get("max_step")
    steps = sorted(s for s in found if (lo is None or s >= lo) and (hi is None or s <= hi))
    if not steps:
        raise ConfigError(f"{where}: none of the {len(branches)} branches of {model} match {pattern.pattern!r}")
    picked = pick_log_spaced(steps, count)
    out = []
    for s in picked:
        name, tokens = found[s]
        if tokens is None:
            if tokens_per_step is None:
                raise ConfigError(
                    f"{where}: branch {name!r} has no tokensNB label; add `tokens_per_step` to the panel"
                )
            tokens = s * tokens_per_step
        out.append(Revision(name, tokens, s))
    return tuple(out)


def pick_log_spaced(steps: list[int], count: int) -> list[int]:
    """Up to `count` distinct values of the sorted `steps`, nearest (in log) to a geometric grid from first to last."""
    if count >= len(steps):
        return list(steps)
    logs = [math.log(max(s, 1)) for s in steps]
    lo, hi = logs[0], logs[-1]
    chosen: list[int] = []
    for k in range(count):
        target = lo + (hi - lo) * k / max(count - 1, 1)
        order = sorted(range(len(steps)), key=lambda i: (abs(logs[i] - target), i))
        chosen.append(next(i for i in order if i not in chosen))
    return [steps[i] for i in sorted(chosen)]


def list_hub_branches(model: str) -> list[str]:
    """Branch names of a hub model (online). Offline or unreachable -> ModelUnavailableError."""
    try:
        from huggingface_hub import list_repo_refs

        return [b.name for b in list_repo_refs(model).branches]
    except Exception as err:  # offline, unreachable, unknown repo: one message
        raise ModelUnavailableError(
            f"cannot list the revisions of {model} on the Hugging Face hub ({type(err).__name__}: {err}). "
            "Log-spaced panels need the hub once: run `circuitdev panels FILE --freeze OUT.yaml` online and use "
            "OUT.yaml, or list the revisions explicitly"
        ) from None
