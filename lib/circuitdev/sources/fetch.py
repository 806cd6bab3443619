"""The authors' published files at pinned commits: the manifest, a verified download (or copy), a check.

`data/published_manifest.tsv` lists every file of a published directory with the authors' repository path, the
pinned commit, its size and sha256 -- the data themselves are never part of this repository. Files are downloaded
from `$CIRCUITDEV_PUBLISHED_URL` (a template with `{commit}` and `{repo_path}`; default: the authors' raw files on
GitHub; `circuitdev.sources.download`), so a mirror or a test server can serve them. `$CIRCUITDEV_PUBLISHED_MANIFEST`
names another manifest (a mirror that pins other files; the tests' fixture mirror).

- `fetch_published` makes a folder hold every manifest file, all or nothing: the files not already right are
  downloaded (or, with `from_dir`, copied) into a staging folder beside it (`.<name>.staging`), each verified
  against its sha256, and moved in only when all of them are. A failure raises and leaves the folder as it was; a
  kill leaves at most the staging folder, which the next run removes. The staging folder lies on the folder's own
  filesystem (inside it when the folder is a mount point; a symlinked folder is staged beside its target), and a
  move that still crosses filesystems is a copy then a rename. A failure while moving files in (disk full,
  read-only) moves back what was moved: the folder is as it was. Each download stops past the manifest's size.
  The folder's lock (`circuitdev.locks`) is held throughout: a second fetch or ensure waits for the first, then
  finds the files in place. Only the manifest's files are touched: a
  user's README or notes stay, and a manifest file with other content is kept beside the new one
  (`<file>.replaced-<sha8>`, named in the result), never deleted.
- `ensure_published` is the same, but never raises for a failed download: it returns (complete, one-line message)
  -- what `make book` runs before the pages, which then leave the tier out and say why.
- `check_published` / `copy_status` compare a folder with the manifest (what every reader checks first:
  `circuitdev.sources.published.load_published`).
"""

from __future__ import annotations

import csv
import errno
import hashlib
import http.client
import inspect
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from circuitdev.atomic import sha256_of, write_atomic
from circuitdev.errors import CircuitdevError, ConfigError, DataError, os_error_fix
from circuitdev.locks import folder_lock
from circuitdev.paths import REPO_ROOT, published_dir
from circuitdev.sources.download import RAW_URL, URL_ENV, DownloadError, classify, url_template
from circuitdev.sources.download import download as _download

__all__ = ["MANIFEST_PATH", "MANIFEST_ENV", "RAW_URL", "URL_ENV", "DownloadError", "ManifestEntry", "CopyStatus",
           "url_template", "read_manifest", "fetch_published", "ensure_published", "check_published",
           "copy_status", "is_complete"]

MANIFEST_PATH = REPO_ROOT / "data" / "published_manifest.tsv"
MANIFEST_ENV = "CIRCUITDEV_PUBLISHED_MANIFEST"
Download = Callable[[str, float], bytes]  # (url, timeout for the whole file) -> its bytes


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


def manifest_path() -> Path:
    """$CIRCUITDEV_PUBLISHED_MANIFEST, else data/published_manifest.tsv."""
    value = os.environ.get(MANIFEST_ENV, "").strip()
    return Path(value).expanduser() if value else MANIFEST_PATH


def read_manifest(path: str | os.PathLike | None = None) -> list[ManifestEntry]:
    path = Path(path) if path is not None else manifest_path()
    try:
        lines = [l for l in path.read_text().splitlines() if l.strip() and not l.startswith("#")]
        return [ManifestEntry(r["local_path"], r["repo_path"], r["commit"], int(r["bytes"]), r["sha256"])
                for r in csv.DictReader(lines, delimiter="\t")]
    except (OSError, KeyError, TypeError, ValueError) as err:
        raise DataError(f"{path}: cannot read the manifest of the authors' files ({type(err).__name__}: {err}); "
                        f"restore data/published_manifest.tsv from the repository or fix {MANIFEST_ENV}") from None


# ------------------------------------------------------------------------------------------------------ the check


