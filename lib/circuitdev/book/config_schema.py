"""The pipeline's configuration checked before Snakemake plans a job: `check_pipeline_config(config)`.

Snakemake takes any key: a misspelt one (`toy_seed:`) is ignored without a word, and a bad value (a seed of -1, a
refine metric that does not exist) passes the dry run and fails only when its job runs, maybe hours later. The
Snakefile calls this first; every problem is listed in one ConfigError (exit 2 from the CLI; Snakemake prints it
and stops before any job), each with the key, the value and the fix -- an unknown key with the closest known one.

The schema is `SCHEMA` below: each top-level key of config/pipeline.yaml with a check of its value; the mappings
whose keys are fixed (`cluster`, `workshop`, `model_notebook`, a `notebooks` / `refine` entry) list them.
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Callable

from circuitdev.errors import ConfigError

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # a name that becomes a file or folder name
DEVICE_RE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")

CLUSTER_KEYS = ("account", "partition", "mem_mb", "runtime", "max_cpus", "gpu_partition", "gpu", "gpu_model", "gres",
                "gpu_cpus", "gpu_mem_mb", "gpu_runtime")
WORKSHOP_KEYS = ("sources", "execute")
MODEL_NOTEBOOK_KEYS = ("source", "parameters")
NOTEBOOK_KEYS = ("name", "source", "parameters", "panels")
REFINE_KEYS = ("panel", "metric", "max_new")


def closest(name: str, known) -> str:
    """" (did you mean `x`?)" for the closest of `known`, or ""."""
    match = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=0.6)
    return f" (did you mean `{match[0]}`?)" if match else ""


def _keys(where: str, value: dict, known, problems: list[str]) -> None:
    for key in value:
        if key not in known:
            problems.append(f"{where}: unknown key `{key}`{closest(key, known)}; known: {', '.join(known)}")


def _mapping(where: str, value, problems: list[str]) -> dict | None:
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.append(f"{where}: must be a mapping (`{{key: value}}`), got {value!r}")
        return None
    return value


def _list(where: str, value, problems: list[str]) -> list | None:
    if value is None:
        return []
    if not isinstance(value, list):
        problems.append(f"{where}: must be a list (`[a, b]`), got {value!r}")
        return None
    return value


def _int(where: str, value, problems: list[str], *, low: int | None = None, none_ok: bool = False) -> None:
    if value is None and none_ok:
        return
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):  # `--config k=[0,1]` gives text
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or (low is not None and value < low):
        bound = f" >= {low}" if low is not None else ""
        problems.append(f"{where}: must be an integer{bound}{' or null' if none_ok else ''}, got {value!r}")


def _folder(where: str, value, problems: list[str]) -> None:
    if value is not None and not isinstance(value, str):
        problems.append(f"{where}: must be a folder path (text), got {value!r}")
    elif isinstance(value, str) and "\0" in value:
        problems.append(f"{where}: a path cannot hold a NUL character")


def _as_flag(value):
    """"true" / "false" (what `--config key=true` may give) as booleans; anything else unchanged."""
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return value


def _choice(*choices) -> Callable:
    def check(where, value, problems, config):
        if _as_flag(value) not in choices:
            shown = ", ".join("null" if c is None else str(c).lower() if isinstance(c, bool) else str(c)
                              for c in choices)
            problems.append(f"{where}: {value!r} is not one of {shown}{closest(value, [str(c) for c in choices])}")
    return check


def _probe_fields(where: str, value, problems: list[str]) -> None:
    import dataclasses

    from circuitdev.measure.config import ProbeConfig

    fields = _mapping(where, value, problems)
    if fields:
        known = [f.name for f in dataclasses.fields(ProbeConfig)]
        _keys(where, fields, known, problems)
        good = {k: v for k, v in fields.items() if k in known}
        try:
            ProbeConfig(**{**ProbeConfig().to_dict(), **good}) if good else None
        except (ConfigError, TypeError, ValueError) as err:
            problems.append(f"{where}: {err}")


def _panel_name(where: str, value, problems: list[str]) -> None:
    text = str(value)
    if not isinstance(value, str) or not (NAME_RE.match(text) or text.endswith((".yaml", ".yml"))):
        problems.append(f"{where}: {value!r} is neither a panel name (letters, digits, '.', '_', '-') nor a "
                        "panel file (.yaml)")


def _check_toy_families(where, value, problems, config):
    from circuitdev.toy.recipe import FAMILIES

    for i, fam in enumerate(_list(where, value, problems) or []):
        if fam not in FAMILIES:
            problems.append(f"{where}[{i}]: {fam!r} is not a toy family{closest(fam, FAMILIES)}; use "
                            f"{', '.join(FAMILIES)}")


def _check_toy_seeds(where, value, problems, config):
    seeds = _list(where, value, problems)
    for i, seed in enumerate(seeds or []):
        _int(f"{where}[{i}]", seed, problems, low=0)
    if seeds and len({str(s).strip() for s in seeds}) != len(seeds):
        problems.append(f"{where}: {seeds!r} names a seed twice")


def _check_null_pr_draws(where, value, problems, config):
    _int(where, value, problems, low=0)


def _check_toy_set(where, value, problems, config):
    import dataclasses

    from circuitdev.toy.recipe import ToyRecipe

    fields = _mapping(where, value, problems)
    if fields:
        _keys(where, fields, [f.name for f in dataclasses.fields(ToyRecipe)], problems)


def _check_panels(where, value, problems, config):
    for i, name in enumerate(_list(where, value, problems) or []):
        _panel_name(f"{where}[{i}]", name, problems)


def _check_probe(where, value, problems, config):
    _probe_fields(where, value, problems)


def _check_probe_panel(where, value, problems, config):
    for panel, fields in (_mapping(where, value, problems) or {}).items():
        _panel_name(f"{where}: key", panel, problems)
        _probe_fields(f"{where}.{panel}", fields, problems)


def _check_device(where, value, problems, config):
    if not isinstance(value, str) or not DEVICE_RE.match(value):
        problems.append(f"{where}: {value!r} is not a device; use auto, cpu, cuda, cuda:N or mps")


def _entries(where, value, keys, problems):
    """(its place, the entry) for each mapping of the list `value`, its keys checked against `keys`; a value that is
    not a list, or an entry that is not a mapping, adds its problem and is skipped."""
    for i, entry in enumerate(_list(where, value, problems) or []):
        at = f"{where}[{i}]"
        entry = _mapping(at, entry, problems)
        if entry is not None:
            _keys(at, entry, keys, problems)
            yield at, entry


def _check_refine(where, value, problems, config):
    from circuitdev.analysis.findings import REVISION_METRICS

    for at, entry in _entries(where, value, REFINE_KEYS, problems):
        if not entry.get("panel"):
            problems.append(f"{at}: needs `panel` (the probed panel to refine)")
        else:
            _panel_name(f"{at}.panel", entry["panel"], problems)
        metric = entry.get("metric")
        if metric not in REVISION_METRICS:
            problems.append(f"{at}.metric: {metric!r} is not a refine metric{closest(metric, REVISION_METRICS)}; "
                            "`circuitdev refine --help` lists them")
        if "max_new" in entry:
            _int(f"{at}.max_new", entry["max_new"], problems, low=1)


def _check_model_notebook(where, value, problems, config):
    entry = _mapping(where, value, problems)
    if entry:
        _keys(where, entry, MODEL_NOTEBOOK_KEYS, problems)
        _mapping(f"{where}.parameters", entry.get("parameters"), problems)


def _check_notebooks(where, value, problems, config):
    seen = set()
    for at, entry in _entries(where, value, NOTEBOOK_KEYS, problems):
        name = entry.get("name")
        if not isinstance(name, str) or not NAME_RE.match(name):
            problems.append(f"{at}.name: {name!r} is not a plain name (it names <generated_dir>/<name>.ipynb)")
        elif name in seen:
            problems.append(f"{at}.name: {name!r} is given twice")
        seen.add(name)
        if not entry.get("source"):
            problems.append(f"{at}: needs `source` (a jupytext page, e.g. notebooks/f1_floor.py)")
        _mapping(f"{at}.parameters", entry.get("parameters"), problems)
        if "panels" in entry:
            _check_panels(f"{at}.panels", entry["panels"], problems, config)


def _check_cluster(where, value, problems, config):
    entry = _mapping(where, value, problems)
    for key, val in (entry or {}).items():
        if key not in CLUSTER_KEYS:
            problems.append(f"{where}: unknown key `{key}`{closest(key, CLUSTER_KEYS)}; known: {', '.join(CLUSTER_KEYS)}")
        elif key in ("mem_mb", "runtime", "gpu_cpus", "gpu_mem_mb", "gpu_runtime"):
            _int(f"{where}.{key}", val, problems, low=1)
        elif key in ("gpu", "max_cpus"):
            _int(f"{where}.{key}", val, problems, low=0, none_ok=True)


def _check_workshop(where, value, problems, config):
    entry = _mapping(where, value, problems)
    if entry:
        _keys(where, entry, WORKSHOP_KEYS, problems)
        if "execute" in entry:
            _choice("auto", True, False)(f"{where}.execute", entry["execute"], problems, config)


def _folder_key(where, value, problems, config):
    _folder(where, value, problems)


def _text(where, value, problems, config):
    if value is not None and not isinstance(value, str):
        problems.append(f"{where}: must be text, got {value!r}")


def _flag(where, value, problems, config):
    if not isinstance(_as_flag(value), bool):
        problems.append(f"{where}: must be true or false, got {value!r}")


def _published_models(where, value, problems, config):
    for i, name in enumerate(_list(where, value, problems) or []):
        if not isinstance(name, str) or not NAME_RE.match(name):
            problems.append(f"{where}[{i}]: {name!r} is not a model name")


SCHEMA: dict[str, Callable] = {
    "data_dir": _folder_key, "results_dir": _folder_key, "published_dir": _folder_key,
    "published_from": _folder_key, "generated_dir": _folder_key, "logs_dir": _folder_key, "book_root": _folder_key,
    "toy_families": _check_toy_families, "toy_set": _check_toy_set, "toy_seeds": _check_toy_seeds,
    "null_pr_draws": _check_null_pr_draws,
    "real_panels": _check_panels, "panels": _check_panels, "probe": _check_probe, "probe_panel": _check_probe_panel,
    "device": _check_device, "refine": _check_refine, "model_notebook": _check_model_notebook,
    "published_models": _published_models, "notebooks": _check_notebooks, "skip_missing_notebooks": _flag,
    "kernel": _text, "workshop": _check_workshop, "cluster": _check_cluster,
    "book": _choice("auto", True, False), "repository_url": _text,
    "workshop_edition": _choice("instructors", "participants"),
}


def pipeline_config_problems(config: dict[str, Any]) -> list[str]:
    """Every problem of a pipeline configuration, one line each ([] when it is valid)."""
    problems: list[str] = []
    if not isinstance(config, dict):
        return [f"the configuration must be a mapping of keys, got {type(config).__name__}"]
    for key, value in config.items():
        check = SCHEMA.get(key)
        if check is None:
            problems.append(f"unknown key `{key}`{closest(key, SCHEMA)}: it would be ignored; the keys are "
                            "those of config/pipeline.yaml")
            continue
        check(key, value, problems, config)
    return problems


def check_pipeline_config(config: dict[str, Any]) -> dict[str, Any]:
    """Raise one ConfigError listing every problem of `config` (see the module docstring); returns it unchanged."""
    problems = pipeline_config_problems(config)
    if problems:
        raise ConfigError("the pipeline configuration has {} problem(s), fix them in config/pipeline.yaml or the "
                          "--config / --configfile given:\n  - {}".format(len(problems), "\n  - ".join(problems)))
    return config
