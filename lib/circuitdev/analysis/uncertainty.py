"""How sure is a finding: intervals of derived quantities from the probe's bootstrap replicates (issue 14).

A probe with n_boot > 0 stores, beside each record, B replicates of every head's six selectivities, each computed on
the same resample of the batch's sequences (`measure.bootstrap`, `sources.records.RecordSet.boot`). Replicate b
of the whole developmental table is the table with every selectivity replaced by its b-th replicate; a findings
quantity (a BOS fraction, a per-layer count, a circuit and its recall, a milestone revision) computed on each of the
B tables gives B values from the same draws for every head, and their percentiles are its 95% interval. So every
head's membership in a class or circuit is re-decided per replicate, exactly as the point value decides it.

    reps = Replicates.align(dev, boot)                  # (B, rows) per selectivity column, aligned to dev's rows
    for frame in reps.frames(): ...                     # dev with the selectivities of replicate b
    with_intervals(dev, boot, findings.bos_fraction, columns=["bos_fraction"])   # + bos_fraction_lo / _hi

Conventions: a quantity's interval is [`<column>_lo`, `<column>_hi`], the 2.5th / 97.5th percentiles over the
replicates (for counts and other step-valued quantities the nearest replicate values below / above, so that a count's
interval holds counts), widened where needed to contain the point value. Rows of panels without replicates (the
published tier has no per-sequence data; records probed with n_boot = 0) get NaN intervals, never zero-width ones.

What such an interval covers: re-measuring one trained model on another draw of the probe batch (the batch's
sequences resampled), not another training run; call it a "re-measurement interval (the probe batch resampled)"
(`INTERVAL_NAME`). Training noise is what seed replicas measure (`findings.seed_spread`).

Reading a count or a maximum: a bootstrap of a count of heads above a bar is not centred on the point count when
heads sit near the bar (each one passes in some resamples only), and a maximum over heads is biased upwards; the
percentiles may then miss the point value. `with_intervals` therefore also gives `<column>_boot_mean` (the mean over
the replicates, to read beside the point) and `<column>_widened` (True where the interval had to be widened to
contain the point: the resamples centre elsewhere). Say so where it happens (`WIDENED_NOTE`).
Pure numpy / pandas: the findings call in here when given `boot=`; nothing here imports the findings.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np
import pandas as pd

from circuitdev.analysis.devtable import require, reuse_indexes
from circuitdev.errors import DataError
from circuitdev.schema import INTERVAL_LEVEL, SEL_COLUMNS

LEVEL = INTERVAL_LEVEL  # the coverage of every interval
INTERVAL_NAME = "re-measurement interval (the probe batch resampled)"  # what every interval here covers
WIDENED_NOTE = ("interval widened to include the point: the resamples center elsewhere because heads sit near the "
                "bar")  # what a page says where `<column>_widened` is True
KEYS = ["panel", "revision", "layer", "head"]
# Columns derived from the selectivities: dropped from replicate tables so that nothing stale decides a class
# (`measure.classify.is_class` recomputes the best class when the column is absent).
_DERIVED = ("best_class", "best_selectivity", "second_class", "second_selectivity", "classification",
            "in_induction_circuit", "in_prev_token_circuit", "is_bos")


@dataclass
class Replicates:
    """Bootstrap replicates aligned to the rows of one developmental table `dev`."""

    dev: pd.DataFrame
    values: dict[str, np.ndarray]  # sel column -> (B, rows); a row without replicates holds its point value
    covered: np.ndarray  # (rows,) True where the row's head has all B replicates

    @property
    def n_boot(self) -> int:
        return next(iter(self.values.values())).shape[0]

    @property
    def panels(self) -> set[str]:
        """Panels all of whose rows have replicates: the ones whose quantities get intervals."""
        panels = self.dev["panel"].to_numpy()
        return set(pd.unique(panels)) - set(pd.unique(panels[~self.covered]))

    @classmethod
    def align(cls, dev: pd.DataFrame, boot: pd.DataFrame | "Replicates") -> "Replicates":
        """Match the replicate table `boot` (panel, revision, replicate, layer, head, sel_* -- as
        `load_boot_replicates` returns it, several panels concatenated) to the rows of `dev`. B is the smallest
        replicate count of the panels present."""
        if isinstance(boot, Replicates):
            if boot.dev is dev:
                return boot
            boot = boot.long()
        require(dev, [*KEYS, *SEL_COLUMNS], "bootstrap intervals")
        missing = [c for c in (*KEYS, "replicate", *SEL_COLUMNS) if c not in boot.columns]
        if missing:
            raise DataError(f"bootstrap replicates lack column(s) {missing}; load them with "
                            "circuitdev.sources.records.RecordSet.boot")
        rows = dev[KEYS].reset_index(drop=True).assign(_row=np.arange(len(dev)))
        m = boot.merge(rows, on=KEYS, how="inner")
        per_panel = m.groupby("panel")["replicate"].max()
        n_boot = int(per_panel.min()) + 1 if len(per_panel) else 0
        if n_boot == 0:
            raise DataError("no bootstrap replicate matches a row of the table (probe with n_boot > 0)")
        m = m[m["replicate"] < n_boot]
        b, r = m["replicate"].to_numpy(dtype=np.int64), m["_row"].to_numpy(dtype=np.int64)
        values = {}
        for col in SEL_COLUMNS:
            arr = np.tile(dev[col].to_numpy(dtype=float), (n_boot, 1))  # (B, rows)
            arr[b, r] = m[col].to_numpy(dtype=float)
            values[col] = arr
        covered = np.bincount(r, minlength=len(dev)) == n_boot
        return cls(dev, values, covered)

    def long(self) -> pd.DataFrame:
        """Back to the long replicate table (covered rows only)."""
        rows = np.flatnonzero(self.covered)
        b = np.repeat(np.arange(self.n_boot), len(rows))
        keys = self.dev[KEYS].iloc[np.tile(rows, self.n_boot)].reset_index(drop=True)
        return keys.assign(replicate=b, **{c: v[:, rows].reshape(-1) for c, v in self.values.items()})

    def frames(self) -> Iterator[pd.DataFrame]:
        """The developmental table with the selectivities of replicate 0, 1, ... B-1 (one frame, updated in place:
        use each before asking for the next). Findings called on it reuse its revision index."""
        frame = self.dev.drop(columns=[c for c in _DERIVED if c in self.dev.columns])
        with reuse_indexes():
            for b in range(self.n_boot):
                for col, arr in self.values.items():
                    frame[col] = arr[b]
                yield frame

    def head_interval(self, column: str, *, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
        """Per-row percentile interval of one selectivity (linear interpolation, as the records' sel_*_lo / _hi
        columns), widened to contain the point value; NaN for rows without replicates."""
        point = self.dev[column].to_numpy(dtype=float)
        lo, hi = percentiles(self.values[column], point, level=level, discrete=False)
        return np.where(self.covered, lo, np.nan), np.where(self.covered, hi, np.nan)


def percentiles(values: np.ndarray, point: np.ndarray, *, level: float = LEVEL, discrete: bool = True
                ) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) over axis 0 of `values` (B, ...), widened to contain `point`. discrete=True takes the replicate
    values just below / above the percentiles (a count's interval holds counts); NaN replicates are left out."""
    lo, hi, _ = widened_percentiles(values, point, level=level, discrete=discrete)
    return lo, hi


