"""Never lose a participant's file: what a workshop build wrote, so that the next build recognises an edited notebook.

`circuitdev workshop build --out W` keeps W/.workshop-build.json: the sha256 of every file it wrote, by its path in W.
A later build writing the same file first compares what is there with that record:

    absent, or as the last build wrote it       written (replaced)
    the same bytes as the new edition           left as it is
    changed since (a participant's work), or    kept; the new edition is written beside it, `<name>.new.ipynb` (or
    not written by a build at all               `.new2` ... when that one was edited too), and the build says so;
                                                `--force` replaces it instead (also said)

Only the participants' editions are protected this way (student/ and solutions/); the book's edition is a pipeline
output that each build replaces.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

MANIFEST = ".workshop-build.json"
PROTECTED = ("student", "solutions")  # the editions a participant (or an instructor) works in


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class BuildManifest:
    """The files a build wrote into `out`, with their hashes; `write` protects edited ones."""

    out: Path
    files: dict[str, str] = field(default_factory=dict)  # path relative to `out` -> sha256 of what was written

    @classmethod
    def open(cls, out: str | Path) -> BuildManifest:
        out = Path(out)
        try:
            raw = json.loads((out / MANIFEST).read_text())
            files = {str(k): str(v) for k, v in raw.get("files", {}).items()}
        except (OSError, ValueError, AttributeError):  # no build yet (or an unreadable record: nothing is trusted)
            files = {}
        return cls(out, files)

    def save(self) -> None:
        from circuitdev.atomic import write_atomic

        write_atomic(self.out / MANIFEST, json.dumps({"files": dict(sorted(self.files.items()))}, indent=1) + "\n")

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.out).as_posix()

    def edited(self, path: Path) -> bool:
        """The file exists and is not what a build last wrote there (a participant changed it, or no build wrote
        it)."""
        if not path.is_file():
            return False
        return self.files.get(self._rel(path)) != sha256(path.read_bytes())

    def beside(self, path: Path) -> Path:
        """Where the new edition goes when `path` is kept: <stem>.new.ipynb, else .new2, .new3 ... -- the first that
        is absent or unedited."""
        for k in range(1, 1000):
            candidate = path.with_name(f"{path.stem}.new{k if k > 1 else ''}{path.suffix}")
            if not self.edited(candidate):
                return candidate
        raise RuntimeError(f"{path}: a thousand edited copies beside it")  # pragma: no cover

    def write(self, path: str | Path, text: str, *, force: bool = False,
              log: Callable[[str], None] = print) -> Path:
        """Write `text` to `path` (inside `out`) unless that would overwrite an edited file; returns where it went.
        The record is saved after each write, so an interrupted build leaves a true one."""
        from circuitdev.atomic import write_atomic

        path = Path(path)
        data = text.encode()
        if path.is_file() and path.read_bytes() == data:
            target = path
        elif self.edited(path):
            if force:
                log(f"{self._rel(path)} changed since the last build: replaced (--force)")
                target = path
            else:
                target = self.beside(path)
                log(f"{self._rel(path)} changed since the last build (a participant's work?): kept as it is; the new "
                    f"edition is {self._rel(target)} (--force replaces the file instead)")
        else:
            target = path
        if not (target.is_file() and target.read_bytes() == data):
            write_atomic(target, data)
        self.files[self._rel(target)] = sha256(data)
        self.save()
        return target
