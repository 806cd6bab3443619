"""The revisions `circuitdev refine` added to a panel: DIR/<panel>/refined.yaml, the one home of that file.

A panel's revisions are those of its panel file plus the refined ones. Readers never merge them by hand:
`load_panel(name, results_dir=DIR)` returns the panel with them (`sources.panels`), and that is the only place
that calls `refined_revisions` to build a panel.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from circuitdev.atomic import write_atomic
from circuitdev.errors import DataError
from circuitdev.locks import folder_lock
from circuitdev.sources.revision import NAME_RE, Revision

REFINED_FILE = "refined.yaml"
REFINED_FORMAT = "circuitdev.refined/1"


def refined_path(results_dir: str | os.PathLike, panel: str) -> Path:
    return Path(results_dir) / panel / REFINED_FILE


def _entries(results_dir: str | os.PathLike, panel: str) -> list[dict]:
    """The validated raw entries of the refined list ([] when the panel has none)."""
    import yaml

    path = refined_path(results_dir, panel)
    if not path.is_file():
        return []
    try:
        doc = yaml.safe_load(path.read_text()) or {}
        entries = list(doc.get("revisions") or [])
        for r in entries:
            Revision(str(r["name"]), int(r["tokens"]), None if r.get("step") is None else int(r["step"]))
    except (yaml.YAMLError, KeyError, TypeError, ValueError, AttributeError) as err:
        raise DataError(f"{path} is not a {REFINED_FORMAT} list of revisions ({err}); fix it or delete it (its "
                        "records stay, but the panel forgets them)") from None
    for r in entries:  # a name becomes a record's file name: `../other/step1` would write into another panel
        if not NAME_RE.match(str(r["name"])):
            raise DataError(f"{path}: revision name {str(r['name'])!r} is not a plain name (letters, digits, '.', "
                            "'_' or '-'; it names the record's files in this panel's folder): fix or remove that "
                            "entry")
    if doc.get("format") != REFINED_FORMAT or doc.get("panel") != panel:
        raise DataError(f"{path} is not the {REFINED_FORMAT} list of panel {panel}; delete it or restore it")
    return entries


def refined_revisions(results_dir: str | os.PathLike, panel: str) -> tuple[Revision, ...]:
    """The revisions `circuitdev refine` added to a panel, in token order; () if none."""
    revs = [Revision(str(r["name"]), int(r["tokens"]), None if r.get("step") is None else int(r["step"]))
            for r in _entries(results_dir, panel)]
    return tuple(sorted(revs, key=lambda r: r.tokens))


def refined_log(results_dir: str | os.PathLike, panel: str) -> pd.DataFrame:
    """The refined list with why each revision was added: name, tokens, step, metric, between, change (empty when
    the panel has none)."""
    out = pd.DataFrame(_entries(results_dir, panel), columns=["name", "tokens", "step", "metric", "between", "change"])
    return out.assign(between=[" → ".join(b) if isinstance(b, list) else b for b in out["between"]])


def add_refined(results_dir: str | os.PathLike, panel: str, revision: Revision, **why: Any) -> Path:
    """Add one revision to the panel's refined list (atomically; `why`: the refinement step that chose it)."""
    import yaml

    if not NAME_RE.match(revision.name):
        raise DataError(f"refine: revision name {revision.name!r} is not a plain name (letters, digits, '.', '_' "
                        "or '-'); it would name files outside the panel's folder")
    path = refined_path(results_dir, panel)
    # read, add, write under the panel folder's lock: two refine runs never drop each other's revisions
    with folder_lock(Path(results_dir) / panel, what=f"results folder of panel {panel}"):
        known = _entries(results_dir, panel)
        if any(r["name"] == revision.name for r in known):
            return path
        known.append({"name": revision.name, "tokens": revision.tokens,
                      **({"step": revision.step} if revision.step is not None else {}), **why})
        known.sort(key=lambda r: r["tokens"])
        doc = {"format": REFINED_FORMAT, "panel": panel, "revisions": known}
        return write_atomic(path, yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=120))
