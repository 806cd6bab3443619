"""Summaries of a probed toy panel: what formed, where, and when, and how each panel was trained (the toy panel page,
notebooks/toy_panel.py, computes them; the toy recipe appendix and the introduction glue its numbers)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from circuitdev.analysis.devtable import final_circuit, revisions
from circuitdev.analysis.findings.basics import BOS
from circuitdev.analysis.findings.f1_floor import floor_margin
from circuitdev.analysis.findings.f3_milestones import Milestone, milestone, milestone_mask, milestones
from circuitdev.errors import ConfigError
from circuitdev.schema import HEAD_CLASSES, parse_head, sel_column


# ------------------------------------------------------------------------------ the toy panel page (issue 21 item 10)
# What the toy panel page (notebooks/toy_panel.py) computes, so that the toy recipe appendix glues it instead of
# typing it: how each panel was trained (its recipe.json), when each event first happened, which heads are there at
# the end, and how close the first layers come to the sink bar. Numbers only; the page words them.

FLOOR_LAYERS = (0, 1)  # the paper's layer floor (F1): no sink head in layers 0 and 1


@dataclass(frozen=True)
class Event:
    """Something that first happens during training: a toy milestone spec (`findings.Milestone`: at least min_heads
    heads, or min_fraction of the heads, of a class at a bar), timed by `findings.milestones` like the paper's."""

    name: str  # in words, as the page's tables show it
    key: str  # its glue key part, e.g. "induction-3"
    spec: Milestone


def toy_events(*, induction: float = 50.0, sink: float = 30.0, prev: float = 100.0) -> tuple[Event, ...]:
    """The events the toy recipe talks about, in the order the circuit forms (bars: the paper's by default); two of
    them are F3's milestones themselves, at these bars."""
    return (Event("a previous-token head", "prev-first", Milestone("prev-first", "previous-token", prev, 1)),
            Event("an induction head", "induction-first", Milestone("induction-first", "induction", induction, 1)),
            Event("three induction heads (F3's milestone)", "induction-3",
                  milestone("induction_3_heads", threshold=induction)),
            Event("a sink head at the second A", "sink-first", Milestone("sink-first", BOS, sink, 1)),
            Event("a sink head over all queries", "sink-allq-first",
                  Milestone("sink-allq-first", BOS, sink, 1, column="sel_first_token_allq")),
            Event("sink heads in 10% of heads (F3's earliest sink milestone)", "sinks-10pct",
                  milestone("bos_10pct", threshold=sink)))


# findings.milestones' censoring (`bound`) in the page's words: "first" reached at the first probed revision after
# initialisation (at or before it), "never" not by the last probed revision
_CENSORED = {"upper": "first", "lower": "never", "exact": "", "none": ""}


def first_events(dev: pd.DataFrame, events: Sequence[Event]) -> pd.DataFrame:
    """Per panel and event, the first probed revision at which the event holds (`findings.milestones` over the
    events' specs, with its censoring). Columns: panel, event, key, revision (None: never), tokens_b, layers (of
    the heads counted there), censored ("" | "first": it holds at the panel's first probed revision after
    initialisation, so it happened at or before it | "never": not by the last probed revision), first_revision,
    last_revision."""
    ms = {(r["panel"], r["milestone"]): r for r in milestones(dev, specs=[e.spec for e in events]).to_dict("records")}
    revs = revisions(dev).groupby("panel", sort=False)["revision"].agg(["first", "last"])
    rows = []
    for panel, (first, last) in revs.iterrows():
        at_panel = dev[dev["panel"] == panel]
        for ev in events:
            m = ms[panel, ev.spec.name]
            hit = None if pd.isna(m["revision"]) else m["revision"]
            at = at_panel[at_panel["revision"] == hit] if hit is not None else at_panel.iloc[0:0]
            layers = sorted({int(x) for x in at.loc[milestone_mask(at, ev.spec), "layer"]})
            rows.append({"panel": panel, "event": ev.name, "key": ev.key, "revision": hit, "tokens_b": m["tokens_b"],
                         "layers": layers, "censored": _CENSORED[m["bound"]], "first_revision": first,
                         "last_revision": last})
    return pd.DataFrame(rows, columns=["panel", "event", "key", "revision", "tokens_b", "layers", "censored",
                                       "first_revision", "last_revision"])


