"""Which weights a record measured: an identity stored in its sidecar, so a record of other weights is stale.

A panel name can outlive its checkpoints (a toy panel retrained with another recipe, a folder re-saved): the record
must then be recomputed, not reused. The identity of one revision's weights is, by kind of panel:

- a folder panel, toy panels included: the sha256 of the revision's safetensors files, with their sizes and mtimes
  so that an unchanged file is not hashed again (the stored identity is reused when they match). A toy's recipe
  hash is not enough: the same recipe retrained with other threads, or a replaced `model.safetensors`, gives other
  weights. A record that stored only the recipe (before this) is stale: re-probed once to record the sha256;
- a hub panel: the commit the revision resolved to when it was loaded. Offline, a status check cannot resolve it,
  so hub records are never called stale on this ground.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from circuitdev.sources.panels import Panel
from circuitdev.sources.revision import Revision

RECIPE_FILE = "recipe.json"  # written by `circuitdev toy train` into the toy panel's model folder


def weights_identity(panel: Panel, revision: Revision, *, known: dict | None = None) -> dict | None:
    """The identity of a folder panel's revision ({"kind", "id"[, "files"]}), or None when it cannot be known here
    (a hub panel, a missing folder). `known`: a stored identity whose hash is reused when the files are unchanged."""
    if not panel.is_local:
        return None
    folder = Path(panel.model) / revision.name
    files = sorted(folder.glob("model*.safetensors")) if folder.is_dir() else []
    if not files:
        return None
    stats = {f.name: [f.stat().st_size, f.stat().st_mtime_ns] for f in files}
    if known and known.get("kind") == "sha256" and known.get("files") == stats:
        return known
    digest = hashlib.sha256()
    for f in files:
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return {"kind": "sha256", "id": digest.hexdigest(), "files": stats}


def loaded_identity(panel: Panel, revision: Revision, model) -> dict | None:
    """The identity of the weights just loaded: a folder panel's as above, a hub panel's resolved commit."""
    if panel.is_local:
        return weights_identity(panel, revision)
    commit = getattr(getattr(model, "config", None), "_commit_hash", None)
    return {"kind": "commit", "id": str(commit)} if commit else None


def weights_differ(stored: dict | None, current: dict | None) -> str:
    """Why a record's weights are not the current ones ("" when they are, or when either side is unknown)."""
    if stored and current and stored.get("kind") == "recipe" and current.get("kind") == "sha256":
        return ("measured weights known only by their toy recipe, not by content (a retrain or a replaced file "
                "would go unseen); re-probed to record their sha256")
    if not stored or not current or stored.get("kind") != current.get("kind"):
        return ""
    if stored.get("id") == current.get("id"):
        return ""
    what = {"recipe": "toy recipe", "sha256": "weights file sha256", "commit": "hub commit"}[current["kind"]]
    return f"measured other weights ({what} {str(stored['id'])[:12]}, now {str(current['id'])[:12]})"
