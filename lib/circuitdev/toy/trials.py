"""Recorded trials of the toy recipe (issue 32): per checkpoint, how many first-token sink and induction heads a
trial's panels hold, kept as data in the repository (`data/toy_trials/`) and drawn on the toy recipe page.

A trial is one recipe trained for one or more families (`circuitdev toy train ... --data-dir D`); `record_trial`
probes every saved checkpoint of its panels (the grid and the dense `candidates`, or the grid only) with the
panels' own probe settings, counts the heads per checkpoint (`checkpoint_counts`) and writes two files:

    data/toy_trials/<trial>.csv   TRIAL_COLUMNS, one row per (panel, checkpoint)
    data/toy_trials/<trial>.json  what the trial changed against the default recipe, and per panel the recipe hash,
                                  the tokens, the training seconds and the final loss (the panel's recipe.json)

Sinks are counted by both first-token scores of the records, at the paper's bar (BOS_THRESHOLD): the paper's
(second A) and the all-query one, with the attention mass on position 0 beside them; in layers >= 2 and, apart,
in layers 0/1 (the paper's floor, F1). Induction heads at the paper's circuit bar (INDUCTION_THRESHOLD).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from circuitdev.atomic import write_atomic
from circuitdev.errors import ConfigError, DataError
from circuitdev.schema import BOS_THRESHOLD, INDUCTION_THRESHOLD

FLOOR_LAYERS = 2  # layers 0 .. FLOOR_LAYERS - 1: the paper's floor (F1: no sink heads there)
TRIAL_COLUMNS: dict[str, str] = {
    "trial": "the trial's name (its files' stem)",
    "panel": "toy panel name",
    "family": "gpt_neox / olmo / olmoe",
    "revision": "checkpoint name (step<k>)",
    "step": "training step",
    "tokens": "training tokens seen",
    "sinks_upper": "heads in layers >= 2 with second-A first-token selectivity >= the bar (the paper's metric)",
    "sinks_upper_allq": "heads in layers >= 2 with all-query first-token selectivity >= the bar",
    "sinks_floor": "heads in layers 0/1 with second-A first-token selectivity >= the bar",
    "sinks_floor_allq": "heads in layers 0/1 with all-query first-token selectivity >= the bar",
    "max_first_upper": "the largest second-A first-token selectivity in layers >= 2",
    "max_first_upper_allq": "the largest all-query first-token selectivity in layers >= 2",
    "max_mass_upper_allq": "the largest mean all-query attention mass on position 0 in layers >= 2",
    "induction": "heads with induction selectivity >= the circuit bar",
    "max_induction": "the largest induction selectivity",
    "sink_heads": "the layer >= 2 heads over the sink bar by either score, e.g. 'L3H2 L2H0' (empty: none)",
    "floor_heads": "the layer 0/1 heads over the sink bar by either score (empty: none)",
}


def default_trials_dir() -> Path:
    """data/toy_trials/ of this repository: the trials are recorded data shipped with the code (like
    data/claims.yaml), not build output, so a build's own data folder ($CIRCUITDEV_DATA) does not move them."""
    from circuitdev.paths import REPO_ROOT

    return REPO_ROOT / "data" / "toy_trials"


