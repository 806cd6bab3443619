"""One probe run of one checkpoint: batch → capture → screen · PR · alternative metrics → a per-head table.

`probe_model` returns a `ProbeResult`: the per-head table and, beside it, what is not one value per head (the
bootstrap replicates, the null draws, the revision's behaviour -- top-1 and loss at B, ICL score, first-position
norms, from the same forward passes (`measure.behaviour`) -- and timings). This is what `circuitdev probe` stores
per (panel, revision, configuration). With `null_pr_draws`, the PR null's random batches go through the same
loaded model too (`null_prs`, as `circuitdev null-pr` runs them: sdpa, the same chunks), so the null job reads them
instead of loading every revision again. Ablations are separate calls (`measure.ablation`).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from circuitdev.measure.batch import InductionBatch, induction_batch, repeated_batch
from circuitdev.measure.behaviour import Behaviour, SequenceBehaviour, summarise
from circuitdev.measure.bootstrap import bootstrap_selectivities, percentile_interval
from circuitdev.measure.capture import Capture, as_token_tensor, capture, chunks, prefix_pass
from circuitdev.measure.config import ProbeConfig
from circuitdev.measure.families import family_of
from circuitdev.schema import HEAD_CLASSES, sel_column
from circuitdev.measure.classify import circuit_memberships, classify
from circuitdev.measure.screen import null_selectivity, selectivities
from circuitdev.measure.spectral import head_prs, participation_ratios


@dataclass(frozen=True)
class ProbeResult:
    """What one probe of one checkpoint measured."""

    table: pd.DataFrame  # one row per (layer, head): see `probe_model`
    family: str  # the architecture family (measure.families)
    n_valid: int  # sequences of the batch whose A/B positions are valid
    replicates: np.ndarray | None = None  # (B, 6, L, H) bootstrap replicates, classes in HEAD_CLASSES order
    nulls: np.ndarray | None = None  # (n_nulls, L, H) null induction selectivities (method reference §3)
    behaviour: Behaviour | None = None  # top-1, loss at B, ICL score with intervals, per-stream norms
    null_pr: np.ndarray | None = None  # (null_pr_draws, L, H) each head's PR on random ids (`null_prs`)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage

    @property
    def null_summary(self) -> dict | None:
        """The whole-model null statistics of F6: n_nulls, null_p99, null_max, real_max, k_above_null_p99."""
        if self.nulls is None:
            return None
        p99 = float(np.percentile(self.nulls, 99))
        real = self.table["sel_induction"]
        return {"n_nulls": int(len(self.nulls)), "null_p99": p99, "null_max": float(self.nulls.max()),
                "real_max": float(real.max()), "k_above_null_p99": int((real > p99).sum())}

    def summary(self) -> dict:
        """The per-revision facts a record's sidecar keeps (family, valid sequences, null statistics)."""
        return {"family": self.family, "n_valid": self.n_valid,
                **({"null": self.null_summary} if self.nulls is not None else {})}


def batch_for(config: ProbeConfig) -> InductionBatch:
    return induction_batch(
        config.n, config.seq_len, config.seed, config.vocab_range, first_a_range=config.first_a_range,
        first_token=config.first_token_id,
    )


