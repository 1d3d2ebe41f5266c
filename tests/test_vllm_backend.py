"""VLLMBackend against a recording fake of ``vllm``: the real backend and trainer, only vLLM faked.

The fake mimics vLLM 0.30.0's attribute paths, read in its source (the pinned ``gpu`` extra):
- ``LLM(model=…, **kwargs)``; ``llm.llm_engine.model_executor`` exists only when
  ``VLLM_ENABLE_V1_MULTIPROCESSING`` was ``"0"`` when the engine was built
  (vllm/v1/engine/llm_engine.py:128-130, 161, 179);
- ``…model_executor.driver_worker.model_runner.model.load_weights(iterable of (name, tensor))``,
  which raises ``ValueError`` on a name the model has no parameter for
  (vllm/model_executor/models/utils.py:417), and skips a tied alias such as ``lm_head.weight``
  (utils.py:238-243);
- ``llm.reset_prefix_cache()`` (vllm/entrypoints/llm.py:796);
- ``llm.generate(prompts, sampling_params, use_tqdm=…)`` with ``{"prompt_token_ids": […]}`` prompts and
  one ``SamplingParams`` per prompt, returning ``RequestOutput``s whose ``outputs`` are ``n``
  ``CompletionOutput``s with ``token_ids`` and ``logprobs`` — one ``{token_id: Logprob}`` per sampled
  token (vllm/outputs.py, vllm/logprobs.py).
Its engine model is a real ``transformers`` model loaded from the same folder, so what the
backend pushes is what the fake samples from.
"""

from __future__ import annotations

import copy
import os
import sys
import types
from dataclasses import dataclass, field
from typing import ClassVar

import pytest
import torch

from kimina_edu.logprobs import truncated_importance_weights
from kimina_edu.lora import lora_config
from kimina_edu.merged_weights import vllm_weights
from kimina_edu.models import base_model_path, load_policy
from kimina_edu.pocket import PocketRecipe
from kimina_edu.rewards import RewardBreakdown
from kimina_edu.rollouts import (
    Generation,
    SamplingSettings,
    VLLMBackend,
    _read_vllm_outputs,
    chat_prompt,
    encode_prompts,
)
from kimina_edu.tasks import SEEDS, make_entries
from kimina_edu.train_config import TrainConfig
from kimina_edu.trainer import GRPOTrainer

SMOKE = PocketRecipe.smoke()
ENTRIES = make_entries("syllogism", 32, SEEDS["rl"])


# ------------------------------------------------------------------ the recording fake


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    token_ids: list[int]
    logprobs: list[dict[int, Logprob]] | None
    text: str = ""
    finish_reason: str | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput] = field(default_factory=list)


class SamplingParams:
    def __init__(self, n: int = 1, temperature: float = 1.0, top_p: float = 1.0, min_p: float = 0.0,
                 max_tokens: int | None = 16, seed: int | None = None, logprobs: int | None = None, **extra):
        self.n, self.temperature, self.top_p, self.min_p = n, temperature, top_p, min_p
        self.max_tokens, self.seed, self.logprobs, self.extra = max_tokens, seed, logprobs, extra


class EngineModel:
    """Stands for vLLM's model: loads weights by checkpoint name, records every one."""

    def __init__(self, hf_model, events: list):
        self.hf, self.events = hf_model, events
        self.params = dict(hf_model.named_parameters())
        self.pushed: list[tuple[str, torch.Tensor]] = []

    def load_weights(self, weights):
        loaded = set()
        for name, tensor in weights:
            if name == "lm_head.weight" and self.hf.config.tie_word_embeddings:
                self.events.append(("skip", name))  # a tied alias: vLLM skips it (utils.py:238-243)
                continue
            if name not in self.params:
                raise ValueError(f"There is no module or parameter named '{name}' in LlamaForCausalLM")
            with torch.no_grad():
                self.params[name].copy_(tensor)
            self.pushed.append((name, tensor.detach().clone()))
            self.events.append(("load", name))
            loaded.add(name)
        return loaded


