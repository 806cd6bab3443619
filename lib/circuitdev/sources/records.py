"""A panel's stored records, read together: the developmental table, its bootstrap replicates and null draws.

`PanelRecords.open(results_dir, panel)` resolves the panel once -- its file with the revisions `circuitdev refine`
added, or, for a results folder without a panel file, the records on disk -- and every read goes through it:

    records = PanelRecords.open("data/results", "toy-pythia")
    read = records.read(on_missing="skip")   # a RecordSet: table, config, config_hash, missing, sidecars
    read.table                               # the developmental table (schema.py columns first), token order
    read.boot()                              # bootstrap replicates of the same revisions (analysis.uncertainty)
    read.nulls()                             # null induction selectivities of the same revisions (F6)
    records.status()                         # one row per revision: complete / missing / corrupt / stale

A record of other weights than the panel's current ones (`sources.weights`) is stale: never read as current.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pandas as pd

from circuitdev.errors import ConfigError, DataError
from circuitdev.paths import results_dir as default_results_dir
from circuitdev.schema import DEV_KEY_COLUMNS, DEV_OPTIONAL_COLUMNS, SEL_COLUMNS
from circuitdev.sources.panels import Panel, load_panel
from circuitdev.sources.store import (BOOT_COLUMNS, FORMAT, NULL_COLUMNS, RecordStatus, read_parquet,
                                      record_paths, record_status)
from circuitdev.sources.weights import weights_identity

MissingPolicy = Literal["raise", "skip"]


@dataclass(frozen=True)
class RecordSet:
    """The complete records of one panel read together (one configuration for all)."""

    root: Path
    panel: str
    table: pd.DataFrame  # the developmental table, revisions in token order
    config: dict  # the records' ProbeConfig fields
    config_hash: str
    sidecars: dict[str, dict] = field(default_factory=dict)  # revision -> its sidecar
    missing: tuple[str, ...] = ()  # "<revision> (<state>: <reason>)" of each revision without a usable record

    @property
    def revisions(self) -> list[str]:
        return list(self.sidecars)

    def _side(self, key: str, columns: tuple[str, ...]) -> pd.DataFrame:
        frames = []
        for rev, meta in self.sidecars.items():
            if meta.get(key):
                frames.append(read_parquet(record_paths(self.root, self.panel, rev).side(key)).assign(
                    panel=self.panel, revision=rev, tokens_b=meta["tokens"] / 1e9))
        if not frames:
            return pd.DataFrame(columns=["panel", "revision", "tokens_b", *columns])
        return pd.concat(frames, ignore_index=True)[["panel", "revision", "tokens_b", *columns]]

    def boot(self) -> pd.DataFrame:
        """The bootstrap replicates: one row per (revision, replicate, layer, head), columns panel, revision,
        tokens_b, replicate, layer, head, sel_<class> x6 (records without replicates left out; empty when none has
        them). Pass it to the findings functions (`boot=`) for intervals (analysis.uncertainty)."""
        return self._side("boot", BOOT_COLUMNS)

    def nulls(self) -> pd.DataFrame:
        """The null induction selectivities: one row per (revision, draw, layer, head), columns panel, revision,
        tokens_b, draw, layer, head, sel_null_induction (records probed with n_nulls = 0 left out)."""
        return self._side("nulls", NULL_COLUMNS)

    def outdated(self) -> list[str]:
        """Revisions whose record an older format wrote (readable; `circuitdev probe` refreshes them)."""
        return [rev for rev, meta in self.sidecars.items() if meta.get("format") != FORMAT]


@dataclass(frozen=True)
class PanelRecords:
    """The records of one panel in a results folder; `panel` is None for a folder without a panel file."""

    root: Path
    name: str
    panel: Panel | None

    @classmethod
    def open(cls, results_dir: str | os.PathLike | None, panel: Panel | str) -> "PanelRecords":
        """Resolve `panel` (a Panel, a panel name or file, or the name of a results sub-folder) once."""
        root = Path(results_dir) if results_dir is not None else default_results_dir()
        try:
            pan = load_panel(panel, results_dir=root, resolve_hub=False)
        except ConfigError:
            if not isinstance(panel, str) or not (root / panel).is_dir():
                raise
            return cls(root, panel, None)  # no panel file: whatever records the results folder holds
        return cls(root, pan.name, pan if pan.revisions else None)

    def revision_names(self, revisions: list[str] | None = None) -> list[str]:
        if self.panel is not None:
            return [r.name for r in self.panel.select(revisions)]
        return list(revisions or sorted(p.stem for p in (self.root / self.name).glob("*.json")
                                        if not p.name.startswith(".")))

    def config_hash(self, config) -> str | None:
        """The hash the records must carry for `config` (a ProbeConfig; the panel's defaults apply under it)."""
        if config is None:
            return None
        return self.panel.probe_config(**config.to_dict()).config_hash() if self.panel is not None \
            else config.config_hash()

    def status_of(self, revision: str, *, config_hash: str | None = None, paths=None) -> RecordStatus:
        """`store.record_status` of one revision's record (at `paths`: e.g. an archived copy), the panel's current
        weights identity included."""
        paths = paths or record_paths(self.root, self.name, revision)
        weights = None
        if self.panel is not None:
            known = None
            if paths.sidecar.is_file():  # reuse the stored weights hash when the files are unchanged
                try:
                    known = json.loads(paths.sidecar.read_text()).get("weights")
                except (OSError, ValueError, AttributeError):
                    known = None
            weights = weights_identity(self.panel, self.panel.revision(revision), known=known)
        return record_status(paths, panel=self.name, revision=revision, config_hash=config_hash, weights=weights)

    def status(self, *, config=None) -> pd.DataFrame:
        """One row per revision (refined ones included): revision, step, tokens_b, state, config_hash, reason."""
        key = self.config_hash(config)
        rows = []
        for name in self.revision_names():
            st = self.status_of(name, config_hash=key)
            rev = self.panel.revision(name) if self.panel is not None else None
            rows.append({"revision": name, "step": rev.step if rev else None, "tokens_b": rev.tokens_b if rev else None,
                         "state": st.state, "config_hash": (st.sidecar or {}).get("config_hash"),
                         "reason": st.reason or st.outdated})
        return pd.DataFrame(rows, columns=["revision", "step", "tokens_b", "state", "config_hash", "reason"])

    def read(self, *, revisions: list[str] | None = None, config=None,
             on_missing: MissingPolicy = "raise") -> RecordSet:
        """All complete records (of `config`, else of one configuration for all revisions) as one RecordSet.
        on_missing="skip" leaves out revisions without a complete record (listed in `missing`); "raise" reports
        them."""
        key = self.config_hash(config)
        tables, problems, sidecars = [], [], {}
        for rev in self.revision_names(revisions):
            st = self.status_of(rev, config_hash=key)
            if not st.complete:
                problems.append(f"{rev} ({st.state}{': ' + st.reason if st.reason else ''})")
                continue
            sidecars[rev] = st.sidecar
            tables.append((st.sidecar, read_parquet(record_paths(self.root, self.name, rev).parquet)))
        where = self.root / self.name
        if problems and on_missing == "raise":
            raise DataError(f"panel {self.name}: no usable record for {len(problems)} revision(s) in {where}: "
                            f"{'; '.join(problems)}. Run `circuitdev probe --panel {self.name} --out {self.root}`, "
                            "or pass on_missing='skip'")
        hashes = {rev: meta["config_hash"] for rev, meta in sidecars.items()}
        if len(set(hashes.values())) > 1:
            raise DataError(f"panel {self.name}: records in {where} come from different probe configurations "
                            f"{hashes}; re-probe the odd ones with one configuration (`circuitdev probe ... --force`) "
                            "or pass config= to pick one")
        if not tables:
            raise DataError(f"panel {self.name}: no complete record in {where}; run `circuitdev probe --panel "
                            f"{self.name}`" + (f" ({'; '.join(problems)})" if problems else ""))
        tables.sort(key=lambda st: st[0]["tokens"])
        out = pd.concat([t for _, t in tables], ignore_index=True)
        first = [c for c in (*DEV_KEY_COLUMNS, *SEL_COLUMNS, *DEV_OPTIONAL_COLUMNS) if c in out.columns]
        out = out[first + [c for c in out.columns if c not in first]]
        ordered = {meta["revision"]: meta for meta, _ in tables}
        return RecordSet(self.root, self.name, out, dict(tables[0][0]["config"]), tables[0][0]["config_hash"],
                         ordered, tuple(problems))


# The functions most callers want, over PanelRecords (kept for the public API and the workshop's sessions).


def load_panel_table(results_dir: str | os.PathLike | None, panel: Panel | str, *, revisions: list[str] | None = None,
                     config=None, on_missing: MissingPolicy = "raise") -> pd.DataFrame:
    """The developmental table of a panel's records (`PanelRecords.read(...).table`)."""
    return PanelRecords.open(results_dir, panel).read(revisions=revisions, config=config,
                                                      on_missing=on_missing).table


def load_boot_replicates(results_dir: str | os.PathLike | None, panel: Panel | str, *,
                         revisions: list[str] | None = None, config=None) -> pd.DataFrame:
    """The bootstrap replicates of the revisions `load_panel_table` reads (empty when none has them)."""
    try:
        read = PanelRecords.open(results_dir, panel).read(revisions=revisions, config=config, on_missing="skip")
    except DataError:
        return pd.DataFrame(columns=["panel", "revision", "tokens_b", *BOOT_COLUMNS])
    return read.boot()


def panel_status(results_dir: str | os.PathLike | None, panel: Panel | str, *, config=None) -> pd.DataFrame:
    """One row per revision of the panel (its refined ones included): state, reason, config hash."""
    return PanelRecords.open(results_dir, panel).status(config=config)
