"""The thin layer a page is written in: `ch = chapter("f2_shapes", globals())` and then the paper's section.

`chapter` checks the page's parameters (its typed `parameters` cell plus the build's folder parameters), finds the
build's folders (`book.build`), loads the tiers the page shows (its `sources` parameter), puts a note at the top
for each absent tier and a folded "Parameters of this page" block with the command that re-runs it, and glues the
paper's own thresholds (so prose about the paper's claim quotes the paper's values, whatever a re-run sets).
The `Chapter` it returns draws and quotes:

    frac = ch.apply(findings.bos_fraction, threshold=bos_threshold)   # a findings function on every tier
    ch.figure(plots.bos_fraction_lines(frac), name="fig-f2-bos-fraction", caption="...")  # numbered, provenance
    ch.glue_frame(shape, {"final-pct": "{:.1f}%"})   # {glue:text}`f2-pub-olmo-final-pct`, `f2-toy-toy-pythia-...`
    ch.glue_list("toy-final", shape, "final_pct", "{:.1f}%", tier="toy")   # "toy-pythia 6.2%, toy-olmo 6.2%"
    ch.paper_vs_data("F2")                            # the paper's numbers beside the authors' data
    frac = ch.apply(findings.bos_fraction, intervals=True)  # + bos_fraction_lo / _hi where a tier has replicates
    ch.glue_bootstrap()                               # {glue:text}`f2-boot`: "200 resamples of the 500 sequences ..."
    ch.seed_spread(findings.bos_fraction, "bos_fraction")   # across the toy seed replicas, when probed

Glue keys are `<prefix>-<key>`, prefix = the page name up to its first "_" ("f2"). Rows of `glue_frame` are keyed
`<tier>-<panel>-<column>` with the tiers shortened to pub / toy / measured, the published models to pythia / olmo /
olmoe, and "_" in column names written "-"; the published models always get their keys ("n/a ..." when absent), so
the prose never breaks.

A page is built with any subset of the tiers (issue 33): when its last code cell has run, every glue key and figure
label its prose (or a book chapter quoting it) references that names an absent tier (`pub`, `toy`, `measured` as a
part of the key) and that no cell produced is glued with "not in this build" wording, or drawn as a placeholder
figure saying so (`Chapter.finish`), so no page needs its own guard. A reference to a present tier, or a misspelt
key, is left alone: the book build still fails on it.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import pandas as pd

from circuitdev.book import display
from circuitdev.book.build import BuildFolders, build_folders
from circuitdev.book.parameters import check_namespace, read_parameters
from circuitdev.book.tiers import TIER_LABELS, TIERS, Tier, Tiers, load_tiers
from circuitdev.paths import REPO_ROOT

TIER_KEYS = {"published": "pub", "toy": "toy", "measured": "measured"}
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
_PAPER_THRESHOLDS = {"class-threshold": "class_threshold", "bos-threshold": "bos_threshold",
                     "induction-threshold": "induction_threshold", "prev-threshold": "prev_token_threshold"}


def _short_panel(panel: str) -> str:
    from circuitdev.sources.published_panels import PUBLISHED_PANELS

    return PUBLISHED_PANELS[panel].short if panel in PUBLISHED_PANELS else panel


@dataclass
class Chapter:
    name: str  # the page (notebooks/<name>.py)
    prefix: str  # glue keys start with "<prefix>-"
    params: dict[str, Any]  # the page's own parameters, checked
    folders: BuildFolders
    tiers: Tiers = field(default_factory=lambda: Tiers({}))
    glued: dict[str, str] = field(default_factory=dict)  # every text glued so far, by full key
    figures: set[str] = field(default_factory=set)  # every figure label shown so far
    # the robustness table of each claim on the present tiers, computed once per page: the verdict under the title
    # and the "How robust" block read the same table (each costs seconds on F5)
    _robust: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------------------------------------ data
    def apply(self, fn: Callable[..., pd.DataFrame], *args, **kwargs) -> pd.DataFrame:
        """`fn(table, ...)` on every present tier, with a `tier` column (see `Tiers.apply`)."""
        return self.tiers.apply(fn, *args, **kwargs)

    def robustness(self, claim: str) -> pd.DataFrame:
        """`findings.robustness_table` of one claim on every present tier (+ tier), computed once per page."""
        from circuitdev.analysis import findings

        if claim not in self._robust:
            self._robust[claim] = self.apply(findings.robustness_table, claims=[claim])
        return self._robust[claim]

    def use_tier(self, tier: Tier) -> Tier:
        """Show one tier only (a model page): its absence becomes the page's note."""
        self.tiers = Tiers({tier.name: tier}, results_dir=self.folders.results_dir)
        self._robust.clear()
        if not tier.present:
            display.note(tier.note, title="No data for this page")
        return tier

    def panel_view(self, name: str):
        """One record panel as the refinement page reads it (`findings.PanelView`): from the first present tier
        holding it, with its default grid (the revisions of its panel file) and the log of `circuitdev refine`;
        None when no tier holds it."""
        from circuitdev.analysis.findings import PanelView
        from circuitdev.errors import ConfigError
        from circuitdev.sources.panels import load_panel
        from circuitdev.sources.refined import refined_log

        for t in self.tiers.present:
            if name in t.panels:
                table = t.table[t.table["panel"] == name].reset_index(drop=True)
                boot = t.boot[t.boot["panel"] == name] if t.boot is not None else None
                try:
                    grid = load_panel(name, resolve_hub=False).revision_names  # the file's: without refined ones
                except ConfigError:
                    grid = list(pd.unique(table["revision"]))
                return PanelView(name, t.name, table, boot if boot is not None and len(boot) else None, grid,
                                 refined_log(self.folders.results_dir, name))
        return None

    def seed_spread(self, fn: Callable[..., pd.DataFrame], column: str, *, fmt: str = "{:g}",
                    **kwargs) -> pd.DataFrame:
        """Across the seed replicas of each toy panel (`<panel>-s<seed>`, probed when the build's `toy_seeds` lists
        more than seed 0), the spread of `column` of `fn(table, **kwargs)` at the final revision: tier, panel,
        seeds, values (each in `fmt`), min, max, spread. Empty when no tier has replicas."""
        from circuitdev.analysis.findings import seed_spread

        out = seed_spread(self.apply(fn, replicas=True, **kwargs), column, fmt=fmt) if any(
            t.replicas is not None for t in self.tiers.present) else pd.DataFrame()
        return out.assign(tier="toy")[["tier", *out.columns]] if len(out) else \
            pd.DataFrame(columns=["tier", "panel", "seeds", "values", "min", "max", "spread"])

    def glue_bootstrap(self) -> None:
        """Glue `<prefix>-boot`: how the record tiers' intervals were made ("200 resamples of the 500 sequences of
        the probe batch"), or that this build has no bootstrap replicates."""
        sizes = sorted({(int(c.get("n_boot", 0)), int(c.get("n", 0))) for t in self.tiers.present
                        if t.boot is not None for c in t.probe_configs.values() if c.get("n_boot")})
        text = "; ".join(f"{b} resamples of the {n} sequences of the probe batch" for b, n in sizes)
        self.glue("boot", text or None, absent="no bootstrap replicates in this build (records probed with n_boot = 0)")

    @property
    def paper(self):
        """The paper's constants: the default ProbeConfig (thresholds, batch, seeds)."""
        from circuitdev.measure.config import ProbeConfig

        return ProbeConfig()

    # ------------------------------------------------------------------------------------------------ glue
    def glue(self, key: str, value: Any, fmt: str | Callable[[Any], str] = "{}", *, absent: str = "n/a") -> None:
        """Glue `value` formatted with `fmt` under `<prefix>-<key>` (`absent` when missing); the text is kept in
        `glued`. Returns None, so that a cell ending with it shows nothing."""
        text = display.format_value(value, fmt, absent=absent)
        full = f"{self.prefix}-{key}"
        self.glued[full] = text
        display.glue_text(full, text, value)

    def glue_frame(self, frame: pd.DataFrame, columns: dict[str, str | Callable[[Any], str]], *,
                   by: Sequence[str] = ("tier", "panel"), absent: str = "n/a") -> None:
        """Glue every cell of `columns` under `<tier>-<panel>-<key>` (by=("tier", "panel"), one row per model) or
        `<tier>-<key>` (by=("tier",), one row per tier). Write each key as it ends the glue keys, with hyphens
        ("final-pct" for column `final_pct`), so that searching the page for a key the prose uses finds the call
        that glues it. Absent rows are glued `absent`: the three tiers, and with panels the published models,
        always get their keys."""
        from circuitdev.sources.published_panels import PUBLISHED_PANELS

        by = tuple(by)
        rows = {} if frame.empty else {k if len(by) > 1 else (k,): r for k, r in zip(
            frame[list(by)].itertuples(index=False, name=None) if len(by) > 1 else frame[by[0]],
            frame.to_dict("records"))}
        expected = [("published", p) for p in PUBLISHED_PANELS] if by == ("tier", "panel") else \
            [(t,) for t in TIERS] if by == ("tier",) else []
        for key in expected:
            rows.setdefault(key, {})
        for key, row in rows.items():
            parts = [TIER_KEYS.get(key[0], key[0]), *(_short_panel(p) for p in key[1:])]
            for key_part, fmt in columns.items():
                column = key_part if key_part in row else key_part.replace("-", "_")
                self.glue("-".join([*parts, key_part.replace("_", "-")]), row.get(column), fmt, absent=absent)

    def glue_tier_sentence(self, key: str, frame: pd.DataFrame, template: str, *, tier: str) -> None:
        """Glue `template.format(**row)` for `frame`'s row of `tier` (its `tier` column); a tier without a row glues
        a short sentence pointing at the page's note on the absent tier (what is missing, the command that adds it:
        commands do not survive inline prose) instead of "n/a of n/a"."""
        rows = frame[frame["tier"] == tier].to_dict("records") if len(frame) else []
        requested = tier in self.tiers.tiers
        self.glue(key, template.format(**rows[0]) if rows else None,
                  absent="none in this build (the note at the top of the page says how to add them)" if requested
                  else "not shown on this page (its sources leave this tier out)")

    def glue_list(self, key: str, frame: pd.DataFrame, column: str, fmt: str | Callable[[Any], str] = "{}", *,
                  tier: str | None = None, sep: str = ", ", missing: str = "n/a",
                  absent: str = "n/a (no data in this tier)") -> None:
        """Glue "panel value, panel value" over the rows of one tier (or all rows): a summary whose length follows
        the data. A row whose value is missing reads `missing`; no rows at all glue `absent`."""
        rows = frame[frame["tier"] == tier] if tier is not None and len(frame) else frame
        text = sep.join(f"{p} {display.format_value(v, fmt, absent=missing)}" for p, v in zip(rows["panel"],
                                                                                            rows[column])) \
            if len(rows) else None
        self.glue(key, text, absent=absent)

    # ------------------------------------------------------------------------------------------------ output
    def figure(self, fig, *, name: str, caption: str, provenance: str | None = None,
               tiers: Sequence[str] | None = None, extra: Sequence[str] = (), width: str = "100%",
               drawn: pd.DataFrame | None = None) -> None:
        """A numbered figure ({numref}`name`) with its caption and the provenance line of the tiers it draws.
        `drawn` (the rows the figure draws, with tier and panel): the line names exactly those tiers and panels, not
        every tier of the page (a figure of the record tiers' norms named the published models it cannot draw)."""
        self.figures.add(name.lower().replace("_", "-"))
        panels = None
        if drawn is not None:
            tiers = [t for t in pd.unique(drawn["tier"]) if tiers is None or t in tiers] if len(drawn) else []
            panels = list(pd.unique(drawn["panel"])) if len(drawn) else []
        display.show_figure(fig, name=name, caption=caption, width=width,
                            provenance=provenance or self.tiers.provenance(tiers=tiers, panels=panels, extra=extra))

    def glue_figure(self, key: str, fig, *, alt: str = "") -> None:
        """Glue a figure under `<prefix>-<key>` for another page's `{glue}` directive (`display.glue_figure`); it
        is not shown on this page."""
        display.glue_figure(f"{self.prefix}-{key}", fig, alt=alt)

    def table(self, df: pd.DataFrame, caption: str = "", **kwargs) -> None:
        display.show_table(df, caption, **kwargs)

    def note(self, text: str, **kwargs) -> None:
        display.note(text, **kwargs)

    def how_robust(self, claim: str, *, rules: Sequence[str] | None = None, caption: str = "",
                   table: pd.DataFrame | None = None, figure: bool = True) -> pd.DataFrame:
        """The "How robust" block of a findings page (issue 21) for one claim of findings.ROBUSTNESS_CLAIMS.

        Contract: the page writes the heading and the prose, e.g. a markdown cell
            ## How robust
            The statement holds for bars {glue:text}`f3-robust-f3-gap-ranges`. It hangs on
            {glue:text}`f3-robust-f3-gap-hangs-on`.
        followed by a code cell `ch.how_robust("F3.gap")`, which evaluates findings.robustness_table(claims=[claim])
        on every present tier, draws plots.robustness_curves (one panel per model, the paper's bar marked; `rules`:
        the rule variants drawn) as figure `fig-<prefix>-robust-<key>` and glues (key = the claim id lower-cased,
        "." -> "-": "F3.gap" -> "f3-gap"):
            <prefix>-robust-<key>-ranges        where the paper's statement holds, every tier ("published: ...")
            <prefix>-robust-<key>-<tier>-ranges per tier (pub / toy / measured; "n/a ..." when absent)
            <prefix>-robust-<key>-hangs-on      what it hangs on at the paper's bar (the published tier, else the
                                                first present one): the deciding head, its value, its margin
            <prefix>-robust-<key>-<tier>-hangs-on  per tier
            <prefix>-robust-<key>-<tier>-<model>-ranges / -hangs-on  per model (pub-olmo, toy-toy-pythia, ...)
        `table`: a robustness table (+ tier) the page already computed (else computed here); figure=False glues only.
        Returns the robustness table (with a tier column) for the page's own tables."""
        from circuitdev.analysis import findings
        from circuitdev.book import plots
        from circuitdev.sources.published_panels import PUBLISHED_PANELS

        key = claim.lower().replace(".", "-")
        names = {p: {"pythia": "Pythia", "olmo": "OLMo", "olmoe": "OLMoE"}.get(info.short, p)
                 for p, info in PUBLISHED_PANELS.items()}
        if table is not None:  # a page's table of several claims: this claim's rows, kept for its verdict too
            self._robust[claim] = table[table["claim"] == claim].reset_index(drop=True) if len(table) else table
        table = self.robustness(claim)
        hangs = self.apply(findings.hangs_on, claim)
        ranges, held, summary = {}, {}, []
        for tier in TIERS:
            rows = table[table["tier"] == tier] if len(table) else table
            ranges[tier] = findings.ranges_sentence(rows, claim, names=names) if len(rows) else None
            h = hangs[hangs["tier"] == tier] if len(hangs) else pd.DataFrame(columns=["panel", "text"])
            held[tier] = "; ".join(f"{names.get(p, p)}: {t}" for p, t in zip(h["panel"], h["text"])) or None
            self.glue(f"robust-{key}-{TIER_KEYS[tier]}-ranges", ranges[tier], absent="n/a (no data in this tier)")
            self.glue(f"robust-{key}-{TIER_KEYS[tier]}-hangs-on", held[tier], absent="n/a (no data in this tier)")
            panels = dict.fromkeys([*(PUBLISHED_PANELS if tier == "published" else []), *rows.get("panel", [])])
            for p in panels:
                one = rows[rows["panel"] == p] if len(rows) else rows
                where = findings.ranges_sentence(one, claim, names={p: ""}) if len(one) else None
                why = "; ".join(h.loc[h["panel"] == p, "text"]) if len(h) else None
                self.glue(f"robust-{key}-{TIER_KEYS[tier]}-{_short_panel(p)}-ranges", where)
                self.glue(f"robust-{key}-{TIER_KEYS[tier]}-{_short_panel(p)}-hangs-on", why)
                if where or why:
                    summary.append({"evidence": TIER_LABELS[tier].split(" (")[0], "model": names.get(p, p),
                                    "holds for bars": where or "—", "at the paper's bar it hangs on": why or "—"})
        self.glue(f"robust-{key}-ranges", "; ".join(f"{TIER_LABELS[t].split(' (')[0]}: {r}" for t, r in
                                                   ranges.items() if r) or None)
        first = next((held[t] for t in TIERS if held[t]), None)
        self.glue(f"robust-{key}-hangs-on", first)
        if figure:  # a findings page: the same sentences as a small table (one row a model), then the curves
            if summary:
                self.table(pd.DataFrame(summary), caption=f"How robust {claim} is, per model: the bars at which the "
                           "paper's statement holds under the paper's rule, and what it hangs on at the paper's bar.")
            self.figure(plots.robustness_curves(table, claim, rules=rules), name=f"fig-{self.prefix}-robust-{key}",
                        caption=caption or f"How robust {claim} is: its value at every bar of the grid, one panel "
                        "per model; filled markers where the paper's statement holds, hollow where it fails, triangles "
                        "where the value is a bound (an event already holds at the first probed revision or is never "
                        "reached); the dotted line is the paper's bar.")
        return table

    def verdict(self, claim: str, *, show: bool = True) -> pd.DataFrame:
        """The verdict of one claim of findings.ROBUSTNESS_CLAIMS on every present tier (issue 29), stated right
        under a findings page's title: one short line per model, its verdict folded over the claim's items and the
        reason that decided it (`findings.claim_verdicts`, with F5's permutation test where the claim has one).
        Glues the verdicts without their reasons, for a summary table: `<prefix>-verdict-<key>-<tier>-<model>` (key
        as in `how_robust`: "F3.gap" -> "f3-gap"; the published models always get theirs when that tier is present, "no data" when one lacks a row)
        and `<prefix>-verdict-<key>-<tier>` (every model of a present tier in one line, "does not apply" when it has
        no row for the claim). show=False glues only. Returns the verdicts (+ tier)."""
        from circuitdev.analysis.findings.claim import ALL  # the row about every model at once: in the table only
        from circuitdev.sources.published_panels import PUBLISHED_PANELS

        from circuitdev.analysis import findings

        key = claim.lower().replace(".", "-")
        robust = self.robustness(claim)
        verdicts = self.apply(findings.table_verdicts, [claim], per_tier=lambda t: {
            "robustness": robust[robust["tier"] == t.name].drop(columns="tier") if len(robust) else robust})
        lines = []
        for tier in TIERS:
            rows = verdicts[verdicts["tier"] == tier] if len(verdicts) else verdicts
            present = tier in self.tiers.tiers and self.tiers.tiers[tier].present
            said = {}
            for panel in dict.fromkeys([*(PUBLISHED_PANELS if tier == "published" else []), *rows.get("panel", [])]):
                cell = rows[rows["panel"] == panel] if len(rows) else rows
                said[panel] = _verdict_line(cell) if len(cell) else None
                if present:  # an absent tier's keys read "not in this build" (`finish`)
                    self.glue(f"verdict-{key}-{TIER_KEYS[tier]}-{_short_panel(panel)}",
                              said[panel][0] if said[panel] else None, absent="no data")
            named = [(_MODEL_NAMES.get(_short_panel(p), p), t) for p, t in said.items() if t and p != ALL]
            if present:
                self.glue(f"verdict-{key}-{TIER_KEYS[tier]}", "; ".join(f"{n}: {v}" for n, (v, _) in named) or None,
                          absent="does not apply")
            lines += [f"- **{n}** ({TIER_LABELS[tier].split(' (')[0]}): **{v.rstrip('*')}**"
                      f"{' (a bound decides it)' if v.endswith('*') else ''} — {r}" for n, (v, r) in named]
        if show:
            display.note("\n".join(lines) if lines else "No tier of this build holds the data for this claim: "
                         "untestable here.", kind="important", title=f"Verdict on {claim} (what the data support)")
        return verdicts

    def claimed(self, claim_id: str) -> pd.DataFrame:
        """The paper's values of one claim of data/claims.yaml (a series expands into rows)."""
        from circuitdev.analysis.claims import claim_values

        return claim_values(claim_id)

    def paper_vs_data(self, finding: str) -> None:
        """The audit rows of one finding for the published tier: the paper's value beside the value the authors' own
        files give, as a table (or a note when that tier is absent). Glues `<prefix>-claims-match` / `-total`."""
        from circuitdev.analysis.audit import run_audit
        from circuitdev.analysis.quantities import load_claims

        pub = self.tiers.get("published")
        if pub is None:
            self.note("The comparison needs the published tier (see the note at the top of the page).")
            self.glue("claims-match", None)
            self.glue("claims-total", None)
            return
        result = run_audit(pub.table, claims=[c for c in load_claims() if c.finding == finding],
                           published=pub.published)
        out = pd.concat([result.table, result.unverified.assign(status="unverified")], ignore_index=True)
        out = out[["id", "paper_value", "data_value", "status", "reason"]]
        self.glue("claims-match", int((out["status"] == "match").sum()))
        self.glue("claims-total", len(out))
        self.table(out, caption=f"{finding} claims: the paper's value and the value in the authors' files.")


    # ------------------------------------------------------------------------------------------------ tiers absent
    def absent_tiers(self) -> list[str]:
        """The tiers this page cannot show in this build: requested but without data, or not requested at all."""
        return [t for t in TIERS if t not in self.tiers.tiers or not self.tiers.tiers[t].present]

    def finish(self, references: "PageReferences") -> None:
        """Glue "not in this build" for each referenced glue key of an absent tier that no cell glued, and draw a
        placeholder figure for each referenced figure label of an absent tier that no cell drew (issue 33). Run by
        the hook `chapter` installs after the page's last code cell; idempotent."""
        absent = self.absent_tiers()
        for key in sorted(references.glue_keys - set(self.glued)):
            tier = tier_named_in(key, absent)
            if tier is not None:
                self.glued[key] = text = not_in_build(tier)
                display.glue_text(key, text)
        for label in sorted(references.figure_labels - self.figures):
            tier = tier_named_in(label, absent)
            if tier is not None:
                self.figure(_placeholder_figure(tier), name=label, caption=f"Not in this build: {not_in_build(tier)}.",
                            provenance=f"Source: no data · code {_code_commit()}")


