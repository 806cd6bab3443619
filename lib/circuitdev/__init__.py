"""circuitdev — when do attention circuits form? Probes, findings and a reproducible book for arXiv 2606.02378.

The package follows the data flow, one stage a sub-package, each importing only from the stages before it:

    measure/   one checkpoint -> per-head selectivities, PR, ablations (torch, nnsight)
    sources/   panels, loading, the record store, the authors' published files -> the developmental table
    analysis/  the findings F1-F6 and the audit over a developmental table (pandas only: no torch)
    book/      the book's pages: parameters, tiers, glue, figures, page execution

beside them `toy/` (the offline toy panel), `commands/` + `cli` (the `circuitdev` command) and the shared basics
`schema`, `errors`, `paths`, `atomic`, `runinfo`. The small public API below is imported lazily so that
`import circuitdev` (and `circuitdev --help`) stay fast; torch and nnsight load on first use.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_PUBLIC = {
    "induction_batch": "circuitdev.measure.batch",
    "InductionBatch": "circuitdev.measure.batch",
    "participation_ratio": "circuitdev.measure.spectral",
    "trajectory_features": "circuitdev.measure.spectral",
    "ProbeConfig": "circuitdev.measure.config",
    "capture": "circuitdev.measure.capture",
    "selectivities": "circuitdev.measure.screen",
    "classify": "circuitdev.measure.classify",
    "probe_model": "circuitdev.measure.probe",
    "ProbeResult": "circuitdev.measure.probe",
    "PanelRecords": "circuitdev.sources.records",
    "load_panel": "circuitdev.sources.panels",
    "evaluate": "circuitdev.measure.ablation",
    "ablation_suite": "circuitdev.measure.ablation",
    "family_of": "circuitdev.measure.families",
    "HEAD_CLASSES": "circuitdev.schema",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'circuitdev' has no attribute {name!r}")
