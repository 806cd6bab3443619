"""Panels: a model, its family and dtype, and the ordered training revisions to probe (method reference §6).

A panel file is YAML (the contract other modules rely on)::

    name: pythia-1b                      # used as the results sub-folder: letters, digits, . _ -
    model: EleutherAI/pythia-1b          # a Hugging Face id, or a folder path relative to this file
    family: gpt_neox                     # gpt_neox | olmo | olmoe | llama (rows of circuitdev.measure.families)
    dtype: fp32                          # fp32 | fp16 | bf16 (float32 / float16 / bfloat16 accepted)
    tokens_per_step: 2097152             # optional: checks every `tokens`, or fills it in from `step`
    description: ...                     # optional, free text
    source: probe                        # optional: "probe" (default) or "toy" -- the developmental table's `source`
    probe:                               # optional ProbeConfig defaults for this panel (field names of ProbeConfig)
      seq_len: 64
    revisions:                           # ordered by training tokens (strictly increasing)
      - {name: step1, tokens: 2097152, step: 1}   # name = hub branch, or the sub-folder of a folder model
      ...
    candidates:                          # optional: more checkpoints that exist but are not probed by default; the
      - {name: step20, tokens: 20480}    # pool `circuitdev refine` draws from (the toy trainer lists its dense grid)

`model` is a local folder when it starts with `/`, `./`, `../` or `~`, when it names an existing folder (relative to
the panel file), or when it cannot be a hub id (more than one `/`). Otherwise it is a hub id.

Instead of a list, a hub panel may ask for "N log-spaced revisions of those the hub lists"
(`revisions: {log_spaced: 10}`), resolved online when the panel is loaded (`sources.hub_revisions`); `circuitdev
panels FILE --freeze OUT` writes the resolved list once, so later runs (and Snakemake) work offline.

Which loader to use: `load_panel(NAME_OR_FILE)` for one panel, `list_panels()` for the shipped ones.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from circuitdev.errors import ConfigError
from circuitdev.measure.families import FAMILIES, FamilyName
from circuitdev.paths import panels_dir
from circuitdev.sources.hub_revisions import STEP_BRANCH_RE, resolve_log_spaced
from circuitdev.sources.refined import refined_revisions
from circuitdev.sources.revision import NAME_RE, Revision, as_int

Dtype = Literal["fp32", "fp16", "bf16"]
DTYPE_ALIASES: dict[str, Dtype] = {
    "fp32": "fp32", "float32": "fp32", "float": "fp32",
    "fp16": "fp16", "float16": "fp16", "half": "fp16",
    "bf16": "bf16", "bfloat16": "bf16",
}  # fmt: skip
PanelSource = Literal["probe", "toy"]

_HUB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
_TOP_KEYS = {"name", "model", "family", "dtype", "revisions", "probe", "tokens_per_step", "description", "source",
             "candidates"}
_REQUIRED = ("name", "model", "family", "dtype", "revisions")
_REV_KEYS = {"name", "tokens", "step"}


@dataclass(frozen=True)
class Panel:
    name: str
    model: str  # hub id, or the absolute path of the folder holding one sub-folder per revision
    family: FamilyName
    dtype: Dtype
    revisions: tuple[Revision, ...]
    is_local: bool = False  # True: `model` is a folder path
    tokens_per_step: int | None = None
    description: str = ""
    source: PanelSource = "probe"
    probe: dict[str, Any] = field(default_factory=dict)  # ProbeConfig defaults of this panel
    path: Path | None = None  # the panel file it was read from
    candidates: tuple[Revision, ...] = ()  # further checkpoints `circuitdev refine` may add (not probed by default)

    def revision(self, name: str) -> Revision:
        for rev in self.revisions:
            if rev.name == name:
                return rev
        raise ConfigError(
            f"panel {self.name!r} has no revision {name!r}; its revisions are: {', '.join(self.revision_names)}"
        )

    @property
    def revision_names(self) -> list[str]:
        return [r.name for r in self.revisions]

    def select(self, names: list[str] | None) -> tuple[Revision, ...]:
        """The named revisions in panel order (all when `names` is None or empty)."""
        if not names:
            return self.revisions
        wanted = {self.revision(n).name for n in names}
        return tuple(r for r in self.revisions if r.name in wanted)

    def with_revisions(self, extra: "tuple[Revision, ...] | list[Revision]") -> "Panel":
        """This panel with `extra` revisions merged in token order (those already listed, by name or by token count,
        are skipped). `load_panel(..., results_dir=...)` uses it for the revisions `circuitdev refine` added."""
        names, tokens = set(self.revision_names), {r.tokens for r in self.revisions}
        new = [r for r in extra if r.name not in names and r.tokens not in tokens]
        if not new:
            return self
        return Panel(**{**self.__dict__, "revisions": tuple(sorted((*self.revisions, *new), key=lambda r: r.tokens))})

    def revision_path(self, revision: str | Revision) -> Path:
        """Folder of a revision's `save_pretrained` checkpoint (folder panels only)."""
        if not self.is_local:
            raise ConfigError(f"panel {self.name!r} is a hub panel ({self.model}); it has no revision folders")
        name = revision.name if isinstance(revision, Revision) else self.revision(revision).name
        return Path(self.model) / name

    def probe_config(self, **overrides):
        """ProbeConfig = defaults <- this panel's `probe:` <- `overrides`; dtype defaults to the panel's.

        Every override counts, None included: `first_token_id=None` asks for the paper's random filler at position 0
        even when the panel's `probe:` puts a BOS there (callers leave out what was not given)."""
        from circuitdev.measure.config import ProbeConfig

        fields = dict(self.probe)
        fields.update(overrides)
        cfg = ProbeConfig.from_dict(fields)
        return cfg.replace(dtype=normalize_dtype(cfg.dtype or self.dtype, where="dtype"))

    def to_dict(self) -> dict:
        """The panel as a YAML-ready mapping (an explicit revision list; folder paths made absolute)."""
        d: dict[str, Any] = {"name": self.name, "model": self.model, "family": self.family, "dtype": self.dtype}
        for key in ("tokens_per_step", "description"):
            if getattr(self, key):
                d[key] = getattr(self, key)
        if self.source != "probe":
            d["source"] = self.source
        if self.probe:
            d["probe"] = dict(self.probe)
        d["revisions"] = [
            {"name": r.name, "tokens": r.tokens, **({"step": r.step} if r.step is not None else {})}
            for r in self.revisions
        ]
        if self.candidates:
            d["candidates"] = [{"name": r.name, "tokens": r.tokens, **({"step": r.step} if r.step is not None else {})}
                               for r in self.candidates]
        return d


