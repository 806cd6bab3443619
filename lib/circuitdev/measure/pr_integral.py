"""The authors' PR integral (method reference §3), in one place: pure numpy, so that the findings (which never import
torch) and the measure stage's trajectory features compute it the same way."""

from __future__ import annotations

import numpy as np

from circuitdev.errors import ConfigError


def pr_integral(pr, tokens_b, *, clip_b: float = 1.0) -> np.ndarray:
    """Per trajectory (last axis of `pr`: revisions, aligned with `tokens_b`): the trapezoid of max(PR - 1, 0) over
    ln(max(tokens_b, clip_b)), over the revisions with a PR (NaN skipped). Revisions below the clip (the authors':
    1B tokens) all sit at one x and add nothing -- a quirk of the authors' clip, kept for fidelity. NaN for a
    trajectory without any PR; a scalar for a 1-D `pr`."""
    pr = np.asarray(pr, dtype=float)
    x = np.log(np.maximum(np.asarray(tokens_b, dtype=float), clip_b))
    if pr.shape[-1] != x.shape[0]:
        raise ConfigError(f"PR trajectory has {pr.shape[-1]} revisions but {x.shape[0]} token counts")
    rows = pr.reshape(-1, pr.shape[-1])
    out = np.full(len(rows), np.nan)
    for i, row in enumerate(rows):
        ok = ~np.isnan(row)
        if ok.any():
            y = np.maximum(row[ok] - 1, 0)
            out[i] = float(np.sum((y[1:] + y[:-1]) / 2 * np.diff(x[ok])))
    return out.reshape(pr.shape[:-1])[()]
