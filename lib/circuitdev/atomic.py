"""The one way files are written: complete or not at all.

`write_atomic` writes to a temporary file in the destination's folder, flushes and fsyncs it, gives it the usual
permissions (mkstemp makes 0600) and renames it over the destination, so a reader sees the old file or the new one,
never a part; a crash leaves at most a `.<name>.p<pid>@<host>.*.tmp` file, which writers clean up
(`remove_temp_files`) -- only those of processes that are gone, so one run's clean-up never deletes the temporary
file another run is writing.
Probe records, published files, toy checkpoints' metadata, panel files and result tables all go through it.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import tempfile
from pathlib import Path


def publish(src: Path, dst: Path) -> None:
    """The one rename that makes a file visible (a function of its own so that tests can interrupt it)."""
    os.replace(src, dst)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write `data` (text is UTF-8 encoded) to `path` atomically; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{_owner()}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        publish(Path(tmp), path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:40] or "host"


def _owner() -> str:
    """The writer's mark in a temporary file's name: p<pid>@<host>."""
    return f"p{os.getpid()}@{_host()}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def remove_temp_files(folder: Path, name: str) -> None:
    """Delete what an interrupted `write_atomic(folder / name, ...)` left behind: temporary files of processes of
    this host that are gone (or of an older circuitdev that did not mark them). Another live run's file, or one of
    another host (a shared results folder), is left alone."""
    prefix = f".{name}."
    for tmp in Path(folder).glob(f".{glob_escape(name)}.*.tmp"):
        mark = re.match(r"p(\d+)@([A-Za-z0-9-]+)\.", tmp.name[len(prefix):])
        if mark and (mark.group(2) != _host() or _alive(int(mark.group(1)))):
            continue
        tmp.unlink(missing_ok=True)


def glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


def sha256_of(path: str | os.PathLike) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