def head_table(cap: Capture, batch: InductionBatch, config: ProbeConfig
               ) -> tuple[pd.DataFrame, np.ndarray | None, float]:
    """Per-head screen from a capture: six selectivities, classification, circuits, PR, first-token masses.
    Returns (table, bootstrap replicates (B, 6, L, H) or None when config.n_boot = 0, seconds the bootstrap took)."""
    L, H = cap.n_layers, cap.n_heads
    sel = selectivities(
        cap.attn_rows,
        batch,
        baseline_size=config.baseline_size,
        baseline_seed=config.baseline_seed,
        baseline_excludes_ab=config.baseline_excludes_ab,
    )
    layer, head = np.divmod(np.arange(L * H), H)
    table = pd.DataFrame({"layer": layer, "head": head})
    for c in HEAD_CLASSES:
        table[sel_column(c)] = sel[c].reshape(-1)
    replicates, boot_s = None, 0.0
    if config.n_boot:  # 95% intervals from resampling the sequences (no forward pass: the query rows are captured)
        t0 = time.perf_counter()
        replicates = bootstrap_selectivities(
            cap.attn_rows, batch, n_boot=config.n_boot, seed=config.boot_seed, baseline_size=config.baseline_size,
            baseline_seed=config.baseline_seed, baseline_excludes_ab=config.baseline_excludes_ab,
        )  # (B, 6, L, H)
        for k, c in enumerate(HEAD_CLASSES):
            lo, hi = percentile_interval(replicates[:, k], sel[c])
            table[sel_column(c) + "_lo"], table[sel_column(c) + "_hi"] = lo.reshape(-1), hi.reshape(-1)
        boot_s = time.perf_counter() - t0
    table = table.join(classify(table, threshold=config.class_threshold))
    table = table.join(
        circuit_memberships(
            table,
            induction_threshold=config.induction_threshold,
            prev_token_threshold=config.prev_token_threshold,
            bos_threshold=config.bos_threshold,
        )
    )
    table["pr"] = head_prs(cap.head_out, n=min(config.n_pr, batch.n)).reshape(-1)
    # Second-A mass on position 0 beside the ratio: selectivity alone hides how much attention that is.
    table["mass_first_token"] = cap.attn_rows[..., 0].mean(0).reshape(-1).numpy()
    mass_allq = cap.mass_first_allq.double().mean(0)  # (L, H) ratio of means, not mean of ratios
    base_allq = cap.base_first_allq.double().mean(0)
    table["sel_first_token_allq"] = (mass_allq / base_allq.clamp(min=1e-8)).reshape(-1).numpy()
    table["mass_first_token_allq"] = mass_allq.reshape(-1).numpy()
    # Our all-query mass rule (queries >= allq_skip, sequences averaged before the threshold) ...
    table["is_sink_mass"] = table["mass_first_token_allq"] > config.sink_rate_epsilon
    # ... and Gu et al.'s (sail-sg/Attention-Sink): every query, thresholded per sequence, then averaged
    table["gu_sink_share"] = (cap.mass_first_all > config.sink_rate_epsilon).double().mean(0).reshape(-1).numpy()
    return table, replicates, boot_s


