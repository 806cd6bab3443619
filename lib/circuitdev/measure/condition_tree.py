"""Many ablation conditions of one batch, each layer computed once per distinct history: a prefix tree of conditions.

A condition zeroes (or mean-fills) some heads' slices of W_O's input at some layers. Two conditions that ablate
the same heads at layers 0 .. g-1 carry the same residual stream into layer g, so layer g's attention input -- its
queries, keys, values, scores and z, W_O's input -- is the same for both: only what comes after W_O at layer g can
differ. In a block whose MLP reads the block's input (GPT-NeoX's parallel residual), that MLP's output is shared too.

`branch_plan` orders the conditions by their per-layer head sets and gives each the earlier condition (or the
unablated forward, ROOT) it shares the longest history with; the conditions that branch off the same one at the
same layer form a `Branch`, stacked in one forward that starts at that layer from what the parent's forward kept
there. `run_branches` executes a plan for one block of sequences through the model's own forward: the layers below
a branch's layer stand in as `_Reuse` (the kept input), the branch layer's attention as `_ReuseAttention` (the kept
z through W_O, where the head mask's pre-hook ablates it), a parallel block's MLP as `_Kept`. Nothing is computed
twice that does not differ; every condition's logits are those of its own forward (to float rounding: the rows meet
other matmul shapes; tests/test_ablation_batched.py).
"""

from __future__ import annotations

from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import torch

from circuitdev.measure.capture import chunks
from circuitdev.measure.families import Layout

ROOT = -1  # the unablated forward: the parent of every condition that shares nothing with another
Key = tuple[tuple[int, ...], ...]  # a condition's ablated heads, layer by layer


@dataclass(frozen=True)
class Branch:
    """Conditions that ablate what `parent` ablates below `layer` and something else at `layer`: one stacked
    forward from `layer` on. layer == n_layers: identical to the parent (its logits are theirs)."""

    parent: int  # a condition's index, or ROOT
    layer: int
    members: tuple[int, ...]


def condition_keys(keep: torch.Tensor) -> list[Key]:
    """Per condition of a (C, L, H) keep mask (False: ablated), its ablated heads per layer."""
    return [tuple(tuple(int(h) for h in torch.nonzero(~row).flatten()) for row in cond) for cond in keep]


def shared_layers(a: Key, b: Key) -> int:
    """How many layers, from layer 0, two conditions ablate alike."""
    n = 0
    while n < len(a) and a[n] == b[n]:
        n += 1
    return n


def branch_plan(keys: list[Key]) -> list[Branch]:
    """The branches of a set of conditions, in the order they run (every parent before its children).

    The conditions are sorted by their keys; in sorted order, the longest history a condition shares with any
    earlier one is the one it shares with its predecessor (ROOT, which ablates nothing, sorts first). Its parent is
    the earliest condition sharing that much, so that siblings share one parent and stack in one forward."""
    n_layers = len(keys[0]) if keys else 0
    seen: list[tuple[int, Key]] = [(ROOT, ((),) * n_layers)]
    branches: dict[tuple[int, int], list[int]] = {}
    for c in sorted(range(len(keys)), key=lambda c: keys[c]):
        layer = shared_layers(keys[c], seen[-1][1])
        parent = next(p for p, k in seen if shared_layers(keys[c], k) >= layer)
        branches.setdefault((parent, layer), []).append(c)
        seen.append((c, keys[c]))
    return [Branch(p, layer, tuple(m)) for (p, layer), m in branches.items()]


def root_runs(plan: list[Branch]) -> bool:
    """Whether the unablated forward is worth running: some branch reuses its layers, or is it (no ablation). A
    branch at layer 0 alone would only save layer 0's attention, at the cost of a whole forward."""
    return any(b.parent == ROOT and b.layer > 0 for b in plan)


def kept_layers(plan: list[Branch], n_layers: int, *, with_root: bool) -> dict[int, set[int]]:
    """Per parent (a condition or ROOT), the layers its forward keeps for its children's branches."""
    needs: dict[int, set[int]] = defaultdict(set)
    for b in plan:
        if b.layer < n_layers and (b.parent != ROOT or with_root):
            needs[b.parent].add(b.layer)
    return needs


