"""ToyRecipe: every knob of the toy developmental panel, with the shipped recipe as typed, commented defaults.

The toy panel is three tiny causal LMs -- one per family of the paper (GPT-NeoX / Pythia, OLMo, OLMoE) -- trained on
CPU in a few minutes from a procedurally generated corpus, so that a machine with no GPU and no network can watch the
paper's phenomena form. Deviations from the real 1B models (all deliberate, all stated in book/toy_recipe.md):

- tied input/output embeddings (Pythia-1B and OLMoE are untied): untied toys formed no induction head in budget;
- rotary on all head dims (Pythia uses 25%: at head_dim 16 that would leave 4 rotary dims);
- a 1024-token byte-level BPE vocabulary trained on a synthetic corpus (real: ~50k BPE on web text);
- context `seq_len` (real: 2048/4096) and a probe batch of `probe_seq_len` tokens drawn from `probe_vocab_range`;
- a BOS token (the end-of-document id) at the start of every training window, and so at position 0 of the probe
  batch (`ProbeConfig.first_token_id`); Pythia and OLMo have none and their position-0 sink is positional, but in
  every toy run without a BOS no lasting position-0 sink formed (book/toy_recipe.md);
- a training mixture with synthetic repetition and a Bigram-Backcopy task (see `Mixture`) instead of hundreds of
  billions of web tokens.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass, field

from circuitdev.errors import ConfigError

# The toy panel of each family of the paper (the names other code and the book rely on).
PANEL_NAMES = {"gpt_neox": "toy-pythia", "olmo": "toy-olmo", "olmoe": "toy-olmoe"}
FAMILIES = tuple(PANEL_NAMES)
# The kinds of training window, in the sampler's order (circuitdev.toy.corpus.WindowSampler): each is a share of
# `Mixture`. `ToyRecipe.window_kinds` are those a recipe trains on.
WINDOW_KINDS = ("text", "periodic", "repeat", "recall", "backcopy")
# naming, and extra checkpoints that change no weight: a recipe differing only there reuses a panel's checkpoints
_NOT_HASHED = {"panel_suffix", "dense_every"}
CORPUS_FORMAT = 2  # bump when the generator or the tokenizer's special tokens change


@dataclass(frozen=True)
class Mixture:
    """Share of each kind of training window (normalised at sampling time); see `circuitdev.toy.corpus`.

    The class defaults are the shipped recipe's second phase: periodic windows keep the induction circuit sharp, the
    repeat windows (the probe's own layout: random filler with a span seen twice) make it work with a single earlier
    match, and the backcopy windows give upper-layer heads a job that is needed only after a rare two-token trigger --
    an active-dormant head, which parks on the BOS when idle (Guo et al. 2024): the attention sink. The first phase
    (`ToyRecipe.mixture`) has text and periodic windows only: random-filler windows from step 0 delay or prevent the
    circuit (book/toy_recipe.md). recall is an experiment documented there (off)."""

    text: float = 0.25  # a window cut from the packed synthetic corpus
    periodic: float = 0.3  # a random 4-16-token span (ids in the probe range) repeated to fill the window
    repeat: float = 0.15  # random filler (probe-range ids) in which a few random spans occur twice (the probe's layout)
    recall: float = 0.0  # random filler in which a recall marker is followed by the window's first token
    backcopy: float = 0.3  # Bigram-Backcopy (Guo et al. 2024): Markov chain with context-gated copy triggers
    bos: bool = True  # start every window with the end-of-document id (a fixed BOS; Pythia/OLMo have none)
    period_range: tuple[int, int] = (4, 17)  # periodic span length, half-open
    repeat_spans: tuple[int, int] = (1, 3)  # repeat windows: number of repeated spans, half-open
    repeat_len: tuple[int, int] = (4, 17)  # repeat windows: span length, half-open

    @classmethod
    def only(cls, kind: str, *, bos: bool = True) -> "Mixture":
        """Windows of one kind only (e.g. to look at what a model does on each), with the BOS as in training."""
        if kind not in WINDOW_KINDS:
            raise ConfigError(f"unknown window kind {kind!r}; the kinds are {', '.join(WINDOW_KINDS)}")
        return cls(**{k: 1.0 if k == kind else 0.0 for k in WINDOW_KINDS}, bos=bos)

    def shares(self) -> tuple[float, ...]:
        """The shares in WINDOW_KINDS order (not normalised)."""
        return tuple(float(getattr(self, k)) for k in WINDOW_KINDS)


# Sequences per forward when a toy panel is probed (ProbeConfig.batch_size, not hashed). A dense toy's record is
# the same bits at any chunk that holds the 64-sequence prefix batch whole (each row is computed alike in any chunk;
# the prefix score is summed over chunks), and chunks of 64 ran its probe, null PR included, 12-16% faster than 250
# side by side on 2 cores (the activations stay in cache; issue 34; tests/test_probe.py). A mixture of experts'
# expert matmuls see as many tokens as the chunk routes to each expert, so its rounding depends on the chunk: it
# keeps the 250 its shipped records were measured with.
TOY_PROBE_CHUNK: dict[str | None, int] = {None: 64, "olmoe": 250}


@dataclass(frozen=True)
class ToyRecipe:
    seed: int = 0  # one seed drives corpus, tokenizer, data order and initialisation
    # --- corpus (procedural, see corpus.py) and tokenizer
    corpus_words: int = 400_000  # words of synthetic text generated (~1.5 tokens per word)
    lexicon_size: int = 2000  # distinct pseudo-words (Zipf-distributed)
    n_topics: int = 0  # documents draw one of n topics that re-rank the unigram words (0: no topics)
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
    steps: int = 2500
    lr: float = 3e-3
    warmup: int = 50
    min_lr_frac: float = 0.1  # cosine decay to lr * min_lr_frac
    weight_decay: float = 0.1  # 0.1 gave sharper induction heads than 0 in the curriculum runs (toy_recipe.md)
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    # curriculum: `mixture` from step 1, then each (start fraction of `steps`, Mixture) of `phases` in order
    # (a phase given as a dict, e.g. via `--set phases=...`, fills unset fields with the Mixture class defaults).
    # Shipped: text + periodic windows first (the circuit forms fast and at the same point for every seed tried),
    # then the repeat windows (the circuit generalises to a single earlier match, as the probe needs) and the
    # backcopy windows (dormant upper-layer heads: the sinks) join.
    mixture: Mixture = field(default_factory=lambda: Mixture(text=0.5, periodic=0.5, repeat=0.0, backcopy=0.0))
    phases: tuple[tuple[float, Mixture], ...] = ((0.3, Mixture()),)
    # --- checkpoints: steps saved (always including 0 and `steps`); None = `default_grid(steps)`
    checkpoint_steps: tuple[int, ...] | None = None
    # --- a dense grid of further checkpoints (every `dense_every` steps; 0: none), saved beside the probed ones and
    # listed as the panel's `candidates:` -- the pool `circuitdev refine` draws from. Saving changes no weight.
    dense_every: int = 10
    # --- probe defaults written to the panel file (ProbeConfig field names)
    probe_seq_len: int = 64
    probe_n: int = 500
    dtype: str = "float32"
    panel_suffix: str = ""  # variants get their own panels, e.g. "-sink" -> toy-pythia-sink (defaults keep the contract names)

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
            object.__setattr__(self, "mixture", _mixture(self.mixture))
        phases = tuple((float(f), _mixture(m) if isinstance(m, dict) else m) for f, m in self.phases)
        object.__setattr__(self, "phases", phases)
        starts = [f for f, _ in phases]
        if any(not 0 < f < 1 for f in starts) or starts != sorted(starts):
            raise ConfigError(f"phases must start at increasing fractions strictly between 0 and 1, got {starts}")

    def mixture_at(self, step: int) -> Mixture:
        """The mixture in force at training step `step` (1-based)."""
        current = self.mixture
        for start, mix in self.phases:
            if step > start * self.steps:
                current = mix
        return current

    def panel_name(self, family: str) -> str:
        return PANEL_NAMES[family] + self.panel_suffix

    @property
    def final_revision(self) -> str:
        """The last checkpoint's revision name (step{steps}): every grid ends there."""
        return revision_name(self.steps)

    @property
    def window_kinds(self) -> tuple[str, ...]:
        """The kinds of window this recipe trains on (a positive share in some phase), in WINDOW_KINDS order."""
        mixes = (self.mixture, *(m for _, m in self.phases))
        return tuple(k for k in WINDOW_KINDS if any(getattr(m, k) > 0 for m in mixes))

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.seq_len

    @property
    def probe_vocab_range(self) -> tuple[int, int]:
        """Ids used by the probe batch and by the periodic windows: every merged BPE token (not the raw bytes)."""
        return (first_merge_id(), self.vocab_size)

    def grid(self) -> tuple[int, ...]:
        # steps past `steps` (an explicit grid with a shortened run, e.g. `--steps` on the mini preset) are dropped
        steps = set(self.checkpoint_steps or default_grid(self.steps))
        return tuple(sorted({s for s in steps if 0 <= s <= self.steps} | {0, self.steps}))

    def dense_grid(self) -> tuple[int, ...]:
        """The extra checkpoints: every `dense_every` steps that is not on `grid()` (empty when dense_every = 0)."""
        if self.dense_every <= 0:
            return ()
        return tuple(s for s in range(self.dense_every, self.steps, self.dense_every) if s not in set(self.grid()))

    @property
    def trains_with_bos(self) -> bool:
        return self.mixture.bos or any(m.bos for _, m in self.phases)

    def probe_defaults(self, family: str | None = None) -> dict:
        """The probe settings of this recipe's panels (their panel files' `probe:`); `family` picks the chunk size."""
        from circuitdev.toy.tokenizer import EOS_ID

        # a model that always saw the BOS at position 0 is probed with it there (ProbeConfig.first_token_id)
        bos = {"first_token_id": EOS_ID} if self.trains_with_bos else {}
        return {"seq_len": self.probe_seq_len, "vocab_range": list(self.probe_vocab_range), "n": self.probe_n, **bos,
                "n_pr": min(500, self.probe_n),
                # at T = 64 the paper's 50 fixed baseline positions cover ~90% of the positions B can take, which caps
                # induction selectivity near 56x (screen.induction_ceiling); excluding each sequence's A/B lifts it
                "baseline_excludes_ab": True,
                "batch_size": TOY_PROBE_CHUNK.get(family, TOY_PROBE_CHUNK[None])}

    def replace(self, **changes) -> "ToyRecipe":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def from_dict(cls, d: dict) -> "ToyRecipe":
        d = dict(d)
        try:  # mixture / phases given as dicts are converted by __post_init__
            for k in ("betas", "checkpoint_steps"):
                if d.get(k) is not None:
                    d[k] = tuple(d[k])
            return cls(**d)
        except TypeError as err:  # an unknown field name
            raise ConfigError(f"invalid toy recipe: {err}; see circuitdev.toy.ToyRecipe / Mixture for the fields") from None

    def recipe_hash(self) -> str:
        """12 hex digits over the fields that change the checkpoints; a panel is reused only if its hash matches."""
        payload = {k: v for k, v in self.to_dict().items() if k not in _NOT_HASHED}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]

    def corpus_hash(self) -> str:
        keys = ("seed", "corpus_words", "lexicon_size", "vocab_size") + (("n_topics",) if self.n_topics else ())
        payload = {"format": CORPUS_FORMAT, **{k: getattr(self, k) for k in keys}}
        return hashlib.sha256(json.dumps(payload).encode()).hexdigest()[:12]


