"""The audit page's figure: the paper's claims per finding that the data match, contradict or cannot decide."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from circuitdev.book.plots.axes import placeholder


def audit_status(audit: pd.DataFrame) -> Figure:
    """The audit at a glance: claims per finding that the data match, contradict, or cannot decide."""
    if audit.empty:
        return placeholder("No audit: the published tier is absent.", title="Audit")
    counts = audit.groupby(["finding", "status"]).size().unstack(fill_value=0)
    counts = counts.reindex(columns=[c for c in ("match", "differs", "unverified") if c in counts.columns])
    colors = {"match": "#2ca02c", "differs": "#d62728", "unverified": "#bdbdbd"}
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(counts) + 1.4), layout="constrained")
    left = np.zeros(len(counts))
    for status in counts.columns:
        ax.barh(counts.index, counts[status], left=left, color=colors[status], label=status)
        for y, (l, v) in enumerate(zip(left, counts[status])):
            if v:
                ax.text(l + v / 2, y, str(int(v)), ha="center", va="center", fontsize=8, color="white")
        left += counts[status].to_numpy()
    ax.invert_yaxis()
    ax.set_xlabel("claims (count)")
    ax.set_ylabel("finding")
    ax.legend(ncol=3, fontsize=8, loc="lower right")
    ax.set_title("The paper's numeric claims against its own published data", fontsize=10)
    return fig
