"""A panel's per-revision table: the values measured once per revision (behaviour, first-position norms) beside the
final circuit's ablation at that revision.

Its own module because it joins two readers of the same records -- `sources.records` (one row per record) and
`sources.ablate` (the panel's ablation-over-training table, which itself reads the records) -- and neither may
import the other's reader back; `sources.store` holds one record at a time and knows neither.
"""

from __future__ import annotations

import os

import pandas as pd

from circuitdev.sources.ablate import with_ablation
from circuitdev.sources.records import PanelRecords


def load_revision_table(results_dir: str | os.PathLike | None, panel) -> pd.DataFrame:
    """One row per probed revision of `panel` (a name, file or Panel; refined revisions included, token order):
    `records.REVISION_COLUMNS`, the norm columns (`records.revision_norm_columns`) and the ablation-over-training
    columns (sources.ablate.ABLATION_COLUMNS; NaN where not computed). Revisions without a complete record are left out;
    a record without behaviour (format 1 / 2) gives NaN."""
    read = PanelRecords.open(results_dir, panel).read(on_missing="skip")
    return with_ablation(read.revision_table(), read)