def check_published(directory: str | os.PathLike, *, manifest: list[ManifestEntry] | None = None) -> pd.DataFrame:
    """Compare a published directory with the manifest: local_path, status ("ok", "missing", "sha256 mismatch")."""
    root = Path(directory)
    rows = []
    for entry in manifest if manifest is not None else read_manifest():
        path = root / entry.local_path
        status = "missing" if not path.is_file() else "ok" if sha256_of(path) == entry.sha256 else "sha256 mismatch"
        rows.append({"local_path": entry.local_path, "status": status})
    return pd.DataFrame(rows, columns=["local_path", "status"])


@dataclass(frozen=True)
class CopyStatus:
    """A folder against the manifest. It is a *copy* of the authors' files when it holds at least one of them with
    its pinned sha256; a folder holding none (a synthetic test folder, the authors' code run at other commits) is
    read by the schema checks alone."""

    directory: Path
    n_files: int  # files the manifest lists
    missing: tuple[str, ...]
    changed: tuple[str, ...]  # present with another sha256
    n_ok: int

    @property
    def is_copy(self) -> bool:
        return self.n_ok > 0

    @property
    def complete(self) -> bool:
        return not self.missing and not self.changed

    def describe(self, shown: int = 3) -> str:
        """"2 of 39 files missing (a.json, b.json), 1 changed (c.json)"."""
        def some(names: tuple[str, ...]) -> str:
            more = f" and {len(names) - shown} more" if len(names) > shown else ""
            return ", ".join(names[:shown]) + more

        parts = [f"{len(self.missing)} of {self.n_files} files missing ({some(self.missing)})"] if self.missing else []
        parts += [f"{len(self.changed)} changed ({some(self.changed)})"] if self.changed else []
        return ", ".join(parts) or f"all {self.n_files} files present"


def copy_status(directory: str | os.PathLike, *, manifest: list[ManifestEntry] | None = None) -> CopyStatus:
    table = check_published(directory, manifest=manifest)
    by = table.groupby("status")["local_path"].apply(tuple).to_dict()
    return CopyStatus(Path(directory), len(table), by.get("missing", ()), by.get("sha256 mismatch", ()),
                      len(by.get("ok", ())))


def is_complete(directory: str | os.PathLike, *, manifest: list[ManifestEntry] | None = None) -> bool:
    root = Path(directory)
    return root.is_dir() and bool((check_published(root, manifest=manifest)["status"] == "ok").all())


# -------------------------------------------------------------------------------------------- stage, then swap in


STAGING_INSIDE = ".circuitdev-staging"


def staging_dir(to: Path) -> Path:
    """Where a fetch gathers files before they move in: `.<name>.staging` beside the folder (its real path: a
    symlinked folder is staged beside its target), or `.circuitdev-staging` inside it when the folder is a mount
    point (its parent is another filesystem), so that moving a file in is a rename, not a copy."""
    real = Path(os.path.realpath(to))
    try:
        if real.is_dir() and os.stat(real).st_dev != os.stat(real.parent).st_dev:
            return real / STAGING_INSIDE
    except OSError:
        pass
    return real.parent / f".{real.name}.staging"


def _get(entry: ManifestEntry, from_dir: Path | None, timeout: float, download: Download) -> tuple[bytes, str]:
    if from_dir is not None:
        src = from_dir / entry.local_path
        if not src.is_file():
            raise DataError(f"{src}: missing from the local copy {from_dir}; it should hold {entry.local_path}")
        size = src.stat().st_size
        if size != entry.bytes:  # checked before reading: a wrong (maybe huge) file is never read whole
            raise DataError(f"{src}: {size} bytes where the manifest pins {entry.bytes} for {entry.repo_path}@"
                            f"{entry.commit[:8]}; not copied (another version of the file, or a wrong folder)")
        return src.read_bytes(), str(src)
    url = entry.url
    try:
        if "max_bytes" in _parameters(download):
            return download(url, timeout, max_bytes=entry.bytes), url
        return download(url, timeout), url
    except (OSError, http.client.HTTPException) as err:  # a downloader of one's own (tests) may raise these
        raise classify(url, err, timeout) from err


