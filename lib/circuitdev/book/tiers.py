"""The three kinds of evidence a page shows side by side, each as a developmental table.

- "published": the authors' per-revision files (`sources.published`);
- "toy": records of the toy panel probed here (`sources.records`, records whose source is "toy");
- "measured": records of real models probed here.

A tier that has no data is never an error: `Tier.note` says why and how to add it, and the page shows it as a note.
A record tier also carries its records' bootstrap replicates (`Tier.boot`: `Tiers.apply(..., intervals=True)`), their
null draws (`Tier.nulls`: `Tiers.apply(..., nulls=True)`) and, for the toy panel, its seed replicas
(`Tier.replicas`: panels `<panel>-s<seed>` trained by `circuitdev toy train --seeds`), which stay out of its main
table so that every figure shows one model per family.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Sequence

import pandas as pd

from circuitdev.book.provenance import provenance_line
from circuitdev.errors import CircuitdevError, ConfigError, DataError

TierName = Literal["published", "toy", "measured"]
TIERS: tuple[TierName, ...] = ("published", "toy", "measured")
TIER_LABELS = {"published": "published (authors' files)", "toy": "toy panel (trained here)",
               "measured": "measured (real models probed here)"}
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
    boot: pd.DataFrame | None = None  # bootstrap replicates of the records (RecordSet.boot); None: none
    nulls: pd.DataFrame | None = None  # null induction selectivities of the records (RecordSet.nulls); None: none
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
              intervals: bool = False, nulls: bool = False, replicas: bool = False,
              per_tier: Callable[[Tier], dict] | None = None, **kwargs) -> pd.DataFrame:
        """`fn(table, *args, **kwargs)` on every present tier (or `tiers`), concatenated with a `tier` column first.
        Use it for any findings function: `tiers.apply(findings.bos_fraction, threshold=30)`. intervals=True passes
        each tier's bootstrap replicates as `boot=` where it has them (the findings then add `_lo` / `_hi`
        columns); nulls=True passes each tier's null draws as `nulls=` (None where it has none: F6);
        replicas=True appends the tier's seed replicas to its table (for `findings.seed_spread`); `per_tier(tier)`
        gives keyword arguments of one tier's call (a table the page already computed for that tier)."""
        def table(t: Tier) -> pd.DataFrame:
            return pd.concat([t.table, t.replicas], ignore_index=True) if replicas and t.replicas is not None \
                else t.table

        def extra(t: Tier) -> dict:
            return {**({"boot": t.boot} if intervals and t.boot is not None else {}),
                    **({"nulls": t.nulls} if nulls else {}), **(per_tier(t) if per_tier is not None else {})}

        frames = [fn(table(t), *args, **kwargs, **extra(t)).assign(tier=t.name)
                  for t in self.present if tiers is None or t.name in tiers]
        kept = [f for f in frames if len(f)]
        if not kept:  # keep the function's columns: a page selecting them must not fail on a tier without rows
            columns = dict.fromkeys(c for f in frames for c in f.columns if c != "tier")
            return pd.DataFrame(columns=["tier", *columns])
        out = pd.concat(kept, ignore_index=True)
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
    note = (f"This build read an incomplete copy of the authors' files in `{where}` (allowed by --allow-partial): "
            f"{len(data.missing)} missing or changed ({', '.join(data.missing[:4])}"
            f"{', ...' if len(data.missing) > 4 else ''}). Every finding of this tier is computed on the subset. "
            f"{HOW_TO_ADD_PUBLISHED}") if data.partial else ""
    return Tier("published", data.table, published=data, note=note,
                configs={p: f"{h} (the authors' run ≙ paper defaults)" for p in pd.unique(data.table["panel"])})


def _read_records(results_dir: Path, panels: list[str], revisions: Sequence[str] | None) -> tuple[dict, list[str]]:
    """Each panel's RecordSet (sources.records), and the problems met, worded for a page's note."""
    from circuitdev.sources.records import PanelRecords

    sets, problems = {}, []
    for panel in panels:
        try:
            read = PanelRecords.open(results_dir, panel).read(revisions=list(revisions) if revisions else None,
                                                              on_missing="skip")
        except (CircuitdevError, OSError) as err:
            problems.append(f"`{panel}`: {err}")
            continue
        if read.missing:
            problems.append(f"`{panel}`: no complete record for {', '.join(read.missing)}")
        sets[panel] = read
    return sets, problems


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame | None:
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else None


def _commit(sidecar: dict) -> str | None:
    git = sidecar.get("git") or {}
    return git["commit"][:8] + ("+dirty" if git.get("dirty") else "") if git.get("commit") else None


def record_tier(name: TierName, sets: dict, *, replicas: dict | None = None, note: str = "") -> Tier:
    """A tier from RecordSets (panel -> RecordSet): the tables, replicates and null draws of its panels."""
    return Tier(name, pd.concat([s.table for s in sets.values()], ignore_index=True), note=note,
                configs={p: s.config_hash for p, s in sets.items()},
                probe_configs={p: dict(s.config) for p, s in sets.items()},
                commits={c for s in sets.values() for m in s.sidecars.values() if (c := _commit(m))},
                boot=_concat([s.boot() for s in sets.values()]), nulls=_concat([s.nulls() for s in sets.values()]),
                replicas=pd.concat([s.table for s in replicas.values()], ignore_index=True) if replicas else None)


def load_tiers(sources: Sequence[str] = TIERS, *, published_dir: Path | None, results_dir: Path,
               panels: Sequence[str] | None = None, revisions: Sequence[str] | None = None) -> Tiers:
    """The data of each requested tier. `panels`: the record panels to read (None: every panel with records in
    `results_dir`); a panel goes to the toy tier when its records say `source == "toy"`, else to "measured".
    `revisions` restricts record panels to those revisions. Nothing here raises for absent data."""
    from circuitdev.analysis.findings import seed_of

    bad = [s for s in sources if s not in TIERS]
    if bad:
        raise ConfigError(f"unknown source(s) {bad}; the tiers are {', '.join(TIERS)}")
    root = Path(results_dir)
    out: dict[str, Tier] = {}
    if "published" in sources:
        out["published"] = load_published_tier(published_dir)
    if "toy" in sources or "measured" in sources:
        sets, problems = _read_records(root, list(panels) if panels is not None else record_panels(root), revisions)
        for tier in ("toy", "measured"):
            if tier not in sources:
                continue
            mine = {p: s for p, s in sets.items() if (s.table["source"].iloc[0] == "toy") == (tier == "toy")}
            copies = {p: s for p, s in mine.items() if seed_of(p)[1] > 0 and seed_of(p)[0] in mine}  # beside it
            mine = {p: s for p, s in mine.items() if p not in copies}
            out[tier] = record_tier(tier, mine, replicas=copies, note=("Some records could not be used: " + "; ".join(
                problems)) if problems else "") if mine else Tier(tier, note=_absent_records_note(tier, root, problems))
    return Tiers({s: out[s] for s in sources if s in out}, results_dir=root)


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
