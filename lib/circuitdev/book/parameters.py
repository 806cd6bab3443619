"""A page's parameters: declared once, in its `parameters` cell, and checked wherever a value comes from.

A page's `parameters` cell is a list of typed assignments, each with the comment that documents it::

    # a head is a sink head when first-token selectivity ≥ this (paper: 30x)
    bos_threshold: float = 30.0

The annotations are the types (`str`, `int`, `float`, `bool`, `list[...]`, `dict[...]`, `X | None` / `Optional[X]`,
or a `Literal[...]` alias such as `Rule`); papermill only parses annotations made of names and [], so allowed values
live in the aliases. A number's range goes in a comment at the end of its line, in interval notation after `in`
(`inf` for no bound; for a list it applies to every item; None is always allowed where the type allows it)::

    # a jump carrying at least this share of the total rise makes a transition
    transition_share: float = 0.5  # in [0, 1]
    bos_threshold: float = 30.0  # in (0, inf)

`read_parameters(source)` reads the cell from a notebook source (names, types, ranges, defaults, comments: what
`circuitdev notebook list` prints), `check_parameters` checks given values against the types (what a page does as
it starts) and `check_bounds` against the ranges (with the types, what `circuitdev notebook run` does before it
starts a kernel). Besides its own parameters every page accepts the build's folder parameters
(`BUILD_PARAMETERS`), which it otherwise takes from the build configuration (`circuitdev.book.build`).
"""

from __future__ import annotations

import ast
import io
import math
import re
import tokenize
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Optional, Sequence

from circuitdev.errors import ConfigError

# Set by the pipeline (or `circuitdev notebook run`) for every page; a page does not declare them.
BUILD_PARAMETERS: dict[str, Any] = {
    "results_dir": Optional[str],  # probe records
    "published_dir": Optional[str],  # the authors' published files ("none": leave that tier out)
    "data_dir": Optional[str],  # data folder holding panels/ and toy/
    "panels": Optional[list[str]],  # the record panels to read (None: every panel with records)
}


def type_name(tp: Any) -> str:
    if tp is type(None) or tp is None:
        return "None"
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in typing.get_args(tp))
    if origin is not None:
        args = ", ".join(type_name(a) for a in typing.get_args(tp))
        return f"{origin.__name__}[{args}]"
    return getattr(tp, "__name__", str(tp))


