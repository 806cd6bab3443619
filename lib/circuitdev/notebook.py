"""What the book's notebooks share: parameter checks, the three tiers of data, provenance, glue, notes and figures.

A notebook (notebooks/*.py, executed by papermill) is a few calls into this module and into `findings` / `plots`:

    from circuitdev import notebook as nb
    _before = set(globals())                 # hidden first cell
    panel: str = "toy-pythia"                # the `parameters` cell: typed assignments, one comment each
    nb.check_notebook_parameters(globals(), _before)   # hidden: unknown / ill-typed parameters fail here
    tiers = nb.load_tiers(sources, published_dir=..., results_dir=..., panels=...)

Tiers (the three kinds of evidence, DESIGN.md): "published" (the authors' per-revision files), "toy" (toy-panel
records probed here), "measured" (records of real models probed here). A tier that has no data is never an error:
`Tier.note` says why and how to add it, and `absent_notes` renders that as a visible note in the book.

Which helper to use:
- numbers that prose quotes: `Glue(prefix)(key, value, fmt)` -- pasted with {glue:text}`key` in the same notebook,
  {glue:text}`_generated/NAME.ipynb::key:s` from a book page (always end a cross-page key with a format, e.g. `:s`);
- figures: `show_figure(fig, name=..., caption=..., provenance=...)` -- numbered, captioned, cross-referencable with
  {numref}`name`, provenance line in the caption (works when one notebook is executed once per panel);
- notes: `note(text)` / `absent_notes(tiers)`; tables: `show_table(df, caption)`.
"""

from __future__ import annotations

import base64
import html
import io
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Sequence

import numpy as np
import pandas as pd

from circuitdev.errors import CircuitdevError, ConfigError, DataError

TierName = Literal["published", "toy", "measured"]
# Parameter types for the notebooks' `parameters` cells (papermill only parses annotations made of names and [],
# so the allowed values live in these aliases and are spelled out in each parameter's comment).
Source = TierName
Rule = Literal["per-class", "best-class"]
ModelSource = Literal["auto", "records", "published"]
AblationMode = Literal["zero", "mean"]
TIERS: tuple[str, ...] = ("published", "toy", "measured")
TIER_LABELS = {"published": "published (authors' files)", "toy": "toy panel (trained here)",
               "measured": "measured (real models probed here)"}
# IPython puts these in every namespace; they are never parameters.
_IPYTHON_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "open"}


# ------------------------------------------------------------------------------------------------------ parameters


def _type_name(tp: Any) -> str:
    if tp is type(None) or tp is None:
        return "None"
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(tp))
        return f"{origin.__name__}[{args}]"
    return getattr(tp, "__name__", str(tp))


