"""A local byte-level BPE tokenizer (`tokenizers`), trained on the synthetic corpus; no download."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

# id 0: end-of-document separator in the packed stream; with `Mixture.bos` (the shipped recipe) it also starts every
# training window, as a BOS (Pythia/OLMo have none). id 1: recall marker (Mixture.recall).
SPECIAL_TOKENS = ("<|endoftext|>", "<|recall|>")
EOS_ID, RECALL_ID = 0, 1


def train_tokenizer(docs: Iterable[str], vocab_size: int):
    """Byte-level BPE: ids 0..len(SPECIAL_TOKENS)-1 special, then the 256 byte symbols, then merges."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(docs, trainer=trainer)
    return tok


def to_hf(tok):
    """Wrap for `save_pretrained` next to each checkpoint, so a revision folder loads with AutoTokenizer."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=SPECIAL_TOKENS[0], bos_token=SPECIAL_TOKENS[0],
                                   unk_token=SPECIAL_TOKENS[0])


def load_tokenizer(path: Path):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))
