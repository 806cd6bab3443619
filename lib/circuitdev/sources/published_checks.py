"""Reading the authors' JSON files with checks: each failure is a `DataError` naming the file, the field, the problem
and the fix (by default: re-fetch the file). Shared by the readers of the per-revision, trajectory, top-K and
ablation files (`sources.published`, `sources.published_topk`, `sources.published_ablations`).
"""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path

from circuitdev.errors import DataError

_HEAD_RE = re.compile(r"^L(\d+)_H(\d+)$")


def fail(path: Path, field: str, problem: str,
         fix: str = "re-fetch it with `circuitdev published fetch`") -> DataError:
    return DataError(f"{path}: field {field!r}: {problem}; {fix}")


def read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: not valid JSON ({err}); the file is truncated or corrupt, re-fetch it") from err
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err})") from err
    if not isinstance(data, dict):
        raise fail(path, "<top level>", f"expected a JSON object, got {type(data).__name__}")
    return data


def require(path: Path, data: dict, field: str):
    if field not in data:
        raise fail(path, field, "missing (partial file?)")
    return data[field]


def number(path: Path, field: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fail(path, field, f"expected a number, got {value!r}")
    if not math.isfinite(value):
        raise fail(path, field, f"non-finite value {value!r}")
    return float(value)


def as_list(path: Path, field: str, value) -> list:
    """Lists may be stored as real JSON lists or as Python-repr strings ("['step1', ...]"); accept both, safely."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError) as err:
            raise fail(path, field, f"a string that is not a Python list literal ({err})") from err
    if not isinstance(value, (list, tuple)):
        raise fail(path, field, f"expected a list, got {type(value).__name__}")
    return list(value)


def head_key(path: Path, field: str, key: str) -> tuple[int, int]:
    m = _HEAD_RE.match(key)
    if not m:
        raise fail(path, f"{field}.{key}", "head keys must look like 'L{layer}_H{head}'")
    return int(m.group(1)), int(m.group(2))


def check_grid(path: Path, field: str, heads: set[tuple[int, int]]) -> tuple[int, int]:
    """All heads of an n_layers x n_heads grid must be present: a missing head means a partial file."""
    n_layers = max(h[0] for h in heads) + 1
    n_heads = max(h[1] for h in heads) + 1
    missing = [f"L{l}_H{h}" for l in range(n_layers) for h in range(n_heads) if (l, h) not in heads]
    if missing:
        raise fail(path, field, f"{len(missing)} head(s) missing from the {n_layers}x{n_heads} grid, "
                                f"e.g. {', '.join(missing[:3])} (partial file?)")
    return n_layers, n_heads