class HeadMask:
    """The hooks of a plan's forwards: W_O's pre-hook at every layer some condition ablates, writing 0 (or the head's
    mean) where the current rows' mask (`rows`, (B, L, H) bool, set before each forward) is False; with
    `query_only`, the last layer's MLP run on the last position only (nothing reads the others: the logits are the
    query's). `keeping` keeps layers' inputs, W_O inputs (before the mask) and parallel MLPs' outputs in one
    forward; `reusing` stands them in for the layers below a branch and at its layer. Restores the model on exit."""

    def __init__(self, model, layout: Layout, keep: torch.Tensor, *, fill: torch.Tensor | None = None,
                 query_only: bool = False):
        self.model, self.layout, self.keep, self.fill = model, layout, keep, fill  # fill: (L, H * d_head) or None
        self.query_only = query_only
        self.rows: torch.Tensor | None = None
        self.stack = model.get_submodule(layout.layer_path(0).rsplit(".", 1)[0])  # the decoder layers' ModuleList
        self.originals = list(self.stack)
        self.attentions = [getattr(block, layout.family.attention) for block in self.originals]
        self.mlps = [getattr(block, layout.family.mlp) for block in self.originals]

    def _out_proj(self, layer: int) -> torch.nn.Module:
        return getattr(self.attentions[layer], self.layout.family.out_proj)

    def _pre_hook(self, layer: int):
        H, dh = self.layout.n_heads, self.layout.head_dim
        fill = None if self.fill is None else self.fill[layer].reshape(1, 1, H, dh)

        def pre_hook(module, args):
            z = args[0]  # (B, T, H * d_head)
            b = z.shape[0]
            m = self.rows[:, layer].to(z.device).reshape(b, 1, H, 1)
            other = torch.zeros((), dtype=z.dtype, device=z.device) if fill is None else fill.to(z)
            return (torch.where(m, z.reshape(b, z.shape[1], H, dh), other).reshape(z.shape), *args[1:])

        return pre_hook

    def __enter__(self) -> "HeadMask":
        touched = [layer for layer in range(self.layout.n_layers) if not bool(self.keep[:, layer].all())]
        self.handles = [self._out_proj(layer).register_forward_pre_hook(self._pre_hook(layer)) for layer in touched]
        if self.query_only:  # (B, T, d) -> (B, 1, d); the block's residual sum broadcasts it, right at the last row
            self.handles.append(self.mlps[-1].register_forward_pre_hook(
                lambda module, args: (args[0][:, -1:], *args[1:])))
        return self

    def __exit__(self, *exc) -> None:
        for h in self.handles:
            h.remove()
        for layer, block in enumerate(self.originals):
            self.stack[layer] = block
            setattr(block, self.layout.family.attention, self.attentions[layer])
            setattr(block, self.layout.family.mlp, self.mlps[layer])

    @contextmanager
    def keeping(self, layers) -> Iterator[dict[int, dict[str, torch.Tensor]]]:
        """In the forward inside: per layer g of `layers`, "input" (layer g - 1's output; g > 0), "z" (W_O's input,
        before any head is masked) and, in a parallel block, "mlp" (its MLP's output)."""
        got: dict[int, dict[str, torch.Tensor]] = {g: {} for g in layers}

        def put(slot: dict, key: str) -> Callable:
            return lambda value: slot.__setitem__(key, value.clone())

        hooks = []
        for g, slot in got.items():
            if g > 0:
                hooks.append(self.originals[g - 1].register_forward_hook(
                    lambda mod, args, out, put=put(slot, "input"): put(out)))
            hooks.append(self._out_proj(g).register_forward_pre_hook(  # prepend: before the head mask's hook
                lambda mod, args, put=put(slot, "z"): put(args[0]), prepend=True))
            if self.layout.parallel_residual:
                hooks.append(self.mlps[g].register_forward_hook(lambda mod, args, out, put=put(slot, "mlp"): put(out)))
        try:
            yield got
        finally:
            for h in hooks:
                h.remove()

    @contextmanager
    def reusing(self, layer: int, state: dict[str, torch.Tensor] | None):
        """For the forward inside: the layers below `layer` replaced by `_Reuse` of the kept input, and `layer`'s
        attention by the kept z through W_O, its MLP by the kept output (each where `state` holds it)."""
        state = state or {}
        if "input" in state:
            for below in range(layer):
                self.stack[below] = _Reuse(state["input"] if below == layer - 1 else None)
        block = self.originals[layer]
        if "z" in state:
            setattr(block, self.layout.family.attention, _ReuseAttention(state["z"], self._out_proj(layer)))
        if "mlp" in state:
            setattr(block, self.layout.family.mlp, _Kept(state["mlp"]))
        try:
            yield
        finally:
            for below in range(layer):
                self.stack[below] = self.originals[below]
            setattr(block, self.layout.family.attention, self.attentions[layer])
            setattr(block, self.layout.family.mlp, self.mlps[layer])


