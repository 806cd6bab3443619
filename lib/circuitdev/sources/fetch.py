"""The authors' published files at pinned commits: the manifest, a verified download (or copy), a check.

`data/published_manifest.tsv` lists every file of a published directory with the authors' repository path, the
pinned commit, its size and sha256 -- the data themselves are never part of this repository. `fetch_published`
downloads (or, with `from_dir`, copies) each file, verifies its sha256 before writing it atomically, and leaves alone
the files already present with the right hash; `check_published` compares a folder with the manifest.
"""

from __future__ import annotations

import csv
import hashlib
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from circuitdev.atomic import sha256_of, write_atomic
from circuitdev.errors import DataError
from circuitdev.paths import REPO_ROOT, published_dir

MANIFEST_PATH = REPO_ROOT / "data" / "published_manifest.tsv"
RAW_URL = "https://raw.githubusercontent.com/skydancerosel/spectral-probe-circuits/{commit}/{repo_path}"


@dataclass(frozen=True)
class ManifestEntry:
    local_path: str  # where the file lives in a published directory
    repo_path: str  # path in the authors' repository
    commit: str  # pinned commit
    bytes: int
    sha256: str

    @property
    def url(self) -> str:
        return RAW_URL.format(commit=self.commit, repo_path=self.repo_path)


def read_manifest(path: str | os.PathLike = MANIFEST_PATH) -> list[ManifestEntry]:
    lines = [l for l in Path(path).read_text().splitlines() if l.strip() and not l.startswith("#")]
    return [ManifestEntry(r["local_path"], r["repo_path"], r["commit"], int(r["bytes"]), r["sha256"])
            for r in csv.DictReader(lines, delimiter="\t")]


def _download(url: str, timeout: float) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (fixed https URL)
        return response.read()


def fetch_published(to_dir: str | os.PathLike | None = None, *, from_dir: str | os.PathLike | None = None,
                    manifest: list[ManifestEntry] | None = None, timeout: float = 30.0,
                    download: Callable[[str, float], bytes] = _download) -> pd.DataFrame:
    """Download (or, with `from_dir`, copy from a local copy) every manifest file into `to_dir`, verify its sha256,
    write atomically. Files already present with the right sha256 are left alone. Returns local_path, action."""
    to = Path(to_dir) if to_dir is not None else published_dir()
    done = []
    for entry in manifest if manifest is not None else read_manifest():
        dest = to / entry.local_path
        if dest.exists() and sha256_of(dest) == entry.sha256:
            done.append({"local_path": entry.local_path, "action": "present"})
            continue
        if from_dir is not None:
            src = Path(from_dir) / entry.local_path
            if not src.exists():
                raise DataError(f"{src}: missing from the local copy {from_dir}; it should hold {entry.local_path}")
            data, origin = src.read_bytes(), str(src)
        else:
            try:
                data, origin = download(entry.url, timeout), entry.url
            except (urllib.error.URLError, OSError, TimeoutError) as err:
                raise DataError(f"cannot download {entry.url} ({err}); offline? Copy the published files from a "
                                f"machine that is online and use `--from DIR` with that copy") from err
        if hashlib.sha256(data).hexdigest() != entry.sha256:
            raise DataError(f"{origin}: sha256 {hashlib.sha256(data).hexdigest()[:12]}... differs from the pinned "
                            f"{entry.sha256[:12]}... of {entry.repo_path}@{entry.commit[:8]}; not written")
        write_atomic(dest, data)
        done.append({"local_path": entry.local_path, "action": "copied" if from_dir is not None else "downloaded"})
    return pd.DataFrame(done, columns=["local_path", "action"])


def check_published(directory: str | os.PathLike, *, manifest: list[ManifestEntry] | None = None) -> pd.DataFrame:
    """Compare a published directory with the manifest: local_path, status ("ok", "missing", "sha256 mismatch")."""
    root = Path(directory)
    rows = []
    for entry in manifest if manifest is not None else read_manifest():
        path = root / entry.local_path
        status = "missing" if not path.exists() else "ok" if sha256_of(path) == entry.sha256 else "sha256 mismatch"
        rows.append({"local_path": entry.local_path, "status": status})
    return pd.DataFrame(rows, columns=["local_path", "status"])
