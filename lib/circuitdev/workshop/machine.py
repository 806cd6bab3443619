"""This machine's torch thread count for the workshop, chosen by measurement and stored for the sessions.

On a laptop doing other work, torch's threads compete with it: on a 2-core machine with other jobs running, 2 threads
trained the `mini` preset about 10x slower than 1 (the same heads either way -- the thread count changes float
rounding, not what the model learns). So the count is measured, never assumed:

    measure()      times a few optimiser steps of the mini model with each candidate count (1, half the cores, all
                   of them), interleaved over rounds (1, N, 1, N, ...) so that a burst of load hits every candidate,
                   and keeps the fastest (the median of its rounds)
    save(choice)   <workshop>/machine.json, written by `circuitdev workshop doctor`
    current()      the stored choice when it was measured on this machine (same CPU count and torch), else a new
                   measurement (a few seconds), stored

`ThreadChoice` says how long the mini run should take here (`estimate_s`) and the range to expect (`expected_range`):
session 2 prints it before it trains and its own measured time after.
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from circuitdev.workshop.paths import mini_recipe, workshop_dir

MACHINE_FILE = "machine.json"  # in `circuitdev.workshop.paths.workshop_dir()`
ROUNDS = 2  # interleaved rounds per candidate
STEPS_PER_ROUND = 4  # timed optimiser steps per round (after one warm-up step)
DROP_AFTER = 3.0  # a count this many times slower than the best after the first round is not timed again
RANGE = (0.75, 2.0)  # the expected range around the estimate: a quieter moment, or a machine twice as busy
StepTimer = Callable[[int, int], float]  # (threads, steps) -> seconds per step


def cpu_count() -> int:
    """The cores this process may use: those it may run on, at most OMP_NUM_THREADS where that is set -- a pipeline
    job's share (`make book` runs two one-thread jobs on two cores; a session's second thread there competed with
    the other job and trained the mini run ~20x slower, 0.88 s a step against 0.04 s)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    allotted = os.environ.get("OMP_NUM_THREADS", "").strip()
    return min(cores, int(allotted)) if allotted.isdigit() and int(allotted) > 0 else cores


