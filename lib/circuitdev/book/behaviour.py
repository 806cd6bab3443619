"""The record tiers' behaviour per revision, for a page: the behavioural milestones of every probed panel.

The developmental tables a page's tiers hold are per head; behaviour (top-1 at the query, ICL score, and the
ablation over training) is per revision and lives beside the records (`sources.revision_table.load_revision_table`, the
behaviour replicates of `RecordSet.behaviour_boot`). `record_behaviour(ch.tiers, results_dir, specs=...)` reads them
for every panel of the toy and measured tiers and applies `findings.behaviour_milestones`. The published tier has no
behaviour per revision.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from circuitdev.analysis.findings import BEHAVIOUR_MILESTONES, BehaviourMilestone, behaviour_milestones
from circuitdev.book.tiers import Tiers
from circuitdev.errors import CircuitdevError


def _per_record_panel(tiers: Tiers, results_dir: str | Path, fn: Callable, empty: list[str]) -> pd.DataFrame:
    """`fn(read)` (a sources.records.RecordSet -> frame) for every panel of the present record tiers (the published
    tier has no per-revision data), with a `tier` column first; a panel that cannot be read gives no rows. Empty
    (columns `empty`) when there are none."""
    from circuitdev.sources.records import PanelRecords

    frames = []
    for tier in tiers.present:
        if tier.name == "published":
            continue
        for panel in tier.panels:
            try:
                read = PanelRecords.open(results_dir, panel).read(on_missing="skip")
            except (CircuitdevError, OSError):
                continue
            frames.append(fn(read).assign(tier=tier.name))
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame(columns=empty)
    out = pd.concat(frames, ignore_index=True)
    return out[["tier", *[c for c in out.columns if c != "tier"]]]


def record_behaviour(tiers: Tiers, results_dir: str | Path, *,
                     specs: Sequence[BehaviourMilestone] = BEHAVIOUR_MILESTONES,
                     sustained: bool = False) -> pd.DataFrame:
    """findings.behaviour_milestones of every panel of the present record tiers, with a `tier` column first; a panel
    whose records carry no behaviour (format 1 / 2) or cannot be read gives no rows. Empty (columns tier, panel,
    milestone) when there are none."""
    from circuitdev.sources.ablate import with_ablation

    def milestones(read) -> pd.DataFrame:
        boot = read.behaviour_boot()
        return behaviour_milestones(with_ablation(read.revision_table(), read), specs=specs, sustained=sustained,
                                    boot=boot if len(boot) else None)

    return _per_record_panel(tiers, results_dir, milestones, ["tier", "panel", "milestone"])


def record_revision_tables(tiers: Tiers, results_dir: str | Path) -> pd.DataFrame:
    """The per-revision table (sources.revision_table.load_revision_table: behaviour, first-position norms, ablation
    over training) of every panel of the present record tiers, with a `tier` column first; panels that cannot be read
    give no rows. Empty (columns tier, panel, revision) when there are none."""
    from circuitdev.sources.ablate import with_ablation

    return _per_record_panel(tiers, results_dir, lambda read: with_ablation(read.revision_table(), read),
                             ["tier", "panel", "revision"])