def normalize_dtype(value: Any, *, where: str = "dtype") -> Dtype:
    key = str(value).lower().removeprefix("torch.")
    if key not in DTYPE_ALIASES:
        raise ConfigError(f"{where}: unknown dtype {value!r}; use one of fp32, fp16, bf16")
    return DTYPE_ALIASES[key]


def looks_like_folder(model: str, base: Path) -> bool:
    """Decide whether a panel's `model` is a folder path (see the module docstring for the rule)."""
    if model.startswith(("/", "./", "../", "~")) or model in (".", ".."):
        return True
    if (base / model).expanduser().is_dir():
        return True
    return not _HUB_ID_RE.match(model) or "--" in model or ".." in model


def find_panel_file(name_or_file: str | os.PathLike) -> Path:
    """A NAME resolves to data/panels/NAME.yaml (see `data_dir`); anything else is taken as a file path."""
    text = str(name_or_file)
    candidate = Path(text).expanduser()
    if candidate.suffix in (".yaml", ".yml") or os.sep in text or "/" in text:
        if candidate.is_file():
            return candidate.resolve()
        raise ConfigError(f"panel file {text} does not exist; give an existing YAML file or a panel name ({_names_hint()})")
    for ext in (".yaml", ".yml"):
        path = panels_dir() / f"{text}{ext}"
        if path.is_file():
            return path
    if candidate.is_file():
        return candidate.resolve()
    raise ConfigError(
        f"no panel named {text!r} in {panels_dir()} ({_names_hint()}); give a panel name, a panel file path, "
        "or set CIRCUITDEV_DATA to the data folder that holds panels/"
    )


def _names_hint() -> str:
    names = [p.stem for p in sorted(panels_dir().glob("*.y*ml"))]
    return "known panels: " + (", ".join(names) if names else "none") + "; see `circuitdev panels`"