def checkpoint_counts(table: pd.DataFrame, *, sink_threshold: float = BOS_THRESHOLD,
                      induction_threshold: float = INDUCTION_THRESHOLD) -> pd.DataFrame:
    """Per (panel, revision) of a developmental table: the TRIAL_COLUMNS counts (no trial/family/step columns)."""
    need = {"panel", "revision", "tokens_b", "layer", "head", "sel_first_token", "sel_first_token_allq",
            "mass_first_token_allq", "sel_induction"}
    missing = sorted(need - set(table.columns))
    if missing:
        raise DataError(f"the records lack column(s) {missing}: re-probe with this version (`circuitdev probe`)")
    rows = []
    for (panel, revision), g in table.groupby(["panel", "revision"], sort=False):
        upper, floor = g[g["layer"] >= FLOOR_LAYERS], g[g["layer"] < FLOOR_LAYERS]
        rows.append({"panel": panel, "revision": revision, "tokens": int(round(float(g["tokens_b"].iloc[0]) * 1e9)),
                     "sinks_upper": int((upper["sel_first_token"] >= sink_threshold).sum()),
                     "sinks_upper_allq": int((upper["sel_first_token_allq"] >= sink_threshold).sum()),
                     "sinks_floor": int((floor["sel_first_token"] >= sink_threshold).sum()),
                     "sinks_floor_allq": int((floor["sel_first_token_allq"] >= sink_threshold).sum()),
                     "max_first_upper": _max(upper["sel_first_token"]),
                     "max_first_upper_allq": _max(upper["sel_first_token_allq"]),
                     "max_mass_upper_allq": _max(upper["mass_first_token_allq"]),
                     "induction": int((g["sel_induction"] >= induction_threshold).sum()),
                     "max_induction": _max(g["sel_induction"]),
                     "sink_heads": _names(upper, sink_threshold), "floor_heads": _names(floor, sink_threshold)})
    return pd.DataFrame(rows)


def _names(g: pd.DataFrame, threshold: float) -> str:
    over = g[(g["sel_first_token"] >= threshold) | (g["sel_first_token_allq"] >= threshold)]
    return " ".join(f"L{int(l)}H{int(h)}" for l, h in zip(over["layer"], over["head"]))


def _max(values: pd.Series) -> float:
    v = values.astype(float).to_numpy()
    v = v[np.isfinite(v)]
    return float(v.max()) if v.size else float("nan")


def trial_panel(panel_file: str | os.PathLike, *, dense: bool = True):
    """The panel of `panel_file` with its dense checkpoints (`candidates`) as revisions too (dense=True), keeping
    only the checkpoints saved in full -- a trial still training is recorded as far as it has come."""
    from circuitdev.sources.panels import load_panel
    from circuitdev.toy.train import checkpoint_saved

    panel = load_panel(panel_file)
    revs = [*panel.revisions, *(panel.candidates if dense else ())]
    saved = sorted((r for r in revs if checkpoint_saved(Path(panel.model) / r.name)), key=lambda r: r.tokens)
    if not saved:
        raise DataError(f"{panel.name}: no saved checkpoint under {panel.model}; train it first (`circuitdev toy "
                        "train`)")
    return dataclasses.replace(panel, revisions=tuple(saved), candidates=())


def record_trial(name: str, panel_files: Sequence[str | os.PathLike], *, results_dir: str | os.PathLike,
                 out_dir: str | os.PathLike | None = None, dense: bool = True, progress: bool = False,
                 log: Callable[[str], None] | None = None) -> tuple[Path, Path]:
    """Probe every saved checkpoint of the trial's panels into `results_dir` (resumable: stored records are kept)
    and write <out_dir>/<name>.csv and .json (module docstring). Returns their paths."""
    from circuitdev.sources.records import load_panel_table
    from circuitdev.sources.run import probe_panel
    from circuitdev.toy.recipe import ToyRecipe

    if not name or Path(name).name != name or name.startswith("."):
        raise ConfigError(f"a trial name is a plain file stem (e.g. long30x), got {name!r}")
    say = log or (lambda msg: None)
    out = Path(out_dir) if out_dir is not None else default_trials_dir()
    frames, panels = [], {}
    for f in panel_files:
        panel = trial_panel(f, dense=dense)
        probe_panel(panel, results_dir=results_dir, progress=progress, log=say)
        table = load_panel_table(results_dir, panel, revisions=[r.name for r in panel.revisions], on_missing="skip")
        steps = {r.name: r.step for r in panel.revisions}
        counts = checkpoint_counts(table.assign(panel=panel.name))
        frames.append(counts.assign(trial=name, family=panel.family, step=counts["revision"].map(steps)))
        trained = _trained(Path(panel.model))
        recipe = ToyRecipe.from_dict(trained["recipe"]) if trained else None
        panels[panel.name] = {"family": panel.family, "recipe_hash": recipe.recipe_hash() if recipe else None,
                              "tokens": int(max(r.tokens for r in panel.revisions)),
                              "finished": trained is not None,
                              "train_seconds": trained.get("seconds") if trained else None,
                              "final_loss": trained.get("final_loss") if trained else None,
                              "changes": _changes(recipe) if recipe else None}
        say(f"{panel.name}: {len(counts)} checkpoint(s) counted")
    rows = pd.concat(frames, ignore_index=True)[list(TRIAL_COLUMNS)]
    csv = write_atomic(out / f"{name}.csv", rows.to_csv(index=False, float_format="%.6g"))
    meta = {"trial": name, "sink_threshold": BOS_THRESHOLD, "induction_threshold": INDUCTION_THRESHOLD,
            "floor_layers": FLOOR_LAYERS, "dense": dense, "panels": panels}
    meta_path = write_atomic(out / f"{name}.json", json.dumps(meta, indent=1) + "\n")
    return csv, meta_path