NOT_IN_BUILD = "not in this build (no {label} data: the note at the top of the page says how to add it)"
_TIER_PARTS = {"published": ("pub", "published"), "toy": ("toy",), "measured": ("measured",)}
_GLUE_ROLE = re.compile(r"\{glue(?::[a-z]+)?\}`(?:(?:[^`:]*?)(?P<page>[\w.-]+)\.ipynb::)?(?P<key>[^`:]+)(?::[^`]*)?`")
_NUMREF_ROLE = re.compile(r"\{numref\}`(?:[^`<]*<)?(?P<label>[^`>]+)>?`")


def not_in_build(tier: str) -> str:
    """The words a glue key or figure of an absent tier reads in this build."""
    return NOT_IN_BUILD.format(label=TIER_LABELS[tier])


def tier_named_in(key: str, tiers: Sequence[str]) -> str | None:
    """The first of `tiers` that `key` names as one of its hyphen-separated parts ("f1-pub-all-where" -> published;
    "fig-rob-map-published" -> published), else None."""
    parts = set(key.lower().split("-"))
    return next((t for t in tiers if parts & set(_TIER_PARTS[t])), None)


@dataclass(frozen=True)
class PageReferences:
    """What a page's prose references: glue keys (its own markdown cells and book chapters quoting the page),
    figure labels ({numref}), and the source of its last code cell (when the hook runs)."""

    glue_keys: set[str]
    figure_labels: set[str]
    last_code: str | None


