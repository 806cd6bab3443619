"""The three kinds of evidence a page shows side by side, each as a developmental table.

- "published": the authors' per-revision files (`sources.published`);
- "toy": records of the toy panel probed here (`sources.store`, records whose source is "toy");
- "measured": records of real models probed here.

A tier that has no data is never an error: `Tier.note` says why and how to add it, and the page shows it as a note.
A record tier also carries its records' bootstrap replicates (`Tier.boot`, for intervals: `Tiers.apply(...,
intervals=True)`) and, for the toy panel, its seed replicas (`Tier.replicas`: panels `<panel>-s<seed>` trained by
`circuitdev toy train --seeds`), which stay out of its main table so that every figure shows one model per family.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Sequence

import numpy as np
import pandas as pd

from circuitdev.book.provenance import provenance_line
from circuitdev.errors import CircuitdevError, ConfigError, DataError

TierName = Literal["published", "toy", "measured"]
TIERS: tuple[TierName, ...] = ("published", "toy", "measured")
TIER_LABELS = {"published": "published (authors' files)", "toy": "toy panel (trained here)",
               "measured": "measured (real models probed here)"}
ModelSource = Literal["auto", "records", "published"]
HOW_TO_ADD_PUBLISHED = ("Fetch them once with `circuitdev published fetch` (into data/published, where `make book` "
                        "looks), or point the build at a copy: `make book PUBLISHED_DIR=/path/to/published`.")


@dataclass
class Tier:
    """One kind of evidence. `table` is the developmental table (schema.py), None when the tier is absent."""

    name: str
    table: pd.DataFrame | None = None
    note: str = ""  # why the tier is absent (or what is partially missing), with how to add it
    published: Any = None  # circuitdev.sources.published.PublishedData for the published tier
    configs: dict[str, str] = field(default_factory=dict)  # panel -> probe configuration hash
    probe_configs: dict[str, dict] = field(default_factory=dict)  # panel -> the records' ProbeConfig fields
    commits: set[str] = field(default_factory=set)  # git commits that computed the records
    boot: pd.DataFrame | None = None  # bootstrap replicates of the records (load_boot_replicates); None: none
    replicas: pd.DataFrame | None = None  # developmental table of the seed replicas (<panel>-s<seed>); None: none

    @property
    def present(self) -> bool:
        return self.table is not None and len(self.table) > 0

    @property
    def panels(self) -> list[str]:
        return list(pd.unique(self.table["panel"])) if self.present else []


@dataclass
class Tiers:
    """The tiers a page shows, in the order asked for. `present` skips the absent ones."""

    tiers: dict[str, Tier]
    results_dir: Path | None = None

    def __getitem__(self, name: str) -> Tier:
        return self.tiers[name]

    def __iter__(self):
        return iter(self.tiers.values())

    @property
    def present(self) -> list[Tier]:
        return [t for t in self.tiers.values() if t.present]

    def get(self, name: str) -> Tier | None:
        t = self.tiers.get(name)
        return t if t is not None and t.present else None

    def apply(self, fn: Callable[..., pd.DataFrame], *args, tiers: Sequence[str] | None = None,
              intervals: bool = False, replicas: bool = False, **kwargs) -> pd.DataFrame:
        """`fn(table, *args, **kwargs)` on every present tier (or `tiers`), concatenated with a `tier` column first.
        Use it for any findings function: `tiers.apply(findings.bos_fraction, threshold=30)`. intervals=True passes
        each tier's bootstrap replicates as `boot=` where it has them (the findings then add `_lo` / `_hi`
        columns); replicas=True appends the tier's seed replicas to its table (for `findings.seed_spread`)."""
        def table(t: Tier) -> pd.DataFrame:
            return pd.concat([t.table, t.replicas], ignore_index=True) if replicas and t.replicas is not None \
                else t.table

        frames = [fn(table(t), *args, **kwargs, **({"boot": t.boot} if intervals and t.boot is not None else {}))
                  .assign(tier=t.name) for t in self.present if tiers is None or t.name in tiers]
        frames = [f for f in frames if len(f)]
        if not frames:
            return pd.DataFrame(columns=["tier"])
        out = pd.concat(frames, ignore_index=True)
        return out[["tier", *[c for c in out.columns if c != "tier"]]]

    def provenance(self, *, tiers: Sequence[str] | None = None, panels: Sequence[str] | None = None,
                   revisions: Sequence[str] | None = None, extra: Sequence[str] = ()) -> str:
        """The provenance line of a figure or table drawn from these tiers."""
        chosen = [t for t in self.present if tiers is None or t.name in tiers]
        return provenance_line(chosen, panels=panels, revisions=revisions, extra=extra)