def _allowed(tp: Any) -> list[Any]:
    """The allowed values of a Literal (also inside `X | None`); [] when any value of the type is fine."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        return list(typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return [v for a in typing.get_args(tp) for v in _allowed(a)]
    return []


def _coerce(value: Any, tp: Any) -> tuple[bool, Any]:
    """(ok, value) for `value` checked against annotation `tp`. int -> float and tuple -> list are accepted."""
    if tp is Any:
        return True, value
    if tp is None or tp is type(None):
        return value is None, value
    origin = typing.get_origin(tp)
    if origin is Literal:
        return (value in typing.get_args(tp) and not isinstance(value, bool)
                or any(value is a for a in typing.get_args(tp))), value
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            ok, out = _coerce(value, arg)
            if ok:
                return True, out
        return False, value
    if origin in (list, tuple, Sequence):
        if not isinstance(value, (list, tuple)):
            return False, value
        (item,) = typing.get_args(tp)[:1] or (Any,)
        items = [_coerce(v, item) for v in value]
        return all(ok for ok, _ in items), [v for _, v in items]
    if origin is dict:
        key_t, val_t = typing.get_args(tp) or (Any, Any)
        if not isinstance(value, dict):
            return False, value
        pairs = [(_coerce(k, key_t), _coerce(v, val_t)) for k, v in value.items()]
        return all(k[0] and v[0] for k, v in pairs), {k[1]: v[1] for k, v in pairs}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False, value
        return True, float(value)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if tp is list:
        return isinstance(value, (list, tuple)), list(value) if isinstance(value, (list, tuple)) else value
    if isinstance(tp, type):
        return isinstance(value, tp), value
    raise ConfigError(f"cannot check parameters annotated {tp!r}; use str, int, float, bool, list[...], "
                      "dict[...], Literal[...] or X | None")


def check_parameters(given: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """Check notebook parameters against their declared types; return them normalised (int -> float, tuple -> list).

    `spec` maps each parameter to its annotation: a type, `X | None`, `list[str]`, `dict[str, float]` or a
    `Literal[...]` of the allowed values. Raises ConfigError naming the parameter, the expected type, the allowed
    values (for a Literal) and what was given; an unknown name lists the parameters the notebook takes."""
    unknown = sorted(set(given) - set(spec))
    if unknown:
        known = ", ".join(f"{k} ({_type_name(t)})" for k, t in spec.items())
        raise ConfigError(f"unknown notebook parameter(s) {', '.join(map(repr, unknown))}; this notebook takes: "
                          f"{known}. Check the spelling of `-p NAME VALUE` (papermill) or of the Snakefile entry")
    out = {}
    for name, tp in spec.items():
        if name not in given:
            raise ConfigError(f"notebook parameter {name!r} ({_type_name(tp)}) has no value; give it with -p")
        ok, value = _coerce(given[name], tp)
        if not ok:
            allowed = _allowed(tp)
            choices = f"; allowed values: {', '.join(map(repr, allowed))}" if allowed else ""
            raise ConfigError(f"notebook parameter {name!r} must be {_type_name(tp)}{choices}; got {given[name]!r} "
                              f"({type(given[name]).__name__})")
        out[name] = value
    return out


def check_notebook_parameters(namespace: dict[str, Any], before: Iterable[str]) -> None:
    """Validate a notebook's parameters in place: the typed assignments of its `parameters` cell are the spec
    (`namespace["__annotations__"]`), and every name created since `before` (the parameters cell plus papermill's
    injected cell) is a given value. Normalised values are written back into `namespace`."""
    spec = {}
    for name, tp in dict(namespace.get("__annotations__", {})).items():
        if isinstance(tp, str):  # `from __future__ import annotations`, or a quoted annotation
            try:
                tp = eval(tp, dict(namespace))  # noqa: S307 -- the notebook's own annotation, in its own namespace
            except Exception as err:
                raise ConfigError(f"cannot read the type of parameter {name!r} ({tp!r}: {err})") from None
        spec[name] = tp
    skip = set(before) | _IPYTHON_NAMES
    given = {k: v for k, v in namespace.items()
             if k not in skip and not k.startswith("_") and not isinstance(v, types.ModuleType)}
    values = check_parameters(given, spec)
    namespace.update(values)


# ------------------------------------------------------------------------------------------------------ the tiers


@dataclass
class Tier:
    """One kind of evidence. `table` is the developmental table (schema.py), None when the tier is absent."""

    name: str
    table: pd.DataFrame | None = None
    note: str = ""  # why the tier is absent (or what is partially missing), with how to add it
    published: Any = None  # circuitdev.published.PublishedData for the published tier
    configs: dict[str, str] = field(default_factory=dict)  # panel -> probe configuration hash
    probe_configs: dict[str, dict] = field(default_factory=dict)  # panel -> the records' ProbeConfig fields
    commits: set[str] = field(default_factory=set)  # git commits that computed the records

    @property
    def present(self) -> bool:
        return self.table is not None and len(self.table) > 0

    @property
    def panels(self) -> list[str]:
        return list(pd.unique(self.table["panel"])) if self.present else []


@dataclass
class Tiers:
    """The tiers a notebook shows, in the order asked for. `present` skips the absent ones."""

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
              **kwargs) -> pd.DataFrame:
        """`fn(table, *args, **kwargs)` on every present tier (or `tiers`), concatenated with a `tier` column first.

        Use it for any findings function: `tiers.apply(findings.bos_fraction, threshold=30)`."""
        frames = [fn(t.table, *args, **kwargs).assign(tier=t.name) for t in self.present
                  if tiers is None or t.name in tiers]
        frames = [f for f in frames if len(f)]
        if not frames:
            return pd.DataFrame(columns=["tier"])
        out = pd.concat(frames, ignore_index=True)
        return out[["tier", *[c for c in out.columns if c != "tier"]]]

    def provenance(self, *, tiers: Sequence[str] | None = None, panels: Sequence[str] | None = None,
                   revisions: Sequence[str] | None = None, extra: Sequence[str] = ()) -> str:
        """The provenance line of a figure or table drawn from these tiers (see `provenance_line`)."""
        chosen = [t for t in self.present if tiers is None or t.name in tiers]
        return provenance_line(chosen, panels=panels, revisions=revisions, extra=extra)


def resolve_published_dir(published_dir: str | None) -> Path | None:
    """"auto": `$CIRCUITDEV_PUBLISHED`, else ../shared/published next to the repository, when it exists;
    None / "" / "none": no published data; anything else: that folder (it may be missing: the tier is then absent)."""
    from circuitdev.published import default_published_dir

    if published_dir in (None, "", "none", "null"):
        return None
    if published_dir == "auto":
        guess = default_published_dir()
        return guess if guess.is_dir() else None
    return Path(published_dir).expanduser()


def use_data_dir(data_dir: str | None) -> None:
    """Make `circuitdev.panels` look for panel files (toy panels included) in `data_dir`/panels."""
    if data_dir:
        os.environ["CIRCUITDEV_DATA"] = str(Path(data_dir).expanduser().resolve())


def record_panels(results_dir: Path) -> list[str]:
    """Panels with at least one record (a `<revision>.json` sidecar) in `results_dir`, sorted."""
    if not results_dir.is_dir():
        return []
    return sorted(p.name for p in results_dir.iterdir() if p.is_dir() and any(p.glob("*.json")))


def _load_published(published_dir: str | None) -> Tier:
    from circuitdev.published import load_published

    root = resolve_published_dir(published_dir)
    how = ("Build with `make book PUBLISHED_DIR=/path/to/published` (the folder holding per_revision/ and "
           "pr_trajectory/), or fetch the files once online with `circuitdev published fetch`.")
    if root is None:
        return Tier("published", note=f"The authors' published measurements were not given to this build. {how}")
    try:
        data = load_published(root)
    except DataError as err:
        return Tier("published", note=f"The published measurements in `{root}` could not be read: {err}. {how}")
    from circuitdev.config import ProbeConfig

    h = ProbeConfig().config_hash()
    return Tier("published", data.table, published=data, configs={p: f"{h} (the authors' run ≙ paper defaults)"
                                                                    for p in pd.unique(data.table["panel"])})


def _load_records(results_dir: Path, panels: list[str], revisions: Sequence[str] | None
                  ) -> tuple[dict[str, pd.DataFrame], list[str]]:
    from circuitdev.store import load_panel_table

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


def load_tiers(sources: Sequence[str] = TIERS, *, published_dir: str | None = "auto",
               results_dir: str | None = None, panels: Sequence[str] | None = None,
               revisions: Sequence[str] | None = None) -> Tiers:
    """The data of each requested tier. `panels`: the record panels to read (None: every panel with records in
    `results_dir`); a panel goes to the toy tier when its records say `source == "toy"`, else to "measured".
    `revisions` restricts record panels to those revisions. Nothing here raises for absent data."""
    from circuitdev.store import default_results_dir

    bad = [s for s in sources if s not in TIERS]
    if bad:
        raise ConfigError(f"unknown source(s) {bad}; the tiers are {', '.join(TIERS)}")
    root = Path(results_dir).expanduser() if results_dir else default_results_dir()
    out: dict[str, Tier] = {}
    if "published" in sources:
        out["published"] = _load_published(published_dir)
    if "toy" in sources or "measured" in sources:
        names = list(panels) if panels is not None else record_panels(root)
        tables, problems = _load_records(root, names, revisions)
        for tier in ("toy", "measured"):
            if tier not in sources:
                continue
            mine = {p: t for p, t in tables.items() if (t["source"].iloc[0] == "toy") == (tier == "toy")}
            if mine:
                table = pd.concat(mine.values(), ignore_index=True)
                commits = {str(c) for t in mine.values() for c in _record_commits(root, t)}
                out[tier] = Tier(tier, table, note=_partial_note(problems, tier),
                                 configs={p: t.attrs.get("config_hash", "?") for p, t in mine.items()},
                                 probe_configs={p: dict(t.attrs.get("config") or {}) for p, t in mine.items()},
                                 commits=commits)
            else:
                out[tier] = Tier(tier, note=_absent_records_note(tier, root, problems))
    ordered = {s: out[s] for s in sources if s in out}
    return Tiers(ordered, results_dir=root)


def _record_commits(root: Path, table: pd.DataFrame) -> set[str]:
    from circuitdev.store import read_sidecar

    commits = set()
    for panel, revision in table[["panel", "revision"]].drop_duplicates().itertuples(index=False):
        try:
            git = read_sidecar(root, panel, revision).get("git") or {}
        except CircuitdevError:
            continue
        if git.get("commit"):
            commits.add(git["commit"][:8] + ("+dirty" if git.get("dirty") else ""))
    return commits


def _partial_note(problems: list[str], tier: str) -> str:
    return ("Some records could not be used: " + "; ".join(problems)) if problems else ""


def _absent_records_note(tier: str, root: Path, problems: list[str]) -> str:
    extra = (" Records that could not be used: " + "; ".join(problems) + ".") if problems else ""
    if tier == "toy":
        return (f"No toy-panel records in `{root}`. Train and probe the toy panel with `make book` (it runs "
                "`circuitdev toy train` and `circuitdev probe --panel toy-pythia` etc.), then rebuild." + extra)
    return (f"No records of real models in `{root}`: this build probed none (they need the network and, for "
            "speed, a GPU). Add them with `make book SMK_ARGS=\"--config real_panels='[pythia-1b]'\"` or "
            "`circuitdev probe --panel pythia-1b`; see the chapter on re-running the book." + extra)


# ---------------------------------------------------------------------------------------------------- provenance


def code_commit() -> str:
    """The commit of the code running now ("+dirty" when lib/ has uncommitted changes; "uncommitted" before any)."""
    from circuitdev.store import git_state

    git = git_state()
    if not git.get("commit"):
        return "uncommitted"
    return git["commit"][:8] + ("+dirty" if git.get("dirty") else "")


def _tier_clause(t: Tier, panels: Sequence[str] | None, revisions: Sequence[str] | None) -> str | None:
    """"<tier> — p1, p2; <n> revisions each (first…last); config <hash>[; records <commit>]"."""
    chosen = [p for p in t.panels if panels is None or p in panels]
    if not chosen:
        return None
    rows = t.table[t.table["panel"].isin(chosen)]
    if revisions:
        rows = rows[rows["revision"].isin(revisions)]
    revs = rows.drop_duplicates(["panel", "revision"]).sort_values("tokens_b")
    counts = revs.groupby("panel", sort=False).size()
    if len(chosen) == 1 and len(revs):
        n = int(counts.iloc[0])
        span = f"{n} revision{'s' if n != 1 else ''} ({revs['revision'].iloc[0]}…{revs['revision'].iloc[-1]})"
    elif counts.nunique() == 1:
        span = f"{int(counts.iloc[0])} revisions each"
    else:
        span = "revisions: " + ", ".join(f"{p} {n}" for p, n in counts.items())
    configs = sorted({t.configs.get(p, "?") for p in chosen})
    commits = f"; records {', '.join(sorted(t.commits))}" if t.commits else ""
    return f"{t.name} — {', '.join(chosen)}; {span}; config {', '.join(configs)}{commits}"


def provenance_line(tiers: Sequence[Tier], *, panels: Sequence[str] | None = None,
                    revisions: Sequence[str] | None = None, extra: Sequence[str] = ()) -> str:
    """The provenance line of a figure: for each tier its panels, revisions and probe-configuration hash (and the
    commits that computed its records), then the commit of the code that drew it:
    "Source: published — pythia-1b, …; 10 revisions each; config … | toy — … · code 1a2b3c4d". `extra` adds
    clauses for sources that are not tiers (e.g. "paper — claims F6.* of data/claims.yaml")."""
    parts = [c for t in tiers if (c := _tier_clause(t, panels, revisions))] + list(extra)
    return f"Source: {' | '.join(parts) if parts else 'no data'} · code {code_commit()}"


# ---------------------------------------------------------------------------------------------------------- glue


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


class Glue:
    """Glue values for the prose under `<prefix>-<key>` (prefix = the notebook's name, so keys are unique).

    `g("olmo-jump", 62.9, "{:.1f}")` glues the text "62.9" and returns it. A missing value (None / NaN) glues
    `absent` instead, so the prose never breaks when a tier is absent. Paste with {glue:text}`<prefix>-<key>`;
    `g.keys` holds every text glued so far."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.keys: dict[str, str] = {}

    def key(self, key: str) -> str:
        return f"{self.prefix}-{key}"

    def __call__(self, key: str, value: Any, fmt: str | Callable[[Any], str] = "{}", *,
                 absent: str = "n/a") -> None:
        from myst_nb import glue

        if _is_missing(value):
            text = absent
        else:
            text = fmt(value) if callable(fmt) else fmt.format(value)
        full = self.key(key)
        self.keys[full] = text
        glue(full, text, display=False)

    def table(self) -> pd.DataFrame:
        """Every value glued so far (key, text): handy at the end of a notebook to see what the prose can quote."""
        return pd.DataFrame(sorted(self.keys.items()), columns=["key", "text"])


def fmt_tokens(tokens_b: float) -> str:
    """Tokens given in billions -> "6.29B", "2.05M", "3.05T", "0"."""
    if _is_missing(tokens_b):
        return "n/a"
    x = float(tokens_b) * 1e9
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.3g}{unit}"
    return f"{x:.3g}"