def load_panel(name_or_file: str | os.PathLike | Panel, *, results_dir: str | os.PathLike | None = None,
               resolve_hub: bool = True) -> Panel:
    """Read and validate a panel file; errors name the file, the field and the fix (ConfigError).

    With `results_dir`, the panel comes with the revisions `circuitdev refine` added there (DIR/<panel>/
    refined.yaml): pass it wherever records are read or written, so that every reader and the probe see the same
    revisions. This is the one place a panel is built with its refined revisions."""
    if isinstance(name_or_file, Panel):
        panel = name_or_file
    else:
        panel = _read_panel_file(name_or_file, resolve_hub=resolve_hub)
    if results_dir is None:
        return panel

    extra = refined_revisions(results_dir, panel.name)
    return panel.with_revisions(extra) if extra else panel


def _read_panel_file(name_or_file: str | os.PathLike, *, resolve_hub: bool) -> Panel:
    path = find_panel_file(name_or_file)
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"panel file {path} is not valid YAML ({err}); fix the syntax") from None
    panel = parse_panel(raw, base=path.parent, where=str(path), resolve_hub=resolve_hub)
    if path.parent.resolve() == panels_dir().resolve() and panel.name != path.stem:
        raise ConfigError(
            f"{path}: name {panel.name!r} differs from the file name; panels in {panels_dir()} must be named after "
            f"their file: set `name: {path.stem}` or rename the file to {panel.name}.yaml"
        )
    return Panel(**{**panel.__dict__, "path": path})


def list_panels() -> list[Panel]:
    """Every panel file in data/panels, sorted by name. Hub-listed panels are not resolved (no network)."""
    return [load_panel(p, resolve_hub=False) for p in sorted(panels_dir().glob("*.y*ml"))]


def parse_panel(raw: Any, *, base: Path | str = ".", where: str = "panel", resolve_hub: bool = True) -> Panel:
    """Validate a panel mapping (as read from YAML). `base` is the folder relative model paths start from."""
    base = Path(base)
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a panel file must be a YAML mapping with keys {', '.join(_REQUIRED)}")
    unknown = set(raw) - _TOP_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; allowed keys are {sorted(_TOP_KEYS)}")
    missing = [k for k in _REQUIRED if raw.get(k) in (None, "")]
    if missing:
        raise ConfigError(f"{where}: missing required field(s) {missing}; a panel needs {', '.join(_REQUIRED)}")

    name = str(raw["name"])
    if not NAME_RE.match(name):
        raise ConfigError(f"{where}: name {name!r} must use letters, digits, '.', '_' or '-' (it names a results folder)")
    family = str(raw["family"])
    if family not in FAMILIES:
        raise ConfigError(f"{where}: family {family!r} is unknown; use one of {', '.join(FAMILIES)}")
    dtype = normalize_dtype(raw["dtype"], where=f"{where}: dtype")
    source = str(raw.get("source", "toy" if name.startswith("toy-") else "probe"))
    if source not in ("probe", "toy"):
        raise ConfigError(f"{where}: source {source!r} must be 'probe' (a trained model's checkpoints) or 'toy'")

    tokens_per_step = raw.get("tokens_per_step")
    if tokens_per_step is not None:
        tokens_per_step = as_int(tokens_per_step, f"{where}: tokens_per_step", minimum=1)

    model = str(raw["model"])
    is_local = looks_like_folder(model, base)
    if is_local:
        model = str((base / model).expanduser().resolve())

    probe = raw.get("probe") or {}
    if not isinstance(probe, dict):
        raise ConfigError(f"{where}: probe must be a mapping of ProbeConfig fields (e.g. `probe: {{seq_len: 64}}`)")
    _check_probe_defaults(probe, where)

    revs_raw = raw["revisions"]
    if isinstance(revs_raw, dict):
        if is_local:
            raise ConfigError(f"{where}: revisions: {{log_spaced: N}} needs a hub model; list a folder panel's revisions")
        if not resolve_hub:
            revisions: tuple[Revision, ...] = ()
        else:
            revisions = resolve_log_spaced(model, revs_raw, tokens_per_step=tokens_per_step, where=where)
    elif isinstance(revs_raw, list):
        revisions = tuple(_parse_revision(r, i, tokens_per_step, where) for i, r in enumerate(revs_raw))
    else:
        raise ConfigError(f"{where}: revisions must be a list of {{name, tokens}} or {{log_spaced: N}}")
    _check_revisions(revisions, where, allow_empty=isinstance(revs_raw, dict) and not resolve_hub)
    cands_raw = raw.get("candidates") or []
    if not isinstance(cands_raw, list):
        raise ConfigError(f"{where}: candidates must be a list of {{name, tokens}} like revisions")
    candidates = tuple(_parse_revision(r, i, tokens_per_step, f"{where}: candidates") for i, r in enumerate(cands_raw))
    _check_revisions(candidates, f"{where}: candidates", allow_empty=True)
    return Panel(
        name=name,
        model=model,
        family=family,  # type: ignore[arg-type]
        dtype=dtype,
        revisions=revisions,
        is_local=is_local,
        tokens_per_step=tokens_per_step,
        description=str(raw.get("description") or "").strip(),
        source=source,  # type: ignore[arg-type]
        probe=dict(probe),
        candidates=candidates,
    )


