"""circuitdev — when do attention circuits form? Probes, findings and a reproducible book for arXiv 2606.02378.

The small public API is imported lazily so that `import circuitdev` (and `circuitdev --help`) stay fast; torch and
nnsight load on first use.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_PUBLIC = {
    "induction_batch": "circuitdev.batch",
    "InductionBatch": "circuitdev.batch",
    "participation_ratio": "circuitdev.spectral",
    "trajectory_features": "circuitdev.spectral",
    "ProbeConfig": "circuitdev.config",
    "capture": "circuitdev.capture",
    "selectivities": "circuitdev.screen",
    "classify": "circuitdev.classify",
    "probe_model": "circuitdev.probe",
    "evaluate": "circuitdev.ablation",
    "ablation_suite": "circuitdev.ablation",
    "family_of": "circuitdev.families",
    "HEAD_CLASSES": "circuitdev.schema",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'circuitdev' has no attribute {name!r}")
