"""The toy panel page in words (notebooks/toy_panel.py): what `circuitdev.toy.report` computes, as the texts the page
glues and the toy recipe appendix and the introduction quote.

    texts = panel_texts(panels, runs, events, induction, sinks, floor, floor_allq)  # one row of texts per panel
    ch.glue(f"{short_name(panel)}-induction-final", texts.loc[panel, "induction-final"])

A panel the build does not have reads `ABSENT` in every text, so the prose that quotes it never breaks.
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from circuitdev.book.display import fmt_interval, fmt_tokens_b, is_missing

ABSENT = "not in this build"
TEXT_KEYS = ("seconds", "hash", "prev-first", "induction-first", "induction-3", "sink-first", "sink-allq-first",
             "sinks-10pct", "induction-final", "sinks-final", "sinks-final-names", "order", "floor", "floor-allq")


def short_name(panel: str) -> str:
    """A toy panel's glue-key part: "toy-pythia" -> "pythia", "toy-pythia-s1" -> "pythia-s1"."""
    return panel.removeprefix("toy-")


def fmt_x(value: float) -> str:
    """A selectivity: "95.1×" below 100, "283×" and "1,790×" above."""
    return f"{value:,.0f}×" if value >= 100 else f"{value:.1f}×"


def layers_text(layers: Sequence[int]) -> str:
    return "" if not len(layers) else ("layer " if len(layers) == 1 else "layers ") + ", ".join(map(str, layers))


def event_text(row: dict) -> str:
    """When an event first happened: "step875 (896k tokens; layers 2, 3)"; censored events as bounds: "≤ step0 (the
    first probed revision; ...)" and "not by step2500"."""
    if row["censored"] == "never":
        return f"not by {row['last_revision']}"
    where = "; ".join(x for x in (f"{fmt_tokens_b(row['tokens_b'])} tokens", layers_text(row["layers"])) if x)
    if row["censored"] == "first":
        return f"≤ {row['revision']} (the first probed revision; {where})"
    return f"{row['revision']} ({where})"


def event_revision(row: dict) -> str:
    """The revision alone, as a bound where censored: "step875", "≤ step0", "not by step2500"."""
    if row["censored"] == "never":
        return f"not by {row['last_revision']}"
    return f"≤ {row['revision']}" if row["censored"] == "first" else str(row["revision"])


def revisions_list(events: pd.DataFrame, key: str, panels: Sequence[str]) -> str:
    """"toy-pythia step550, toy-olmo step250, ..." for one event over `panels` (ABSENT for a panel without records)."""
    rows = {r["panel"]: r for r in events.to_dict("records") if r["key"] == key} if "key" in events.columns else {}
    return ", ".join(f"{p} {event_revision(rows[p]) if p in rows else ABSENT}" for p in panels)


def heads_text(heads: pd.DataFrame) -> str:
    """ "4 heads: L1H3 179×, L1H2 95.1×, ..." or "none"."""
    if heads.empty:
        return "none"
    listed = ", ".join(f"{n} {fmt_x(v)}" for n, v in zip(heads["name"], heads["value"]))
    return f"{len(heads)} head{'s' if len(heads) > 1 else ''}: {listed}"


def sinks_text(sinks: pd.DataFrame) -> str:
    """The sink heads at the end with both first-token scores and their attention masses on position 0."""
    if sinks.empty:
        return "none"
    return ", ".join(f"{r['name']} (second A {fmt_x(r['sel_first_token'])}, mass {r['mass_first_token']:.2f}; "
                     f"all queries {fmt_x(r['sel_first_token_allq'])}, mass {r['mass_first_token_allq']:.2f})"
                     for r in sinks.to_dict("records"))


def order_text(events: pd.DataFrame, *, first: str = "induction-3", then: str = "sinks-10pct") -> str:
    """Which of two events came first in one panel's `first_events` rows (F3's order: induction, then sinks)."""
    a, b = (events[events["key"] == k].iloc[0] for k in (first, then))
    if a["censored"] == "never" and b["censored"] == "never":
        return f"neither milestone is reached by {a['last_revision']}"
    if b["censored"] == "never":
        return f"induction first; the sink milestone is not reached by {b['last_revision']}"
    if a["censored"] == "never":
        return f"sinks first; the induction milestone is not reached by {a['last_revision']}"
    if a["tokens_b"] == b["tokens_b"]:
        return f"both at {a['revision']} (the grid cannot order them)"
    return "induction first, sinks later" if a["tokens_b"] < b["tokens_b"] else "sinks first, induction later"


def floor_text(row: pd.Series | None, *, interval: bool = True) -> str:
    if row is None:
        return ABSENT
    value = fmt_interval(row["value"], row["value_lo"] if interval else None, row["value_hi"] if interval else None,
                         fmt_x)
    return f"{row['name']} {value} at {row['revision']}"


def _of(frame: pd.DataFrame, panel: str) -> pd.DataFrame:
    """The rows of one panel (none when the frame is empty: a tier the build does not have)."""
    return frame[frame["panel"] == panel] if "panel" in frame.columns else frame.iloc[0:0]


