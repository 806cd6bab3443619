# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The method
#
# The paper measures circuit formation with four instruments, all re-implemented in `circuitdev` and applied
# identically to every tier: a synthetic induction batch, a six-class selectivity screen of every head, a
# participation ratio of each head's output, and group ablations. Every constant below is read from the library's
# defaults (`circuitdev.ProbeConfig`), which are the paper's.

# %% tags=["remove-cell"]
from circuitdev.analysis.findings.f5_pr_lead import PR_SIGNAL_FLOOR
from circuitdev.book import chapter, plots
from circuitdev.measure.batch import default_first_a_range, induction_batch
from circuitdev.measure.positions import baseline_positions
from circuitdev.runinfo import code_commit

# %% tags=["parameters", "remove-cell"]
# which sequence of the batch to draw
example: int = 0  # in [0, inf)

# %% tags=["remove-input"]
ch = chapter("method", globals())
cfg = ch.paper
batch = induction_batch(cfg.n, cfg.seq_len, cfg.seed, cfg.vocab_range)
lo, hi = default_first_a_range(cfg.seq_len)
base = baseline_positions(cfg.seq_len, cfg.baseline_size, cfg.baseline_seed)
for key, value in {"n": cfg.n, "T": cfg.seq_len, "q": cfg.seq_len - 1, "seed": cfg.seed, "vocab-lo": cfg.vocab_range[0],
                   "vocab-hi": cfg.vocab_range[1], "ab-lo": lo, "ab-hi": hi - 1, "n-valid": int(batch.valid.sum()),
                   "baseline-size": cfg.baseline_size, "baseline-seed": cfg.baseline_seed,
                   "baseline-in-ab": int(((base >= lo) & (base <= hi)).sum()), "n-pr": cfg.n_pr, "n-nulls": cfg.n_nulls,
                   "null-seed": cfg.null_seed, "pr-floor": f"{PR_SIGNAL_FLOOR:g}", "config-hash": cfg.config_hash()}.items():
    ch.glue(key, value)

# %% [markdown]
# ## The synthetic induction batch
#
# {glue:text}`method-n` sequences of T = {glue:text}`method-T` random token ids drawn from
# [{glue:text}`method-vocab-lo`, {glue:text}`method-vocab-hi`) with numpy's `RandomState` seeded
# {glue:text}`method-seed`. Each holds one bigram A B at a random position ab ∈ [{glue:text}`method-ab-lo`, {glue:text}`method-ab-hi`] and
# ends with a second A at the query position q = T − 1 = {glue:text}`method-q`, so a model that has learnt induction
# predicts B there. No BOS token is added: position 0 holds a random filler id. {glue:text}`method-n-valid` of
# the {glue:text}`method-n` sequences pass the authors' validity filter (B occurs once before the query).
# {numref}`fig-method-batch` draws one of them.

# %% tags=["remove-input", "full-width"]
ch.figure(plots.batch_layout(int(batch.first_a[example]), cfg.seq_len, base), name="fig-method-batch",
          caption=f"Sequence {example} of the batch: the six class targets seen from the query (the second A, at "
                  f"position {cfg.seq_len - 1}), and the fixed baseline positions.",
          provenance=f"Source: circuitdev.induction_batch, ProbeConfig defaults {cfg.config_hash()} · code "
                     f"{code_commit()}")

# %% [markdown]
# ## Six classes and selectivity
#
# For head (L, H), let $a_i(k)$ be the attention of the query row of sequence i on key position k. Each class has a
# target position: induction B (ab + 1), duplicate-token the first A (ab), previous-token q − 1, self q,
# first-token (BOS, the attention sink) position 0, local the mean over q − 2 … q − 5. The baseline is the mean
# attention over the {glue:text}`method-baseline-size` fixed positions drawn with seed
# {glue:text}`method-baseline-seed` ({glue:text}`method-baseline-in-ab` of them fall in the range of ab, which the
# authors do not exclude). Selectivity is a ratio of batch means:
#
# $$
# \mathrm{sel}_c(L,H) = \frac{\frac{1}{|I_c|}\sum_{i \in I_c} a_i(t_c)}{\frac{1}{N\,|P|}\sum_{i}\sum_{k \in P} a_i(k)}
# $$
#
# with $I_c$ the valid sequences for induction and duplicate-token (all sequences otherwise), $t_c$ the target and $P$
# the baseline positions. A head's best class is the argmax over the six (ties go to the class listed first); it is
# *classified* when that selectivity reaches {glue:text}`method-paper-class-threshold`. The developmental counts use the
# **per-class** rule: a head counts for class $c$ when $\mathrm{sel}_c \ge \tau$ whatever its best class — sinks at
# {glue:text}`method-paper-bos-threshold`, induction circuit at {glue:text}`method-paper-induction-threshold`, previous-token
# circuit at {glue:text}`method-paper-prev-threshold` with the best-class condition.

# %% [markdown]
# ## The participation ratio
#
# The input of the attention output projection, split per head, is read at the query for the first
# {glue:text}`method-n-pr` sequences: a matrix $M$ of shape $N \times d_{\mathrm{head}}$ per head. With $\sigma_j$ its singular values (not
# centred),
#
# $$
# p_j = \frac{\sigma_j^2}{\sum_k \sigma_k^2}, \qquad \mathrm{PR} = \exp\Big(-\sum_j p_j \log p_j\Big),
# $$
#
# the effective number of directions the head's output spans. The figures draw PR − 1 with a floor of
# {glue:text}`method-pr-floor`. A null calibration replaces B by random non-target positions
# ({glue:text}`method-n-nulls` draws per sequence by default, seed {glue:text}`method-null-seed`) to give the
# selectivity noise floor of F6.

# %% [markdown]
# ## Group ablation
#
# A head is *zero-ablated* by setting its slice of the output projection's input to zero at every position; the
# model is then scored at the query (top-1 and top-5 accuracy of B, loss, mean logit of B). Three head sets are
# compared: the induction circuit; a *matched random* set with the same layers and per-layer counts drawn from the
# other heads of those layers (`circuitdev.measure.ablation.matched_random`); and every head of those layers (the upper
# bound). The paper ablates at the final checkpoint only, with one matched random draw (seed 123). The model
# appendices add, for models trained or probed here, several distinct matched random draws; a second control of as
# many random heads from any layer outside the circuit, which exists even where the circuit fills its layers (a small
# model) but is not neutral, since it can hold previous-token heads; and the same ablation at every revision of
# training. Every top-1 is given with its 95% binomial (Wilson) interval for the batch the ablation scored.
#
# All of this is one configuration, hash {glue:text}`method-config-hash`; a record's sidecar stores the hash of the
# configuration it was computed with, and every figure's provenance line names it.