def probe_model(model: torch.nn.Module, config: ProbeConfig | None = None, *, progress: bool = True,
                behaviour: bool = True) -> ProbeResult:
    """Screen every head of `model` (an eager-attention HF CausalLM) with `config`; one row per (layer, head).

    Columns: layer, head, sel_<class> x6, sel_<class>_lo / _hi x6 (95% bootstrap intervals; absent when
    config.n_boot = 0), best_class, best_selectivity, second_class, second_selectivity,
    classification, in_induction_circuit, in_prev_token_circuit, is_bos, pr, mass_first_token,
    sel_first_token_allq, mass_first_token_allq, is_sink_mass, gu_sink_share, prefix_matching, null_induction_p99 -- as
    `result.table`; the bootstrap replicates the intervals come from, the null draws and the timings beside it,
    and `result.behaviour` (`measure.behaviour`; the ICL score needs config.n_prefix > 0). `behaviour=False`
    leaves the behaviour out (the per-head table is the same either way; bench/behaviour.py times the difference).
    """
    config = config or ProbeConfig()
    layout = family_of(model)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    batch = batch_for(config)
    as_token_tensor(batch.tokens[:1], model)  # vocab check before any work
    cap = capture(model, batch.tokens, batch_size=config.batch_size, allq_skip=config.allq_skip, layout=layout,
                  progress=progress, target=batch.target if behaviour else None, norms=behaviour)
    timings["capture_s"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    table, replicates, boot_s = head_table(cap, batch, config)
    timings["screen_s"] = time.perf_counter() - t1  # includes the bootstrap, also timed on its own (boot_s)
    if replicates is not None:
        timings["boot_s"] = boot_s
    icl = None
    if config.n_prefix:
        t2 = time.perf_counter()
        rep = repeated_batch(config.n_prefix, config.seq_len, config.seed, config.vocab_range,
                             first_token=config.first_token_id)
        scores, icl = prefix_pass(model, rep, layout=layout, batch_size=config.batch_size, icl=behaviour)
        table["prefix_matching"] = scores.reshape(-1)
        timings["prefix_s"] = time.perf_counter() - t2
    else:
        table["prefix_matching"] = np.nan
    nulls = None
    if config.n_nulls:
        t3 = time.perf_counter()
        nulls = null_selectivity(
            cap.attn_rows, batch, n_nulls=config.n_nulls, seed=config.null_seed,
            baseline_size=config.baseline_size, baseline_seed=config.baseline_seed,
            baseline_excludes_ab=config.baseline_excludes_ab,  # the selectivities' own baseline: one scale
        )  # (draws, L, H)
        table["null_induction_p99"] = np.percentile(nulls, 99, axis=0).reshape(-1)
        timings["null_s"] = time.perf_counter() - t3
    else:
        table["null_induction_p99"] = np.nan
    summary = None
    if behaviour:  # the per-sequence values are reduced already; this is the bootstrap over them
        t4 = time.perf_counter()
        seqs = SequenceBehaviour(correct=cap.query_correct.numpy(), loss=cap.query_loss.double().numpy(), icl=icl,
                                 norm_pos0=cap.norm_pos0.numpy(), norm_median=cap.norm_median.numpy())
        summary = summarise(seqs, n_boot=config.n_boot, boot_seed=config.boot_seed)
        timings["behaviour_s"] = time.perf_counter() - t4
    null_pr_draws = None
    if config.null_pr_draws:
        t5 = time.perf_counter()
        with attention_implementation(model, "sdpa"):  # no probabilities are read: as `circuitdev null-pr` loads it
            null_pr_draws = null_prs(model, config, n=config.n_pr, first_token=config.first_token_id,
                                     seeds=[config.null_pr_seed + d for d in range(config.null_pr_draws)])
        timings["null_pr_s"] = time.perf_counter() - t5
    timings["total_s"] = time.perf_counter() - t0
    return ProbeResult(table, family=layout.family.name, n_valid=int(batch.valid.sum()), replicates=replicates,
                       nulls=nulls, behaviour=summary, timings=timings, null_pr=null_pr_draws)


@contextmanager
def attention_implementation(model: torch.nn.Module, implementation: str):
    """The model's attention implementation switched for the block (transformers' `set_attn_implementation`: every
    attention module reads it at each forward), then switched back."""
    before = model.config._attn_implementation
    model.set_attn_implementation(implementation)
    try:
        yield model
    finally:
        model.set_attn_implementation(before)


def null_pr(model: torch.nn.Module, config: ProbeConfig | None = None, *, n: int = 2000, seed: int = 2026,
            first_token: int | None = None) -> np.ndarray:
    """(L, H) PR of each head at the last position of `n` sequences of uniform random ids in [0, vocab_size)
    (RandomState(seed), length config.seq_len) -- the PR null of method reference §3 (the authors: final checkpoint,
    N = 2000). `first_token`: an id put at position 0 of every sequence (the toy panels' BOS, `first_token_id`, as
    their probe batch has it); None, the paper's, leaves it random. One draw of `null_prs`."""
    return null_prs(model, config, n=n, seeds=[seed], first_token=first_token)[0]


def null_prs(model: torch.nn.Module, config: ProbeConfig | None = None, *, n: int = 2000, seeds: list[int],
             first_token: int | None = None) -> np.ndarray:
    """(D, L, H): `null_pr` for each seed of `seeds` (one random batch per seed), all draws through the same
    forwards: the batches stacked, chunks of config.batch_size rows, W_O's input at the last position read by a
    forward pre-hook, the forward stopped there (the last MLP and the logits are not computed; `sources.null_pr`
    calls it at every revision)."""
    config = config or ProbeConfig()
    layout = family_of(model)
    vocab = model.get_input_embeddings().num_embeddings
    draws = []
    for seed in seeds:
        ids = np.random.RandomState(seed).randint(0, vocab, size=(n, config.seq_len))
        if first_token is not None:
            ids[:, 0] = first_token
        draws.append(ids)
    ids = as_token_tensor(np.concatenate(draws), model)
    q, H, dh = config.seq_len - 1, layout.n_heads, layout.head_dim
    z: list[list[torch.Tensor]] = [[] for _ in range(layout.n_layers)]  # per layer, per chunk (B, H, dh)

    def hook_for(layer: int):
        def pre_hook(module, args):
            z[layer].append(args[0][:, q].float().reshape(args[0].shape[0], H, dh).cpu())
            if layer == layout.n_layers - 1:
                raise _Done  # nothing after the last W_O input is needed: its MLP and the logits are skipped
        return pre_hook

    handles = [model.get_submodule(layout.out_proj_path(layer)).register_forward_pre_hook(hook_for(layer))
               for layer in range(layout.n_layers)]
    try:
        with torch.no_grad():
            for sl in chunks(ids.shape[0], config.batch_size):
                try:
                    model(input_ids=ids[sl])
                except _Done:
                    pass
    finally:
        for h in handles:
            h.remove()
    heads = torch.stack([torch.cat(parts) for parts in z], dim=1)  # (D * n, L, H, dh)
    per_draw = heads.reshape(len(seeds), n, *heads.shape[1:])  # (D, n, L, H, dh)
    return np.stack([participation_ratios(d.permute(1, 2, 0, 3)) for d in per_draw])


class _Done(Exception):
    """Raised by `null_prs`' last hook to end a forward once everything it reads is read."""