def panel_texts(panels: Sequence[str], runs: pd.DataFrame, events: pd.DataFrame, induction: pd.DataFrame,
                sinks: pd.DataFrame, floor: pd.DataFrame, floor_allq: pd.DataFrame) -> pd.DataFrame:
    """One row per panel (index: panel), one text per TEXT_KEYS column, from the frames of `circuitdev.toy.report`
    (`training_runs`, `first_events`, `final_heads` of the induction and the sink heads, `strongest` of the two
    first-token scores). Panels without records read ABSENT (their training time may still be known)."""
    rows = {}
    for panel in panels:
        run = runs[runs["panel"] == panel]
        trained = len(run) and bool(run["trained"].iloc[0])
        text = dict.fromkeys(TEXT_KEYS, ABSENT)
        text["seconds"] = f"{run['seconds'].iloc[0]:.0f} s" if trained and not is_missing(run["seconds"].iloc[0]) \
            else "not recorded (no recipe.json in this build's data folder)"
        text["hash"] = str(run["recipe_hash"].iloc[0]) if trained else text["seconds"]
        ev = _of(events, panel)
        if len(ev):
            text.update({r["key"]: event_text(r) for r in ev.to_dict("records")})
            text["order"] = order_text(ev)
            text["induction-final"] = heads_text(_of(induction, panel))
            text["sinks-final"] = sinks_text(_of(sinks, panel))
            text["sinks-final-names"] = ", ".join(_of(sinks, panel).get("name", [])) or "none"
            f2a, faq = (_of(f, panel) for f in (floor, floor_allq))
            text["floor"] = floor_text(f2a.iloc[0] if len(f2a) else None)
            text["floor-allq"] = floor_text(faq.iloc[0] if len(faq) else None, interval=False)
        rows[panel] = text
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(TEXT_KEYS))


def onsets_text(milestones: pd.DataFrame) -> str:
    """The panels of a `findings.milestones` table (one milestone) in the order they reach it: "pythia-1b ≤ 6.29B
    tokens (its first revision), olmoe-1b-7b-0924 41B tokens, ..."; censored as bounds (the milestones' `bound`:
    reached at the first probed revision after initialisation), never reached last."""
    rows = milestones.sort_values("tokens_b", na_position="last").to_dict("records")
    return ", ".join(f"{r['panel']} not by its last revision" if is_missing(r["revision"]) else
                     f"{r['panel']} ≤ {fmt_tokens_b(r['tokens_b'])} tokens (its first revision)"
                     if r["bound"] == "upper" else f"{r['panel']} {fmt_tokens_b(r['tokens_b'])} tokens"
                     for r in rows)


def summary_list(texts: pd.DataFrame, key: str, panels: Sequence[str] | None = None, *, sep: str = "; ") -> str:
    """"toy-pythia: <text>; toy-olmo: <text>" over `panels` (default: every row)."""
    return sep.join(f"{p}: {texts.loc[p, key]}" for p in (panels if panels is not None else texts.index))


TRIAL_ABSENT = "not recorded (data/toy_trials/ holds no such trial)"


def glue_trials(ch, counts: pd.DataFrame, meta: dict[str, dict]) -> None:
    """The recorded toy trials (`circuitdev.toy.trials.read_trials`) for the toy recipe page: the figure
    (`<prefix>-trials-figure`), per trial its label (`-trial-<name>-label`) and per trained family what formed
    (`-trial-<name>-<family>`), the outcome against issue 32's bar (`-trials-outcome`) and the training hours of the
    trials other than the default (`-trials-hours`). A trial the recipe page quotes but the folder lacks reads
    TRIAL_ABSENT, so the prose never breaks."""
    from circuitdev.book import plots
    from circuitdev.book.chapter import page_references
    from circuitdev.toy import trials

    labels = {name: trials.trial_label(m) for name, m in meta.items()}
    ch.glue_figure("trials-figure", plots.trial_counts(counts, labels=labels),
                   alt="Sink heads, attention mass on position 0 and induction heads per checkpoint, per family and "
                       "recorded toy trial")
    for name, m in meta.items():
        ch.glue(f"trial-{name}-label", labels[name])
        for panel, info in m["panels"].items():
            rows = counts[(counts["trial"] == name) & (counts["panel"] == panel)]
            minutes = (info.get("train_seconds") or 0) / 60
            ch.glue(f"trial-{name}-{info['family']}", trials.trial_sentence(rows, minutes=minutes))
    ch.glue("trials-outcome", trials.trials_outcome(counts, meta) if meta else None, absent="no trial is recorded")
    ch.glue("trials-hours", sum(p.get("train_seconds") or 0 for name, m in meta.items() if name != "default"
                                for p in m["panels"].values()) / 3600 if meta else None, "{:.1f} hours",
            absent="no time (no trial is recorded)")
    prefix = f"{ch.prefix}-trial-"
    for key in sorted(k for k in page_references(ch.name).glue_keys if k.startswith(prefix) and k not in ch.glued):
        ch.glue(key.removeprefix(f"{ch.prefix}-"), TRIAL_ABSENT)