def record_panels(results_dir: Path) -> list[str]:
    """Panels with at least one record (a `<revision>.json` sidecar) in `results_dir`, sorted."""
    if not results_dir.is_dir():
        return []
    return sorted(p.name for p in results_dir.iterdir() if p.is_dir() and any(p.glob("*.json")))


def load_published_tier(published_dir: Path | None) -> Tier:
    from circuitdev.measure.config import ProbeConfig
    from circuitdev.paths import relative_to_repo
    from circuitdev.sources.published import load_published

    if published_dir is None:
        return Tier("published", note=f"This build leaves out the authors' published measurements. "
                                      f"{HOW_TO_ADD_PUBLISHED}")
    where = relative_to_repo(published_dir)
    if not published_dir.is_dir():
        return Tier("published", note=f"The authors' published measurements are not in `{where}`. "
                                      f"{HOW_TO_ADD_PUBLISHED}")
    try:
        data = load_published(published_dir)
    except DataError as err:
        return Tier("published", note=f"The published measurements in `{where}` could not be read: {err}. "
                                      f"{HOW_TO_ADD_PUBLISHED}")
    h = ProbeConfig().config_hash()
    return Tier("published", data.table, published=data,
                configs={p: f"{h} (the authors' run ≙ paper defaults)" for p in pd.unique(data.table["panel"])})


def _load_boot(results_dir: Path, panels: Sequence[str], revisions: Sequence[str] | None) -> pd.DataFrame | None:
    from circuitdev.sources.store import load_boot_replicates

    frames = []
    for panel in panels:
        try:
            frames.append(load_boot_replicates(results_dir, panel, revisions=list(revisions) if revisions else None))
        except (CircuitdevError, OSError):
            continue
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else None


def _load_records(results_dir: Path, panels: list[str], revisions: Sequence[str] | None
                  ) -> tuple[dict[str, pd.DataFrame], list[str]]:
    from circuitdev.sources.store import load_panel_table

    tables, problems = {}, []
    for panel in panels:
        try:
            table = load_panel_table(results_dir, panel, revisions=list(revisions) if revisions else None,
                                     on_missing="skip")
        except (CircuitdevError, OSError) as err:
            problems.append(f"`{panel}`: {err}")
            continue
        if table.attrs.get("missing"):
            problems.append(f"`{panel}`: no complete record for {', '.join(table.attrs['missing'])}")
        tables[panel] = table
    return tables, problems