def _mixture(d: dict) -> Mixture:
    try:
        return Mixture(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})
    except TypeError as err:
        raise ConfigError(f"invalid mixture: {err}; see circuitdev.toy.Mixture for the fields") from None


def revision_name(step: int) -> str:
    """A toy checkpoint's revision name: the folder under data/toy/<panel>/ and the panel file's `name:`."""
    return f"step{step}"


def first_merge_id() -> int:
    """Special tokens take ids 0.., the 256 byte-level symbols follow, merges start after them."""
    from circuitdev.toy.tokenizer import SPECIAL_TOKENS

    return len(SPECIAL_TOKENS) + 256


def default_grid(steps: int) -> tuple[int, ...]:
    """Log-spaced early points, a dense stretch over the transitions (previous-token heads at 10-30%, induction and
    sink heads at 30-50% of the shipped run, after its phase boundary at 30%), and wider steps after it.

    At 2500 steps: 0 1 4 16 64 160 250 350 450 550 650 750 875 1000 1125 1250 1500 1750 2100 2500.
    """
    frac = (0, 0.0004, 0.0016, 0.0064, 0.0256, 0.064, 0.10, 0.14, 0.18, 0.22, 0.26, 0.30, 0.35, 0.40, 0.45, 0.50,
            0.60, 0.70, 0.84, 1.0)
    return tuple(sorted({max(0, min(steps, round(f * steps))) for f in frac}))