def _allowed(tp: Any) -> list[Any]:
    """The allowed values of a Literal (also inside `X | None`); [] when any value of the type is fine."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        return list(typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return [v for a in typing.get_args(tp) for v in _allowed(a)]
    return []


def _coerce(value: Any, tp: Any) -> tuple[bool, Any]:
    """(ok, value) for `value` checked against annotation `tp`. int -> float and tuple -> list are accepted."""
    if tp is Any:
        return True, value
    if tp is None or tp is type(None):
        return value is None, value
    origin = typing.get_origin(tp)
    if origin is Literal:
        return (value in typing.get_args(tp) and not isinstance(value, bool)
                or any(value is a for a in typing.get_args(tp))), value
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            ok, out = _coerce(value, arg)
            if ok:
                return True, out
        return False, value
    if origin in (list, tuple, Sequence):
        if not isinstance(value, (list, tuple)):
            return False, value
        (item,) = typing.get_args(tp)[:1] or (Any,)
        items = [_coerce(v, item) for v in value]
        return all(ok for ok, _ in items), [v for _, v in items]
    if origin is dict:
        key_t, val_t = typing.get_args(tp) or (Any, Any)
        if not isinstance(value, dict):
            return False, value
        pairs = [(_coerce(k, key_t), _coerce(v, val_t)) for k, v in value.items()]
        return all(k[0] and v[0] for k, v in pairs), {k[1]: v[1] for k, v in pairs}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False, value
        return True, float(value)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if tp is list:
        return isinstance(value, (list, tuple)), list(value) if isinstance(value, (list, tuple)) else value
    if isinstance(tp, type):
        return isinstance(value, tp), value
    raise ConfigError(f"cannot check parameters annotated {tp!r}; use str, int, float, bool, list[...], "
                      "dict[...], Literal[...] or X | None")


def _accepts_text(tp: Any) -> bool:
    """Whether some string is a valid value of `tp` (str, a Literal of strings, or a union holding one)."""
    origin = typing.get_origin(tp)
    if tp is str:
        return True
    if origin is Literal:
        return any(isinstance(a, str) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return any(_accepts_text(a) for a in typing.get_args(tp))
    return False


def yaml_hint(name: str, value: Any, tp: Any, text: str | None = None) -> str:
    """A quoting hint when YAML made a non-string of what was meant as text (`yes` -> True, `a: b` -> a mapping)."""
    if isinstance(value, str) or not _accepts_text(tp):
        return ""
    shown = text if text is not None else "TEXT"
    return (f". YAML read {shown!r} as {type(value).__name__} (yes/no/on/off are booleans, `a: b` a mapping, "
            f"null/~ None): to pass it as text, quote it inside the shell's quotes: -p {name} '\"{shown}\"'")


def check_parameters(given: dict[str, Any], spec: dict[str, Any], *, required: bool = True,
                     where: str = "this notebook", texts: dict[str, str] | None = None) -> dict[str, Any]:
    """Check parameter values against their declared types; return them normalised (int -> float, tuple -> list).

    `spec` maps each parameter to its annotation. Raises ConfigError naming the parameter, the expected type, the
    allowed values (for a Literal) and what was given; an unknown name lists the parameters `where` takes.
    `required=False` checks only the names given (a partial set of overrides). `texts`: the command-line text of
    each value, quoted in the hint when YAML turned text into another type."""
    unknown = sorted(set(given) - set(spec))
    if unknown:
        known = ", ".join(f"{k} ({type_name(t)})" for k, t in spec.items())
        raise ConfigError(f"unknown notebook parameter(s) {', '.join(map(repr, unknown))}; {where} takes: "
                          f"{known}. Check the spelling of `-p NAME VALUE`")
    out = {}
    for name, tp in spec.items():
        if name not in given:
            if required:
                raise ConfigError(f"notebook parameter {name!r} ({type_name(tp)}) has no value; give it with -p")
            continue
        ok, value = _coerce(given[name], tp)
        if not ok:
            allowed = _allowed(tp)
            choices = f"; allowed values: {', '.join(map(repr, allowed))}" if allowed else ""
            hint = yaml_hint(name, given[name], tp, (texts or {}).get(name))
            raise ConfigError(f"notebook parameter {name!r} must be {type_name(tp)}{choices}; got {given[name]!r} "
                              f"({type(given[name]).__name__}){hint}")
        out[name] = value
    return out


def _annotations(namespace: dict[str, Any]) -> dict[str, Any]:
    spec = {}
    for name, tp in dict(namespace.get("__annotations__", {})).items():
        if isinstance(tp, str):  # `from __future__ import annotations`, or a quoted annotation
            try:
                tp = eval(tp, dict(namespace))  # noqa: S307 -- the notebook's own annotation, in its own namespace
            except Exception as err:
                raise ConfigError(f"cannot read the type of parameter {name!r} ({tp!r}: {err})") from None
        spec[name] = tp
    return spec


def injected_names(namespace: dict[str, Any]) -> list[str]:
    """Names papermill's injected-parameters cell assigned in this kernel (none when the page runs by hand).

    papermill writes that cell as "# Parameters" and one assignment per parameter; IPython keeps the source of
    every executed cell in `In`, so the names come from parsing the last such cell."""
    for source in reversed(list(namespace.get("In") or [])):
        if isinstance(source, str) and source.lstrip().startswith(INJECTED_MARK):
            tree = ast.parse(source)
            return [t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
                    if isinstance(t, ast.Name)]
    return []


INJECTED_MARK = "# Parameters"  # the first line of papermill's injected cell (its Python translator)


def check_namespace(namespace: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Validate a running page's parameters in place; returns (its own parameters, the build parameters given).

    The spec is the page's annotations (its `parameters` cell); the values are the namespace's (defaults from that
    cell, overridden by papermill's injected cell). A name papermill injected that the page does not declare, and
    that is not a build parameter, is an error naming it and the valid names."""
    spec = _annotations(namespace)
    injected = injected_names(namespace)
    unknown = {k: namespace[k] for k in injected if k not in spec and k not in BUILD_PARAMETERS}
    own = check_parameters({**{k: namespace[k] for k in spec if k in namespace}, **unknown}, spec)
    namespace.update(own)
    build = {k: namespace[k] for k in injected if k in BUILD_PARAMETERS and k not in spec}
    return own, check_parameters(build, BUILD_PARAMETERS, required=False)


# ------------------------------------------------------------------------------------------ reading a page's source


@dataclass(frozen=True)
class Bounds:
    """A closed, open or half-open interval of numbers: `in [0, 1]`, `in (0, inf)`."""

    low: float
    high: float
    low_closed: bool = True
    high_closed: bool = True

    def __contains__(self, x: float) -> bool:
        above = x >= self.low if self.low_closed else x > self.low
        below = x <= self.high if self.high_closed else x < self.high
        return above and below and not math.isnan(x)

    def __str__(self) -> str:
        def fmt(v: float) -> str:
            # written as `-p NAME VALUE` takes it: 1000000, not 1e+06 (YAML reads "1e+06" as text)
            return "inf" if v == math.inf else "-inf" if v == -math.inf else \
                str(int(v)) if float(v).is_integer() else repr(float(v))
        return f"{'[' if self.low_closed else '('}{fmt(self.low)}, {fmt(self.high)}{']' if self.high_closed else ')'}"


_BOUNDS_RE = re.compile(r"^in\s*([\[(])\s*([^,\s]+)\s*,\s*([^\])\s]+)\s*([\])])$")