class LLM:
    built: ClassVar[list[LLM]] = []

    def __init__(self, model: str, **kwargs):
        from transformers import AutoModelForCausalLM

        self.kwargs, self.events, self.requests = kwargs, [], []
        hf = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
        self.engine_model = EngineModel(hf, self.events)
        engine = types.SimpleNamespace()
        if os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "1") == "0":  # as in LLMEngine.__init__
            runner = types.SimpleNamespace(model=self.engine_model)
            engine.model_executor = types.SimpleNamespace(driver_worker=types.SimpleNamespace(model_runner=runner))
        self.llm_engine = engine
        LLM.built.append(self)

    def reset_prefix_cache(self, reset_running_requests: bool = False, reset_connector: bool = False) -> bool:
        self.events.append(("reset",))
        return True

    def generate(self, prompts, sampling_params=None, use_tqdm=True, **kwargs):
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(prompts)
        assert len(params) == len(prompts)
        self.events.append(("generate", len(prompts)))
        hf, outs = self.engine_model.hf, []
        for k, (prompt, sp) in enumerate(zip(prompts, params)):
            self.requests.append((prompt, sp))
            ids = list(prompt["prompt_token_ids"])  # the backend must send token ids, not text
            gen = torch.Generator().manual_seed(sp.seed if sp.seed is not None else 1234)
            samples = [self._sample(hf, ids, sp, gen) for _ in range(sp.n)]
            outs.append(RequestOutput(str(k), ids, [CompletionOutput(i, t, lp) for i, (t, lp) in enumerate(samples)]))
        return outs

    @torch.no_grad()
    def _sample(self, hf, ids, sp, gen):
        tokens, logprobs, eos = [], [], hf.config.eos_token_id
        for _ in range(sp.max_tokens):
            logits = hf(input_ids=torch.tensor([ids + tokens])).logits[0, -1].float()
            raw = torch.log_softmax(logits, -1)  # logprobs_mode="raw_logprobs": before temperature
            probs = torch.softmax(logits / max(sp.temperature, 1e-6), -1)
            tok = int(torch.multinomial(probs, 1, generator=gen))
            tokens.append(tok)
            logprobs.append({tok: Logprob(float(raw[tok]), 1)})
            if tok == eos:
                break
        return tokens, logprobs


@pytest.fixture
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.LLM, module.SamplingParams = LLM, SamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    LLM.built.clear()
    return module


pytestmark = pytest.mark.usefixtures("offline_shared_cache")


def _lora_policy(seed: int = 0):
    """The pocket model with a LoRA whose B matrices are non-zero, so merged ≠ base."""
    model, tok = load_policy("pocket", recipe=SMOKE, lora=lora_config(r=4, alpha=8), verbose=False)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    return model, tok, base_model_path("pocket", SMOKE)


def _lora_trainable(model) -> int:
    return sum(p.numel() for n, p in model.named_parameters() if p.requires_grad and "lora_" in n)


def brevity_reward(text, entry):
    score = 1.0 - min(len(text), 40) / 40
    return RewardBreakdown(None, 0.0, score, score)


# ------------------------------------------------------------------ tests


def test_engine_is_built_for_in_process_access(fake_vllm):
    _, _, path = _lora_policy()
    backend = VLLMBackend(path, seed=7)
    llm = LLM.built[-1]
    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert backend.engine_model() is llm.engine_model
    assert llm.kwargs["enable_prefix_caching"] and llm.kwargs["seed"] == 7
    assert llm.kwargs["logprobs_mode"] == "raw_logprobs"
    backend.llm.llm_engine = types.SimpleNamespace()  # what vLLM's default multiprocess engine exposes
    with pytest.raises(RuntimeError, match="VLLM_ENABLE_V1_MULTIPROCESSING=0"):
        backend.engine_model()