# Named recipes for `circuitdev toy train --preset NAME`.
PRESETS: dict[str, ToyRecipe] = {
    # the shipped panel (toy-pythia, toy-olmo, toy-olmoe)
    "default": ToyRecipe(),
    # the previous shipped recipe: no BOS and no backcopy windows. Induction heads form as in the default; no
    # first-token sink forms in any family -- the contrast that shows what the BOS and the dormant-head task do.
    "nobos": ToyRecipe(mixture=Mixture(text=0.5, periodic=0.5, repeat=0.0, backcopy=0.0, bos=False),
                       phases=((0.3, Mixture(text=0.4, periodic=0.4, repeat=0.2, backcopy=0.0, bos=False)),),
                       panel_suffix="-nobos"),
    # issue 32's long trial for the OLMo-like and OLMoE-like families: 30x the default's tokens (75,000 steps of
    # 1,024 tokens), a context of 256 (4 windows a step) and weight decay 0.3, the levers that the sink literature
    # names (book/toy_recipe.md, "Long trials"); about 75 / 95 CPU-minutes per family on one thread. Its trials are
    # recorded in data/toy_trials/ (`circuitdev toy trial`); the default build neither trains nor reads its weights.
    "long": ToyRecipe(steps=75_000, seq_len=256, batch_size=4, weight_decay=0.3, dense_every=2500,
                      panel_suffix="-long"),
    # MINI
    "mini": ToyRecipe(n_layer=3, steps=1500,
                      phases=((0.3, Mixture(text=0.4, periodic=0.4, repeat=0.2, backcopy=0.0)),),
                      checkpoint_steps=tuple(range(0, 1501, 150)), dense_every=0, panel_suffix="-mini"),
}

# Presets that `circuitdev toy train` runs on all cores when one process trains one family (`--threads` unset).
# torch's float results depend on the thread count, so the other presets keep one thread per family: their
# checkpoints stay bit-identical to the panels already trained (and shown in the book) with that recipe.
ALL_CORES_PRESETS = frozenset({"mini"})


def preset(name: str) -> ToyRecipe:
    """The named recipe of PRESETS (`circuitdev toy train --preset NAME`)."""
    if name not in PRESETS:
        raise ConfigError(f"no {name!r} toy preset; the presets are {', '.join(PRESETS)} "
                          "(circuitdev.toy.recipe.PRESETS)")
    return PRESETS[name]


def recipe_of(panel: str) -> tuple[str, ToyRecipe]:
    """(family, recipe) of a toy panel name, over every preset's panels ("toy-pythia-mini" -> gpt_neox, mini)."""
    for recipe in PRESETS.values():
        for family in FAMILIES:
            if recipe.panel_name(family) == panel:
                return family, recipe
    known = sorted(r.panel_name(f) for r in PRESETS.values() for f in FAMILIES)
    raise ConfigError(f"{panel!r} is not a toy panel of any preset; the toy panels are {', '.join(known)}")
