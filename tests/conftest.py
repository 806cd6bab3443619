"""Shared test fixtures: tiny random models of the three families and tiny local-folder panels.

Use them from any test module (pytest finds this file):

- `tiny_config(family, **overrides)` (plain function) / fixture `tiny_configs`: a fresh HF config for
  "gpt_neox" | "olmo" | "olmoe" -- 2 layers x 4 heads, head_dim 8, vocab 128, context 128. A new object each call
  (`from_config(..., attn_implementation=...)` mutates the config it gets).
- `tiny_model(family, seed=0)`: an eager-attention random CausalLM of that config, in eval mode.
- `TINY_PROBE`: a ProbeConfig small enough for CPU tests (16 sequences of 32 tokens, ids in [3, 120)).
- fixture `make_tiny_panel(family="gpt_neox", revisions=3, name=None, folder=None)`: writes a local-folder panel
  (one `save_pretrained` checkpoint per revision, different seeds, tokens 0 / 1024 / 2048 ...) under `tmp_path`
  and returns the panel file's Path.
- fixture `tiny_panel` (session scope, read-only by convention): a 3-revision gpt_neox panel built once; write
  results elsewhere (tmp_path), never into its folder.

The hub is switched off for every test (`HF_HUB_OFFLINE=1`, an empty HF_HOME) so nothing is downloaded.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

# Before anything imports huggingface_hub (it reads these at import time).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
if "HF_HOME" not in os.environ:
    os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="circuitdev-test-hf-")
    atexit.register(shutil.rmtree, os.environ["HF_HOME"], True)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import yaml  # noqa: E402

from circuitdev.measure.config import ProbeConfig  # noqa: E402
from circuitdev.paths import published_dir  # noqa: E402

# The authors' published files, when this machine has a copy: $CIRCUITDEV_PUBLISHED (CI names its copy there), else
# data/published (where `circuitdev published fetch` and `make book` put them). Tests that need them skip visibly.
PUBLISHED = published_dir()

TINY_FAMILIES = ("gpt_neox", "olmo", "olmoe")
TINY_PROBE = ProbeConfig(n=16, n_pr=16, seq_len=32, vocab_range=(3, 120), baseline_size=10, n_prefix=8, n_nulls=2,
                         batch_size=8)
TINY_TOKENS_PER_STEP = 1024


def tiny_config(family: str, **overrides):
    """A fresh tiny config of the family (2 layers, 4 heads, hidden 32, vocab 128, context 128)."""
    from transformers import GPTNeoXConfig, OlmoConfig, OlmoeConfig

    common = dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                  max_position_embeddings=128)
    if family == "gpt_neox":
        cfg = GPTNeoXConfig(**common)
    elif family == "olmo":
        cfg = OlmoConfig(**common, pad_token_id=1, bos_token_id=None, eos_token_id=0)
    elif family == "olmoe":
        cfg = OlmoeConfig(**common, num_experts=4, num_experts_per_tok=2, pad_token_id=1, eos_token_id=0)
    else:
        raise ValueError(f"unknown tiny family {family!r}; use one of {TINY_FAMILIES}")
    for key, value in overrides.items():
        setattr(cfg, key, value)
    return cfg


def tiny_model(family: str = "gpt_neox", seed: int = 0):
    """A random eager-attention CausalLM of `tiny_config(family)`, deterministic in `seed`."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(tiny_config(family), attn_implementation="eager").eval()


def write_tiny_panel(folder: Path, family: str = "gpt_neox", revisions: int = 3, name: str | None = None,
                     probe: dict | None = None) -> Path:
    """Write checkpoints folder/<name>/step{i}/ and the panel file folder/<name>.yaml; return the file's path."""
    name = name or f"tiny-{family.replace('_', '')}"
    ckpts = folder / name
    revs = []
    for i in range(revisions):
        tiny_model(family, seed=100 + i).save_pretrained(ckpts / f"step{i}")
        revs.append({"name": f"step{i}", "step": i, "tokens": i * TINY_TOKENS_PER_STEP})
    panel = {
        "name": name,
        "model": f"./{name}",
        "family": family,
        "dtype": "fp32",
        "tokens_per_step": TINY_TOKENS_PER_STEP,
        "description": f"tiny random {family} test panel",
        "probe": probe if probe is not None else {"n": 16, "n_pr": 16, "seq_len": 32, "vocab_range": [3, 120],
                                                  "baseline_size": 10, "n_prefix": 8, "n_nulls": 2},
        "revisions": revs,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(panel, sort_keys=False))
    return path


@pytest.fixture
def tiny_configs():
    """{family: fresh config} for the three paper families."""
    return {f: tiny_config(f) for f in TINY_FAMILIES}


@pytest.fixture
def make_tiny_panel(tmp_path):
    """Factory: make_tiny_panel(family="gpt_neox", revisions=3, name=None, folder=None, probe=None) -> panel file."""

    def make(family: str = "gpt_neox", revisions: int = 3, name: str | None = None, folder: Path | None = None,
             probe: dict | None = None) -> Path:
        return write_tiny_panel(Path(folder or tmp_path), family, revisions, name, probe)

    return make


@pytest.fixture(scope="session")
def tiny_panel(tmp_path_factory) -> Path:
    """A 3-revision gpt_neox local-folder panel shared by the session. Read-only: put results in tmp_path."""
    return write_tiny_panel(tmp_path_factory.mktemp("tiny-panel"), "gpt_neox", 3, "tiny-gptneox")


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """A loopback mirror of the authors' files (`loopback_mirror.Mirror`), named by the download's environment
    variables for the test's duration (the fault tests of fetching: test_faults*.py)."""
    from loopback_mirror import Mirror

    m = Mirror(tmp_path / "mirror")
    for key, value in m.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("CIRCUITDEV_PUBLISHED_PARTIAL", raising=False)
    yield m
    m.stop()


@pytest.fixture(autouse=True)
def _close_figures():
    """Close every pyplot figure a test opened: the plot tests draw dozens, and pyplot keeps each one (and its
    memory) until closed."""
    yield
    import sys

    if "matplotlib.pyplot" in sys.modules:  # no import (and no backend) for tests that drew nothing
        sys.modules["matplotlib.pyplot"].close("all")
