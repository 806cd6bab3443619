"""The authors' published files at pinned commits: the manifest, a verified download (or copy), a check.

`data/published_manifest.tsv` lists every file of a published directory with the authors' repository path, the
pinned commit, its size and sha256 -- the data themselves are never part of this repository. Files are downloaded
from `$CIRCUITDEV_PUBLISHED_URL` (a template with `{commit}` and `{repo_path}`; default: the authors' raw files on
GitHub), so a mirror or a test server can serve them.

- `fetch_published` downloads (or, with `from_dir`, copies) each file, verifies its sha256 before writing it
  atomically, and leaves alone the files already present with the right hash; it stops at the first failure.
- `ensure_published` makes a folder complete or leaves it alone, never half-filled: the files are gathered in a
  staging folder beside it and swapped in only when every sha256 matches (what `make book` runs before the pages).
- `check_published` compares a folder with the manifest.
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
URL_ENV = "CIRCUITDEV_PUBLISHED_URL"


class DownloadError(DataError):
    """A manifest file could not be downloaded (offline, unreachable mirror, HTTP error)."""

    def __init__(self, url: str, reason: BaseException):
        self.url, self.reason = url, getattr(reason, "reason", reason)
        super().__init__(f"cannot download {url} ({self.reason}); offline? Copy the published files from a machine "
                         "that is online and use `--from DIR` with that copy")


def url_template() -> str:
    """$CIRCUITDEV_PUBLISHED_URL, else the authors' raw files; `{commit}` and `{repo_path}` are filled in."""
    template = os.environ.get(URL_ENV, "").strip() or RAW_URL
    if "{repo_path}" not in template:
        raise DataError(f"{URL_ENV}={template!r} has no {{repo_path}} field; e.g. "
                        "http://127.0.0.1:8000/{commit}/{repo_path}")
    return template


@dataclass(frozen=True)
class ManifestEntry:
    local_path: str  # where the file lives in a published directory
    repo_path: str  # path in the authors' repository
    commit: str  # pinned commit
    bytes: int
    sha256: str

    @property
    def url(self) -> str:
        return url_template().format(commit=self.commit, repo_path=self.repo_path)


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
                raise DownloadError(entry.url, err) from err
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


def is_complete(directory: str | os.PathLike, *, manifest: list[ManifestEntry] | None = None) -> bool:
    root = Path(directory)
    return root.is_dir() and bool((check_published(root, manifest=manifest)["status"] == "ok").all())


def ensure_published(to_dir: str | os.PathLike, *, from_dir: str | os.PathLike | None = None,
                     manifest: list[ManifestEntry] | None = None, timeout: float = 10.0,
                     download: Callable[[str, float], bytes] = _download) -> tuple[bool, str]:
    """Make `to_dir` hold every manifest file with its pinned sha256, or leave it out: (complete, one-line message).

    Files already right are kept; the others come from `from_dir` (a local copy) or are downloaded. Everything is
    gathered in `.<name>.staging` beside `to_dir` and swapped in only when complete, so a reader never sees a
    partial or corrupt folder. On failure (offline, a bad copy) nothing is raised: a folder that was there but
    incomplete or corrupt is moved aside to `<name>.invalid`, and the message says why and how to add the files."""
    import shutil

    to = Path(to_dir)
    entries = manifest if manifest is not None else read_manifest()
    if is_complete(to, manifest=entries):
        return True, f"published: {len(entries)} files in {to}, sha256 verified (nothing to fetch)"
    staging = to.parent / f".{to.name}.staging"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        if to.is_dir():  # keep what is already right
            for entry in entries:
                src = to / entry.local_path
                if src.is_file() and sha256_of(src) == entry.sha256:
                    write_atomic(staging / entry.local_path, src.read_bytes())
        done = fetch_published(staging, from_dir=from_dir, manifest=entries, timeout=timeout, download=download)
    except DataError as err:
        why = f"{err.reason} for {err.url}" if isinstance(err, DownloadError) else str(err)
        shutil.rmtree(staging, ignore_errors=True)
        if to.exists():
            aside = to.parent / f"{to.name}.invalid"
            shutil.rmtree(aside, ignore_errors=True)
            to.rename(aside)
        how = ("`circuitdev published fetch` when online, or `make book PUBLISHED_DIR=/path/to/a/copy`"
               if from_dir is None else f"a complete copy in place of {from_dir}")
        return False, f"published: not available ({why}); the book is built without the authors' files -- add them: {how}"
    if to.exists():
        old = to.parent / f".{to.name}.old"
        shutil.rmtree(old, ignore_errors=True)
        to.rename(old)
        staging.rename(to)
        shutil.rmtree(old, ignore_errors=True)
    else:
        staging.rename(to)
    how = "copied from " + str(from_dir) if from_dir is not None else "downloaded from " + url_template().split("{")[0]
    fetched = int((done["action"] != "present").sum())
    return True, f"published: {fetched} of {len(entries)} files {how} into {to}, sha256 verified"