def test_engine_samples_in_the_learners_dtype(fake_vllm, monkeypatch):
    """One dtype policy (models.policy_dtype) for the learner and for vLLM: bf16 on a bf16 GPU, fp32 on an older one."""
    from kimina_edu import models

    _, _, path = _lora_policy()
    for policy, expected in ((torch.bfloat16, "bfloat16"), (torch.float32, "float32")):
        monkeypatch.setattr(models, "policy_dtype", lambda device, policy=policy: policy)
        VLLMBackend(path)
        assert LLM.built[-1].kwargs["dtype"] == expected
    VLLMBackend(path, dtype="float16")
    assert LLM.built[-1].kwargs["dtype"] == "float16", "an explicit dtype wins"


def test_sync_keeps_the_adapter_trainable_and_pushes_merged_weights_under_checkpoint_names(fake_vllm):
    model, _, path = _lora_policy()
    live_before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainable_before = _lora_trainable(model)
    backend = VLLMBackend(path)
    backend.load_policy(model)

    assert trainable_before > 0 and _lora_trainable(model) == trainable_before
    assert all(torch.equal(p, live_before[n]) for n, p in model.named_parameters()), "the live model was modified"
    merged = copy.deepcopy(model).merge_and_unload()
    expected = dict(merged.named_parameters())
    pushed = LLM.built[-1].engine_model.pushed
    names = [n for n, _ in pushed]
    assert sorted(names) == sorted(expected), "every base weight once, under the checkpoint's names"
    assert not any("lora" in n or "base_model" in n or "base_layer" in n for n in names)
    for name, tensor in pushed:
        assert torch.allclose(tensor, expected[name], atol=1e-6), name
    assert any(not torch.equal(t, live_before["base_model.model." + n.replace(".weight", ".base_layer.weight")])
               for n, t in pushed if "proj" in n), "the LoRA delta was not merged into what vLLM got"


def test_vllm_weights_of_a_plain_model_are_its_named_parameters():
    model, _ = load_policy("pocket", recipe=SMOKE, verbose=False)
    got = dict(vllm_weights(model))
    assert got.keys() == dict(model.named_parameters()).keys()
    assert all(t is not None and torch.equal(t, p) for (n, t), p in zip(got.items(), model.parameters()))


def test_training_with_vllm_rollouts_moves_the_adapter_one_push_per_step(fake_vllm, tmp_path):
    model, tok, path = _lora_policy()
    backend = VLLMBackend(path, seed=0)
    # 3 rounds of B·G = 4 per step (buffer 12), one optimizer step over them
    cfg = TrainConfig(steps=2, questions_per_batch=2, group_size=2, max_new_tokens=6, buffer_size=12,
                      minibatch_size=12, grad_accum=1, lr=5e-2, log_rollouts=0, seed=1)
    trainer = GRPOTrainer(model, tok, cfg, train_entries=ENTRIES, output_dir=tmp_path, reward_fn=brevity_reward,
                          backend=backend, progress=False)
    lora_before = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}
    log = trainer.train()

    assert _lora_trainable(model) == sum(p.numel() for p in lora_before.values())
    moved = [n for n, p in model.named_parameters() if "lora_" in n and not torch.equal(p, lora_before[n])]
    assert moved, "the optimizer no longer moves the LoRA parameters"
    events = LLM.built[-1].events
    kinds = [e[0] for e in events if e[0] not in ("load", "skip")]
    assert backend.syncs == cfg.steps
    assert kinds == ["reset", "generate", "generate", "generate"] * cfg.steps, kinds
    loads_per_sync = len([e for e in events if e[0] == "load"]) // cfg.steps
    assert loads_per_sync == len(dict(vllm_weights(model)))
    # the second push carries the updated adapter: what vLLM holds equals the merged policy now… minus the
    # last step's update, which happened after the last push
    assert all(r.get("skipped") == 1.0 or "tis_weight_mean" in r for r in log)
    learned = [r for r in log if r.get("skipped") == 0.0]
    assert learned and all(0.5 < r["tis_weight_mean"] < 1.5 for r in learned)