def fmt_pct(fraction: float, decimals: int = 1) -> str:
    """0.578125 -> "57.8%"."""
    return "n/a" if _is_missing(fraction) else f"{100 * float(fraction):.{decimals}f}%"


# ------------------------------------------------------------------------------------------ notes, tables, figures


def _display_bundle(markdown: str, html_text: str) -> None:
    """One output the book renders as MyST markdown (nb_mime_priority_overrides puts text/markdown first) and
    Jupyter renders as HTML (it prefers text/html)."""
    from IPython.display import display

    display({"text/markdown": markdown, "text/html": html_text, "text/plain": html.unescape(
        html_text.replace("<br>", "\n"))}, raw=True)


def note(text: str, *, kind: Literal["note", "warning", "important", "tip"] = "note", title: str | None = None
         ) -> None:
    """A visible admonition (MyST markdown inside; backticks become code)."""
    head = f"{{admonition}} {title}\n:class: {kind}" if title else f"{{{kind}}}"
    md = f"````{head}\n{text}\n````\n"
    body = html.escape(text).replace("`", "")
    _display_bundle(md, f'<div style="border-left:4px solid #4a90d9;padding:0.5em 1em;background:#f3f7fc">'
                        f'<b>{html.escape(title or kind.capitalize())}.</b> {body}</div>')


