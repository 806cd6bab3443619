"""ToyRecipe: every knob of the toy developmental panel, with the shipped recipe as typed, commented defaults.

The toy panel is three tiny causal LMs -- one per family of the paper (GPT-NeoX / Pythia, OLMo, OLMoE) -- trained on
CPU in a few minutes from a procedurally generated corpus, so that a machine with no GPU and no network can watch the
paper's phenomena form. Deviations from the real 1B models (all deliberate, all stated in book/toy_recipe.md):

- tied input/output embeddings (Pythia-1B and OLMoE are untied): untied toys formed no induction head in budget;
- rotary on all head dims (Pythia uses 25%: at head_dim 16 that would leave 4 rotary dims);
- a 1024-token byte-level BPE vocabulary trained on a synthetic corpus (real: ~50k BPE on web text);
- context `seq_len` (real: 2048/4096) and a probe batch of `probe_seq_len` tokens drawn from `probe_vocab_range`;
- no BOS token: windows are cut from a packed token stream with an end-of-document separator, as in Pythia and OLMo,
  so a position-0 sink must be positional (the paper's probe puts a random filler token at position 0);
- a training mixture with synthetic repetition (see `Mixture`) instead of hundreds of billions of web tokens.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field

from circuitdev.errors import ConfigError

FAMILIES = ("gpt_neox", "olmo", "olmoe")
PANEL_NAMES = {"gpt_neox": "toy-pythia", "olmo": "toy-olmo", "olmoe": "toy-olmoe"}


@dataclass(frozen=True)
class Mixture:
    """Share of each kind of training window (normalised at sampling time). See `circuitdev.toy.corpus`."""

    text: float = 0.5  # a window cut from the packed synthetic corpus
    periodic: float = 0.5  # a random 4-16-token span (ids in the probe range) repeated to fill the window
    backcopy: float = 0.0  # Bigram-Backcopy (Guo et al. 2024): Markov chain with context-gated copy triggers
    period_range: tuple[int, int] = (4, 17)  # periodic span length, half-open


@dataclass(frozen=True)
class ToyRecipe:
    seed: int = 0  # one seed drives corpus, tokenizer, data order and initialisation
    # --- corpus (procedural, see corpus.py) and tokenizer
    corpus_words: int = 400_000  # words of synthetic text generated (~1.5 tokens per word)
    lexicon_size: int = 2000  # distinct pseudo-words (Zipf-distributed)
    vocab_size: int = 1024  # byte-level BPE vocabulary, special tokens included
    # --- model (shared by all families; OLMoE splits its MLP into experts)
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 64  # head_dim = d_model / n_head
    d_ff: int = 256  # dense MLP width (4 * d_model)
    n_experts: int = 8  # OLMoE only
    top_k: int = 2  # OLMoE only: experts per token
    d_ff_expert: int = 128  # OLMoE only: width of each expert, so top-k active width == d_ff
    router_aux_loss_coef: float = 0.01  # OLMoE load-balancing loss weight (OLMoE's value)
    # --- optimisation
    seq_len: int = 64  # training context
    batch_size: int = 16  # windows per step
    steps: int = 2000
    lr: float = 3e-3
    warmup: int = 50
    min_lr_frac: float = 0.1  # cosine decay to lr * min_lr_frac
    weight_decay: float = 0.0  # 0 helped induction and sinks (toy_panel_notes)
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    mixture: Mixture = field(default_factory=Mixture)
    # --- checkpoints: steps saved (always including 0 and `steps`); None = `default_grid(steps)`
    checkpoint_steps: tuple[int, ...] | None = None
    # --- probe defaults written to the panel file (ProbeConfig field names)
    probe_seq_len: int = 64
    probe_n: int = 500
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.d_model % self.n_head:
            raise ConfigError(f"d_model={self.d_model} must be divisible by n_head={self.n_head}")
        if self.steps < 1 or self.batch_size < 1 or self.seq_len < 12:
            raise ConfigError("steps and batch_size must be >= 1 and seq_len >= 12")
        if not 0 < self.top_k <= self.n_experts:
            raise ConfigError(f"top_k={self.top_k} must lie in 1..n_experts={self.n_experts}")
        if self.vocab_size < 300:
            raise ConfigError(f"vocab_size={self.vocab_size} must exceed the 257 byte-level ids plus merges (>= 300)")
        if isinstance(self.mixture, dict):
            object.__setattr__(self, "mixture", Mixture(**self.mixture))

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.seq_len

    @property
    def probe_vocab_range(self) -> tuple[int, int]:
        """Ids used by the probe batch and by the periodic windows: every merged BPE token (not the raw bytes)."""
        return (first_merge_id(), self.vocab_size)

    def grid(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.checkpoint_steps or default_grid(self.steps)) | {0, self.steps}))

    def probe_defaults(self) -> dict:
        return {"seq_len": self.probe_seq_len, "vocab_range": list(self.probe_vocab_range), "n": self.probe_n,
                "n_pr": min(500, self.probe_n)}

    def replace(self, **changes) -> "ToyRecipe":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def from_dict(cls, d: dict) -> "ToyRecipe":
        d = dict(d)
        if "mixture" in d:
            d["mixture"] = Mixture(**{k: tuple(v) if isinstance(v, list) else v for k, v in d["mixture"].items()})
        for k in ("betas", "checkpoint_steps"):
            if d.get(k) is not None:
                d[k] = tuple(d[k])
        return cls(**d)

    def recipe_hash(self) -> str:
        """12 hex digits; a checkpoint folder is reused only if its stored hash matches."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:12]

    def corpus_hash(self) -> str:
        keys = ("seed", "corpus_words", "lexicon_size", "vocab_size")
        return hashlib.sha256(json.dumps({k: getattr(self, k) for k in keys}).encode()).hexdigest()[:12]


def first_merge_id() -> int:
    """Special tokens take ids 0.., the 256 byte-level symbols follow, merges start after them."""
    from circuitdev.toy.tokenizer import SPECIAL_TOKENS

    return len(SPECIAL_TOKENS) + 256


def default_grid(steps: int) -> tuple[int, ...]:
    """Log-spaced early points plus a dense stretch over the transitions (measured at 10-50% of a 2000-step run).

    At 2000 steps: 0 1 4 16 64 128 200 300 400 500 600 700 800 1000 1200 1400 1700 2000.
    """
    frac = (0, 1 / 2000, 4 / 2000, 16 / 2000, 64 / 2000, 0.064, 0.10, 0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.50, 0.60,
            0.70, 0.85, 1.0)
    return tuple(sorted({max(0, min(steps, round(f * steps))) for f in frac}))
