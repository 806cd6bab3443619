"""One advisory lock per folder that is written: a results folder's panel, a published folder, a workshop folder.

`folder_lock(folder, what=...)` holds an exclusive `fcntl.flock` on `.<name>.lock` beside the folder (beside, not
inside: a published folder's listing stays the user's and the manifest's files, and the staging folder beside it is
covered too). The lock file holds the holder's pid, host and command line, so a second run that waits past its
bound (`CIRCUITDEV_LOCK_WAIT` seconds, default 600) exits 2 naming who holds it. flock is released by the kernel
when its holder dies (SIGKILL included), so a crashed run never leaves a folder locked; the lock file itself stays
(removing it would let two runs lock two different files).

Within one process the lock is re-entrant (a write that archives a record takes the lock its caller already holds).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from circuitdev.errors import CircuitdevError, ConfigError, os_error_fix

WAIT_ENV = "CIRCUITDEV_LOCK_WAIT"
DEFAULT_WAIT_S = 600.0
POLL_S = 0.05

_held: dict[str, int] = {}  # "lock file@thread" -> depth, this process
_guard = threading.RLock()


class FolderBusy(CircuitdevError):
    """Another run holds a folder's lock past the wait bound."""


def lock_path(folder: str | os.PathLike) -> Path:
    """`.<name>.lock` beside the folder's real path (two spellings of one folder share one lock)."""
    folder = Path(os.path.realpath(folder))
    return folder.parent / f".{folder.name}.lock"


def _open(path: Path, folder: Path) -> tuple[int, Path]:
    """Open (create) the lock file; where the folder's parent is not writable (a mount point under a read-only
    folder), the lock lies inside the folder instead."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o666), path
    except OSError:
        inside = Path(os.path.realpath(folder)) / ".circuitdev.lock"
        if not inside.parent.is_dir():
            raise
        return os.open(inside, os.O_RDWR | os.O_CREAT, 0o666), inside


def wait_bound() -> float:
    value = os.environ.get(WAIT_ENV, "").strip()
    if not value:
        return DEFAULT_WAIT_S
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise ConfigError(f"{WAIT_ENV}={value!r} is not a number of seconds >= 0 (how long a run waits for a folder "
                          f"another run is writing); unset it for the default {DEFAULT_WAIT_S:g}")
    return seconds


def holder(path: Path) -> str:
    """Who holds a lock, as its file says: "pid 123 on host (circuitdev probe ...), since ..."."""
    try:
        info = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return "an unknown process"
    if not info:
        return "an unknown process"
    return (f"pid {info.get('pid')} on {info.get('host')} ({info.get('command')}), "
            f"holding it since {info.get('since')}")


@contextmanager
def folder_lock(folder: str | os.PathLike, *, what: str, wait: float | None = None) -> Iterator[Path]:
    """Hold the lock of `folder` (`what`: the folder's role, for the message) for the block. Waits up to `wait`
    seconds (default `CIRCUITDEV_LOCK_WAIT`, 600) for another run's, then raises FolderBusy (exit 2) naming it."""
    path = lock_path(folder)
    key = f"{path}@{threading.get_ident()}"  # re-entrant per thread; another thread waits as another process would
    with _guard:
        nested = bool(_held.get(key))
        if nested:
            _held[key] += 1
    if nested:  # this thread holds it already (a write inside a move): no second flock, which would wait for itself
        try:
            yield path
        finally:
            with _guard:
                _held[key] -= 1
        return
    bound = wait_bound() if wait is None else wait
    try:
        fd, path = _open(path, Path(folder))
    except OSError as err:
        raise ConfigError(f"cannot lock the {what} {folder}: {path} cannot be created ({err.strerror}); "
                          f"{os_error_fix(err, path.parent)}") from None
    try:
        deadline = time.monotonic() + bound
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not said and bound > 0:  # a run that seems to hang says why
                    print(f"circuitdev: the {what} {folder} is being written by another run ({holder(path)}); "
                          f"waiting for it (at most {bound:g} s, {WAIT_ENV})", file=sys.stderr, flush=True)
                    said = True
                if time.monotonic() >= deadline:
                    raise FolderBusy(
                        f"the {what} {folder} is being written by another run: {holder(path)}. Wait for it to "
                        f"finish (or stop it), then run again; {WAIT_ENV}=SECONDS waits longer "
                        f"(waited {bound:g} s)") from None
                time.sleep(POLL_S)
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "command": " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))[:300],
                "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        with _guard:
            _held[key] = 1
        try:
            yield path
        finally:
            with _guard:
                _held.pop(key, None)
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing releases the flock
