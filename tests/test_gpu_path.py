"""The GPU path where a GPU is (skipped on CPU-only machines such as CI's): the dtype policy on
CUDA, generation through the course's sampler, and one GRPO update that moves the LoRA.

Run on a lent GPU machine with ``python -m pytest tests/test_gpu_path.py``; what it found there is
in benchmarks/README.md ("Speed: the hub path at real size (CPU and GPU)").
"""

import pytest
import torch

pytestmark = [pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
              pytest.mark.usefixtures("offline_shared_cache")]


def test_policy_on_cuda_learns_in_the_policy_dtype():
    from kimina_edu.grpo import policy_loss
    from kimina_edu.logprobs import Rollout, completion_logprobs
    from kimina_edu.lora import lora_config
    from kimina_edu.models import load_policy, policy_dtype
    from kimina_edu.rollouts import chat_prompt, generate

    model, tok = load_policy("pocket", device="cuda", lora=lora_config(), verbose=False)
    named = dict(model.named_parameters())
    assert {p.dtype for n, p in named.items() if "lora_" not in n} == {policy_dtype("cuda")}
    assert {p.dtype for n, p in named.items() if "lora_" in n} == {torch.float32}  # small updates are not rounded away
    assert all(p.device.type == "cuda" for p in named.values())

    question = "Consider these statements: 1. All cats are animals 2. Some animals are pets. Does it follow that some cats are pets?"
    prompt_ids, completions = generate(model, tok, [chat_prompt(tok, question)], max_new_tokens=24, temperature=1.0,
                                       top_p=0.95, min_p=0.1, num_return_sequences=4, seed=0)
    assert len(completions) == 4 and all(len(c) > 0 for c in completions)

    rollouts = [Rollout(prompt_ids[0], c, [], 1.0 if i % 2 else -1.0, 0.0, False) for i, c in enumerate(completions)]
    trainable = [p for p in model.parameters() if p.requires_grad]
    before = [p.detach().clone() for p in trainable]
    opt = torch.optim.AdamW(trainable, lr=1e-3, weight_decay=0.0)
    model.train()
    logp, mask = completion_logprobs(model, rollouts, tok.pad_token_id)
    assert logp.dtype == torch.float32 and torch.isfinite(logp[mask.bool()]).all()
    adv = torch.tensor([r.advantage for r in rollouts], device=logp.device)
    loss, _ = policy_loss(logp, logp.detach(), adv, mask, loss_type="grpo", max_len=24)
    loss.backward()
    opt.step()
    assert torch.isfinite(loss)
    assert any(not torch.equal(a, b) for a, b in zip(before, trainable)), "one GRPO step did not move the LoRA"