def absent_notes(tiers: Tiers, *, what: str = "this chapter") -> list[str]:
    """A note for every absent tier (and every partially usable one); returns the absent tiers' names."""
    absent = []
    for t in tiers:
        if not t.present:
            absent.append(t.name)
            note(t.note, kind="note", title=f"No {TIER_LABELS[t.name]} data in {what}")
        elif t.note:
            note(t.note, kind="warning", title=f"Part of the {TIER_LABELS[t.name]} data is missing")
    return absent


def open_chapter(prefix: str, sources: Sequence[str], *, data_dir: str | None, published_dir: str | None,
                 results_dir: str | None, panels: Sequence[str] | None, what: str = "this chapter"
                 ) -> tuple[Tiers, "Glue"]:
    """The opening of every multi-tier page (findings chapters, the audit, the appendix index): notebook setup, the
    data folder, the tiers to show (with a visible note for each absent one, naming `what`) and the glue under
    `prefix`."""
    setup()
    use_data_dir(data_dir)
    tiers = load_tiers(sources, published_dir=published_dir, results_dir=results_dir, panels=panels)
    absent_notes(tiers, what=what)
    return tiers, Glue(prefix)


def show_table(df: pd.DataFrame, caption: str = "", *, precision: int = 3, index: bool = False,
               formats: dict[str, str | Callable[[Any], str]] | None = None) -> None:
    """A table with a caption; floats with `precision` decimals unless `formats` gives a column its own format
    ("{:.1%}", a callable, ...). Missing values show as "—"."""
    from IPython.display import display

    styler = df.style.format(precision=precision, thousands=",", na_rep="—")
    if formats:
        styler = styler.format({k: v for k, v in formats.items() if k in df.columns}, na_rep="—")
    if not index:
        styler = styler.hide(axis="index")
    if caption:
        styler = styler.set_caption(caption)
    # long text cells (claims, reasons) wrap instead of pushing the table out of the page
    styler = styler.set_table_styles([
        {"selector": "td", "props": "max-width: 24em; white-space: normal; overflow-wrap: break-word; "
                                    "text-align: left; padding: 2px 8px; vertical-align: top"},
        {"selector": "th", "props": "white-space: nowrap; text-align: left; padding: 2px 8px"},
        {"selector": "caption", "props": "caption-side: top; text-align: left; font-style: italic"}])
    display(styler.set_table_attributes('style="font-size: 85%"'))