def widened_percentiles(values: np.ndarray, point: np.ndarray, *, level: float = LEVEL, discrete: bool = True
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`percentiles` and, per element, whether the percentile interval had to be widened to contain `point`."""
    tail = 100 * (1 - level) / 2
    kinds = ("lower", "higher") if discrete else ("linear", "linear")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices stay NaN
        lo = np.nanpercentile(values, tail, axis=0, method=kinds[0])
        hi = np.nanpercentile(values, 100 - tail, axis=0, method=kinds[1])
    point = np.asarray(point, dtype=float)
    widened = (lo > point) | (hi < point)  # False where either is NaN
    return np.fmin(lo, point), np.fmax(hi, point), widened


def boot_mean(values: np.ndarray) -> np.ndarray:
    """Mean over axis 0 (the replicates), NaN replicates left out; NaN where all are."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(values, axis=0)


def replicate_values(dev: pd.DataFrame, boot, fn: Callable[[pd.DataFrame], pd.DataFrame],
                     columns: Sequence[str]) -> tuple[pd.DataFrame, np.ndarray, Replicates]:
    """fn(dev) and, stacked, fn on every replicate table: (point frame, (B, rows, len(columns)), replicates).
    `fn` must give the same rows in the same order for every replicate (per revision, per layer, per milestone)."""
    reps = Replicates.align(dev, boot)
    point = fn(dev)
    out = np.empty((reps.n_boot, len(point), len(columns)))
    for b, frame in enumerate(reps.frames()):
        res = fn(frame)
        if len(res) != len(point):
            raise DataError(f"{getattr(fn, '__name__', 'the quantity')} gave {len(res)} rows on a replicate and "
                            f"{len(point)} on the data: it cannot be bootstrapped row by row")
        out[b] = res[list(columns)].to_numpy(dtype=float)
    return point, out, reps


def with_intervals(dev: pd.DataFrame, boot, fn: Callable[[pd.DataFrame], pd.DataFrame], *, columns: Sequence[str],
                   level: float = LEVEL, discrete: bool = True) -> pd.DataFrame:
    """fn(dev) with, for each of `columns`, `<column>_lo` / `<column>_hi` (the interval, from the same quantity
    computed on every bootstrap replicate of the table), `<column>_boot_mean` (the replicates' mean, to read beside
    the point where heads sit near a bar) and `<column>_widened` (the percentile interval missed the point and was
    widened to contain it). Rows of panels without replicates get NaN (and widened False)."""
    point, values, reps = replicate_values(dev, boot, fn, columns)
    has = point["panel"].isin(reps.panels).to_numpy() if "panel" in point.columns else np.ones(len(point), bool)
    for i, col in enumerate(columns):
        lo, hi, widened = widened_percentiles(values[:, :, i], point[col].to_numpy(dtype=float), level=level,
                                              discrete=discrete)
        point[f"{col}_lo"], point[f"{col}_hi"] = np.where(has, lo, np.nan), np.where(has, hi, np.nan)
        point[f"{col}_boot_mean"] = np.where(has, boot_mean(values[:, :, i]), np.nan)
        point[f"{col}_widened"] = has & widened
    return point


def first_reached(hit: np.ndarray) -> np.ndarray:
    """Index of the first True along the last axis, or its length when there is none."""
    hit = np.asarray(hit, dtype=bool)
    return np.where(hit.any(-1), hit.argmax(-1), hit.shape[-1])


def index_interval(first: np.ndarray, point: int, *, never: int, level: float = LEVEL) -> tuple[int, int, float]:
    """(lo, hi, share reached) of the replicates' first-hit indices `first` (B,), where `never` (= the number of
    revisions) means not reached: the discrete percentile range widened to contain `point`, and the share of
    replicates that reach it at all."""
    lo, hi = percentiles(np.asarray(first, dtype=float)[:, None], np.array([float(point)]), level=level)
    return int(lo[0]), int(hi[0]), float(np.mean(np.asarray(first) < never))


# ------------------------------------------------------------------------ binomial intervals (ablations, top-1)
# A top-1 accuracy on a batch of n sequences is a proportion: where no per-sequence resamples exist (the ablations,
# the authors' files) its 95% interval is the Wilson score interval, computed in ONE place,
# `circuitdev.measure.behaviour.wilson_interval` (the ablation-over-training table stores it; measure is the earliest
# stage, so `sources.ablate` and these helpers share it).


def binomial_intervals(frame: pd.DataFrame, column: str, n, *, level: float = LEVEL) -> pd.DataFrame:
    """`frame` with `<column>_lo` / `<column>_hi`: the Wilson interval of the proportion in `column` on a batch of
    `n` sequences (a number, or the name of a column holding each row's batch size). The count of successes is
    value * n (a mean over random groups gives a fractional count, which the Wilson formula takes as is). Rows
    whose value or n is missing get NaN."""
    from circuitdev.measure.behaviour import wilson_interval

    sizes = frame[n] if isinstance(n, str) else pd.Series(n, index=frame.index)
    p = pd.to_numeric(frame[column], errors="coerce").astype("float64").to_numpy()
    size = pd.to_numeric(sizes, errors="coerce").astype("float64").to_numpy()
    ok = np.isfinite(p) & np.isfinite(size) & (size > 0)
    lo, hi = wilson_interval(np.where(ok, p * size, 0.0), np.where(ok, size, 1.0), level=level)
    return frame.assign(**{f"{column}_lo": np.where(ok, lo, np.nan), f"{column}_hi": np.where(ok, hi, np.nan)})


def difference_interval(p1, lo1, hi1, p2, lo2, hi2) -> tuple[np.ndarray, np.ndarray]:
    """95% interval of the difference p1 - p2 of two proportions from their own (Wilson) intervals: Newcombe's
    hybrid score interval (1998, method 10),
        lo = d - sqrt((p1 - lo1)^2 + (hi2 - p2)^2),   hi = d + sqrt((hi1 - p1)^2 + (p2 - lo2)^2).
    It treats the two as independent samples. For a drop in top-1 (intact minus ablated, the same sequences scored
    twice) the two are positively correlated, which narrows the true spread of the difference: the interval is then
    conservative (wider than a paired one would be), so "the drop's interval excludes 0" is a safe reading."""
    p1, lo1, hi1, p2, lo2, hi2 = (np.asarray(v, dtype=float) for v in (p1, lo1, hi1, p2, lo2, hi2))
    d = p1 - p2
    return d - np.sqrt((p1 - lo1) ** 2 + (hi2 - p2) ** 2), d + np.sqrt((hi1 - p1) ** 2 + (p2 - lo2) ** 2)
