"""A panel's stored records, read together: the developmental table, its bootstrap replicates and null draws.

`PanelRecords.open(results_dir, panel)` resolves the panel once -- its file with the revisions `circuitdev refine`
added, or, for a results folder without a panel file, the records on disk -- and every read goes through it:

    records = PanelRecords.open("data/results", "toy-pythia")
    read = records.read(on_missing="skip")   # a RecordSet: table, config, config_hash, missing, sidecars
    read.table                               # the developmental table (schema.py columns first), token order
    read.boot()                              # bootstrap replicates of the same revisions (analysis.uncertainty)
    read.nulls()                             # null induction selectivities of the same revisions (F6)
    read.revision_table()                    # one row per revision: top-1, loss at B, ICL score, norms
    read.behaviour_boot()                    # their bootstrap replicates (the selectivities' draws)
    records.status()                         # one row per revision: complete / missing / corrupt / stale

`revision_table.load_revision_table(results_dir, panel)` is `read.revision_table()` with the ablation-over-training
columns.

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
from circuitdev.measure.behaviour import NORM_VALUES
from circuitdev.paths import results_dir as default_results_dir
from circuitdev.schema import DEV_KEY_COLUMNS, DEV_OPTIONAL_COLUMNS, SEL_COLUMNS
from circuitdev.sources.panels import Panel, load_panel
from circuitdev.sources.record_format import BEHAVIOUR_BOOT_COLUMNS, BOOT_COLUMNS, NULL_COLUMNS, outdated_reason
from circuitdev.sources.store import RecordStatus, read_parquet, record_paths, record_status
from circuitdev.sources.weights import weights_identity

MissingPolicy = Literal["raise", "skip"]

# Columns of `load_revision_table`, in order (then the norm columns, then sources.ablate.ABLATION_COLUMNS).
REVISION_COLUMNS: dict[str, str] = {
    "panel": "panel name",
    "revision": "revision name",
    "step": "training step (nullable integer)",
    "tokens": "training tokens seen (integer)",
    "tokens_b": "tokens / 1e9",
    "config_hash": "ProbeConfig.config_hash() of the record",
    "n": "sequences of the induction batch top1 and loss_b average over (all of them, valid or not)",
    "n_prefix": "repeated sequences of the ICL score",
    "top1": "top-1 accuracy at the query (second A -> B) on the induction batch",
    "top1_lo": "lower end of top1's 95% bootstrap interval (the selectivities' resamples)",
    "top1_hi": "upper end of top1's 95% bootstrap interval",
    "loss_b": "mean cross-entropy of B at the query",
    "loss_b_lo": "lower end of loss_b's 95% bootstrap interval",
    "loss_b_hi": "upper end of loss_b's 95% bootstrap interval",
    "icl_score": "mean loss on a random span's first occurrence minus on its repeat (measure.behaviour)",
    "icl_score_lo": "lower end of icl_score's 95% bootstrap interval (the repeated batch's own resamples)",
    "icl_score_hi": "upper end of icl_score's 95% bootstrap interval",
    "gu_sink_rate": "Gu et al. (2025)'s sink rate at the first key: gu_sink_share averaged over every head (layers x "
                    "heads); NaN for records older than format 5",
}
_KEYS = ("panel", "revision", "step", "tokens", "tokens_b", "config_hash")  # the rest come from the behaviour block


def revision_norm_columns(streams: list[str]) -> list[str]:
    """The norm columns of `load_revision_table` for these streams: norm_pos0_<stream> ..., norm_median_<stream>
    ..., norm_ratio_<stream> ... (streams "embed", "l0", ...)."""
    return [f"{value}_{stream}" for value in NORM_VALUES for stream in streams]


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

    def behaviour_boot(self) -> pd.DataFrame:
        """The behaviour's bootstrap replicates: one row per (revision, replicate), columns panel, revision,
        tokens_b, replicate, top1, loss_b, icl_score. Replicate b used the same sequences as replicate b of every
        selectivity (`measure.behaviour`); records without them are left out."""
        return self._side("behaviour_boot", BEHAVIOUR_BOOT_COLUMNS)

    def revision_table(self) -> pd.DataFrame:
        """One row per revision, token order: REVISION_COLUMNS and the norm columns (`revision_norm_columns`) from
        each sidecar's behaviour block; NaN where a record has none (format 1 / 2) or a value was not measured."""
        rows, streams = [], []
        gu_rate = self.table.groupby("revision")["gu_sink_share"].mean().to_dict() \
            if "gu_sink_share" in self.table.columns else {}  # mean over every (layer, head) of the revision
        for rev, meta in self.sidecars.items():
            block = meta.get("behaviour") or {}
            row = {"panel": self.panel, "revision": rev, "step": meta.get("step"), "tokens": meta["tokens"],
                   "tokens_b": meta["tokens"] / 1e9, "config_hash": meta["config_hash"],
                   **{c: block.get(c) for c in REVISION_COLUMNS if c not in _KEYS},
                   "gu_sink_rate": gu_rate.get(rev)}
            for i, stream in enumerate(block.get("norm_streams") or []):
                streams += [stream] if stream not in streams else []
                for value in NORM_VALUES:
                    row[f"{value}_{stream}"] = block[value][i]
            rows.append(row)
        columns = [*REVISION_COLUMNS, *revision_norm_columns(streams)]
        out = pd.DataFrame(rows, columns=columns)
        out["tokens"] = out["tokens"].astype("int64")
        for col in ("step", "n", "n_prefix"):
            out[col] = out[col].astype("Int64")  # <NA> where unknown
        numeric = [c for c in columns if c not in ("panel", "revision", "step", "tokens", "config_hash", "n",
                                                   "n_prefix")]
        out[numeric] = out[numeric].astype("float64")  # None (not measured, or a JSON null) -> NaN
        return out

    def outdated(self) -> list[str]:
        """Revisions whose record an older format wrote and `circuitdev probe` refreshes (`record_format.outdated_reason`)."""
        return [rev for rev, meta in self.sidecars.items() if outdated_reason(meta)]


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
        model = self.panel.model if self.panel is not None and not self.panel.is_local else None  # a hub id
        return record_status(paths, panel=self.name, revision=revision, config_hash=config_hash, weights=weights,
                             model=model)

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
