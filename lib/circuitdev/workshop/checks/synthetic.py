"""Small seeded inputs the checks run the participant's functions on (a few hundred numbers each, built here: never
the participant's notebook state).

    random_rows       (N, L, H, T) attention rows of the last query, as the probe captures them
    random_patterns   (N, H, T, T) causal attention patterns, optionally with a first-token sink
    small_batch       an induction batch of the paper's construction at a short length, some rows invalid
    synthetic_dev     a two-panel developmental table with the library's columns (sinks that grow, a circuit head
                      that crosses early and falls back, a head exactly at the paper's threshold)
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np


def random_state(seed: int) -> np.random.RandomState:
    return np.random.RandomState(seed)


def softmax_rows(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def random_rows(n: int, layers: int, heads: int, seq_len: int, *, seed: int = 0, sharp: float = 2.0):
    """(N, L, H, T) float32 torch attention rows of the last query (rows sum to 1), peaked at random keys."""
    import torch

    logits = random_state(seed).randn(n, layers, heads, seq_len) * sharp
    return torch.tensor(softmax_rows(logits), dtype=torch.float32)


def random_patterns(n: int, heads: int, seq_len: int, *, seed: int = 0, sharp: float = 2.0, sink: float = 0.0):
    """(N, H, T, T) float32 torch causal attention patterns (row q spreads over keys 0..q); `sink` adds that many
    logits to key 0 of every head but the first."""
    import torch

    logits = random_state(seed).randn(n, heads, seq_len, seq_len) * sharp
    logits[:, 1:, :, 0] += sink
    mask = np.triu(np.ones((seq_len, seq_len), dtype=bool), k=1)
    logits[..., mask] = -np.inf
    return torch.tensor(softmax_rows(logits), dtype=torch.float32)


def small_batch(n: int = 48, seq_len: int = 32, *, seed: int = 1, invalid: Sequence[int] = ()):
    """An induction batch of the paper's construction at a short length; rows listed in `invalid` marked invalid."""
    from circuitdev.measure.batch import induction_batch

    batch = induction_batch(n=n, seq_len=seq_len, seed=seed, vocab_range=(3, 200))
    if invalid:
        valid = batch.valid.copy()
        valid[list(invalid)] = False
        batch = dataclasses.replace(batch, valid=valid)
    return batch


def synthetic_dev(seed: int = 18):
    """A small developmental table (2 panels x 4 revisions x 2 layers x 4 heads) with the library's columns."""
    import pandas as pd

    from circuitdev.measure.classify import classify
    from circuitdev.schema import HEAD_CLASSES, sel_column

    rng = random_state(seed)
    rows = []
    for panel, tokens in (("dense", (1, 2, 8, 30)), ("moe", (1, 3, 9, 40))):
        for r, t in enumerate(tokens):
            for layer in range(2):
                for head in range(4):
                    rows.append({"panel": panel, "revision": f"step{t * 1000}", "step": t * 1000,
                                 "tokens_b": float(t), "layer": layer, "head": head})
    dev = pd.DataFrame(rows)
    for c in HEAD_CLASSES:
        dev[sel_column(c)] = np.exp(rng.uniform(-1, 7, size=len(dev)))
    growth = dev["tokens_b"].rank(method="dense").to_numpy()
    dev["sel_first_token"] *= growth / 2  # sinks grow over training
    dev.loc[dev.index[5], "sel_first_token"] = 30.0  # exactly at the paper's threshold
    dev["sel_induction"] = np.where((dev["layer"] == 1) & (dev["head"] < 3), 20.0 * growth, dev["sel_induction"] / 20)
    h1 = (dev["panel"] == "dense") & (dev["head"] == 1) & (dev["layer"] == 1)
    dev.loc[h1 & (dev["revision"] == "step2000"), "sel_induction"] = 60.0  # a circuit head crosses early ...
    dev.loc[h1 & (dev["revision"] == "step8000"), "sel_induction"] = 10.0  # ... and falls back below 50x
    return dev.join(classify(dev))