def figure_png(fig, dpi: int = 110) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


def show_figure(fig, *, name: str, caption: str, provenance: str, width: str = "100%", close: bool = True) -> None:
    """Show a figure as a numbered MyST figure: `name` is its label ({numref}`name`), `caption` one sentence or
    two (MyST markdown), the provenance line in smaller print under it. The image is embedded (no side files)."""
    import matplotlib.pyplot as plt

    data = base64.b64encode(figure_png(fig)).decode()
    if close:
        plt.close(fig)
    label = name.lower().replace("_", "-")
    md = (f"```{{figure}} data:image/png;base64,{data}\n:name: {label}\n:width: {width}\n:alt: {caption}\n\n"
          f"{caption}\n<br><small>{provenance}</small>\n```\n")
    html_text = (f'<figure><img src="data:image/png;base64,{data}" style="max-width:{width}"/>'
                 f"<figcaption>{html.escape(caption)}<br><small>{html.escape(provenance)}</small></figcaption>"
                 "</figure>")
    _display_bundle(md, html_text)


# ------------------------------------------------------------------------------------------ data beyond the table


def record_nulls(tiers: Tiers) -> pd.DataFrame:
    """F6 null-selectivity statistics of every record panel, from the records' sidecars (probe with n_nulls > 0).

    Columns: tier, panel, revision, tokens_b, n_nulls, null_p99, null_max, real_max, k_above (findings.NULL_COLUMNS)."""
    from circuitdev.store import read_sidecar

    rows = []
    for t in tiers.present:
        if t.name == "published":
            continue
        for panel, revision, tokens_b in t.table[["panel", "revision", "tokens_b"]].drop_duplicates().itertuples(
                index=False):
            try:
                null = (read_sidecar(tiers.results_dir, panel, revision).get("probe_attrs") or {}).get("null")
            except CircuitdevError:
                continue
            if null:
                rows.append({"tier": t.name, "panel": panel, "revision": revision, "tokens_b": tokens_b,
                             "n_nulls": null.get("n_nulls"), "null_p99": null["null_p99"],
                             "null_max": null["null_max"], "real_max": null["real_max"],
                             "k_above": null["k_above_null_p99"]})
    return pd.DataFrame(rows, columns=["tier", "panel", "revision", "tokens_b", "n_nulls", "null_p99", "null_max",
                                       "real_max", "k_above"])


