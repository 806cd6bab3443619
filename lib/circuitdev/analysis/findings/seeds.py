"""Toy seed replicas: the panel name of a replica (<panel>-s<seed>) and the spread of a value across replicas."""

from __future__ import annotations

import re

import pandas as pd

from circuitdev.analysis.devtable import require


from circuitdev.schema import SEED_SUFFIX  # a toy seed replica's panel: <panel>-s<seed>; seed 0 = <panel>

__all__ = ["seed_of", "seed_spread"]


def seed_of(panel: str) -> tuple[str, int]:
    """(base panel, seed) of a panel name: "toy-pythia-s2" -> ("toy-pythia", 2), "toy-pythia" -> ("toy-pythia", 0)."""
    m = re.match(rf"^(?P<base>.+){re.escape(SEED_SUFFIX)}(?P<seed>\d+)$", panel)
    return (m["base"], int(m["seed"])) if m else (panel, 0)


def seed_spread(values: pd.DataFrame, column: str, *, fmt: str = "{:g}") -> pd.DataFrame:
    """Across the seed replicas of each panel, the spread of `column` at each panel's final revision (`values`:
    one row per (panel, revision) in token order, e.g. bos_fraction or head_counts). One row per base panel that
    has at least two seeds: panel, seeds, values ("s<seed>: value" list, each value in `fmt`), min, max, spread
    (max - min)."""
    require(values, ["panel", column], "seed_spread", allow_empty=True)
    final = values.groupby("panel", sort=False).tail(1)
    rows = {}
    for panel, value in zip(final["panel"], final[column]):
        base, seed = seed_of(panel)
        rows.setdefault(base, []).append((seed, float(value)))
    out = [{"panel": base, "seeds": len(v), "values": ", ".join(f"s{s}: {fmt.format(x)}" for s, x in sorted(v)),
            "min": min(x for _, x in v), "max": max(x for _, x in v),
            "spread": max(x for _, x in v) - min(x for _, x in v)} for base, v in rows.items() if len(v) > 1]
    return pd.DataFrame(out, columns=["panel", "seeds", "values", "min", "max", "spread"])
