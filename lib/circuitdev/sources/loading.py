"""Load one revision of a panel as a plain Hugging Face CausalLM, ready for the probes (method reference §4).

Rules, all enforced here: eager attention by default (the probes need attention probabilities; `sdpa` returns none),
the panel's dtype unless overridden, the device chosen automatically (CUDA, then Apple MPS, then CPU), weights only
from safetensors (`use_safetensors=True`) and never `trust_remote_code`. The caller keeps one revision in memory at a
time: `with loaded_revision(...) as model:` frees it on leaving the block.

Every failure a user can fix becomes a `ModelUnavailableError` naming the model, the revision and the fix: an offline or
unreachable hub (populate the HF cache, or use a local-folder panel), a missing local folder (reported as a folder,
not as a malformed repo id), a revision without safetensors weights.
"""

from __future__ import annotations

import gc
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import torch

from circuitdev.errors import ConfigError, ModelUnavailableError
from circuitdev.sources.panels import Panel, normalize_dtype
from circuitdev.sources.revision import Revision

AttnImplementation = Literal["eager", "sdpa"]
TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
SAFETENSORS_FILES = ("model.safetensors", "model.safetensors.index.json")


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """`None`/"auto": CUDA when present, else Apple MPS, else CPU. Otherwise the device asked for, checked."""
    if device is None or str(device) == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ConfigError(f"unknown device {device!r}; use auto, cpu, cuda, cuda:N or mps") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} asked for, but torch sees no CUDA GPU here; use --device cpu or auto")
    if dev.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ConfigError(f"device {device!r} asked for, but MPS is not available here; use --device cpu or auto")
    return dev


def torch_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """"fp32" / "float16" / torch.bfloat16 ... -> the torch dtype."""
    if isinstance(dtype, torch.dtype):
        return dtype
    return TORCH_DTYPES[normalize_dtype(dtype)]


def revision_source(panel: Panel, revision: Revision) -> tuple[str, dict]:
    """What `from_pretrained` gets for this revision: (path or hub id, extra kwargs). Checks local folders first."""
    if panel.is_local:
        folder = panel.revision_path(revision)
        check_local_checkpoint(folder, panel, revision)
        return str(folder), {"local_files_only": True}
    return panel.model, {"revision": revision.name}


def check_local_checkpoint(folder: Path, panel: Panel, revision: Revision) -> None:
    where = f"panel {panel.name!r}, revision {revision.name!r}"
    if not Path(panel.model).is_dir():
        raise ModelUnavailableError(
            f"{where}: the panel's model folder {panel.model} does not exist. Create it (for the toy panels: "
            "`circuitdev toy train`), or fix `model:` in the panel file (a path relative to the file)"
        )
    if not folder.is_dir():
        raise ModelUnavailableError(
            f"{where}: local folder {folder} does not exist. Each revision of a folder panel is a sub-folder holding a "
            "`save_pretrained` checkpoint; save that checkpoint there or remove the revision from the panel"
        )
    if not (folder / "config.json").is_file():
        raise ModelUnavailableError(f"{where}: {folder} has no config.json; it is not a `save_pretrained` checkpoint")
    if not any((folder / f).is_file() for f in SAFETENSORS_FILES):
        raise ModelUnavailableError(
            f"{where}: {folder} has no model.safetensors; circuitdev loads weights only from safetensors. Re-save the "
            "checkpoint with `model.save_pretrained(folder)` (safetensors is the default)"
        )


def load_revision(
    panel: Panel,
    revision: str | Revision,
    *,
    dtype: str | torch.dtype | None = None,
    device: str | torch.device | None = None,
    attn_implementation: AttnImplementation = "eager",
    progress: bool = True,
):
    """Load one revision of a panel: a `PreTrainedModel` in eval mode on `device`, in `dtype` (default: the panel's).

    Use attn_implementation="eager" whenever attention probabilities are read (the screen); "sdpa" is faster and is
    what the authors' PR run used, but returns no attention weights. On a CPU a mixture of experts (OLMoE) runs
    its experts one after another (`experts_implementation="eager"`): transformers' default, grouped_mm, gives the
    same logits there (tests/test_loading.py) about a third slower on the toy panels.
    """
    from transformers import AutoModelForCausalLM

    if not isinstance(panel, Panel):
        raise TypeError(f"load_revision takes a Panel, got {panel!r}: load it with `load_panel(NAME)`")
    rev = revision if isinstance(revision, Revision) else panel.revision(revision)
    dev = resolve_device(device)
    tdtype = torch_dtype(dtype or panel.dtype)
    source, extra = revision_source(panel, rev)
    if not progress:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    if dev.type == "cpu":  # a mixture of experts' plain loop: the same numbers as grouped_mm, faster on a CPU
        extra = {**extra, "experts_implementation": "eager"}
    try:
        model = AutoModelForCausalLM.from_pretrained(
            source,
            dtype=tdtype,
            attn_implementation=attn_implementation,
            use_safetensors=True,
            trust_remote_code=False,
            **extra,
        )
    except Exception as err:
        raise _unavailable(panel, rev, err) from None
    check_family(model, panel)
    return model.to(dev).eval()