def candidates(cpus: int | None = None) -> list[int]:
    """Thread counts worth trying: 1, half the cores and all of them (at most 8: the toy models are small)."""
    cpus = max(1, min(cpus or cpu_count(), 8))
    return sorted({1, max(1, cpus // 2), cpus})


def training_seconds(recipe, family: str, *, steps: int = 8, threads: int = 1,
                     clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds the whole recipe would take here, from `steps` timed optimiser steps (after one warm-up step) of its
    model on random windows of its shape, with `threads` torch threads, read on `clock`. torch's thread count is
    restored afterwards."""
    import torch

    from circuitdev.toy.train import build_model

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch.manual_seed(0)
        model = build_model(family, recipe)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr)
        lo, hi = recipe.probe_vocab_range
        x = torch.randint(lo, hi, (recipe.batch_size, recipe.seq_len))

        def step() -> None:
            loss = model(input_ids=x, labels=x).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        step()
        t0 = clock()
        for _ in range(steps):
            step()
        return (clock() - t0) / steps * recipe.steps
    finally:
        torch.set_num_threads(before)


@dataclass(frozen=True)
class ThreadChoice:
    threads: int  # the fastest count measured
    seconds_per_step: dict[int, float]  # median seconds per optimiser step of the mini model, per thread count
    steps: int  # the mini preset's training steps
    cpus: int  # the cores it was measured on
    torch: str  # torch's version it was measured with
    measured_at: str  # ISO time

    @property
    def estimate_s(self) -> float:
        """How long the mini run should take here, with the chosen thread count."""
        return self.seconds_per_step[self.threads] * self.steps

    def expected_range(self) -> tuple[float, float]:
        return RANGE[0] * self.estimate_s, RANGE[1] * self.estimate_s

    def summary(self) -> str:
        """One line: each count's speed, the choice, and how long the mini run should take."""
        best = self.seconds_per_step[self.threads]
        speeds = ", ".join(f"{n} thread{'s' * (n > 1)}: {s * 1000:.0f} ms a step"
                           + (f" ({s / best:.1f}x slower)" if n != self.threads and s / best >= 1.2 else "")
                           for n, s in sorted(self.seconds_per_step.items()))
        lo, hi = self.expected_range()
        return (f"{speeds} -> {self.threads} thread{'s' * (self.threads > 1)}; the mini run should take about "
                f"{duration(self.estimate_s)} here ({duration(lo)} to {duration(hi)})")

    def to_dict(self) -> dict:
        out = asdict(self)
        out["seconds_per_step"] = {str(k): v for k, v in self.seconds_per_step.items()}
        return out

    @classmethod
    def from_dict(cls, raw: dict) -> ThreadChoice:
        return cls(threads=int(raw["threads"]), steps=int(raw["steps"]), cpus=int(raw["cpus"]),
                   torch=str(raw["torch"]), measured_at=str(raw["measured_at"]),
                   seconds_per_step={int(k): float(v) for k, v in raw["seconds_per_step"].items()})


def duration(seconds: float) -> str:
    """'45 s', '3.5 min'."""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def step_timer(family: str = "gpt_neox") -> StepTimer:
    """(threads, steps) -> seconds per optimiser step of the mini preset's model, measured here."""
    recipe = mini_recipe()
    return lambda threads, steps: training_seconds(recipe, family, steps=steps, threads=threads) / recipe.steps


def measure(*, timer: StepTimer | None = None, counts: list[int] | None = None, rounds: int = ROUNDS,
            steps: int = STEPS_PER_ROUND) -> ThreadChoice:
    """Time each candidate thread count, interleaved over `rounds`, and choose the fastest (median of its rounds; a
    count `DROP_AFTER` times slower than the best in the first round is not timed again).
    `timer` (default: the mini model's optimiser steps) is what tests replace: no wall clock there."""
    import torch

    timer = timer or step_timer()
    counts = counts or candidates()
    times: dict[int, list[float]] = {n: [] for n in counts}
    for k in range(rounds):
        for n in counts:
            if k and min(times[n]) > DROP_AFTER * min(min(v) for v in times.values()):
                continue  # far slower than the best in its first round: no need to time it again
            times[n].append(timer(n, steps))
    per_step = {n: statistics.median(v) for n, v in times.items()}
    best = min(counts, key=lambda n: (per_step[n], n))  # a tie goes to fewer threads
    return ThreadChoice(threads=best, seconds_per_step=per_step, steps=mini_recipe().steps, cpus=cpu_count(),
                        torch=torch.__version__, measured_at=datetime.datetime.now().isoformat(timespec="seconds"))


def machine_file() -> Path:
    return workshop_dir() / MACHINE_FILE


def save(choice: ThreadChoice, path: Path | None = None) -> Path:
    from circuitdev.atomic import write_atomic

    return write_atomic(path or machine_file(), json.dumps(choice.to_dict(), indent=1) + "\n")


def load(path: Path | None = None) -> ThreadChoice | None:
    """The stored choice, or None when there is none, it is unreadable, or it was measured on other hardware (another
    CPU count) or another torch."""
    import torch

    try:
        choice = ThreadChoice.from_dict(json.loads((path or machine_file()).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if choice.cpus != cpu_count() or choice.torch != torch.__version__ or choice.threads not in choice.seconds_per_step:
        return None
    return choice


def current(*, log: Callable[[str], None] | None = print) -> ThreadChoice:
    """The stored choice for this machine, else a new measurement (a few seconds), stored for the next sessions."""
    choice = load()
    if choice is not None:
        return choice
    if log:
        counts = candidates()
        which = "1 torch thread (all this process may use)" if counts == [1] else \
            f"{', '.join(map(str, counts[:-1]))} and {counts[-1]} torch threads"
        log(f"measuring this machine's training speed with {which} (a few seconds, once; "
            "`circuitdev workshop doctor` does it too) ...")
    choice = measure()
    save(choice)
    return choice


def stored_threads() -> int | None:
    """The stored thread count for this machine (no measurement), or None."""
    choice = load()
    return choice.threads if choice is not None else None
