"""Summaries of a probed toy panel: what formed, where, and when, and how each panel was trained (the toy panel page,
notebooks/toy_panel.py, computes them; the toy recipe appendix and the introduction glue its numbers)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd


def heads_at(table: pd.DataFrame, column: str, threshold: float) -> list[tuple[int, int, float]]:
    hit = table[table[column] >= threshold].sort_values(["layer", "head"])
    return [(int(r.layer), int(r.head), float(getattr(r, column))) for r in hit.itertuples()]


def formation_summary(df: pd.DataFrame, *, induction: float = 50.0, sink: float = 30.0) -> pd.DataFrame:
    """One row per revision (in token order): counts and layers of induction heads (sel_induction >= induction),
    second-A sinks (sel_first_token >= sink) and all-query sinks (sel_first_token_allq >= sink), with the largest
    all-query attention mass on position 0 beside them. `df` is a developmental table (`store.load_panel_table`)."""
    rows = []
    for (rev, tokens), t in df.groupby(["revision", "tokens"], sort=False):
        ind, s2a, saq = (heads_at(t, c, th) for c, th in (("sel_induction", induction), ("sel_first_token", sink),
                                                            ("sel_first_token_allq", sink)))
        rows.append({
            "revision": rev, "tokens": int(tokens),
            "n_induction": len(ind), "induction_layers": sorted({l for l, _, _ in ind}),
            "n_sink_2a": len(s2a), "sink_2a_layers": sorted({l for l, _, _ in s2a}),
            "n_sink_allq": len(saq), "sink_allq_layers": sorted({l for l, _, _ in saq}),
            "max_mass_first_allq": float(t["mass_first_token_allq"].max()),
        })
    return pd.DataFrame(rows).sort_values("tokens").reset_index(drop=True)


def first_formed(summary: pd.DataFrame, column: str, at_least: int = 1) -> str | None:
    """The first revision whose count in `column` reaches `at_least` (None if never)."""
    hit = summary[summary[column] >= at_least]
    return None if hit.empty else str(hit.iloc[0]["revision"])


# ------------------------------------------------------------------------------ the toy panel page (issue 21 item 10)
# What the toy panel page (notebooks/toy_panel.py) computes, so that the toy recipe appendix glues it instead of
# typing it: how each panel was trained (its recipe.json), when each event first happened, which heads are there at
# the end, and how close the first layers come to the sink bar. Numbers only; the page words them.

FLOOR_LAYERS = (0, 1)  # the paper's layer floor (F1): no sink head in layers 0 and 1


@dataclass(frozen=True)
class Event:
    """Something that first happens during training: at least `min_heads` heads (or `min_fraction` of the heads)
    with `column` >= `threshold`. The F3 milestones "induction_3_heads" and "bos_10pct" are two of them."""

    name: str  # in words, as the page's tables show it
    key: str  # its glue key part, e.g. "induction-3"
    column: str  # a selectivity column of the developmental table
    threshold: float
    min_heads: int = 1
    min_fraction: float | None = None  # when set, a share of the panel's heads instead of min_heads


def toy_events(*, induction: float = 50.0, sink: float = 30.0, prev: float = 100.0) -> tuple[Event, ...]:
    """The events the toy recipe talks about, in the order the circuit forms (bars: the paper's by default)."""
    return (Event("a previous-token head", "prev-first", "sel_previous_token", prev),
            Event("an induction head", "induction-first", "sel_induction", induction),
            Event("three induction heads (F3's milestone)", "induction-3", "sel_induction", induction, min_heads=3),
            Event("a sink head at the second A", "sink-first", "sel_first_token", sink),
            Event("a sink head over all queries", "sink-allq-first", "sel_first_token_allq", sink),
            Event("sink heads in 10% of heads (F3's earliest sink milestone)", "sinks-10pct", "sel_first_token", sink,
                  min_fraction=0.10))


def _in_token_order(dev: pd.DataFrame) -> list[tuple[str, list[tuple[str, float, pd.DataFrame]]]]:
    """[(panel, [(revision, tokens_b, rows), ...] in token order), ...] in the table's panel order."""
    out = []
    for panel, g in dev.groupby("panel", sort=False):
        revs = [(str(r), float(t["tokens_b"].iloc[0]), t) for r, t in g.groupby("revision", sort=False)]
        out.append((panel, sorted(revs, key=lambda x: x[1])))
    return out


def first_events(dev: pd.DataFrame, events: Sequence[Event]) -> pd.DataFrame:
    """Per panel and event, the first probed revision at which the event holds (a developmental table of probe
    records, refined revisions included). Columns: panel, event, key, revision (None: never), tokens_b, layers (of
    the heads counted there), censored ("" | "first": it holds at the panel's first probed revision, so it happened
    at or before it | "never": not by the last probed revision), first_revision, last_revision."""
    rows = []
    for panel, revs in _in_token_order(dev):
        for ev in events:
            hit = None
            for revision, tokens_b, t in revs:
                if ev.column not in t.columns:
                    break
                heads = t[t[ev.column] >= ev.threshold]
                need = ev.min_heads if ev.min_fraction is None else ev.min_fraction * len(t) - 1e-9
                if len(heads) >= need and len(heads) > 0:
                    hit = (revision, tokens_b, sorted({int(x) for x in heads["layer"]}))
                    break
            first, last = revs[0][0], revs[-1][0]
            rows.append({"panel": panel, "event": ev.name, "key": ev.key,
                         "revision": hit[0] if hit else None, "tokens_b": hit[1] if hit else float("nan"),
                         "layers": hit[2] if hit else [],
                         "censored": "never" if hit is None else ("first" if hit[0] == first else ""),
                         "first_revision": first, "last_revision": last})
    return pd.DataFrame(rows, columns=["panel", "event", "key", "revision", "tokens_b", "layers", "censored",
                                       "first_revision", "last_revision"])


def final_heads(dev: pd.DataFrame, column: str, threshold: float, *,
                extra: Sequence[str] = ()) -> pd.DataFrame:
    """The heads with `column` >= `threshold` at each panel's last revision, strongest first. Columns: panel,
    revision, name, layer, head, value, and `extra` columns of the table (e.g. the attention masses)."""
    rows = []
    for panel, revs in _in_token_order(dev):
        revision, _, t = revs[-1]
        hit = t[t[column] >= threshold].sort_values(column, ascending=False)
        for r in hit.to_dict("records"):
            rows.append({"panel": panel, "revision": revision, "name": f"L{int(r['layer'])}H{int(r['head'])}",
                         "layer": int(r["layer"]), "head": int(r["head"]), "value": float(r[column]),
                         **{c: r.get(c) for c in extra}})
    return pd.DataFrame(rows, columns=["panel", "revision", "name", "layer", "head", "value", *extra])


SINK_COLUMNS = ("sel_first_token", "mass_first_token", "sel_first_token_allq", "mass_first_token_allq")


def final_sinks(dev: pd.DataFrame, threshold: float = 30.0) -> pd.DataFrame:
    """The sink heads at each panel's last revision: first-token selectivity >= `threshold` at the second A (the
    paper's score) or over all queries (an active-dormant head shows only there), strongest of the two first; with
    both scores and the attention masses on position 0 (SINK_COLUMNS)."""
    either = dev.assign(sink_score=dev[["sel_first_token", "sel_first_token_allq"]].max(axis=1))
    return final_heads(either, "sink_score", threshold, extra=SINK_COLUMNS)


def strongest(dev: pd.DataFrame, column: str, *, layers: Sequence[int] = FLOOR_LAYERS) -> pd.DataFrame:
    """Per panel, the head of `layers` with the largest `column` over all revisions (for the floor: how close the
    first layers come to the bar), with its 95% bootstrap interval where the records carry one (`<column>_lo` /
    `_hi`; NaN otherwise, e.g. the all-query score). Columns: panel, revision, tokens_b, name, value, value_lo,
    value_hi."""
    rows = []
    for panel, g in dev[dev["layer"].isin(list(layers))].groupby("panel", sort=False):
        if column not in g.columns or g[column].isna().all():
            continue
        r = g.loc[g[column].idxmax()]
        rows.append({"panel": panel, "revision": r["revision"], "tokens_b": float(r["tokens_b"]),
                     "name": f"L{int(r['layer'])}H{int(r['head'])}", "value": float(r[column]),
                     **{f"value_{e}": float(r[f"{column}_{e}"]) if f"{column}_{e}" in g.columns else float("nan")
                        for e in ("lo", "hi")}})
    return pd.DataFrame(rows, columns=["panel", "revision", "tokens_b", "name", "value", "value_lo", "value_hi"])


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