def paper_vs_data(tiers: Tiers, findings: Sequence[str]) -> pd.DataFrame | None:
    """The audit rows of `findings` (e.g. ["F2"]) for the published tier: the paper's value beside the value the
    authors' own files give. None when the published tier is absent."""
    from circuitdev.audit import load_claims, run_audit

    pub = tiers.get("published")
    if pub is None:
        return None
    claims = [c for c in load_claims() if c.finding in findings]
    result = run_audit(pub.table, claims=claims, published=pub.published)
    verified = result.table.assign(status=result.table["status"])
    unverified = result.unverified.assign(status="unverified")
    out = pd.concat([verified, unverified], ignore_index=True)
    return out[["id", "paper_value", "data_value", "status", "reason"]]


AblationCondition = Literal["baseline", "screen", "matched_random", "upper_bound", "other"]


def published_ablation(tier: Tier | None, panel: str) -> pd.DataFrame:
    """The authors' final-checkpoint induction ablations of one model, tidy: condition (baseline / screen /
    matched_random / upper_bound / other), label, n_ablated, heads, acc_top1, loss. Empty when absent."""
    cols = ["condition", "label", "seed", "n_ablated", "heads", "acc_top1", "loss"]
    if tier is None or tier.published is None or tier.published.ablation.empty:
        return pd.DataFrame(columns=cols)
    ab = tier.published.ablation
    ab = ab[(ab["model"] == panel) & (ab["task"] == "induction")]
    if ab.empty:
        return pd.DataFrame(columns=cols)
    wide = ab.pivot_table(index=["condition", "n_ablated", "heads"], columns="metric", values="value").reset_index()

    def kind(label: str) -> str:
        if label == "baseline":
            return "baseline"
        if "induction_screen" in label:
            return "screen"
        if "matched_random" in label:
            return "matched_random"
        if "upper bound" in label:
            return "upper_bound"
        return "other"

    wide["label"] = wide["condition"]
    wide["condition"] = wide["label"].map(kind)
    wide["seed"] = np.where(wide["condition"] == "matched_random", 123, np.nan)
    return wide[cols]


def final_circuit_spec(table: pd.DataFrame, *, threshold: float = 50.0) -> dict[int, list[int]]:
    """{layer: [heads]} of the induction screen (sel_induction >= threshold) at the table's final revision."""
    from circuitdev import findings

    circuit = findings.final_circuit(table, threshold=threshold)
    spec: dict[int, list[int]] = {}
    for layer, head in zip(circuit["layer"], circuit["head"]):
        spec.setdefault(int(layer), []).append(int(head))
    return spec


def run_final_ablation(panel: str, table: pd.DataFrame, *, config: dict | None = None, threshold: float = 50.0,
                       seeds: Sequence[int] = (123,), mode: str = "zero", batch_size: int = 8,
                       device: str | None = None) -> tuple[pd.DataFrame | None, str]:
    """Group ablation of the final-revision induction screen with matched-random (one per seed) and upper-bound
    controls, on the records' own batch (`config`: their ProbeConfig fields, Tier.probe_configs). Loads the final checkpoint: cheap for toy and folder
    panels, a GPU job for the 1B models. Returns (table, "") or (None, why it could not run)."""
    from circuitdev.panels import load_panel

    spec = final_circuit_spec(table, threshold=threshold)
    if not spec:
        return None, (f"no head reaches induction selectivity ≥ {threshold:g}× at the final revision, so there is "
                      "no circuit to ablate")
    from circuitdev.ablation import ablation_suite  # torch and nnsight: imported only when there is work
    from circuitdev.errors import ModelUnavailableError
    from circuitdev.loading import free_memory, load_revision
    from circuitdev.probe import batch_for

    try:
        pan = load_panel(panel)
    except ConfigError as err:
        return None, f"the panel file of `{panel}` is not available here ({err})"
    final = table.sort_values("tokens_b")["revision"].iloc[-1]
    config = pan.probe_config(**{k: v for k, v in (config or {}).items() if k not in ("device", "batch_size")})
    config = config.replace(batch_size=batch_size)
    try:
        model = load_revision(pan, final, dtype=config.dtype, device=None if device in (None, "auto") else device,
                              progress=False)
    except (ModelUnavailableError, ConfigError) as err:
        return None, f"the final checkpoint could not be loaded here: {err}"
    try:
        out = ablation_suite(model, batch_for(config), spec, random_seeds=tuple(seeds), mode=mode,
                             batch_size=batch_size)
    finally:
        del model
        free_memory()
    out["heads"] = [" ".join(f"L{l}H{h}" for l, hs in sorted(s.items()) for h in hs) for s in out["spec"]]
    out["label"] = out["condition"]
    out.loc[out["condition"] == "screen", "label"] = f"induction screen ≥{threshold:g}×"
    return out[["condition", "label", "seed", "n_ablated", "heads", "acc_top1", "acc_top5", "loss",
                "mean_logit_B"]], ""