def _trained(panel_dir: Path) -> dict | None:
    """The panel's recipe.json (written when its training finished), else None."""
    path = panel_dir / "recipe.json"
    return json.loads(path.read_text()) if path.exists() else None


def _changes(recipe) -> dict:
    """The recipe's fields that differ from the default recipe (naming and checkpoint-only fields left out)."""
    from circuitdev.toy.recipe import _NOT_HASHED, ToyRecipe

    ours, base = recipe.to_dict(), ToyRecipe().to_dict()
    return {k: v for k, v in ours.items() if v != base[k] and k not in _NOT_HASHED}


def read_trials(trials_dir: str | os.PathLike | None = None) -> tuple[pd.DataFrame, dict[str, dict]]:
    """Every recorded trial: (TRIAL_COLUMNS rows of all trials, {trial: its .json}). Empty when none is stored."""
    root = Path(trials_dir) if trials_dir is not None else default_trials_dir()
    frames, meta = [], {}
    for path in sorted(root.glob("*.csv")):
        side = path.with_suffix(".json")
        if not side.exists():
            raise DataError(f"{path} has no {side.name} beside it: re-record the trial (`circuitdev toy trial`)")
        frame = pd.read_csv(path, keep_default_na=False, na_values={c: [""] for c in TRIAL_COLUMNS
                                                                   if not c.endswith("_heads")})
        missing = sorted(set(TRIAL_COLUMNS) - set(frame.columns))
        if missing:
            raise DataError(f"{path} lacks column(s) {missing}: re-record the trial (`circuitdev toy trial`)")
        frames.append(frame[list(TRIAL_COLUMNS)])
        meta[path.stem] = json.loads(side.read_text())
    if not frames:
        return pd.DataFrame(columns=list(TRIAL_COLUMNS)), {}
    return pd.concat(frames, ignore_index=True), meta


def final_counts(counts: pd.DataFrame) -> pd.DataFrame:
    """The last recorded checkpoint of each (trial, panel)."""
    if counts.empty:
        return counts
    last = counts.groupby(["trial", "panel"], sort=False)["step"].transform("max")
    return counts[counts["step"] == last].reset_index(drop=True)


