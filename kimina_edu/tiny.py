"""A randomly initialised two-layer Llama (no tokenizer): for the demos and exercises whose math needs
a model, not a good one (chapter 2's gradient, the chapter 3–4 solutions), and for the tests of
log-prob, gradient and checkpoint code. It builds in milliseconds.
"""

from __future__ import annotations


def tiny_random_llama(vocab_size: int = 64, seed: int = 0, **overrides):
    """Seeded random weights; ``overrides`` go to ``LlamaConfig`` (``attn_implementation``, token ids…)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = {"vocab_size": vocab_size, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128, **overrides}
    return LlamaForCausalLM(LlamaConfig(**cfg)).eval()
