"""The paper's numeric claims (data/claims.yaml) and the rule that says when data reproduce one.

Each entry names where the paper states it, the finding, the paper's value and a `quantity` of the registry in
`analysis.quantities` with its parameters; a `series` expands into one claim per element. `read_claims` checks the
file's structure (the registry checks each entry's quantity and parameters: `quantities.load_claims`);
`paper_claims` looks the paper's claims up by id; `claim_values` gives the paper's values of one claim as a table
(the book quotes and draws them beside the data).

The match rule (`compare`, MATCH_RULE) lives here, with the claims, so that a finding that tests a paper's number
(findings.robustness' claims) needs neither the audit nor the registry of quantities:

- numbers match when the data, rounded to the digits the paper printed, give the paper's number: the data lie within
  half a unit of the last place the paper writes (`decimals`, default: the literal's own decimals; a tie at exactly
  half a unit matches, whichever way the paper rounded it). A claim written 181.6 matches 181.645; one written
  181.60 does not; "~6B" (written 6) matches a revision at 6.291B, "21x" matches 20.95x; `significant: n` compares n
  significant digits instead (for values written like 9.75e7);
- lists match element by element, head lists as sets; NEVER (the paper's "—") matches a milestone never reached;
- strings and booleans match when equal;
- a censored value (a bound: an event already at the first probed revision, `upper`, or a gap built on one) is
  compared as the bound it is (`consistent_with_bound`): the paper's number is consistent with it when it lies on
  the bound's side (within the paper's rounding), never a plain match.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from circuitdev.errors import ConfigError
from circuitdev.paths import REPO_ROOT

CLAIMS_PATH = REPO_ROOT / "data" / "claims.yaml"
_META_KEYS = {"id", "text", "finding", "source", "quantity", "paper", "decimals", "significant", "note", "other_run",
              "series"}


@dataclass(frozen=True)
class Claim:
    id: str
    text: str
    finding: str
    source: str
    quantity: str
    paper: Any
    params: dict = field(default_factory=dict)
    decimals: int | None = None
    significant: int | None = None
    note: str = ""
    other_run: str = ""  # the paper's value comes from another run than the files (which one): they cannot decide it


def read_claims(path: str | Path = CLAIMS_PATH, *, check=None) -> list[Claim]:
    """Read a claims file and expand its series into one Claim each; ConfigError names the claim and the field.
    `check(claim, where)` (the registry's: `quantities.load_claims`) validates each expanded claim's quantity and
    parameters on top of the file's structure."""
    try:
        doc = yaml.load(Path(path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"{path}: cannot read the claims file ({err})") from err
    if not isinstance(doc, dict) or not isinstance(doc.get("claims"), list):
        raise ConfigError(f"{path}: expected a mapping with a `claims:` list")
    claims, seen = [], set()
    for i, raw in enumerate(doc["claims"]):
        where = f"{path}: claims[{i}] ({raw.get('id', '?') if isinstance(raw, dict) else raw!r})"
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: expected a mapping")
        for key in ("id", "text", "finding", "source", "quantity"):
            if key not in raw:
                raise ConfigError(f"{where}: field {key!r} missing")
        for claim in _expand(raw, where):
            if claim.id in seen:
                raise ConfigError(f"{where}: duplicate claim id {claim.id!r}")
            seen.add(claim.id)
            if check is not None:
                check(claim, where)
            claims.append(claim)
    return claims


def _expand(raw: dict, where: str) -> list[Claim]:
    base = {k: v for k, v in raw.items() if k not in _META_KEYS}
    meta = dict(id=str(raw["id"]), text=str(raw["text"]), finding=str(raw["finding"]), source=str(raw["source"]),
                quantity=raw["quantity"], decimals=raw.get("decimals"), significant=raw.get("significant"),
                note=str(raw.get("note", "")), other_run=str(raw.get("other_run", "")))
    series = raw.get("series")
    if series is None:
        if "paper" not in raw:
            raise ConfigError(f"{where}: field 'paper' missing")
        return [Claim(paper=raw["paper"], params=base, **meta)]
    if not isinstance(series, dict) or "paper" not in series or len(series) < 2:
        raise ConfigError(f"{where}: field 'series' must map parameter(s) and `paper` to equal-length lists")
    lengths = {k: len(v) if isinstance(v, list) else -1 for k, v in series.items()}
    if len(set(lengths.values())) != 1 or -1 in lengths.values():
        raise ConfigError(f"{where}: field 'series': lists of unequal length {lengths}")
    keys = [k for k in series if k != "paper"]
    out = []
    for j, paper in enumerate(series["paper"]):
        params = {**base, **{k: series[k][j] for k in keys}}
        out.append(Claim(paper=paper, params=params, **{**meta, "id": f"{meta['id']}@{series[keys[0]][j]}"}))
    return out


def claim_values(claim_id: str, *, path: str | Path = CLAIMS_PATH) -> pd.DataFrame:
    """The paper's values of one claim (a series expands into rows): id, the claim's parameters as columns, paper."""
    rows = [{"id": c.id, **c.params, "paper": c.paper} for c in read_claims(path)
            if c.id == claim_id or c.id.startswith(claim_id + "@")]
    if not rows:
        raise ConfigError(f"no claim {claim_id!r} in {path}")
    return pd.DataFrame(rows)


def paper_noise_floor(path: str | Path = CLAIMS_PATH) -> pd.DataFrame:
    """The paper's F6 values (Pythia-1B null p99, null max, real max and heads above p99 at its five null-calibration
    checkpoints) in the shape of the records' null statistics: tier "paper", panel, revision, tokens_b, null_p99,
    null_max, real_max, k_above."""
    from circuitdev.sources.published_panels import parse_revision, tokens_b_for_step

    frames = []
    for claim_id, column in (("F6.null_p99", "null_p99"), ("F6.null_max", "null_max"), ("F6.real_max", "real_max")):
        c = claim_values(claim_id, path=path)
        frames.append(c[["panel", "revision", "paper"]].rename(columns={"paper": column}).set_index(
            ["panel", "revision"]))
    out = pd.concat(frames, axis=1).reset_index()
    out["tokens_b"] = [tokens_b_for_step(p, parse_revision(r)[0]) for p, r in zip(out["panel"], out["revision"])]
    out["tier"] = "paper"
    k = claim_values("F6.k_above", path=path)[["panel", "revision", "paper"]].rename(columns={"paper": "k_above"})
    return out.merge(k, on=["panel", "revision"], how="left")[
        ["tier", "panel", "revision", "tokens_b", "null_p99", "null_max", "real_max", "k_above"]]


@lru_cache(maxsize=4)
def _cached(path: str) -> tuple[Claim, ...]:
    return tuple(read_claims(path))


def paper_claims(prefix: str, *, path: str | Path = CLAIMS_PATH) -> dict[tuple[str, str], Claim]:
    """{(panel, item): Claim} of the series whose id starts with `prefix` and that name a panel (item: the series
    key after "@"); the file is read once per process (the paper's numbers do not change while a build runs)."""
    out = {}
    for c in _cached(str(path)):
        if c.id.startswith(prefix) and "@" in c.id and "panel" in c.params:
            out[c.params["panel"], str(c.id.split("@", 1)[1])] = c
    return out


def paper_series(prefix: str, *, path: str | Path = CLAIMS_PATH) -> list[Claim]:
    """The claims whose id starts with `prefix` (read once per process, as `paper_claims`)."""
    return [c for c in _cached(str(path)) if c.id.startswith(prefix)]


# ------------------------------------------------------------------------------------------------- the match rule
NEVER = "never"  # the paper's "—": a milestone never reached
MATCH_RULE = ("a number matches when the data, rounded to the digits the paper printed, give the paper's number "
              "(within half a unit of its last printed place: 181.645 matches a printed 181.6 but not a printed "
              "181.60); lists match element by element, head lists as sets")


def decimals_of(x) -> int:
    """Decimals a number is written with: 10.9 -> 1, 6 -> 0."""
    if isinstance(x, (int, np.integer)) or float(x).is_integer():
        return 0
    text = np.format_float_positional(float(x), trim="-")
    return len(text.split(".")[1]) if "." in text else 0


def is_number(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def half_unit(claim: Claim) -> float:
    """Half a unit in the last place the paper writes: the rounding tolerance of a numeric claim."""
    return 0.5 * 10.0 ** -(claim.decimals if claim.decimals is not None else decimals_of(claim.paper))


def _num_match(paper: float, data: float, claim: Claim) -> bool:
    if claim.significant:
        digits = claim.significant - 1 - math.floor(math.log10(abs(paper))) if paper else claim.significant
        return abs(round(data, digits) - paper) <= 1e-9 * max(1.0, abs(paper))
    return abs(data - paper) <= half_unit(claim) + 1e-9 * max(1.0, abs(paper))


def compare(claim: Claim, data) -> bool:
    """True when `data` reproduces the claim's paper value under the rounding rule of the module docstring."""
    paper = claim.paper
    if claim.quantity == "circuit_heads":
        return sorted(map(str, paper)) == sorted(map(str, data))
    if isinstance(paper, list):
        return isinstance(data, list) and len(paper) == len(data) and all(
            compare(Claim(**{**claim.__dict__, "paper": p}), d) for p, d in zip(paper, data))
    if paper == NEVER or data == NEVER:
        return paper == data
    if is_number(paper) and is_number(data):
        return _num_match(float(paper), float(data), claim)
    return str(paper) == str(data)


def consistent_with_bound(claim: Claim, data, bound: str) -> bool:
    """Whether the paper's value can be the truth that `data`, a bound, bounds: "upper" (the truth is at most
    data), "lower" (at least), "none" (no bound either way: always); within the paper's rounding (`compare`)."""
    if compare(claim, data) or bound == "none":
        return True
    if not (is_number(claim.paper) and is_number(data)):
        return False
    paper, tol = float(claim.paper), half_unit(claim) + 1e-9 * max(1.0, abs(float(claim.paper)))
    return paper <= float(data) + tol if bound == "upper" else paper >= float(data) - tol