def page_references(name: str, *, source: Any = None, book_dir: Any = None) -> PageReferences:
    """Read the references of page `name` from its jupytext source (default notebooks/<name>.py) and the book's
    chapters (default book/*.md: `{glue:text}`_generated/<name>.ipynb::key``)."""
    from pathlib import Path

    import jupytext

    source = Path(source) if source is not None else NOTEBOOKS_DIR / f"{name}.py"
    book_dir = Path(book_dir) if book_dir is not None else REPO_ROOT / "book"
    keys, labels, last = set(), set(), None
    if source.is_file():
        for cell in jupytext.read(source).cells:
            if cell.cell_type == "markdown":
                keys |= {m["key"] for m in _GLUE_ROLE.finditer(cell.source) if not m["page"]}
                labels |= {m["label"].strip() for m in _NUMREF_ROLE.finditer(cell.source)}
            elif cell.cell_type == "code" and cell.source.strip():
                last = cell.source.strip()
    for md in sorted(book_dir.glob("*.md")) if book_dir.is_dir() else []:
        keys |= {m["key"] for m in _GLUE_ROLE.finditer(md.read_text(encoding="utf-8")) if m["page"] == name}
    return PageReferences(keys, labels, last)


def _finish_after_last_cell(ch: Chapter) -> None:
    """Run `ch.finish` once the kernel has run the page's last code cell (an IPython post_run_cell hook); nothing
    outside a kernel or when the page's source cannot be found."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with the kernel
        return
    shell = get_ipython()
    references = page_references(ch.name)
    if shell is None or references.last_code is None:
        return

    def hook(result) -> None:
        if (getattr(result.info, "raw_cell", None) or "").strip() == references.last_code:
            shell.events.unregister("post_run_cell", hook)
            if result.error_in_exec is None:
                ch.finish(references)

    shell.events.register("post_run_cell", hook)


def _placeholder_figure(tier: str):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 1.0))
    ax.axis("off")
    ax.text(0.5, 0.5, f"Not in this build: no {TIER_LABELS[tier]} data", ha="center", va="center", fontsize=11,
            color="#555555")
    return fig


def _code_commit() -> str:
    from circuitdev.book.provenance import code_commit

    return code_commit()


def _verdict_line(cell: pd.DataFrame) -> tuple[str, str]:
    """One model's verdict on a claim as (verdict, reason): the verdict when the claim has one item, else the
    verdicts folded over the items, weakest first ("3 fragile, 5 supported"); "*" where a bound decides one (the
    value at the paper's bar is censored). The reason is the weakest item's (named when there are several)."""
    star = "*" if cell["bound"].astype(bool).any() else ""
    counts = cell["verdict"].value_counts()
    weakest = cell.iloc[int(cell["verdict"].map(_WEAKEST_FIRST.index).to_numpy().argmin())]
    if len(cell) == 1:
        return f"{weakest['verdict']}{star}", str(weakest["reason"])
    head = f"{weakest['verdict']} (all {len(cell)} items)" if len(counts) == 1 else \
        ", ".join(f"{counts[v]} {v}" for v in _WEAKEST_FIRST if v in counts)
    return head + star, f"weakest, {weakest['item']}: {weakest['reason']}"


_WEAKEST_FIRST = ("not supported", "untestable", "fragile", "supported")  # how a summary orders the verdicts
_MODEL_NAMES = {"pythia": "Pythia", "olmo": "OLMo", "olmoe": "OLMoE"}  # the published models as prose names them


def drawn_models(frame: pd.DataFrame) -> str:
    """The models a figure draws, for its caption, from its rows (tier, panel): "toy-tiny (toy panel) and
    tiny-olmoe (measured)"; "no model" when there are none. Computed, so a caption never names a model it does
    not draw."""
    if frame is None or not len(frame):
        return "no model"
    pairs = list(dict.fromkeys(zip(frame["tier"], frame["panel"])))
    words = [f"{panel} ({TIER_LABELS.get(tier, tier).split(' (')[0]})" for tier, panel in pairs]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def value_of(frame: pd.DataFrame, column: str, **where: Any) -> Any:
    """The value of `column` in the first row matching every `where` (column=value); None when none matches."""
    rows = frame
    for key, wanted in where.items():
        if key not in rows.columns:
            return None
        rows = rows[rows[key] == wanted]
    return rows[column].iloc[0] if len(rows) else None


def chapter(name: str, namespace: dict[str, Any], *, tiers: Sequence[str] | None = None,
            prefix: str | None = None, what: str = "this chapter") -> Chapter:
    """Open a page: check its parameters, find the build's folders, show the parameters block, load the tiers it
    shows (`tiers`, default: the page's `sources` parameter, else none) with a note for each absent one."""
    own, build = check_namespace(namespace)
    display.setup()
    ch = Chapter(name=name, prefix=prefix or name.split("_")[0], params=own, folders=build_folders(build))
    _parameters_block(ch)
    for key, field_name in _PAPER_THRESHOLDS.items():
        ch.glue(f"paper-{key}", getattr(ch.paper, field_name), "{:g}×")
    _finish_after_last_cell(ch)
    sources = tiers if tiers is not None else own.get("sources", ())
    if sources:
        ch.tiers = load_tiers(list(sources), published_dir=ch.folders.published_dir,
                              results_dir=ch.folders.results_dir, panels=ch.folders.panels)
        # one line: the tiers shown, the missing ones with how to add them folded under it
        display.tier_line([TIER_LABELS[t.name] for t in ch.tiers.present],
                          {f"No {TIER_LABELS[t.name]} data in {what}": t.note for t in ch.tiers if not t.present},
                          what=what)
        for t in ch.tiers.present:
            if t.note:
                display.note(t.note, kind="warning", title=f"Part of the {TIER_LABELS[t.name]} data is missing")
    return ch


def rerun_command(name: str, changed: dict[str, Any]) -> str:
    """The command line that re-runs page `name` with the parameters in `changed`."""
    from circuitdev.book.execute import format_value_for_cli

    args = "".join(f" -p {k} {format_value_for_cli(v)}" for k, v in changed.items())
    return f"circuitdev notebook run {name}{args}"


def parameter_text(value: Any) -> str:
    """A parameter's value in the parameters table: "not set" for None (not a bare `None`), else the Python literal
    as code with its long decimals by the tables' rule (`[0.3333333333333333]` -> `[0.333]`; the re-run command
    keeps the exact value)."""
    return "not set" if value is None else f"`{display.round_long_decimals(repr(value))}`"


def _default_text(doc) -> str:
    """A parameter's default as the table shows it: `parameter_text` of its value, or as written where the default
    is not a literal (its value reads as None)."""
    literal = doc.default is not None or doc.default_text == "None"
    return parameter_text(doc.default) if literal else f"`{doc.default_text}`"


def _parameters_block(ch: Chapter) -> None:
    """A folded block listing the page's parameters (value, default, meaning) and the command that re-runs it."""
    source = NOTEBOOKS_DIR / f"{ch.name}.py"
    docs = {d.name: d for d in read_parameters(source)} if source.is_file() else {}
    changed = {k: v for k, v in ch.params.items() if k in docs and v != docs[k].default}
    rows = []
    for key, value in ch.params.items():
        doc = docs.get(key)
        default = "" if doc is None or key not in changed else f" (default {_default_text(doc)})"
        rows.append((key, f"{parameter_text(value)}{default}", doc.comment if doc else ""))
    if not rows:
        return
    table = "| parameter | value | meaning |\n|---|---|---|\n" + "\n".join(
        f"| `{k}` | {v} | {c.replace('|', '/')} |" for k, v, c in rows)
    command = rerun_command(ch.name, changed or {rows[0][0]: ch.params[rows[0][0]]})
    how = ("This page ran with these values. Re-run it with others from the repository (any `-p NAME VALUE`; "
           f"see {{doc}}`../rerun`):\n\n```bash\n{command}\n```")
    md = f"````{{admonition}} Parameters of this page\n:class: dropdown\n{table}\n\n{how}\n````\n"
    html_rows = "".join(f"<tr><td><code>{html.escape(k)}</code></td><td>{html.escape(v.replace('`', ''))}</td>"
                        f"<td>{html.escape(c)}</td></tr>" for k, v, c in rows)
    display.display_bundle(md, f"<details><summary>Parameters of this page</summary><table>{html_rows}</table>"
                               f"<pre>{html.escape(command)}</pre></details>")


__all__ = ["Chapter", "chapter", "drawn_models", "parameter_text", "rerun_command", "value_of", "TIERS",
           "PageReferences", "page_references", "not_in_build", "tier_named_in"]
