"""The paper's numeric claims (data/claims.yaml): one `Claim` per stated number, with the quantity that re-derives it.

Each entry names where the paper states it, the finding, the paper's value and a `quantity` of the registry in
`analysis.quantities` with its parameters; a `series` expands into one claim per element. `load_claims` validates
every entry against the quantity's signature; `claim_values` gives the paper's values of one claim as a table (the
book quotes and draws them beside the data).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from circuitdev.analysis.quantities import QUANTITIES
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


def load_claims(path: str | Path = CLAIMS_PATH) -> list[Claim]:
    """Read a claims file and expand its series into one Claim each; ConfigError names the claim and the field."""
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
        if raw["quantity"] not in QUANTITIES:
            raise ConfigError(f"{where}: field 'quantity': unknown {raw['quantity']!r}; known: {sorted(QUANTITIES)}")
        for claim in _expand(raw, where):
            if claim.id in seen:
                raise ConfigError(f"{where}: duplicate claim id {claim.id!r}")
            seen.add(claim.id)
            _check_params(claim, where)
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


def _check_params(claim: Claim, where: str) -> None:
    parameters = inspect.signature(QUANTITIES[claim.quantity]).parameters
    accepted = set(parameters) - {"ctx"}
    unknown = set(claim.params) - accepted
    if unknown:
        raise ConfigError(f"{where}: unknown parameter(s) {sorted(unknown)} for quantity {claim.quantity!r}; "
                          f"it takes {sorted(accepted)}")
    required = {n for n, p in parameters.items() if p.default is inspect.Parameter.empty} - {"ctx"}
    missing = sorted(required - set(claim.params))
    if missing:
        raise ConfigError(f"{where}: quantity {claim.quantity!r} needs parameter(s) {missing}")


def claim_values(claim_id: str, *, path: str | Path = CLAIMS_PATH) -> pd.DataFrame:
    """The paper's values of one claim (a series expands into rows): id, the claim's parameters as columns, paper."""
    rows = [{"id": c.id, **c.params, "paper": c.paper} for c in load_claims(path)
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