def setup(context: str = "notebook") -> None:
    """Plot style and pandas display options shared by every notebook."""
    import warnings

    import matplotlib
    import seaborn as sns

    warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm in a kernel without ipywidgets

    matplotlib.rcParams.update({"figure.dpi": 110, "savefig.dpi": 110, "axes.titleweight": "bold"})
    sns.set_theme(style="whitegrid", context=context)
    pd.set_option("display.max_columns", 30)
    pd.set_option("display.width", 160)


__all__ = ["TIERS", "Tier", "Tiers", "Glue", "check_parameters", "check_notebook_parameters", "load_tiers",
           "provenance_line", "note", "absent_notes", "show_table", "show_figure", "fmt_tokens", "fmt_pct",
           "record_nulls", "paper_vs_data", "published_ablation", "run_final_ablation", "final_circuit_spec",
           "resolve_published_dir", "use_data_dir", "record_panels", "setup", "code_commit"]


# ------------------------------------------------------------------------------------------------ one model panel


def screen_settings(tier: Tier, panel: str) -> str:
    """One sentence on the context length and baseline the screen used, with the induction ceiling it implies."""
    from circuitdev.screen import induction_ceiling

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
            f"its attention on B scores at most {ceiling:.0f}× (`circuitdev.screen.induction_ceiling`)." + first_note)


def panel_name(panel: str) -> str:
    """The name of a panel given as a name or a panel file (a results sub-folder name is returned as is)."""
    from circuitdev.panels import load_panel

    try:
        return load_panel(panel, resolve_hub=False).name
    except ConfigError:
        return Path(panel).stem if panel.endswith((".yaml", ".yml")) else panel


def model_tier(panel: str, *, source: Literal["auto", "records", "published"] = "auto",
               published_dir: str | None = "auto", results_dir: str | None = None,
               revisions: Sequence[str] | None = None, compute_missing: bool = False,
               batch_size: int = 8, device: str | None = None) -> Tier:
    """The data of one panel for a per-model page: its probe records ("records"), the authors' files for a
    published model ("published"), or the first of the two that exists ("auto"). `compute_missing=True` probes
    the revisions that have no record first (loads each checkpoint: a GPU job for the 1B models). Never raises
    for absent data: an absent tier carries a note saying how to add it."""
    from circuitdev.published import PUBLISHED_PANELS

    name = panel_name(panel)
    if source in ("auto", "records"):
        problem = _compute_missing(panel, results_dir, revisions, batch_size, device) if compute_missing else ""
        tiers = load_tiers(["toy", "measured"], results_dir=results_dir, panels=[name], revisions=revisions)
        for t in tiers.present:
            return t
        if source == "records" or name not in PUBLISHED_PANELS:
            return Tier("measured", note=f"No probe records of `{name}` in `{tiers.results_dir}`. Probe them with "
                                         f"`circuitdev probe --panel {name}`, or re-run this notebook with "
                                         f"`-p compute_missing true`. {problem}".strip())
    if name not in PUBLISHED_PANELS:
        return Tier("published", note=f"`{name}` is not one of the published models "
                                      f"({', '.join(PUBLISHED_PANELS)}); use source='records'.")
    tier = _load_published(published_dir)
    if tier.present:
        table = tier.table[tier.table["panel"] == name]
        if revisions:
            table = table[table["revision"].isin(revisions)]
        tier.table = table.reset_index(drop=True)
    return tier


def _compute_missing(panel: str, results_dir: str | None, revisions: Sequence[str] | None, batch_size: int,
                     device: str | None) -> str:
    """Probe the panel's revisions that have no complete record; "" or why it failed."""
    from circuitdev.panels import load_panel
    from circuitdev.store import probe_panel

    try:
        pan = load_panel(panel)
        probe_panel(pan, revisions=list(revisions) if revisions else None, results_dir=results_dir,
                    config=pan.probe_config(batch_size=batch_size),
                    device=None if device in (None, "auto") else device, progress=False)
    except (CircuitdevError, OSError) as err:
        return f"Computing the missing records failed: {err}"
    return ""


# ------------------------------------------------------------------------------------------------ prose helpers


def per_panel(df: pd.DataFrame, value: str, fmt: str | Callable[[Any], str] = "{}", *, tier: str | None = None,
              sep: str = ", ") -> str | None:
    """"panel value, panel value" for the rows of `df` (one per panel; optionally of one tier) -- a glue-ready
    summary whose length follows the data. None when there are no rows."""
    rows = df if tier is None else df[df["tier"] == tier]
    if rows.empty:
        return None
    f = fmt if callable(fmt) else fmt.format
    return sep.join(f"{p} {f(v)}" for p, v in zip(rows["panel"], rows[value]))


def value_at(df: pd.DataFrame, column: str, **where) -> Any:
    """The single value of `column` in the row matching every `where` (column=value); None if no row matches."""
    rows = df
    for key, wanted in where.items():
        if key not in rows.columns:
            return None
        rows = rows[rows[key] == wanted]
    return rows[column].iloc[0] if len(rows) else None