def load_tiers(sources: Sequence[str] = TIERS, *, published_dir: Path | None, results_dir: Path,
               panels: Sequence[str] | None = None, revisions: Sequence[str] | None = None) -> Tiers:
    """The data of each requested tier. `panels`: the record panels to read (None: every panel with records in
    `results_dir`); a panel goes to the toy tier when its records say `source == "toy"`, else to "measured".
    `revisions` restricts record panels to those revisions. Nothing here raises for absent data."""
    bad = [s for s in sources if s not in TIERS]
    if bad:
        raise ConfigError(f"unknown source(s) {bad}; the tiers are {', '.join(TIERS)}")
    root = Path(results_dir)
    out: dict[str, Tier] = {}
    if "published" in sources:
        out["published"] = load_published_tier(published_dir)
    if "toy" in sources or "measured" in sources:
        names = list(panels) if panels is not None else record_panels(root)
        tables, problems = _load_records(root, names, revisions)
        for tier in ("toy", "measured"):
            if tier not in sources:
                continue
            mine = {p: t for p, t in tables.items() if (t["source"].iloc[0] == "toy") == (tier == "toy")}
            copies = {p: t for p, t in mine.items() if _is_seed_replica(p, mine)}  # <panel>-s<seed>: beside it
            mine = {p: t for p, t in mine.items() if p not in copies}
            if mine:
                out[tier] = Tier(tier, pd.concat(mine.values(), ignore_index=True),
                                 note=("Some records could not be used: " + "; ".join(problems)) if problems else "",
                                 configs={p: t.attrs.get("config_hash", "?") for p, t in mine.items()},
                                 probe_configs={p: dict(t.attrs.get("config") or {}) for p, t in mine.items()},
                                 commits={c for t in mine.values() for c in _record_commits(root, t)},
                                 boot=_load_boot(root, list(mine), revisions),
                                 replicas=pd.concat(copies.values(), ignore_index=True) if copies else None)
            else:
                out[tier] = Tier(tier, note=_absent_records_note(tier, root, problems))
    return Tiers({s: out[s] for s in sources if s in out}, results_dir=root)


def _is_seed_replica(panel: str, panels: dict) -> bool:
    from circuitdev.analysis.findings import seed_of

    base, seed = seed_of(panel)
    return seed > 0 and base in panels


def _sidecars(root: Path, table: pd.DataFrame):
    from circuitdev.sources.store import read_sidecar

    for panel, revision, tokens_b in table[["panel", "revision", "tokens_b"]].drop_duplicates().itertuples(
            index=False):
        try:
            yield panel, revision, tokens_b, read_sidecar(root, panel, revision)
        except CircuitdevError:
            continue


def _record_commits(root: Path, table: pd.DataFrame) -> set[str]:
    commits = set()
    for *_, sidecar in _sidecars(root, table):
        git = sidecar.get("git") or {}
        if git.get("commit"):
            commits.add(git["commit"][:8] + ("+dirty" if git.get("dirty") else ""))
    return commits


def _absent_records_note(tier: str, root: Path, problems: list[str]) -> str:
    from circuitdev.paths import relative_to_repo

    extra = (" Records that could not be used: " + "; ".join(problems) + ".") if problems else ""
    where = relative_to_repo(root)
    if tier == "toy":
        return (f"No toy-panel records in `{where}`. Train and probe the toy panel with `make book` (it runs "
                "`circuitdev toy train` and `circuitdev probe --panel toy-pythia` etc.), then rebuild." + extra)
    return (f"No records of real models in `{where}`: this build probed none (they need the network and, for "
            "speed, a GPU). Add them with `make book SMK_ARGS=\"--config real_panels='[pythia-1b]'\"` or "
            "`circuitdev probe --panel pythia-1b`; see the chapter on re-running the book." + extra)


def record_nulls(tiers: Tiers) -> pd.DataFrame:
    """F6 null-selectivity statistics of every record panel, from the records' sidecars (probe with n_nulls > 0).
    Columns: tier, panel, revision, tokens_b, n_nulls, null_p99, null_max, real_max, k_above."""
    rows = []
    for t in tiers.present:
        if t.name == "published":
            continue
        for panel, revision, tokens_b, sidecar in _sidecars(tiers.results_dir, t.table):
            null = (sidecar.get("probe_attrs") or {}).get("null")
            if null:
                rows.append({"tier": t.name, "panel": panel, "revision": revision, "tokens_b": tokens_b,
                             "n_nulls": null.get("n_nulls"), "null_p99": null["null_p99"],
                             "null_max": null["null_max"], "real_max": null["real_max"],
                             "k_above": null["k_above_null_p99"]})
    return pd.DataFrame(rows, columns=["tier", "panel", "revision", "tokens_b", "n_nulls", "null_p99", "null_max",
                                       "real_max", "k_above"])


