"""The one way files are written: complete or not at all.

`write_atomic` writes to a temporary file in the destination's folder, flushes and fsyncs it, gives it the usual
permissions (mkstemp makes 0600) and renames it over the destination, so a reader sees the old file or the new one,
never a part; a crash leaves at most a `.<name>.*.tmp` file, which writers clean up (`remove_temp_files`).
Probe records, published files, toy checkpoints' metadata, panel files and result tables all go through it.
"""

from __future__ import annotations

import hashlib
import os
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
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
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


def remove_temp_files(folder: Path, name: str) -> None:
    """Delete what an interrupted `write_atomic(folder / name, ...)` may have left behind."""
    for tmp in Path(folder).glob(f".{name}.*.tmp"):
        tmp.unlink(missing_ok=True)


def sha256_of(path: str | os.PathLike) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
