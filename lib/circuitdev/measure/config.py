"""ProbeConfig: every knob of one probe run, with the paper's values as defaults (method reference §1-§3).

A stored record is keyed by `config_hash()`, so two runs with the same configuration share results and changing any
field (a threshold, the batch size excepted) gives a new record.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass

from circuitdev.errors import ConfigError
from circuitdev.schema import BOS_THRESHOLD, CLASS_THRESHOLD, INDUCTION_THRESHOLD, PREV_TOKEN_THRESHOLD

# Fields that change how fast a run goes, never what it computes: left out of the hash. The PR null's draws are a
# by-product kept beside the record for `null-pr` (which computes them itself where a record has none): the
# per-head numbers are the same with or without them.
_NOT_HASHED = {"batch_size", "device", "null_pr_draws", "null_pr_seed"}
# Fields added after records were stored: left out of the hash while they hold this value, so every record probed
# before the field existed keeps its hash (add new result-changing fields here with their neutral default).
_HASH_NEUTRAL = {"first_token_id": None, "n_boot": 0}


@dataclass(frozen=True)
class ProbeConfig:
    # --- the synthetic induction batch (method reference §1)
    n: int = 2000  # sequences in the screen / ablation batch
    seq_len: int = 256  # T; the query (second A) sits at T - 1
    seed: int = 42  # RandomState seed of the batch
    vocab_range: tuple[int, int] = (100, 10000)  # filler / A / B ids, half-open
    first_a_range: tuple[int, int] | None = None  # None: (20, 128) at T=256, scaled for shorter T
    # None (the paper): position 0 holds a random filler token. An id: position 0 holds that token instead -- for
    # models trained with a BOS token at every window start (the toy panels), whose "first token" is that BOS.
    first_token_id: int | None = None
    # --- participation ratio (method reference §3): the phase-1 run used the first 500 rows of the same batch
    n_pr: int = 500
    # --- selectivity screen (method reference §2)
    baseline_size: int = 50  # fixed "uniform-other" positions drawn with RandomState(baseline_seed)
    baseline_seed: int = 0
    baseline_excludes_ab: bool = False  # variant: drop each sequence's A/B positions from its baseline
    class_threshold: float = CLASS_THRESHOLD  # best class must reach this to classify the head (30x)
    induction_threshold: float = INDUCTION_THRESHOLD  # induction circuit membership (50x)
    prev_token_threshold: float = PREV_TOKEN_THRESHOLD  # previous-token circuit, with best class == previous-token (100x)
    bos_threshold: float = BOS_THRESHOLD  # first-token (sink) counting rule of the developmental tables (30x)
    # --- our additions: all-query first-token score, Gu et al. sink rate
    allq_skip: int = 4  # queries 0..allq_skip-1 are left out (position 0 trivially attends to itself)
    sink_rate_epsilon: float = 0.3  # Gu et al. 2025: a head is a sink head if its mean mass on position 0 > eps
    n_prefix: int = 64  # repeated-random-sequence batch for the prefix-matching (induction) score; 0 skips it
    # --- null calibration (method reference §3): random non-target positions instead of B
    n_nulls: int = 20  # the authors' default; their reported runs used 500
    null_seed: int = 2026
    # --- bootstrap over the batch's sequences (measure.bootstrap): B resamples give every selectivity a 95% interval
    # (sel_<class>_lo / _hi) and a replicate file beside the record; 0 turns it off (and keeps the pre-bootstrap hash)
    n_boot: int = 200
    boot_seed: int = 0  # numpy.random.default_rng seed of the resamples (irrelevant, and not hashed, when n_boot = 0)
    # --- the PR null over training (sources.null_pr), measured in the probe's load: random-id batches of n_pr
    # sequences each, draw d drawn with RandomState(null_pr_seed + d); 0 leaves it to `circuitdev null-pr` (not
    # hashed: a by-product, the record's own numbers do not change)
    null_pr_draws: int = 0
    null_pr_seed: int = 2026  # the authors' RandomState seed of the null batch
    # --- execution (not hashed)
    # sequences per forward; a dense model's numbers do not depend on it (tests/test_probe.py), a mixture of
    # experts' do at float rounding (its expert matmuls see the tokens a chunk routes to them; toy.recipe)
    batch_size: int = 8
    device: str | None = None
    dtype: str | None = None  # None: the panel's dtype

    def __post_init__(self) -> None:
        for name in ("class_threshold", "induction_threshold", "prev_token_threshold", "bos_threshold"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be a positive selectivity ratio (e.g. 30.0), got {getattr(self, name)!r}")
        if self.n_prefix < 0 or self.n_nulls < 0 or self.n_boot < 0 or self.null_pr_draws < 0:
            raise ConfigError(f"n_prefix, n_nulls, n_boot and null_pr_draws must be >= 0, got {self.n_prefix}, "
                              f"{self.n_nulls}, {self.n_boot}, {self.null_pr_draws}")
        if self.n < 1 or self.n_pr < 1:
            raise ConfigError(f"n and n_pr must be >= 1, got n={self.n}, n_pr={self.n_pr}")
        first = self.first_token_id
        if first is not None and (isinstance(first, bool) or not isinstance(first, int) or first < 0):
            raise ConfigError(f"first_token_id must be a token id >= 0 (e.g. the BOS id) or None, got {first!r}")
        if self.batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {self.batch_size}")
        if not 0 < self.sink_rate_epsilon < 1:
            raise ConfigError(f"sink_rate_epsilon must lie in (0, 1), got {self.sink_rate_epsilon}")
        object.__setattr__(self, "vocab_range", tuple(int(v) for v in self.vocab_range))
        if self.first_a_range is not None:
            object.__setattr__(self, "first_a_range", tuple(int(v) for v in self.first_a_range))

    def replace(self, **changes) -> "ProbeConfig":
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ConfigError(f"unknown probe parameter(s) {sorted(unknown)}; known: {sorted(self.to_dict())}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, d: dict) -> "ProbeConfig":
        return cls().replace(**d)

    def config_hash(self) -> str:
        """12 hex digits over the fields that change results."""
        payload = {k: v for k, v in self.to_dict().items()
                   if k not in _NOT_HASHED and not (k in _HASH_NEUTRAL and v == _HASH_NEUTRAL[k])}
        if self.n_boot == 0:  # no resamples: their seed changes nothing
            payload.pop("boot_seed")
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]
