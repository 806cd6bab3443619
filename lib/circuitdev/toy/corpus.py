"""The toy corpus (generated, no download) and the training-window sampler.

Text: documents of sentences over a Zipf-distributed lexicon of pseudo-words, each word followed by a word drawn from
its own small successor set (a sparse word-level Markov chain) or, with prob. `backoff`, from the unigram Zipf law.
It has the statistics that matter here (Zipf frequencies, local bigram structure, sentence and document breaks) and
every property is a knob. The text is tokenized by a byte-level BPE trained on it and packed into one stream with an
end-of-document id between documents.

Training windows (`WindowSampler`) mix the text with synthetic repetition; what forms in a few CPU minutes depends on
that mixture far more than on the text (book/toy_recipe.md, "Experiment log").
"""

from __future__ import annotations

import numpy as np

from circuitdev.toy.recipe import WINDOW_KINDS, Mixture

_ONSETS = ["", "b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "st", "tr",
           "pl", "gr", "sh", "ch", "th"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ou"]
_CODAS = ["", "", "", "n", "r", "s", "t", "l", "m", "nd", "st"]


def make_lexicon(rng: np.random.Generator, size: int) -> list[str]:
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < size:
        n_syl = int(rng.choice([1, 1, 2, 2, 2, 3, 3, 4]))
        w = "".join(_ONSETS[rng.integers(len(_ONSETS))] + _VOWELS[rng.integers(len(_VOWELS))] +
                    _CODAS[rng.integers(len(_CODAS))] for _ in range(n_syl))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def generate_corpus(seed: int, n_words: int, lexicon_size: int, *, zipf_a: float = 1.1, n_successors: int = 8,
                    backoff: float = 0.3, mean_sentence: float = 12.0, mean_doc_sentences: float = 6.0,
                    n_topics: int = 0) -> list[str]:
    """Documents (strings) of ~n_words words in total, deterministic in `seed`.

    n_topics > 0: each document draws a topic, and its unigram (backoff) words follow that topic's own Zipf ranking of
    the lexicon -- document-level context that only a head averaging over the window can pick up."""
    rng = np.random.default_rng([seed, 1])
    lex = make_lexicon(rng, lexicon_size)
    unigram = 1.0 / np.arange(1, lexicon_size + 1) ** zipf_a
    unigram /= unigram.sum()
    succ = rng.choice(lexicon_size, size=(lexicon_size, n_successors), p=unigram)  # (V, S) successor sets
    succ_p = rng.dirichlet(np.full(n_successors, 0.5), size=lexicon_size)  # (V, S)
    succ_cdf = np.cumsum(succ_p, axis=1)
    # draw everything up front (vectorised), then walk the chain
    u_back, u_succ = rng.random(n_words), rng.random(n_words)
    uni_draws = rng.choice(lexicon_size, size=n_words, p=unigram)
    if n_topics:
        topic_draws = np.stack([rng.permutation(lexicon_size)[uni_draws] for _ in range(n_topics)])  # (K, n_words)
        topic_of_doc = rng.integers(n_topics, size=n_words + 1)  # one per document (indexed by document count)
    ends = rng.random(n_words) < 1.0 / mean_sentence
    doc_ends = rng.random(n_words) < 1.0 / (mean_sentence * mean_doc_sentences)
    commas = rng.random(n_words) < 0.06
    docs, sent, doc = [], [], []
    w = int(uni_draws[0])
    for i in range(n_words):
        if i and u_back[i] >= backoff and sent:
            w = int(succ[w, min(int(np.searchsorted(succ_cdf[w], u_succ[i])), n_successors - 1)])
        else:
            w = int(topic_draws[topic_of_doc[len(docs)], i]) if n_topics else int(uni_draws[i])
        sent.append(lex[w] + ("," if commas[i] else ""))
        if ends[i] or doc_ends[i] or i == n_words - 1:
            s = " ".join(sent).rstrip(",")
            doc.append(s[:1].upper() + s[1:] + ".")
            sent = []
            if doc_ends[i] or i == n_words - 1:
                docs.append(" ".join(doc))
                doc = []
    return docs


def pack(tokenizer, docs: list[str], eos_id: int) -> np.ndarray:
    """One int32 stream: doc tokens, eos, doc tokens, eos, ..."""
    encs = tokenizer.encode_batch(docs)
    out = []
    for e in encs:
        out.extend(e.ids)
        out.append(eos_id)
    return np.asarray(out, dtype=np.int32)


class WindowSampler:
    """Draws (B, T) training batches from the mixture, deterministically from its own numpy Generator."""

    def __init__(self, stream: np.ndarray, mixture: Mixture, seq_len: int, vocab_range: tuple[int, int], seed: int):
        self.stream, self.T, self.vocab_range = stream, seq_len, vocab_range
        self.rng = np.random.default_rng([seed, 2])
        self._bc = None
        self._draw = tuple(getattr(self, f"_{kind}") for kind in WINDOW_KINDS)  # one window of each kind
        self.set_mixture(mixture)

    def set_mixture(self, mixture: Mixture) -> None:
        """Switch the mixture (curriculum phases); the random stream continues."""
        self.mix = mixture
        w = np.array(mixture.shares(), dtype=float)  # WINDOW_KINDS order
        if w.sum() <= 0:
            raise ValueError("the mixture needs at least one positive share")
        self.kind_p = w / w.sum()

    def batch(self, b: int) -> np.ndarray:
        kinds = self.rng.choice(len(self.kind_p), size=b, p=self.kind_p)
        out = np.empty((b, self.T), dtype=np.int64)  # (B, T)
        for i, k in enumerate(kinds):
            out[i] = self._draw[k]()
        if self.mix.bos:
            from circuitdev.toy.tokenizer import EOS_ID

            out[:, 1:], out[:, 0] = out[:, :-1].copy(), EOS_ID
        return out

    def _text(self) -> np.ndarray:
        start = self.rng.integers(0, len(self.stream) - self.T)
        return self.stream[start:start + self.T]

    def _periodic(self) -> np.ndarray:
        lo, hi = self.vocab_range
        p = self.rng.integers(*self.mix.period_range)
        span = self.rng.integers(lo, hi, size=p)
        return np.resize(span, self.T)  # span repeated, cut at T

    def _repeat(self) -> np.ndarray:
        """Uniform random ids with spans copied from earlier to later positions (no overlap with their source)."""
        lo, hi = self.vocab_range
        seq = self.rng.integers(lo, hi, size=self.T)
        for _ in range(self.rng.integers(*self.mix.repeat_spans)):
            n = min(int(self.rng.integers(*self.mix.repeat_len)), (self.T - 1) // 2)  # both copies must fit
            src = int(self.rng.integers(0, self.T - 2 * n))
            dst = int(self.rng.integers(src + n, self.T - n + 1))
            seq[dst:dst + n] = seq[src:src + n]
        return seq

    def _recall(self) -> np.ndarray:
        """Random filler; at 1-3 positions a recall marker is followed by a copy of the token at position 0.
        Solving it needs a head that finds position 0 by position alone (there is no BOS): the positional
        "first token" feature that the real models' sinks key on."""
        from circuitdev.toy.tokenizer import RECALL_ID

        lo, hi = self.vocab_range
        seq = self.rng.integers(lo, hi, size=self.T)
        for pos in self.rng.choice(np.arange(4, self.T - 1), size=int(self.rng.integers(1, 4)), replace=False):
            seq[pos], seq[pos + 1] = RECALL_ID, seq[0]
        return seq

    def _backcopy(self) -> np.ndarray:
        """Bigram-Backcopy with a context-gated trigger: after the bigram (g, t) -- g a gate token, t a trigger --
        the next token copies the token before g. Elsewhere tokens follow a fixed random sparse Markov chain.
        The gate makes the copy condition a two-token pattern, so the copying head cannot live in layer 0."""
        lo, hi = self.vocab_range
        if self._bc is None:
            r = np.random.default_rng([0, 3])  # the task itself is fixed (not seeded), like a language
            n = min(256, hi - lo)
            ids = lo + r.permutation(hi - lo)[:n]
            succ = r.integers(0, n, size=(n, 6))
            self._bc = (ids, succ, ids[:4], ids[4:8])  # vocab, successor sets, triggers, gates
        ids, succ, triggers, gates = self._bc
        seq = np.empty(self.T, dtype=np.int64)
        s = self.rng.integers(len(ids))
        i = 0
        while i < self.T:
            if i >= 2 and self.rng.random() < 0.12 and i + 2 < self.T:
                seq[i] = gates[self.rng.integers(4)]
                seq[i + 1] = triggers[self.rng.integers(4)]
                seq[i + 2] = seq[i - 1]
                s = self.rng.integers(len(ids))
                i += 3
                continue
            s = succ[s, self.rng.integers(6)]
            seq[i] = ids[s]
            i += 1
        return seq
