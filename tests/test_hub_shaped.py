"""The hub path on a folder shaped like SmolLM-135M-Instruct (tests/smollm_shaped.py), no network:
it loads as a hub download does, one dtype policy holds across loading, SFT and GRPO, and a GRPO
update on its conventions (``<|im_end|>`` as EOS *and* pad, a bf16 checkpoint) learns."""

import json

import pytest
import torch

from kimina_edu import models
from kimina_edu.logprobs import Rollout, completion_logprobs, reference_completion_logprobs
from kimina_edu.lora import lora_config
from kimina_edu.models import load_policy
from kimina_edu.rollouts import chat_prompt, encode_prompts
from kimina_edu.sft import make_sft_examples, sft_train
from kimina_edu.tasks import SEEDS, make_entries
from kimina_edu.train_config import TrainConfig
from kimina_edu.trainer import GRPOTrainer

pytestmark = pytest.mark.usefixtures("offline_shared_cache")


def test_the_folder_loads_like_smollm_from_the_hub(smollm_shaped):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = json.loads((smollm_shaped / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["dtype"] == "bfloat16"
    assert config["tie_word_embeddings"] and (config["bos_token_id"], config["eos_token_id"], config["pad_token_id"]) == (1, 2, 2)
    assert config["hidden_size"] * 1536 == config["intermediate_size"] * 576, "SmolLM's hidden : intermediate"
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (9, 3)
    assert config["hidden_size"] == config["num_attention_heads"] * config["head_dim"]
    tok = AutoTokenizer.from_pretrained(smollm_shaped)
    model = AutoModelForCausalLM.from_pretrained(smollm_shaped)
    assert type(tok).__name__ == "GPT2Tokenizer" and model.dtype == torch.bfloat16
    assert tok.convert_ids_to_tokens([0, 1, 2]) == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    assert tok.eos_token == tok.pad_token == "<|im_end|>"
    assert len(tok.tokenize("<think>")) > 1, "SmolLM has no <think> token: the tag is split into pieces"
    assert tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True) == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert tok("hello")["input_ids"] == tok("hello", add_special_tokens=False)["input_ids"], "no BOS added"


# ---- one dtype policy: the baseline, the SFT'd model and the GRPO policy share a dtype


@pytest.mark.parametrize("device, bf16_supported, expected", [
    ("cpu", True, torch.float32), ("cuda", True, torch.bfloat16), ("cuda:1", True, torch.bfloat16),
    ("cuda", False, torch.float32), ("mps", True, torch.float32),
])
def test_policy_dtype(monkeypatch, device, bf16_supported, expected):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16_supported)
    assert models.policy_dtype(device) == expected


def _base_and_adapter_dtypes(model):
    base = {p.dtype for n, p in model.named_parameters() if "lora_" not in n}
    lora = {p.dtype for n, p in model.named_parameters() if "lora_" in n}
    return base, lora


def test_sft_and_load_policy_load_a_bf16_checkpoint_in_one_dtype(smollm_shaped, tmp_path, monkeypatch):
    """SFT and load_policy ask one function for the dtype: fp32 on a CPU whatever the checkpoint
    holds; and when that function says bf16 (a CUDA GPU), both load bf16 and keep LoRA in fp32."""
    examples, _ = make_sft_examples(make_entries("syllogism", 8, SEEDS["sft"]))

    def both():
        policy, _ = load_policy(str(smollm_shaped), device="cpu", lora=lora_config(r=4, alpha=8), verbose=False)
        sft, _, _ = sft_train(str(smollm_shaped), examples, output_dir=tmp_path / "sft", epochs=1, batch_size=8,
                              lora=lora_config(r=4, alpha=8))
        return _base_and_adapter_dtypes(policy), _base_and_adapter_dtypes(sft)

    fp32 = ({torch.float32}, {torch.float32})
    assert both() == (fp32, fp32)
    monkeypatch.setattr(models, "policy_dtype", lambda device: torch.bfloat16)  # what a bf16-capable GPU gets
    bf16 = ({torch.bfloat16}, {torch.float32})
    assert both() == (bf16, bf16), "one function must decide the dtype for loading and for SFT"


# ---- GRPO on SmolLM's conventions


def test_a_grpo_update_learns_on_the_smollm_shape(smollm_shaped):
    """<|im_end|> is EOS and pad: a completion that stops ends in the pad id, and padding must still
    be told apart from it (by the attention mask, never by the id). One update raises the
    advantage-weighted log-prob; the base keeps the policy's dtype; LoRA moves."""
    model, tok = load_policy(str(smollm_shaped), device="cpu", lora=lora_config(r=8, alpha=16), verbose=False)
    assert tok.pad_token_id == tok.eos_token_id
    questions = [e["question"] for e in make_entries("syllogism", 2, SEEDS["rl"])]
    prompts = encode_prompts(tok, [chat_prompt(tok, q) for q in questions])
    g = torch.Generator().manual_seed(0)
    rollouts = []
    for i, length in enumerate((5, 9, 3, 12)):
        body = torch.randint(3, len(tok), (length,), generator=g).tolist()
        stops = i % 2 == 0
        rollouts.append(Rollout(prompts[i // 2], body + [tok.eos_token_id] * stops, [], (1.0, -1.0)[i % 2], 0.0,
                                not stops))
    with torch.no_grad():
        before, mask = completion_logprobs(model, rollouts, tok.pad_token_id)
        reference, _, _ = reference_completion_logprobs(model, rollouts, tok.pad_token_id)
    assert torch.allclose(before, reference.to(before.dtype) * mask, atol=1e-5)
    lora_before = [p.detach().clone() for p in model.parameters() if p.requires_grad]
    cfg = TrainConfig(questions_per_batch=2, group_size=2, buffer_size=4, minibatch_size=4, grad_accum=1, lr=1e-2,
                      max_new_tokens=16)
    stats = GRPOTrainer(model, tok, cfg, train_entries=[], output_dir=smollm_shaped.parent / "grpo", progress=False
                        ).learn(rollouts)
    assert stats["skipped"] == 0.0
    with torch.no_grad():
        after, _ = completion_logprobs(model, rollouts, tok.pad_token_id)
    adv = torch.tensor([r.advantage for r in rollouts])[:, None]
    assert ((after - before) * mask * adv).sum() > 0
    assert any(not torch.equal(a, p) for a, p in zip(lora_before, (p for p in model.parameters() if p.requires_grad)))
    assert _base_and_adapter_dtypes(model) == ({models.policy_dtype("cpu")}, {torch.float32})