def test_prompts_go_in_as_token_ids_with_per_request_seeds(fake_vllm):
    model, tok, path = _lora_policy()
    prompts = [chat_prompt(tok, e["question"]) for e in ENTRIES[:3]]
    ids = encode_prompts(tok, prompts)
    settings = SamplingSettings(max_new_tokens=4, temperature=0.7, top_p=0.95, n=2, seed=11)

    def run():
        backend = VLLMBackend(path)
        backend.load_policy(model)
        return backend.generate(tok, ids, settings), LLM.built[-1].requests

    first, requests = run()
    again, _ = run()
    assert [r[0] for r in requests] == [{"prompt_token_ids": p} for p in ids]
    seeds = [sp.seed for _, sp in requests]
    assert None not in seeds and len(set(seeds)) == len(seeds), "each request needs its own seed"
    assert all(sp.n == 2 and sp.logprobs == 0 and sp.max_tokens == 4 and sp.top_p == 0.95 for _, sp in requests)
    assert first.completion_ids == again.completion_ids, "same seed, same completions"
    assert len(first.completion_ids) == 6 and len(first.sampler_logp) == 6
    assert all(len(lp) == len(c) for lp, c in zip(first.sampler_logp, first.completion_ids))


def test_generate_before_any_push_is_refused(fake_vllm):
    _, tok, path = _lora_policy()
    backend = VLLMBackend(path)
    with pytest.raises(RuntimeError, match="load_policy"):
        backend.generate(tok, [[1, 2, 3]], SamplingSettings(max_new_tokens=2))


def test_log_probs_at_another_temperature_than_vllms_are_refused_in_one_line(fake_vllm):
    """vLLM returns log-probs before temperature (raw_logprobs); a learner scoring at T 0.7 would compare
    them with its own at another temperature, and the importance weight would correct a gap that is not
    the engines'."""
    model, tok, path = _lora_policy()
    backend = VLLMBackend(path)
    backend.load_policy(model)
    with pytest.raises(ValueError, match="set score_at_temperature=False with vLLM"):
        backend.generate(tok, [[1, 2, 3]], SamplingSettings(max_new_tokens=2, temperature=0.7, logp_temperature=0.7))


def test_unrecognised_vllm_outputs_are_errors():
    ok = RequestOutput("0", [1, 2], [CompletionOutput(0, [5, 6], [{5: Logprob(-0.1)}, {6: Logprob(-0.2)}])])
    assert _read_vllm_outputs([ok], [[1, 2]], 1) == Generation([[1, 2]], [[5, 6]], [[-0.1, -0.2]])
    cases = {
        "results for": ([], [[1, 2]], 1),
        "another prompt": ([ok], [[1, 3]], 1),
        "samples for prompt": ([ok], [[1, 2]], 2),
        "no log-prob": ([RequestOutput("0", [1, 2], [CompletionOutput(0, [5, 6], None)])], [[1, 2]], 1),
        "miss the sampled token": ([RequestOutput("0", [1, 2], [CompletionOutput(0, [5], [{7: Logprob(-1.0)}])])],
                                   [[1, 2]], 1),
    }
    for message, args in cases.items():
        with pytest.raises(RuntimeError, match=message):
            _read_vllm_outputs(*args)


def test_truncated_importance_weights_follow_the_ratio_and_the_cap():
    learner = torch.tensor([[-1.0, -2.0, -0.5], [-1.0, 0.0, 0.0]])
    sampler = torch.tensor([[-1.0, -3.0, -0.1], [-4.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    w = truncated_importance_weights(learner, sampler, mask, cap=2.0)
    expected = torch.tensor([[1.0, 2.0, float(torch.exp(torch.tensor(-0.4)))], [2.0, 1.0, 1.0]])
    assert torch.allclose(w, expected)
    assert not w.requires_grad