def claimed(claim_id: str) -> pd.DataFrame:
    """The paper's values of one claim of data/claims.yaml (a series expands into rows): id, the claim's
    parameters as columns, paper. Use it to draw or quote the claimed value beside ours."""
    from circuitdev.audit import load_claims

    rows = [{"id": c.id, **c.params, "paper": c.paper} for c in load_claims()
            if c.id == claim_id or c.id.startswith(claim_id + "@")]
    if not rows:
        raise ConfigError(f"no claim {claim_id!r} in data/claims.yaml")
    return pd.DataFrame(rows)


def paper_noise_floor() -> pd.DataFrame:
    """The paper's claimed F6 values (Pythia-1B null p99, null max, real max at its five null-calibration
    checkpoints) in the shape of `record_nulls`, tier "paper", tokens from the revision's step."""
    from circuitdev.published import parse_revision, tokens_b_for_step

    frames = []
    for claim_id, column in (("F6.null_p99", "null_p99"), ("F6.null_max", "null_max"), ("F6.real_max", "real_max")):
        c = claimed(claim_id)
        frames.append(c[["panel", "revision", "paper"]].rename(columns={"paper": column}).set_index(
            ["panel", "revision"]))
    out = pd.concat(frames, axis=1).reset_index()
    out["tokens_b"] = [tokens_b_for_step(p, parse_revision(r)[0]) for p, r in zip(out["panel"], out["revision"])]
    out["tier"] = "paper"
    k = claimed("F6.k_above")[["panel", "revision", "paper"]].rename(columns={"paper": "k_above"})
    return out.merge(k, on=["panel", "revision"], how="left")[
        ["tier", "panel", "revision", "tokens_b", "null_p99", "null_max", "real_max", "k_above"]]


def milestone_text(name: str) -> str:
    """A milestone of findings.PAPER_MILESTONES / FIG1B_MILESTONES in words: "≥ 3 heads with induction ≥ 50×"."""
    from circuitdev import findings

    specs = {m.name: m for m in (*findings.PAPER_MILESTONES, *findings.FIG1B_MILESTONES)}
    if name not in specs:
        raise ConfigError(f"unknown milestone {name!r}; known: {', '.join(sorted(specs))}")
    m = specs[name]
    who = f"≥ {m.min_heads} heads" if m.min_heads is not None else f"≥ {100 * m.min_fraction:g}% of heads"
    return f"{who} with {m.head_class} selectivity ≥ {m.threshold:g}×"


def select(df: pd.DataFrame, **where) -> pd.DataFrame:
    """Rows of `df` where every column equals its value (floats compared to 1e-9); an empty frame stays empty."""
    if df.empty:
        return df
    mask = np.ones(len(df), dtype=bool)
    for column, wanted in where.items():
        if column not in df.columns:
            return df.iloc[0:0]
        values = df[column]
        if isinstance(wanted, float):
            mask &= (values.astype(float) - wanted).abs().to_numpy() < 1e-9
        else:
            mask &= (values == wanted).to_numpy()
    return df[mask]


def circuit_names(circuits: pd.DataFrame, **where) -> str | None:
    """"panel {L1H2 L3H4}; panel {…}" for a findings.final_circuit table (optionally filtered, e.g. tier=...)."""
    rows = select(circuits, **where)
    text = "; ".join(f"{p} {{{' '.join(g['name'])}}}" for p, g in rows.groupby("panel", sort=False))
    return text or None


def mean_metric(ab: pd.DataFrame | None, condition: str, metric: str = "acc_top1") -> float | None:
    """Mean of an ablation metric over the rows of one condition (e.g. matched_random over seeds); None if absent."""
    if ab is None or ab.empty:
        return None
    rows = ab[ab["condition"] == condition][metric]
    return float(rows.mean()) if len(rows) else None


def model_ablation(tier: Tier, panel: str, *, run: bool = True, threshold: float = 50.0,
                   seeds: Sequence[int] = (123,), mode: str = "zero", batch_size: int = 8,
                   device: str | None = None) -> tuple[pd.DataFrame | None, str]:
    """The final-revision group ablation of a model page: the authors' own for the published tier, else computed
    on the final checkpoint (`run_final_ablation`) when `run`. Returns (table, "") or (None, why there is none)."""
    if not tier.present:
        return None, "there are no data for this panel"
    name = panel_name(panel)
    if tier.name == "published":
        ab = published_ablation(tier, name)
        return (ab, "") if len(ab) else (None, "the published folder holds no induction ablation of this model")
    if not run:
        return None, "ablation=False was given"
    return run_final_ablation(panel, tier.table, config=tier.probe_configs.get(name), threshold=threshold,
                              seeds=seeds, mode=mode, batch_size=batch_size, device=device)
