"""First-position norms beside the sink heads (issue 23 item 3): the residual stream's L2 norm at position 0 against
its median over the other positions, per layer and revision, read from the records' revision table.

The paper's F1 mechanism: a sink head parks its attention on position 0 because the residual stream there has grown
a large ("massive") activation that the keys can find, and layers 0/1 have not yet built one. This module puts the
measured ratio next to where the sink heads are, so a page can say whether the toy forms such an activation before
(or where) its sinks form:

    norms = position_norms(revision_table)      # one row per (panel, revision, stream); NORM_COLUMNS
    norm_summary(norms, flags)                  # per panel: the largest ratio and where, the ratio at the sink layer

A stream is "embed" (the embeddings, depth 0) or "l<i>" (the output of layer i, depth i + 1): the input of layer i + 1,
so a sink head in layer ℓ reads the stream "l<ℓ-1>" (depth ℓ). The ratio is a ratio of means over the batch's
sequences (measure.behaviour.position_norms).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

__all__ = ["NORM_COLUMNS", "stream_words", "position_norms", "norm_summary"]

NORM_COLUMNS = ["panel", "revision", "step", "tokens_b", "stream", "depth", "norm_ratio", "norm_pos0", "norm_median"]
_STREAM = re.compile(r"^norm_ratio_(embed|l\d+)$")


def stream_depth(stream: str) -> int:
    """"embed" -> 0, "l<i>" -> i + 1 (the stream a head of layer i + 1 reads)."""
    return 0 if stream == "embed" else int(stream[1:]) + 1


def stream_words(stream: str) -> str:
    """"embed" -> "the embeddings", "l2" -> "after layer 2"."""
    return "the embeddings" if stream == "embed" else f"after layer {stream[1:]}"


def position_norms(rev: pd.DataFrame) -> pd.DataFrame:
    """The revision table's norm_ratio_<stream>, norm_pos0_<stream>, norm_median_<stream> columns
    (sources.revision_table.load_revision_table; one row per panel and revision) as one row per (panel, revision, stream),
    NORM_COLUMNS, in the table's revision order. Records without norms (formats 1 / 2) give no rows."""
    streams = [m.group(1) for c in rev.columns if (m := _STREAM.match(str(c)))]
    if rev.empty or not streams:
        return pd.DataFrame(columns=NORM_COLUMNS)
    rev = rev.reset_index(drop=True)  # the row order is the revision order (a concatenation may repeat labels)
    frames = []
    for stream in streams:
        part = rev[["panel", "revision", "step", "tokens_b"]].copy()
        part["stream"], part["depth"] = stream, stream_depth(stream)
        for kind in ("norm_ratio", "norm_pos0", "norm_median"):
            col = f"{kind}_{stream}"
            part[kind] = rev[col].astype(float) if col in rev.columns else np.nan
        frames.append(part.reset_index().rename(columns={"index": "_order"}))
    out = pd.concat(frames, ignore_index=True).dropna(subset=["norm_ratio"])
    return out.sort_values(["_order", "depth"], kind="stable").drop(columns="_order")[NORM_COLUMNS] \
        .reset_index(drop=True)


def norm_summary(norms: pd.DataFrame, flags: pd.DataFrame | None = None, *, measure: str = "second_a") -> pd.DataFrame:
    """Per panel: the largest position-0 / median ratio over all streams and revisions (`largest`, at
    `largest_stream`, `largest_revision`); the sink layers at the last revision (`sink_layers`: layers holding a head
    that `measure` of findings.sink_flags flags there) and the ratio of the stream those heads read at the last
    revision (`sink_stream`, `ratio_at_sinks`: the largest over the sink layers); `text`, all of it in one clause."""
    rows = []
    for panel, g in norms.groupby("panel", sort=False):
        top = g.loc[g["norm_ratio"].idxmax()]
        last = g[g["revision"] == g["revision"].iloc[-1]]
        layers: list[int] = []
        if flags is not None and len(flags) and measure in flags.columns:
            f = flags[(flags["panel"] == panel)]
            f = f[f["revision"] == last["revision"].iloc[0]] if len(f) else f
            layers = sorted({int(x) for x in f.loc[f[measure].fillna(False).astype(bool), "layer"]})
        at = last[last["depth"].isin(layers)].sort_values("depth")
        best = at.loc[at["norm_ratio"].idxmax()] if len(at) else None
        text = (f"the position-0 norm is at most {top['norm_ratio']:.2g}× the median position's "
                f"({stream_words(top['stream'])}, at {top['revision']})")
        if best is not None:
            text += (f", and at {best['revision']} its sink heads read, as their layer's input, a position-0 norm of "
                     + ", ".join(f"{r.norm_ratio:.2g}× (layer {r.depth})" for r in at.itertuples())
                     + " the median's")
        elif flags is not None:
            text += f", and no head is a sink at {last['revision'].iloc[0]}"
        rows.append({"panel": panel, "largest": float(top["norm_ratio"]), "largest_stream": top["stream"],
                     "largest_revision": top["revision"], "sink_layers": layers,
                     "sink_stream": None if best is None else best["stream"],
                     "ratio_at_sinks": np.nan if best is None else float(best["norm_ratio"]), "text": text})
    return pd.DataFrame(rows, columns=["panel", "largest", "largest_stream", "largest_revision", "sink_layers",
                                       "sink_stream", "ratio_at_sinks", "text"])