def _parse_revision(raw: Any, i: int, tokens_per_step: int | None, where: str) -> Revision:
    at = f"{where}: revisions[{i}]"
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, dict):
        raise ConfigError(f"{at} must be a mapping like {{name: step1000, tokens: 2097152000}}")
    unknown = set(raw) - _REV_KEYS
    if unknown:
        raise ConfigError(f"{at}: unknown key(s) {sorted(unknown)}; a revision has {sorted(_REV_KEYS)}")
    if raw.get("name") in (None, ""):
        raise ConfigError(f"{at}: missing `name` (the hub branch or the revision's sub-folder)")
    name = str(raw["name"])
    at = f"{where}: revision {name!r}"
    if not NAME_RE.match(name):
        raise ConfigError(f"{at}: names may use letters, digits, '.', '_' or '-' only (they name result files)")
    step = raw.get("step")
    if step is None and (m := STEP_BRANCH_RE.match(name)):
        step = int(m["step"])
    elif step is not None:
        step = as_int(step, f"{at}: step")
    tokens = raw.get("tokens")
    if tokens is None:
        if tokens_per_step is None or step is None:
            raise ConfigError(
                f"{at}: missing `tokens` (training tokens at this checkpoint); give it, or give the panel "
                "`tokens_per_step` and a `step` (or a name like step1000)"
            )
        tokens = step * tokens_per_step
    tokens = as_int(tokens, f"{at}: tokens")
    if tokens_per_step is not None and step is not None and tokens != step * tokens_per_step:
        raise ConfigError(
            f"{at}: tokens {tokens} != step {step} x tokens_per_step {tokens_per_step} = {step * tokens_per_step}; "
            "fix the count, the step, or drop tokens_per_step"
        )
    return Revision(name, tokens, step)


def _check_revisions(revisions: tuple[Revision, ...], where: str, *, allow_empty: bool = False) -> None:
    if not revisions and not allow_empty:
        raise ConfigError(f"{where}: revisions is empty; list at least one {{name, tokens}}")
    seen: set[str] = set()
    for prev, rev in zip((None, *revisions), revisions):
        if rev.name in seen:
            raise ConfigError(f"{where}: revision {rev.name!r} is listed twice; each revision must appear once")
        seen.add(rev.name)
        if prev is not None and rev.tokens <= prev.tokens:
            raise ConfigError(
                f"{where}: revision {rev.name!r} ({rev.tokens} tokens) does not come after {prev.name!r} "
                f"({prev.tokens}); order revisions by strictly increasing training tokens"
            )


def _check_probe_defaults(probe: dict, where: str) -> None:
    from circuitdev.measure.config import ProbeConfig

    try:
        ProbeConfig.from_dict(probe)
    except (ConfigError, TypeError, ValueError) as err:
        raise ConfigError(f"{where}: probe: {err}") from None



def write_panel(panel: Panel, path: str | os.PathLike) -> Path:
    """Write a panel file with an explicit revision list (used by `circuitdev panels --freeze`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(panel.to_dict(), sort_keys=False))
    return path