def _parameters(fn) -> tuple[str, ...]:
    try:
        return tuple(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return ()


def _verify(entry: ManifestEntry, data: bytes, origin: str) -> None:
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry.sha256:
        size = f"{len(data)} bytes where the manifest says {entry.bytes}; " if len(data) != entry.bytes else ""
        raise DataError(f"{origin}: {size}sha256 {digest[:12]}... differs from the pinned {entry.sha256[:12]}... "
                        f"of {entry.repo_path}@{entry.commit[:8]}; not written (a corrupt copy or a wrong mirror)")


def _stage_one(staging: Path, entry: ManifestEntry, data: bytes) -> None:
    write_atomic(staging / entry.local_path, data)


def _stage(staging: Path, entry: ManifestEntry, data: bytes, to: Path) -> None:
    try:
        _stage_one(staging, entry, data)
    except OSError as err:  # the folder's disk, not the download: say so
        raise DataError(f"cannot stage {entry.local_path} for {to} in {staging}: {err.strerror or err}; nothing "
                        f"was moved into {to}. {os_error_fix(err, staging)}") from None


def _move(src: Path, dest: Path) -> None:
    """A rename; across filesystems (a staging folder that could not lie beside), a copy beside `dest`, then a
    rename, then the source removed."""
    try:
        os.replace(src, dest)
    except OSError as err:
        if err.errno != errno.EXDEV:
            raise
        tmp = dest.with_name(f".{dest.name}.p{os.getpid()}.cross.tmp")
        try:
            shutil.copyfile(src, tmp)
            os.replace(tmp, dest)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        src.unlink()


def _swap_in(to: Path, staging: Path, entry: ManifestEntry, undo: list | None = None) -> str | None:
    """Move one staged file into `to`; a file it replaces (other content) is kept beside it. Returns that name.
    `undo` collects what puts the folder back (`_roll_back`)."""
    dest = to / entry.local_path
    kept = None
    if dest.is_file():
        aside = dest.with_name(f"{dest.name}.replaced-{sha256_of(dest)[:8]}")
        if not aside.exists():
            os.replace(dest, aside)
            if undo is not None:
                undo.append(("restore", dest, aside))
        elif undo is not None:
            undo.append(("copy", dest, aside))  # the same content is already kept aside
        kept = str(aside.relative_to(to))
    elif undo is not None:
        undo.append(("remove", dest, None))
    dest.parent.mkdir(parents=True, exist_ok=True)
    _move(staging / entry.local_path, dest)
    return kept


def _roll_back(undo: list) -> None:
    """Put back what `_swap_in` changed, last first: the files it moved in go, the files it kept aside return."""
    for action, dest, aside in reversed(undo):
        if action == "restore":
            if aside.is_file():
                os.replace(aside, dest)
        elif action == "copy":
            shutil.copyfile(aside, dest)
        else:
            dest.unlink(missing_ok=True)


@dataclass(frozen=True)
class Fetched:
    """What `fetch_published` did: `table` (local_path, action: "present", "downloaded" or "copied") and the files
    of other content it kept aside (`<file>.replaced-<sha8>`)."""

    table: pd.DataFrame
    replaced: tuple[str, ...] = ()

    def counts(self) -> dict[str, int]:
        return self.table["action"].value_counts().to_dict()


def fetch_published(to_dir: str | os.PathLike | None = None, *, from_dir: str | os.PathLike | None = None,
                    manifest: list[ManifestEntry] | None = None, timeout: float = 30.0,
                    download: Download = _download) -> Fetched:
    """Make `to_dir` hold every manifest file, all or nothing (see the module docstring). Files already right are
    left alone. Returns a `Fetched` (each file's action, and the files kept aside). Raises ConfigError for a bad timeout or URL template (before any download), DataError (a
    DownloadError for a failed download) with `to_dir` unchanged."""
    to = Path(to_dir) if to_dir is not None else published_dir()
    source = Path(from_dir) if from_dir is not None else None
    if not timeout > 0:
        raise ConfigError(f"--timeout must be > 0 seconds (it bounds each whole file), got {timeout:g}")
    if source is None:
        url_template()  # a malformed template fails here, before anything is downloaded
    elif not source.is_dir():
        raise DataError(f"{source}: no such folder to copy the authors' files from")
    if to.exists() and not to.is_dir():
        raise DataError(f"{to} is a file, not a folder; name a folder with --to")
    entries = manifest if manifest is not None else read_manifest()
    with folder_lock(to, what="published folder"):  # a second fetch waits, then finds the files in place
        table = check_published(to, manifest=entries)
        status = dict(zip(table["local_path"], table["status"]))
        todo = [e for e in entries if status[e.local_path] != "ok"]
        staging = staging_dir(to)
        shutil.rmtree(staging, ignore_errors=True)  # what a killed run left (under the lock: no live run's)
        try:
            for entry in todo:
                data, origin = _get(entry, source, timeout, download)
                _verify(entry, data, origin)
                _stage(staging, entry, data, to)
            replaced, undo = [], []
            try:
                for entry in todo:
                    if kept := _swap_in(to, staging, entry, undo):
                        replaced.append(kept)
            except OSError as err:
                _roll_back(undo)
                raise DataError(f"cannot move the authors' files into {to}: {err.strerror or err} "
                                f"({err.filename or to}); {len(undo)} file(s) moved in were moved back, the folder "
                                f"is as it was. {os_error_fix(err, to)}") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        to.mkdir(parents=True, exist_ok=True)
    action = "copied" if source is not None else "downloaded"
    done = pd.DataFrame([{"local_path": e.local_path, "action": "present" if status[e.local_path] == "ok" else action}
                         for e in entries], columns=["local_path", "action"])
    return Fetched(done, tuple(replaced))


def _left(to: Path, manifest: list[ManifestEntry] | None) -> str:
    """What a failed `ensure` leaves: nothing to say for an absent or empty folder, else its state."""
    try:
        if not to.is_dir() or not any(to.iterdir()):
            return ""
        return f"; {to} is left as it was ({copy_status(to, manifest=manifest).describe()}; readers refuse it)"
    except Exception:  # noqa: BLE001 -- only a note; the manifest itself may be what failed
        return f"; {to} is left as it was"


def ensure_published(to_dir: str | os.PathLike, *, from_dir: str | os.PathLike | None = None,
                     manifest: list[ManifestEntry] | None = None, timeout: float = 10.0,
                     download: Download = _download) -> tuple[bool, str]:
    """Make `to_dir` hold every manifest file with its pinned sha256, or say why not: (complete, one-line message).

    As `fetch_published`, but any failure (offline, a 404, a dropped or hung transfer, a bad copy or template, a
    folder that cannot be written) is returned as "not available" instead of raised; the folder is left as it was
    (an incomplete one is refused by every reader), nothing is deleted or moved, and the staging folder is removed
    in every case. Use it where a missing tier must not stop the build (`make book`); use `fetch_published` where
    a failure should stop."""
    to = Path(to_dir)
    try:
        entries = manifest if manifest is not None else read_manifest()
        if is_complete(to, manifest=entries):
            return True, f"published: {len(entries)} files in {to}, sha256 verified (nothing to fetch)"
        if to.exists() and not to.is_dir():
            raise DataError(f"{to} is a file, not a folder; name a folder with --to")
        with folder_lock(to, what="published folder"):  # the staging clean-up below is this run's, not another's
            try:
                done = fetch_published(to, from_dir=from_dir, manifest=entries, timeout=timeout, download=download)
            finally:
                shutil.rmtree(staging_dir(to), ignore_errors=True)
    except Exception as err:  # noqa: BLE001 -- the contract: never fail the build, say why in one line
        why = (f"{err.short} for {err.url}" if isinstance(err, DownloadError) else
               str(err) if isinstance(err, CircuitdevError) else f"{type(err).__name__}: {err}")
        how = ("`circuitdev published fetch` when online, or `make book PUBLISHED_DIR=/path/to/a/copy`"
               if from_dir is None else f"a complete copy in place of {from_dir}")
        return False, (f"published: not available ({why}); the book is built without the authors' files"
                       f"{_left(to, manifest)} -- add them: {how}")
    how = "copied from " + str(from_dir) if from_dir is not None else "downloaded from " + url_template().split("{")[0]
    fetched = int((done.table["action"] != "present").sum())
    kept = f"; kept the replaced file(s) beside them: {', '.join(done.replaced)}" if done.replaced else ""
    return True, f"published: {fetched} of {len(entries)} files {how} into {to}, sha256 verified{kept}"