@dataclass
class PanelView:
    """One record panel as the refinement page reads it: its table (refined revisions included), its bootstrap
    replicates, the revisions of its panel file (the default grid) and the log of `circuitdev refine`."""

    name: str
    tier: str
    table: pd.DataFrame
    boot: pd.DataFrame | None
    grid: list[str]
    refined: pd.DataFrame

    def apply_on_grid(self, fn: Callable[..., pd.DataFrame], **kwargs) -> pd.DataFrame:
        """`fn(table, boot=replicates, **kwargs)` on the default grid only (the refined revisions left out), to
        compare a finding with and without refinement."""
        keep = lambda df: None if df is None else df[df["revision"].isin(self.grid)]  # noqa: E731
        return fn(keep(self.table), boot=keep(self.boot), **kwargs)


def panel_view(tiers: Tiers, name: str) -> PanelView | None:
    """`name` from the first present tier holding it, or None."""
    from circuitdev.sources.panels import load_panel
    from circuitdev.sources.store import refined_log

    for t in tiers.present:
        if name in t.panels:
            table = t.table[t.table["panel"] == name].reset_index(drop=True)
            boot = t.boot[t.boot["panel"] == name] if t.boot is not None else None
            try:
                grid = load_panel(name, resolve_hub=False).revision_names
            except ConfigError:
                grid = list(pd.unique(table["revision"]))
            return PanelView(name, t.name, table, boot if boot is not None and len(boot) else None, grid,
                             refined_log(tiers.results_dir, name))
    return None


# ------------------------------------------------------------------------------------------------ one model panel


def panel_name(panel: str) -> str:
    """The name of a panel given as a name or a panel file (a results sub-folder name is returned as is)."""
    from circuitdev.sources.panels import load_panel

    try:
        return load_panel(panel, resolve_hub=False).name
    except ConfigError:
        return Path(panel).stem if panel.endswith((".yaml", ".yml")) else panel


def model_tier(panel: str, *, source: ModelSource = "auto", published_dir: Path | None, results_dir: Path,
               revisions: Sequence[str] | None = None, compute_missing: bool = False, batch_size: int = 8,
               device: str | None = None) -> Tier:
    """The data of one panel for a model page: its probe records ("records"), the authors' files for a published
    model ("published"), or the first of the two that exists ("auto"). `compute_missing=True` probes the revisions
    that have no record first (loads each checkpoint: a GPU job for the 1B models). Never raises for absent data:
    an absent tier carries a note saying how to add it."""
    from circuitdev.sources.published import PUBLISHED_PANELS

    name = panel_name(panel)
    if source in ("auto", "records"):
        problem = _compute_missing(panel, results_dir, revisions, batch_size, device) if compute_missing else ""
        tiers = load_tiers(["toy", "measured"], published_dir=None, results_dir=results_dir, panels=[name],
                           revisions=revisions)
        for t in tiers.present:
            return t
        if source == "records" or name not in PUBLISHED_PANELS:
            return Tier("measured", note=f"No probe records of `{name}`. Probe them with "
                                         f"`circuitdev probe --panel {name}`, or re-run this page with "
                                         f"`-p compute_missing true`. {problem}".strip())
    if name not in PUBLISHED_PANELS:
        return Tier("published", note=f"`{name}` is not one of the published models "
                                      f"({', '.join(PUBLISHED_PANELS)}); use source='records'.")
    tier = load_published_tier(published_dir)
    if tier.present:
        table = tier.table[tier.table["panel"] == name]
        if revisions:
            table = table[table["revision"].isin(revisions)]
        tier.table = table.reset_index(drop=True)
    return tier


def _compute_missing(panel: str, results_dir: Path, revisions: Sequence[str] | None, batch_size: int,
                     device: str | None) -> str:
    """Probe the panel's revisions that have no complete record; "" or why it failed."""
    from circuitdev.sources.panels import load_panel
    from circuitdev.sources.run import probe_panel

    try:
        pan = load_panel(panel)
        probe_panel(pan, revisions=list(revisions) if revisions else None, results_dir=results_dir,
                    config=pan.probe_config(batch_size=batch_size),
                    device=None if device in (None, "auto") else device, progress=False)
    except (CircuitdevError, OSError) as err:
        return f"Computing the missing records failed: {err}"
    return ""