def final_heads(dev: pd.DataFrame, column: str, threshold: float, *,
                extra: Sequence[str] = ()) -> pd.DataFrame:
    """The heads with the class selectivity `column` >= `threshold` at each panel's last revision
    (`findings.final_circuit`), strongest first. Columns: panel, revision, name, layer, head, value, and `extra`
    columns of the table (e.g. the attention masses)."""
    head_class = next((c for c in HEAD_CLASSES if sel_column(c) == column), None)
    if head_class is None:
        raise ConfigError(f"final_heads: {column!r} is no class's selectivity column "
                          f"({', '.join(sel_column(c) for c in HEAD_CLASSES)})")
    circuit = final_circuit(dev, head_class=head_class, threshold=threshold)
    final = revisions(dev).groupby("panel", sort=False)["revision"].last()
    circuit = circuit.assign(revision=circuit["panel"].map(final))
    if extra:
        circuit = circuit.merge(dev[["panel", "revision", "layer", "head", *extra]],
                                on=["panel", "revision", "layer", "head"], how="left")
    out = circuit.rename(columns={"selectivity": "value"}).sort_values(["value"], ascending=False, kind="stable")
    order = {p: i for i, p in enumerate(final.index)}
    out = out.sort_values("panel", key=lambda p: p.map(order), kind="stable").reset_index(drop=True)
    return out[["panel", "revision", "name", "layer", "head", "value", *extra]]


SINK_COLUMNS = ("sel_first_token", "mass_first_token", "sel_first_token_allq", "mass_first_token_allq")


def final_sinks(dev: pd.DataFrame, threshold: float = 30.0) -> pd.DataFrame:
    """The sink heads at each panel's last revision: first-token selectivity >= `threshold` at the second A (the
    paper's score) or over all queries (an active-dormant head shows only there), strongest of the two first; with
    both scores and the attention masses on position 0 (SINK_COLUMNS)."""
    either = dev.drop(columns=list(SINK_COLUMNS)).assign(
        sel_first_token=dev[["sel_first_token", "sel_first_token_allq"]].max(axis=1))  # the screen: either score
    heads = final_heads(either, "sel_first_token", threshold)
    return heads.merge(dev[["panel", "revision", "layer", "head", *SINK_COLUMNS]],
                       on=["panel", "revision", "layer", "head"], how="left")


def strongest(dev: pd.DataFrame, column: str, *, layers: Sequence[int] = FLOOR_LAYERS) -> pd.DataFrame:
    """Per panel, the head of `layers` with the largest `column` (a first-token score) over all revisions
    (`findings.floor_margin`'s strongest floor head at its strongest revision: how close the first layers come to
    the bar), with that head's 95% bootstrap interval where the records carry one (`<column>_lo` / `_hi`; NaN
    otherwise, e.g. the all-query score). Columns: panel, revision, tokens_b, name, value, value_lo, value_hi."""
    columns = ["panel", "revision", "tokens_b", "name", "value", "value_lo", "value_hi"]
    if column not in dev.columns or dev[column].isna().all():
        return pd.DataFrame(columns=columns)
    margin = floor_margin(dev, layers=layers, column=column).dropna(subset=["value"])
    top = margin.loc[margin.groupby("panel", sort=False)["value"].idxmax()]
    heads = pd.DataFrame([parse_head(n) for n in top["name"]], columns=["layer", "head"], index=top.index)
    ends = [f"{column}_{e}" for e in ("lo", "hi") if f"{column}_{e}" in dev.columns]
    at = top[["panel", "revision", "tokens_b", "name", "value"]].join(heads).merge(
        dev[["panel", "revision", "layer", "head", *ends]], on=["panel", "revision", "layer", "head"], how="left")
    return at.rename(columns={f"{column}_lo": "value_lo", f"{column}_hi": "value_hi"}).reindex(columns=columns)


def training_runs(toy_dir: Path, panels: Sequence[str]) -> pd.DataFrame:
    """How each toy panel was trained, from `<toy_dir>/<panel>/recipe.json` (written by `circuitdev toy train`):
    panel, trained (False: no recipe.json, e.g. a panel trained elsewhere), recipe_hash, family, seed, steps,
    tokens (steps x tokens per step), seconds (wall-clock training time on the machine that trained it), final_loss.
    """
    rows = []
    for panel in panels:
        path = Path(toy_dir) / panel / "recipe.json"
        try:
            info = json.loads(path.read_text())
            recipe = info["recipe"]
        except (OSError, ValueError, KeyError):
            rows.append({"panel": panel, "trained": False})
            continue
        rows.append({"panel": panel, "trained": True, "recipe_hash": info.get("hash"), "family": info.get("family"),
                     "seed": recipe.get("seed"), "steps": recipe.get("steps"),
                     "tokens": recipe.get("steps", 0) * recipe.get("batch_size", 0) * recipe.get("seq_len", 0),
                     "seconds": info.get("seconds"), "final_loss": info.get("final_loss")})
    return pd.DataFrame(rows, columns=["panel", "trained", "recipe_hash", "family", "seed", "steps", "tokens",
                                       "seconds", "final_loss"])


def corpus_tokens(toy_dir: Path, corpus_hash: str) -> int | None:
    """Tokens in the generated training corpus `<toy_dir>/_corpus/<corpus_hash>/stream.npy` (None when absent)."""
    path = Path(toy_dir) / "_corpus" / corpus_hash / "stream.npy"
    if not path.is_file():
        return None
    return int(np.load(path, mmap_mode="r").shape[0])
