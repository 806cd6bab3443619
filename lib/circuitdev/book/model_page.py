"""One model's appendix page as one object: which panel, which tier of evidence, its screen settings, its ablation.

    page = ModelPage.open("toy-pythia", published_dir=..., results_dir=...)   # records first, else the authors'
    ch.use_tier(page.tier)
    page.screen_settings()          # one sentence: T, baseline, the induction ceiling, the BOS setting
    page.ablation(groups=5)         # (table, "") or (None, why): the authors' own, or computed on the final checkpoint
    page.greater_than()             # (table, "") or (None, why): the authors' greater-than ablation (published tier)
    page.over_training()            # (table, "") or (None, why): the ablation over training (toy / measured records)

The panel is resolved once, here: a panel name or file (with the revisions `circuitdev refine` added in the
results folder), or a published model's name. The ablations are computed and read in `book.model_ablation`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Sequence

import pandas as pd

from circuitdev.book.tiers import Tier, load_published_tier, load_tiers
from circuitdev.book.model_ablation import final_ablation, greater_than, published_ablation
from circuitdev.errors import CircuitdevError, ConfigError
from circuitdev.schema import INDUCTION_THRESHOLD

ModelSource = Literal["auto", "records", "published"]


@dataclass
class ModelPage:
    name: str  # the panel's name (its results sub-folder, or the published model's name)
    tier: Tier  # the one tier the page shows (absent: its note says why and how to add it)
    panel: object | None = None  # circuitdev.sources.panels.Panel when there is a panel file
    results_dir: Path | None = None

    @classmethod
    def open(cls, panel: str, *, source: ModelSource = "auto", published_dir: Path | None, results_dir: Path,
             revisions: Sequence[str] | None = None, compute_missing: bool = False, batch_size: int | None = None,
             device: str | None = None) -> "ModelPage":
        """The data of one panel: its probe records ("records"), the authors' files for a published model
        ("published"), or the first of the two that exists ("auto"). `compute_missing=True` probes the revisions
        that have no record first (loads each checkpoint: a GPU job for the 1B models). Never raises for absent
        data: an absent tier carries a note saying how to add it."""
        from circuitdev.sources.panels import load_panel
        from circuitdev.sources.published_panels import PUBLISHED_PANELS

        try:
            spec = load_panel(panel, results_dir=results_dir, resolve_hub=compute_missing)
            name = spec.name
        except ConfigError:
            spec, name = None, Path(panel).stem if panel.endswith((".yaml", ".yml")) else panel
        page = cls(name, Tier("measured"), spec, Path(results_dir))
        if source in ("auto", "records"):
            problem = page._compute_missing(revisions, batch_size, device) if compute_missing else ""
            tiers = load_tiers(["toy", "measured"], published_dir=None, results_dir=results_dir, panels=[name],
                               revisions=revisions)
            if tiers.present:
                page.tier = tiers.present[0]
                return page
            if source == "records" or name not in PUBLISHED_PANELS:
                page.tier = Tier("measured", note=f"No probe records of `{name}`. Probe them with "
                                                  f"`circuitdev probe --panel {name}`, or re-run this page with "
                                                  f"`-p compute_missing true`. {problem}".strip())
                return page
        if name not in PUBLISHED_PANELS:
            page.tier = Tier("published", note=f"`{name}` is not one of the published models "
                                               f"({', '.join(PUBLISHED_PANELS)}); use source='records'.")
            return page
        tier = load_published_tier(published_dir)
        if tier.present:
            table = tier.table[tier.table["panel"] == name]
            if revisions:
                table = table[table["revision"].isin(revisions)]
            tier.table = table.reset_index(drop=True)
        page.tier = tier
        return page

    def _compute_missing(self, revisions: Sequence[str] | None, batch_size: int | None, device: str | None) -> str:
        """Probe the panel's revisions that have no complete record; "" or why it failed."""
        from circuitdev.sources.run import probe_panel

        if self.panel is None:
            return f"Computing the missing records failed: no panel file for `{self.name}`."
        try:
            probe_panel(self.panel, revisions=list(revisions) if revisions else None, results_dir=self.results_dir,
                        config=self.panel.probe_config(**({"batch_size": batch_size} if batch_size else {})),
                        device=None if device in (None, "auto") else device, progress=False)
        except (CircuitdevError, OSError) as err:
            return f"Computing the missing records failed: {err}"
        return ""

    def screen_settings(self) -> str:
        """One sentence on the context length and baseline the screen used, with the induction ceiling it implies."""
        from circuitdev.measure.positions import induction_ceiling

        tier = self.tier
        cfg = tier.probe_configs.get(self.name) or ({"seq_len": 256} if tier.name == "published" else None)
        if not cfg:
            return "The screen settings are not recorded for this source."
        t, excl = int(cfg.get("seq_len", 256)), bool(cfg.get("baseline_excludes_ab", False))
        ceiling = induction_ceiling(t, baseline_size=int(cfg.get("baseline_size", 50)),
                                    baseline_seed=int(cfg.get("baseline_seed", 0)),
                                    first_a_range=cfg.get("first_a_range"))
        first = cfg.get("first_token_id")
        first_note = ("" if first is None else
                      f" Position 0 held the model's BOS token (id {first}, the probe setting first_token_id) instead "
                      "of the paper's random filler, because this model saw that token at the start of every "
                      "training window: its first-token scores measure attention to that BOS.")
        if excl:
            return (f"The screen ran at T = {t} with each sequence's A and B left out of the baseline (a documented "
                    f"variant): under the paper's shared baseline a head with all its attention on B could score at "
                    f"most {ceiling:.0f}× at this length, so the 50× bar would be nearly out of reach." + first_note)
        return (f"The screen ran at T = {t} with the paper's shared 50-position baseline; at this length a head with "
                f"all its attention on B scores at most {ceiling:.0f}× "
                "(`circuitdev.measure.positions.induction_ceiling`)." + first_note)

    def ablation(self, *, run: bool = True, threshold: float = INDUCTION_THRESHOLD, groups: int = 5,
                 mode: str = "zero", batch_size: int | None = None, device: str | None = None
                 ) -> tuple[pd.DataFrame | None, str]:
        """The final-revision group ablation (ABLATION_TABLE_COLUMNS): the authors' own for the published tier,
        else computed on the final checkpoint with the circuit's own controls (`final_ablation`) when `run`.
        Returns (table, "") or (None, why)."""
        tier = self.tier
        if not tier.present:
            return None, "there are no data for this panel"
        if tier.name == "published":
            ab = published_ablation(tier.published, self.name) if tier.published is not None else None
            return (ab, "") if ab is not None and len(ab) else \
                (None, "the published folder holds no induction ablation of this model")
        if not run:
            return None, "ablation=False was given"
        if self.panel is None:
            return None, f"the panel file of `{self.name}` is not available here"
        return final_ablation(self.panel, tier.table, config=tier.probe_configs.get(self.name), threshold=threshold,
                              groups=groups, mode=mode, batch_size=batch_size, device=device,
                              results_dir=self.results_dir)

    def greater_than(self) -> tuple[pd.DataFrame | None, str]:
        """The authors' greater-than ablation of this model (`model_ablation.greater_than`), or (None, why)."""
        tier = self.tier
        if tier.name != "published" or tier.published is None:
            return None, "the greater-than task is in the authors' files only, one per published model"
        gt = greater_than(tier.published, self.name)
        return (gt, "") if len(gt) else \
            (None, f"the published folder holds no greater-than ablation of {self.name} (ablation/*_gt_ablation.json)")

    def over_training(self) -> tuple[pd.DataFrame | None, str]:
        """The final circuit's ablation at every revision (`load_revision_table`, toy / measured records), with
        the intact top-1's Wilson interval (baseline_top1_lo / _hi) and the drop's (top1_drop_lo / _hi,
        `uncertainty.difference_interval`); only revisions where it was computed. Or (None, why)."""
        tier = self.tier
        if tier.name == "published":
            return None, "the authors' files hold none (the paper ablates the final checkpoint only)"
        if not tier.present:
            return None, "there are no records of this panel"
        from circuitdev.analysis.uncertainty import binomial_intervals, difference_interval
        from circuitdev.sources.revision_table import load_revision_table

        rev = load_revision_table(self.results_dir, self.panel if self.panel is not None else self.name)
        rev = rev[rev["ablated_top1"].notna()].reset_index(drop=True) if "ablated_top1" in rev else rev.iloc[:0]
        if rev.empty:
            return None, (f"the results folder holds none for {self.name}; the ablate command above, run for this "
                          "panel, adds it")
        n = int((tier.probe_configs.get(self.name) or {}).get("n", 0)) or None
        if n is None:
            return None, "the records do not say their batch size, so no binomial interval can be given"
        rev = binomial_intervals(rev, "baseline_top1", n).assign(n=n)
        lo, hi = difference_interval(rev["baseline_top1"], rev["baseline_top1_lo"], rev["baseline_top1_hi"],
                                     rev["ablated_top1"], rev["ablated_top1_lo"], rev["ablated_top1_hi"])
        return rev.assign(top1_drop_lo=lo, top1_drop_hi=hi), ""
