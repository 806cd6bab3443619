"""Tiny random-init models of the three paper families (and a Llama-style one), built from configs — no hub."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, GPTNeoXConfig, LlamaConfig, OlmoConfig, OlmoeConfig

VOCAB = 128
COMMON = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
              max_position_embeddings=128, eos_token_id=None, bos_token_id=None, pad_token_id=None)


def tiny_config(family: str, *, layers: int = 2):
    common = {**COMMON, "num_hidden_layers": layers}
    if family == "gpt_neox":
        return GPTNeoXConfig(**common)
    if family == "olmo":
        return OlmoConfig(**common)
    if family == "olmoe":
        return OlmoeConfig(**common, num_experts=4, num_experts_per_tok=2)
    if family == "llama":
        return LlamaConfig(**common, num_key_value_heads=2)
    raise KeyError(family)


def tiny_model(family: str, *, seed: int = 0, attn: str = "eager", layers: int = 2) -> torch.nn.Module:
    torch.manual_seed(seed)
    # A fresh config each time: from_config writes the attention choice into it.
    model = AutoModelForCausalLM.from_config(tiny_config(family, layers=layers), attn_implementation=attn)
    with torch.no_grad():  # sharpen random attention so that rows differ clearly between heads
        for name, p in model.named_parameters():
            if any(k in name for k in ("query_key_value", "q_proj", "k_proj")):
                p.mul_(4.0)
    return model.eval()


FAMILIES = ("gpt_neox", "olmo", "olmoe")
