"""The audit page's figure: the paper's claims per finding that the data match, contradict or cannot decide."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from circuitdev.book.plots.axes import placeholder


_STATUS_WORDS = {"match": "match", "consistent (bound)": "consistent as a bound",
                 "differs (bound)": "differ as a bound", "differs": "differ", "unverified": "cannot decide"}
_STATUS_COLORS = {"match": "#2ca02c", "consistent (bound)": "#98df8a", "differs (bound)": "#ff9896",
                  "differs": "#d62728", "unverified": "#bdbdbd"}


def audit_status(audit: pd.DataFrame) -> Figure:
    """The audit at a glance: per finding, the claims the data match, contradict or cannot decide; the findings
    (F1-F6, ablation) above, the bookkeeping claims (`analysis.audit.BOOKKEEPING`: panels, method) below, apart."""
    from circuitdev.analysis.audit import BOOKKEEPING

    if audit.empty:
        return placeholder("No audit: the published tier is absent.", title="Audit")
    counts = audit.groupby(["finding", "status"]).size().unstack(fill_value=0)
    counts = counts.reindex(columns=[c for c in _STATUS_WORDS if c in counts.columns])
    blocks = [("findings", [f for f in counts.index if f not in BOOKKEEPING]),
              ("bookkeeping", [f for f in counts.index if f in BOOKKEEPING])]
    ys, names, y = [], [], 0.0
    for _block, rows in blocks:
        for f in rows:
            ys.append(y)
            names.append(f)
            y += 1
        y += 0.6 if rows else 0  # a gap between the two blocks
    counts = counts.loc[names]
    fig, ax = plt.subplots(figsize=(7.5, 0.42 * y + 1.4), layout="constrained")
    left = np.zeros(len(counts))
    for status in counts.columns:
        ax.barh(ys, counts[status], left=left, color=_STATUS_COLORS[status], label=_STATUS_WORDS[status], height=0.8)
        for yy, l, v in zip(ys, left, counts[status]):
            if v:
                ax.text(l + v / 2, yy, str(int(v)), ha="center", va="center", fontsize=9, color="white")
        left += counts[status].to_numpy()
    ax.set_yticks(ys, names, fontsize=10)
    ax.invert_yaxis()
    split = [ys[i] for i, f in enumerate(names) if f in BOOKKEEPING]
    if split and len(split) < len(ys):
        ax.axhline(split[0] - 0.8, color="#444", lw=0.8, ls="--")
        for text, at in (("findings", ys[0]), ("bookkeeping", split[0])):
            ax.annotate(text, (1, at), xycoords=("axes fraction", "data"), xytext=(-4, 0), textcoords="offset points",
                        ha="right", va="center", fontsize=9, style="italic", color="#444")
    ax.set_xlim(0, float(left.max()) * 1.25)  # room on the right for the block labels
    ax.set_xlabel("claims (count)")
    ax.legend(ncol=3, fontsize=9, loc="lower right", title="the authors' files …", title_fontsize=9)
    ax.set_title("The paper's numeric claims against its own published data", fontsize=11)
    return fig