def trial_sentence(rows: pd.DataFrame, *, minutes: float | None = None) -> str:
    """What formed in one panel of one trial (its TRIAL_COLUMNS rows), in words, for the toy recipe page: the last
    checkpoint's sink heads (layers >= 2 and 0/1) with the strongest scores and mass, its induction heads, and how
    many checkpoints held a layer >= 2 sink (a transient one shows there)."""
    from circuitdev.book.display import fmt_tokens

    if rows.empty:
        return "not recorded"
    rows = rows.sort_values("step")
    last = rows.iloc[-1]
    upper = str(last["sink_heads"]).split() if isinstance(last["sink_heads"], str) else []
    floor = str(last["floor_heads"]).split() if isinstance(last["floor_heads"], str) else []
    held = rows[(rows["sinks_upper"] > 0) | (rows["sinks_upper_allq"] > 0)]
    where = (f"{len(held)} of {len(rows)} checkpoints held one, the first at {fmt_tokens(held['tokens'].iloc[0])} "
             "tokens" if len(held) else f"none of its {len(rows)} checkpoints held one")
    sinks = (f"sink heads in layers ≥ 2: {', '.join(upper)}" if upper else "no sink head in layers ≥ 2")
    return (f"{rows['panel'].iloc[0]} at {fmt_tokens(last['tokens'])} tokens"
            + (f" ({minutes:.0f} min of training)" if minutes else "") + f": {sinks} (strongest first-token score "
            f"{last['max_first_upper']:.0f}× at the second A, {last['max_first_upper_allq']:.0f}× over all queries, "
            f"attention mass on position 0 up to {last['max_mass_upper_allq']:.2f}); "
            + (f"in layers 0/1: {', '.join(floor)}" if floor else "none in layers 0/1")
            + f"; {int(last['induction'])} induction heads. Over training, {where}.")


def trial_label(meta: dict) -> str:
    """A trial in a few words, from its .json: its tokens per family and what it changed against the default recipe
    ("25.6M tokens (steps 25,000)"; "the default recipe, 2.56M tokens")."""
    from circuitdev.book.display import fmt_tokens

    panels = list(meta["panels"].values())
    tokens = fmt_tokens(max(p["tokens"] for p in panels))
    if not all(p.get("finished") for p in panels):
        return f"{tokens} tokens so far (training unfinished when recorded)"
    changes = next((p["changes"] for p in panels if p.get("changes") is not None), None)
    if not changes:
        return f"the default recipe, {tokens} tokens"
    words = ", ".join(f"{k.replace('_', ' ')} {v:,}" if isinstance(v, int) and not isinstance(v, bool) else
                      f"{k.replace('_', ' ')} {v}" for k, v in changes.items())
    return f"{tokens} tokens ({words})"


def meets_bar(last: pd.Series, *, min_induction: int = 2) -> bool:
    """Issue 32's bar for a recorded run at its last checkpoint: >= 1 sink head in layers >= 2 (either score), none in
    layers 0/1 (either score), and >= `min_induction` induction heads."""
    return bool((last["sinks_upper"] > 0 or last["sinks_upper_allq"] > 0) and last["sinks_floor"] == 0
                and last["sinks_floor_allq"] == 0 and last["induction"] >= min_induction)


def trials_outcome(counts: pd.DataFrame, meta: dict[str, dict], *, families: Sequence[str] = ("olmo", "olmoe"),
                   min_induction: int = 2) -> str:
    """Which finished trials end, per family, with what issue 32 asks of a recorded run (`meets_bar`), in words."""
    if counts.empty:
        return "no trial is recorded"
    finals = final_counts(counts)
    parts = []
    for family in families:
        rows = finals[finals["family"] == family]
        done = [t for t in pd.unique(rows["trial"]) if all(p.get("finished") for p in meta[t]["panels"].values())]
        ok = [t for t in done if meets_bar(rows[rows["trial"] == t].iloc[0], min_induction=min_induction)]
        name = {"olmo": "OLMo-like", "olmoe": "OLMoE-like", "gpt_neox": "GPT-NeoX-like"}.get(family, family)
        parts.append(f"the {name} toy in the {', '.join(ok)} trial{'s' * (len(ok) > 1)}" if ok else
                     f"the {name} toy in none of the {len(done)} finished trials")
    return "; ".join(parts)