def parse_bounds(text: str) -> Bounds | None:
    """"in [0, 1]" -> Bounds(0, 1); "in (0, inf)" -> Bounds(0, inf, False, False); other text -> None.
    Text that starts like a range but is not one is a ConfigError."""
    text = text.strip()
    if not re.match(r"^in\s*[\[(]", text):
        return None
    m = _BOUNDS_RE.match(text)
    try:
        low, high = float(m.group(2)), float(m.group(3))  # type: ignore[union-attr]
    except (AttributeError, ValueError):
        raise ConfigError(f"range {text!r} is not `in [LOW, HIGH]` (round brackets for open ends, inf for none)") \
            from None
    if not low <= high:
        raise ConfigError(f"range {text!r}: the lower end is above the upper")
    return Bounds(low, high, m.group(1) == "[", m.group(4) == "]")  # type: ignore[union-attr]


@dataclass(frozen=True)
class ParameterDoc:
    name: str
    annotation: str  # as written, e.g. "list[Source]"
    default: Any  # the literal value (None when it is not a literal)
    default_text: str  # as written
    comment: str  # the comment lines above it
    type: Any = None  # the evaluated annotation (None when it could not be evaluated)
    bounds: Bounds | None = None  # the range in the comment at the end of its line (`# in [0, 1]`)


def check_bounds(values: dict[str, Any], docs: Sequence[ParameterDoc], *, where: str = "this notebook") -> None:
    """Each value (each item of a list) within its parameter's declared range; a ConfigError names the first that
    is not, its range and its meaning. None and parameters without a range pass."""
    for doc in docs:
        value = values.get(doc.name)
        if doc.bounds is None or value is None:
            continue
        items = value if isinstance(value, (list, tuple)) else [value]
        bad = [v for v in items if isinstance(v, (int, float)) and not isinstance(v, bool) and v not in doc.bounds]
        if bad:
            each = "each item of " if isinstance(value, (list, tuple)) else ""
            raise ConfigError(f"notebook parameter {doc.name!r} of {where}: {each}the value must be in {doc.bounds}; "
                              f"got {value!r} ({doc.comment or doc.annotation})")


def _trailing_comment(line: str) -> str:
    """The comment at the end of a code line ("" when none)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line).readline))
    except (tokenize.TokenError, SyntaxError):
        return ""
    return next((t.string.lstrip("#").strip() for t in tokens if t.type == tokenize.COMMENT), "")


_CELL_RE = re.compile(r"^# %%(.*)$")


def _cells(text: str) -> list[tuple[str, str]]:
    """(header, body) of each percent-format cell."""
    cells, header, body = [], None, []
    for line in text.splitlines():
        m = _CELL_RE.match(line)
        if m:
            if header is not None:
                cells.append((header, "\n".join(body)))
            header, body = m.group(1), []
        elif header is not None:
            body.append(line)
    if header is not None:
        cells.append((header, "\n".join(body)))
    return cells


def read_parameters(source: str | Path) -> list[ParameterDoc]:
    """The parameters cell of a jupytext percent-format notebook: each parameter's name, type, default and comment.
    Types are evaluated with the imports of the cells before it (the notebook's own type aliases)."""
    path = Path(source)
    cells = _cells(path.read_text())
    at = next((i for i, (h, _) in enumerate(cells) if '"parameters"' in h and "tags" in h), None)
    if at is None:
        raise ConfigError(f"{path}: no cell tagged parameters; a page declares its parameters in one")
    namespace: dict[str, Any] = {"Optional": Optional}
    for _, body in cells[:at]:
        tree = ast.parse(body) if body.strip() else ast.Module(body=[], type_ignores=[])
        imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        if imports:
            exec(compile(ast.Module(body=imports, type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
    body = cells[at][1]
    out, comment = [], []
    for node_line in body.splitlines():
        stripped = node_line.strip()
        if stripped.startswith("#"):
            comment.append(stripped.lstrip("#").strip())
            continue
        if not stripped:
            comment = []
            continue
        node = ast.parse(stripped).body[0]
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            raise ConfigError(f"{path}: the parameters cell holds only `name: type = value` lines; got {stripped!r}")
        annotation = ast.unparse(node.annotation)
        default_text = ast.unparse(node.value) if node.value is not None else ""
        try:
            default = ast.literal_eval(node.value)
        except (ValueError, TypeError, SyntaxError):
            default = None
        try:
            tp = eval(annotation, dict(namespace))  # noqa: S307 -- the page's own annotation
        except Exception:
            tp = None
        try:
            bounds = parse_bounds(_trailing_comment(stripped))
        except ConfigError as err:
            raise ConfigError(f"{path}: parameter {node.target.id}: {err}") from None
        out.append(ParameterDoc(node.target.id, annotation, default, default_text, " ".join(comment), tp, bounds))
        comment = []
    return out