def published_ablation(tier: Tier | None, panel: str) -> pd.DataFrame:
    """The authors' final-checkpoint induction ablations of one model, tidy: condition (baseline / screen /
    matched_random / upper_bound / other), label, seed, n_ablated, heads, acc_top1, loss. Empty when absent."""
    cols = ["condition", "label", "seed", "n_ablated", "heads", "acc_top1", "loss"]
    if tier is None or tier.published is None or tier.published.ablation.empty:
        return pd.DataFrame(columns=cols)
    ab = tier.published.ablation
    ab = ab[(ab["model"] == panel) & (ab["task"] == "induction")]
    if ab.empty:
        return pd.DataFrame(columns=cols)
    wide = ab.pivot_table(index=["condition", "n_ablated", "heads"], columns="metric", values="value").reset_index()

    def kind(label: str) -> str:
        for key, name in (("baseline", "baseline"), ("induction_screen", "screen"),
                          ("matched_random", "matched_random"), ("upper bound", "upper_bound")):
            if (label == key) if key == "baseline" else (key in label):
                return name
        return "other"

    wide["label"] = wide["condition"]
    wide["condition"] = wide["label"].map(kind)
    wide["seed"] = np.where(wide["condition"] == "matched_random", 123, np.nan)  # the authors' one seed
    return wide[cols]


def screen_settings(tier: Tier, panel: str) -> str:
    """One sentence on the context length and baseline the screen used, with the induction ceiling it implies."""
    from circuitdev.measure.positions import induction_ceiling

    cfg = tier.probe_configs.get(panel) or ({"seq_len": 256} if tier.name == "published" else None)
    if not cfg:
        return "The screen settings are not recorded for this source."
    t, excl = int(cfg.get("seq_len", 256)), bool(cfg.get("baseline_excludes_ab", False))
    ceiling = induction_ceiling(t, baseline_size=int(cfg.get("baseline_size", 50)),
                                baseline_seed=int(cfg.get("baseline_seed", 0)),
                                first_a_range=cfg.get("first_a_range"))
    first = cfg.get("first_token_id")
    first_note = ("" if first is None else
                  f" Position 0 held the model's BOS token (id {first}, the probe setting first_token_id) instead "
                  "of the paper's random filler, because this model saw that token at the start of every training "
                  "window: its first-token scores measure attention to that BOS.")
    if excl:
        return (f"The screen ran at T = {t} with each sequence's A and B left out of the baseline (a documented "
                f"variant): under the paper's shared baseline a head with all its attention on B could score at "
                f"most {ceiling:.0f}× at this length, so the 50× bar would be nearly out of reach." + first_note)
    return (f"The screen ran at T = {t} with the paper's shared 50-position baseline; at this length a head with all "
            f"its attention on B scores at most {ceiling:.0f}× (`circuitdev.measure.positions.induction_ceiling`)."
            + first_note)


def model_ablation(tier: Tier, panel: str, *, run: bool = True, threshold: float = 50.0,
                   seeds: Sequence[int] = (123,), mode: str = "zero", batch_size: int = 8,
                   device: str | None = None) -> tuple[pd.DataFrame | None, str]:
    """The final-revision group ablation of a model page: the authors' own for the published tier, else computed
    on the final checkpoint (`sources.run.ablate_final_circuit`) when `run`. Returns (table, "") or (None, why)."""
    if not tier.present:
        return None, "there are no data for this panel"
    name = panel_name(panel)
    if tier.name == "published":
        ab = published_ablation(tier, name)
        return (ab, "") if len(ab) else (None, "the published folder holds no induction ablation of this model")
    if not run:
        return None, "ablation=False was given"
    from circuitdev.sources.run import ablate_final_circuit

    return ablate_final_circuit(panel, tier.table, config=tier.probe_configs.get(name), threshold=threshold,
                                seeds=seeds, mode=mode, batch_size=batch_size, device=device)