def run_branches(mask: HeadMask, plan: list[Branch], ids: torch.Tensor, *, batch_size: int,
                 query_logits: Callable[[torch.Tensor], torch.Tensor]) -> dict[int, torch.Tensor]:
    """Every condition's query logits on one block of sequences `ids` (b, T): the unablated forward when it pays
    (`root_runs`), then each branch of `plan`, its members' rows stacked condition-major in chunks of `batch_size`.
    A parent's kept tensors are dropped once its branch has used them (each (parent, layer) feeds one branch)."""
    b, n_layers = ids.shape[0], mask.layout.n_layers
    with_root = root_runs(plan)
    needs = kept_layers(plan, n_layers, with_root=with_root)
    states: dict[tuple[int, int], dict[str, torch.Tensor]] = {}
    logits: dict[int, torch.Tensor] = {}
    if with_root:
        mask.rows = mask.keep.new_ones(b, n_layers, mask.layout.n_heads)
        with mask.keeping(sorted(needs[ROOT])) as got:
            logits[ROOT] = query_logits(ids)
        states.update({(ROOT, g): got[g] for g in got})
    for branch in plan:
        if branch.layer == n_layers:  # ablates what its parent does: the same logits
            for c in branch.members:
                logits[c] = logits[branch.parent]
            continue
        state = states.pop((branch.parent, branch.layer), None)  # None: a layer-0 branch without the root forward
        layers = sorted(set().union(*(needs.get(c, set()) for c in branch.members)))
        members = torch.tensor(branch.members)
        rows_of: dict[int, list[torch.Tensor]] = defaultdict(list)
        parts: dict[tuple[int, int, str], list[torch.Tensor]] = defaultdict(list)
        for sl in chunks(len(members) * b, batch_size):
            rows = torch.arange(sl.start, sl.stop)
            cond, local = members[rows // b], rows % b
            mask.rows = mask.keep[cond]
            on = local.to(ids.device)
            with mask.reusing(branch.layer, {k: v[on] for k, v in (state or {}).items()}), \
                    mask.keeping(layers) as got:
                lq = query_logits(ids[on])
            for c in cond.unique().tolist():
                mine = cond == c
                rows_of[c].append(lq[mine])
                for g in needs.get(c, ()):
                    for key, value in got[g].items():
                        parts[(c, g, key)].append(value[mine.to(value.device)])
        for c in branch.members:
            logits[c] = torch.cat(rows_of[c])
        for (c, g, key), values in parts.items():
            states.setdefault((c, g), {})[key] = torch.cat(values)
    return logits


class _Reuse(torch.nn.Module):
    """Stands in for a decoder layer below a branch: returns the kept output of the parent's forward (the layer just
    below the branch), or its input unchanged (the layers under that, whose result it overrides)."""

    def __init__(self, value: torch.Tensor | None):
        super().__init__()
        self.value = value

    def forward(self, hidden_states, *args, **kwargs):
        return hidden_states if self.value is None else self.value


class _ReuseAttention(torch.nn.Module):
    """Stands in for the attention of a branch's layer, whose input is the parent's: the kept W_O input z
    (B, T, H * d_head) through W_O itself, so that the head mask's pre-hook on W_O ablates it; returns (output,
    None) as the attention modules do."""

    def __init__(self, z: torch.Tensor, out_proj: torch.nn.Module):
        super().__init__()
        self.z, self.out_proj = z, out_proj

    def forward(self, *args, **kwargs):
        return self.out_proj(self.z), None


class _Kept(torch.nn.Module):
    """Stands in for a parallel block's MLP at a branch's layer: its output, kept from the parent's forward (it reads
    the block's input, which the branch shares)."""

    def __init__(self, value: torch.Tensor):
        super().__init__()
        self.value = value

    def forward(self, *args, **kwargs):
        return self.value
