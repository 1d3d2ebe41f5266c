"""A local folder shaped like ``HuggingFaceTB/SmolLM-135M-Instruct``: the hub path, run with no network.

``AutoModelForCausalLM.from_pretrained(folder)`` and ``AutoTokenizer.from_pretrained(folder)`` load it
exactly as they load a hub download, so a notebook given ``MODEL_ID=<folder>`` takes its hub branch.

Kept from SmolLM-135M-Instruct (its ``config.json``, ``tokenizer_config.json``, v0.2):
- ``LlamaForCausalLM``, tied embeddings, SiLU, RMSNorm eps 1e-5, RoPE theta 10000, 2048 positions;
  the checkpoint stored in **bf16**, as on the hub;
- the shape's proportions: hidden : intermediate = 576 : 1536 (3 : 8), 9 query heads sharing 3 KV
  heads (so ``k_proj``/``v_proj`` are a third of ``q_proj``'s width);
- its tokenizer's conventions: a byte-level BPE loaded as ``GPT2Tokenizer``, ``<|endoftext|>``,
  ``<|im_start|>``, ``<|im_end|>`` at ids 0, 1, 2; ``<|im_end|>`` is EOS *and* pad (the pocket model
  pads with a token of its own); no BOS added; ``<think>``/``<answer>`` are not tokens of their own
  but split into BPE pieces; SmolLM's ChatML chat template, default system turn included.

Not SmolLM's: the weights (random — nothing here is learned, only run), the vocabulary (1,024 pieces
trained here on the pocket model's corpus by :func:`kimina_edu.pocket.train_tokenizer`, the course's own
tokenizer code) and the sizes: head_dim 8 instead of 64 (hidden 72, intermediate 192) and 2 layers
instead of 30, so that notebooks 03–05 run on it in seconds.

    python tests/smollm_shaped.py /tmp/smollm-shaped     # then MODEL_ID=/tmp/smollm-shaped make course
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# https://huggingface.co/HuggingFaceTB/SmolLM-135M-Instruct/blob/main/tokenizer_config.json (chat_template)
SMOLLM_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SMOLLM_SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # ids 0, 1, 2, as in SmolLM's vocabulary

HEAD_DIM = 8  # SmolLM-135M: 64
SHAPE = dict(  # SmolLM-135M-Instruct's config.json, sizes scaled down (see the module docstring)
    hidden_size=9 * HEAD_DIM, intermediate_size=9 * HEAD_DIM * 1536 // 576, num_hidden_layers=2,
    num_attention_heads=9, num_key_value_heads=3, head_dim=HEAD_DIM, max_position_embeddings=2048,
    rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True, hidden_act="silu", initializer_range=0.02,
)
VOCAB_SIZE = 1024  # SmolLM: 49152


def build_smollm_shaped(folder: str | Path, *, seed: int = 0) -> Path:
    """Write the SmolLM-shaped model and tokenizer into ``folder`` (a few seconds); returns the folder."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from kimina_edu.pocket import PocketRecipe, pocket_corpus, train_tokenizer

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer(pocket_corpus(PocketRecipe.smoke()), VOCAB_SIZE, special_tokens=SMOLLM_SPECIAL_TOKENS,
                          whole_tokens=[], pad_token="<|im_end|>", bos_token="<|im_start|>", eos_token="<|im_end|>",
                          unk_token="<|endoftext|>", chat_template=SMOLLM_CHAT_TEMPLATE)
    ids = tok.convert_tokens_to_ids(SMOLLM_SPECIAL_TOKENS)
    if ids != [0, 1, 2]:
        raise RuntimeError(f"SmolLM's special tokens must take ids 0, 1, 2; the trained tokenizer gave {ids}")
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tok), bos_token_id=1, eos_token_id=2, pad_token_id=2, **SHAPE)
    model = LlamaForCausalLM(config).to(torch.bfloat16)  # stored in bf16, as SmolLM is on the hub
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    # SmolLM's tokenizer_config.json names the slow-tokenizer class GPT2Tokenizer: load it the same way
    cfg_path = folder / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.pop("backend", None)
    cfg.update(tokenizer_class="GPT2Tokenizer", add_prefix_space=False, clean_up_tokenization_spaces=False,
               model_max_length=2048, additional_special_tokens=["<|im_start|>", "<|im_end|>"])
    cfg_path.write_text(json.dumps(cfg, indent=2) + "\n")
    return folder


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/smollm_shaped.py FOLDER")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    print(build_smollm_shaped(sys.argv[1]))
