"""The adapter table: where each architecture family keeps its layers, attention and output projection.

Everything model-specific in the library is a row here; probes never branch on the model class. A model whose
`config.model_type` is not listed is still accepted when its module layout matches a known row (Llama-style models
do), so `family_of` checks paths, not names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from circuitdev.errors import ArchitectureError

if TYPE_CHECKING:  # torch is imported where a model is resolved, so panel files are checked without it
    import torch.nn as nn

FamilyName = Literal["gpt_neox", "olmo", "olmoe", "llama"]


@dataclass(frozen=True)
class Family:
    name: FamilyName
    layers: str  # dotted path from the CausalLM to the ModuleList of blocks
    attention: str  # attribute of a block: the attention module (returns (output, weights))
    out_proj: str  # attribute of the attention module: W_O; its *input* is the per-head output z
    model_types: tuple[str, ...]  # config.model_type values that select this row directly
    mlp: str = "mlp"  # attribute of a block: its MLP (dense or mixture of experts), one output per position
    # config attribute that says the block is parallel (x + attn(ln1 x) + mlp(ln2 x): the MLP reads the block's
    # input, not the attention's output); None: always sequential
    parallel_residual: str | None = None


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("gpt_neox", "gpt_neox.layers", "attention", "dense", ("gpt_neox",),
               parallel_residual="use_parallel_residual"),
        Family("olmo", "model.layers", "self_attn", "o_proj", ("olmo",)),
        Family("olmoe", "model.layers", "self_attn", "o_proj", ("olmoe",)),
        # Any Llama-style decoder (llama, mistral, qwen2, olmo2, ...) shares this layout.
        Family("llama", "model.layers", "self_attn", "o_proj", ("llama", "mistral", "qwen2", "olmo2", "gemma")),
    )
}


@dataclass(frozen=True)
class Layout:
    """A model resolved against the table: what the probes need to know."""

    family: Family
    n_layers: int
    n_heads: int
    head_dim: int
    parallel_residual: bool = False  # the MLP of a block reads the block's input (GPT-NeoX's default, Pythia)

    def layer_path(self, layer: int) -> str:
        return f"{self.family.layers}.{layer}"

    def attention_path(self, layer: int) -> str:
        return f"{self.layer_path(layer)}.{self.family.attention}"

    def out_proj_path(self, layer: int) -> str:
        return f"{self.attention_path(layer)}.{self.family.out_proj}"

    def mlp_path(self, layer: int) -> str:
        return f"{self.layer_path(layer)}.{self.family.mlp}"

    @property
    def n_total_heads(self) -> int:
        return self.n_layers * self.n_heads


def _get(module: "nn.Module", path: str) -> "nn.Module | None":
    import torch.nn as nn

    for part in path.split("."):
        module = getattr(module, part, None) if not part.isdigit() else (
            module[int(part)] if isinstance(module, nn.ModuleList) and int(part) < len(module) else None
        )
        if module is None:
            return None
    return module


def _fits(model: "nn.Module", fam: Family) -> bool:
    import torch.nn as nn

    layers = _get(model, fam.layers)
    if not isinstance(layers, nn.ModuleList) or len(layers) == 0:
        return False
    attn = getattr(layers[0], fam.attention, None)
    return isinstance(getattr(attn, fam.out_proj, None), nn.Linear)


def family_of(model: "nn.Module", family: str | None = None) -> Layout:
    """Resolve a HF CausalLM to its layout. Pass `family` to force a row; otherwise the model_type or the layout decides."""
    config = getattr(model, "config", None)
    if family is not None:
        if family not in FAMILIES:
            raise ArchitectureError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
        candidates = [FAMILIES[family]]
    else:
        model_type = getattr(config, "model_type", None)
        by_type = [f for f in FAMILIES.values() if model_type in f.model_types]
        candidates = by_type + [f for f in FAMILIES.values() if f not in by_type]
    for fam in candidates:
        if _fits(model, fam):
            return _layout(model, fam)
    looked = "; ".join(f"{f.name}: {f.layers}[i].{f.attention}.{f.out_proj}" for f in candidates)
    raise ArchitectureError(
        f"{type(model).__name__} (model_type={getattr(config, 'model_type', None)!r}) fits no row of the adapter "
        f"table. Looked for these module paths: {looked}. Add a Family row to circuitdev/measure/families.py (and its name to schema.FamilyName) for this layout."
    )


def _layout(model: "nn.Module", fam: Family) -> Layout:
    cfg = model.config
    n_heads = int(cfg.num_attention_heads)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads
    n_layers = len(_get(model, fam.layers))
    out_proj = _get(model, f"{fam.layers}.0.{fam.attention}.{fam.out_proj}")
    if out_proj.in_features != n_heads * head_dim:
        raise ArchitectureError(
            f"{fam.name}: output projection takes {out_proj.in_features} features, expected n_heads*head_dim = "
            f"{n_heads}*{head_dim}; per-head slices would be wrong"
        )
    parallel = bool(fam.parallel_residual and getattr(cfg, fam.parallel_residual, False))
    return Layout(fam, n_layers, n_heads, int(head_dim), parallel_residual=parallel)