def check_family(model, panel: Panel) -> None:
    """The checkpoint's architecture must match the panel's `family` (olmo and olmoe share module paths)."""
    from circuitdev.measure.families import FAMILIES, family_of

    model_type = getattr(model.config, "model_type", None)
    claimed = FAMILIES[panel.family]
    for fam in FAMILIES.values():
        if model_type in fam.model_types and fam.name != claimed.name:
            raise ConfigError(
                f"panel {panel.name!r} says family {panel.family!r}, but its checkpoint is model_type {model_type!r} "
                f"(family {fam.name!r}); fix `family:` in {panel.path or 'the panel file'}"
            )
    family_of(model, panel.family)  # raises ArchitectureError if the module layout does not fit


BIG_MODEL_PARAMETERS = 10_000_000  # above this, freeing a model is worth a full collection (~0.5 s)


@contextmanager
def loaded_revision(panel: Panel, revision: str | Revision, **kwargs):
    """`with loaded_revision(panel, rev, dtype=..., device=...) as model:` -- `load_revision` (same keywords), and on
    leaving the block its memory released even where a name still holds the model: a real model's weights go to
    the meta device and `free_memory` runs (a tiny model is simply left to reference counting)."""
    model = load_revision(panel, revision, **kwargs)
    try:
        yield model
    finally:
        if sum(p.numel() for p in model.parameters()) > BIG_MODEL_PARAMETERS:
            model.to("meta")  # drops the weights' storage now, not when the last reference goes
            del model
            free_memory()


def free_memory() -> None:
    """Release what a deleted model held (call after `del model`), so one revision at a time fits."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _chain(err: BaseException) -> list[BaseException]:
    out, seen = [], set()
    while err is not None and id(err) not in seen:
        out.append(err)
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return out


def _unavailable(panel: Panel, rev: Revision, err: Exception) -> ModelUnavailableError:
    """Translate a from_pretrained failure into one message: what is missing, and how to make it available."""
    from huggingface_hub import errors as hf

    chain = _chain(err)
    names = {type(e).__name__ for e in chain}
    text = " ".join(str(e) for e in chain)
    what = f"{panel.model} (panel {panel.name!r}, revision {rev.name!r})"
    fix = (
        "To make it available: on a machine with internet, run `hf download "
        f"{panel.model} --revision {rev.name} --include '*.json' --include '*.safetensors'` and point HF_HOME / HF_HUB_CACHE at "
        "that populated cache here; or save the checkpoint with `save_pretrained` into a folder and use a "
        "local-folder panel (see `circuitdev panels --help`)"
    )
    if panel.is_local:
        return ModelUnavailableError(f"cannot load {what} from {panel.revision_path(rev)}: {err}")
    if any(isinstance(e, hf.RevisionNotFoundError) for e in chain):
        return ModelUnavailableError(f"{what}: the hub has no revision {rev.name!r}. Fix the panel's revision list")
    if any(isinstance(e, hf.GatedRepoError) for e in chain):
        return ModelUnavailableError(f"{what} is gated: accept its licence on the hub and log in (`hf auth login`)")
    if any(isinstance(e, hf.RepositoryNotFoundError) for e in chain):
        return ModelUnavailableError(f"{what}: no such model on the Hugging Face hub. Fix `model:` in the panel file")
    if "LocalEntryNotFoundError" in names or "couldn't connect" in text or "offline" in text.lower():
        state = "the hub is offline (HF_HUB_OFFLINE=1)" if _offline() else "the hub is unreachable"
        return ModelUnavailableError(f"{what} is not in the local Hugging Face cache and {state}. {fix}")
    if "safetensors" in text:
        return ModelUnavailableError(
            f"{what} has no safetensors weights at this revision; circuitdev never loads pickled weights. Convert "
            "the checkpoint (load it in a trusted environment, `save_pretrained` to a folder) and use a local-folder panel"
        )
    if any(n in names for n in ("ConnectError", "ConnectionError", "Timeout", "ReadTimeout", "ConnectTimeout")):
        return ModelUnavailableError(f"{what}: the Hugging Face hub is unreachable ({err}). {fix}")
    return ModelUnavailableError(f"cannot load {what}: {type(err).__name__}: {err}")


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
