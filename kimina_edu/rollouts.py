"""Chapter 4 — sampling the policy: prompts in, completions out, behind one small settings object.

Two backends with one interface, so the trainer never branches on which one samples:

    backend.load_policy(model)                          # once per optimizer step: the weights moved
    gen = backend.generate(tok, prompt_ids, settings)   # any number of rounds with those weights
    backend.release()                                   # before learning: free what sampling held

- :class:`TransformersBackend` — batched, KV-cached ``model.generate`` on the CPU or a GPU.
- :class:`VLLMBackend` — vLLM in the same process on a CUDA GPU ("colocate", as TRL calls it).
  It also returns vLLM's own log-probability of every sampled token, because vLLM's kernels
  (bf16, fused, another reduction order) do not compute exactly the learner's distribution;
  the trainer uses them to correct that gap (truncated importance sampling, see
  :func:`kimina_edu.logprobs.truncated_importance_weights`).

Prompts go in as **token ids**, encoded once with ``add_special_tokens=False``: the chat template
already wrote every special token, and a tokenizer that adds a BOS would otherwise let the two
backends see different prompts.
"""

from __future__ import annotations

import copy
import os
import random
from dataclasses import dataclass
from typing import Any

from kimina_edu import smalldecode
from kimina_edu.merged_weights import refresh_merged, vllm_weights
from kimina_edu.rewards import SYSTEM_PROMPT, chat_messages


@dataclass(frozen=True)
class SamplingSettings:
    """How to sample: everything a backend needs, nothing about learning.

    ``n``: samples per prompt (GRPO's group size G). ``temperature == 0``: greedy.
    ``min_p``: drop tokens under ``min_p`` × the top token's probability (0: off).
    ``seed``: base seed of the sampler's own random stream, for backends that own one (vLLM);
    ``None`` leaves seeding to the caller (the transformers backend draws from torch's global
    generator, which the trainer seeds and checkpoints).
    ``logp_temperature``: the sampled tokens' log-probs a backend returns are under
    softmax(logits / this) — the distribution the learner scores (``TrainConfig.score_at_temperature``).
    """

    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    min_p: float = 0.0
    n: int = 1
    seed: int | None = None
    logp_temperature: float = 1.0

    def __post_init__(self) -> None:
        problems = []
        if self.max_new_tokens < 1:
            problems.append(f"max_new_tokens must be ≥ 1 (got {self.max_new_tokens})")
        if not self.temperature >= 0:
            problems.append(f"temperature must be ≥ 0 (got {self.temperature})")
        if not 0 < self.top_p <= 1:
            problems.append(f"top_p must be in (0, 1] (got {self.top_p})")
        if not 0 <= self.min_p < 1:
            problems.append(f"min_p must be in [0, 1) (got {self.min_p})")
        if self.n < 1:
            problems.append(f"n must be ≥ 1 (got {self.n})")
        if not self.logp_temperature > 0:
            problems.append(f"logp_temperature must be > 0 (got {self.logp_temperature})")
        if problems:
            raise ValueError("invalid sampling settings: " + "; ".join(problems))


@dataclass
class Generation:
    """One backend call's result. ``completion_ids`` is prompt-major: the ``n`` samples of prompt 0
    first. ``sampler_logp[i][j]``: the sampler's log-probability of completion token j of sample i
    (vLLM), or ``None`` when the sampler is the learner's own model (transformers)."""

    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]
    sampler_logp: list[list[float]] | None = None


# ------------------------------------------------------------------ prompts


def chat_prompt(tok, question: str, system: str = SYSTEM_PROMPT) -> str:
    """The prompt text the policy sees: system + user turns through the chat template."""
    return tok.apply_chat_template(chat_messages(question, system=system), tokenize=False, add_generation_prompt=True)


def encode_prompts(tok, prompts: list[str]) -> list[list[int]]:
    """Token ids of each prompt, exactly as written: no BOS or other special token added."""
    ids = tok(list(prompts), add_special_tokens=False)["input_ids"]
    empty = [i for i, row in enumerate(ids) if not row]
    if empty:
        raise ValueError(f"prompts {empty[:5]} encode to no tokens: a prompt needs at least one token")
    return [list(row) for row in ids]


# ------------------------------------------------------------------ transformers sampling


def trim_completion(row: list, eos_id: int | None, pad_id: int | None, key=None) -> list:
    """Cut a generated row after its first end-of-turn token (kept: the policy chose to stop), or
    drop the padding ``generate`` appends once a row has finished. ``key``: the token id of an item
    of ``row`` (rows of (token, log-prob) pairs are trimmed alike)."""
    ids = [key(x) for x in row] if key else row
    if eos_id is not None and eos_id in ids:
        return row[: ids.index(eos_id) + 1]
    return [x for x, t in zip(row, ids) if t != pad_id]


def generate_ids(model, tok, prompt_ids: list[list[int]], settings: SamplingSettings,
                 matmul_dtype=None) -> list[list[int]]:
    """One batched, KV-cached ``model.generate`` call from token ids; completions prompt-major.

    Prompts are left-padded here (whatever the tokenizer's side) so every row's next token sits
    in the last column; ``generate`` derives position ids from the attention mask.
    """
    return sample_ids(model, tok, prompt_ids, settings, matmul_dtype).completion_ids


def sample_ids(model, tok, prompt_ids: list[list[int]], settings: SamplingSettings, matmul_dtype=None) -> Generation:
    """:func:`generate_ids`, returning a :class:`Generation`. Where the plain-torch decoder runs its
    matrices in bf16 (:mod:`kimina_edu.precision`), it computes differently from the fp32 learner, so the
    result also holds each sampled token's log-prob under softmax(logits / ``settings.logp_temperature``)
    as the sampler computed it: the trainer measures and corrects that gap, as it does vLLM's.
    ``matmul_dtype``: ``torch.float32`` forces the fp32 path (greedy evaluation: :mod:`kimina_edu.eval`)."""
    import torch

    from kimina_edu import precision

    if not prompt_ids or any(not row for row in prompt_ids):
        raise ValueError("generate_ids needs at least one prompt, each with at least one token")
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    width = max(len(row) for row in prompt_ids)
    ids = torch.full((len(prompt_ids), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(prompt_ids), width), dtype=torch.long)
    for i, row in enumerate(prompt_ids):
        ids[i, width - len(row):] = torch.tensor(row)
        attn[i, width - len(row):] = 1
    sample = settings.temperature > 0
    large = arithmetic_bound(model)
    prompts = [list(p) for p in prompt_ids]
    if smalldecode.supported(model) is None:
        dtype = matmul_dtype or precision.matmul_dtype(large)
        decoder = smalldecode.SmallLlama.from_model(model, dtype)
        bf16 = dtype != torch.float32
        rows = decoder.decode(ids, attn, settings, tok.eos_token_id, share_prefix=large, drop_finished=large,
                              logp_temperature=settings.logp_temperature if bf16 else None)
        if not bf16:
            return Generation(prompts, [trim_completion(row, tok.eos_token_id, pad_id) for row in rows])
        pairs = [trim_completion(list(zip(row, lp)), tok.eos_token_id, pad_id, key=lambda pair: pair[0])
                 for row, lp in zip(rows, decoder.sampled_logp)]
        return Generation(prompts, [[t for t, _ in row] for row in pairs], [[lp for _, lp in row] for row in pairs])
    if large:
        rows = decode_dropping_finished(model, ids, attn, settings, tok.eos_token_id)
        return Generation(prompts, [trim_completion(row, tok.eos_token_id, pad_id) for row in rows])
    kwargs: dict[str, Any] = {"do_sample": sample, "max_new_tokens": settings.max_new_tokens,
                              "num_return_sequences": settings.n, "pad_token_id": pad_id,
                              "eos_token_id": tok.eos_token_id}
    if sample:
        kwargs.update(temperature=settings.temperature, top_p=settings.top_p, top_k=0)
        if settings.min_p > 0:
            kwargs["min_p"] = settings.min_p
    with torch.no_grad():
        out = model.generate(input_ids=ids.to(model.device), attention_mask=attn.to(model.device), **kwargs)
    return Generation(prompts, [trim_completion(row, tok.eos_token_id, pad_id) for row in out[:, width:].tolist()])


# Above this many parameters a decoding step's cost is arithmetic (rows × parameters), so a shared system
# turn is worth running once and a finished row worth dropping; below it (the ~1 M-parameter pocket model) a
# step costs Python and kernel launches whatever the rows. The plain-torch decoder of kimina_edu.smalldecode
# runs both where it can (Llama, fp32, CPU: about 3× `model.generate`'s tokens/s on the pocket model,
# bench_rollouts.py; 1.35–1.6× transformers' own cached forward on SmolLM2, benchmarks/README.md); elsewhere a
# large model takes decode_dropping_finished and a small one `model.generate` (smalldecode.supported says why).
ARITHMETIC_BOUND_PARAMS = 20_000_000


def arithmetic_bound(model) -> bool:
    return sum(p.numel() for p in model.parameters()) > ARITHMETIC_BOUND_PARAMS


def cache_keyword(model) -> str:
    """The name a model's ``forward`` takes its KV cache by: ``cache`` in transformers 5.2x (which warns
    that ``past_key_values`` goes away in 5.40), ``past_key_values`` before (verl's environment)."""
    import inspect

    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(inner.forward).parameters else "past_key_values"


def sampling_probs(logits, settings: SamplingSettings):
    """The distribution ``model.generate`` samples the next token from (``temperature > 0``): temperature,
    then top-p, then min-p — its order of logits warpers — then a softmax."""
    import torch

    scores = logits.float() / settings.temperature
    if settings.top_p < 1:
        ordered, order = torch.sort(scores, descending=False)
        drop = ordered.softmax(-1).cumsum(-1) <= 1 - settings.top_p
        drop[..., -1] = False  # the most likely token always stays
        scores = scores.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    if settings.min_p > 0:
        probs = scores.softmax(-1)
        scores = scores.masked_fill(probs < settings.min_p * probs.max(-1, keepdim=True).values, float("-inf"))
    return scores.softmax(-1)


def sample_next(logits, settings: SamplingSettings):
    """Each row's next token: greedy at ``temperature == 0``, else one draw from :func:`sampling_probs`
    with torch's global generator (which the trainer seeds and checkpoints)."""
    import torch

    if settings.temperature == 0:
        return logits.argmax(-1)
    return torch.multinomial(sampling_probs(logits, settings), 1).squeeze(1)


def decode_dropping_finished(model, ids, attn, settings: SamplingSettings, eos_id: int | None) -> list[list[int]]:
    """KV-cached decoding for models whose steps cost arithmetic: each prompt is prefilled once and its
    cache copied to its ``settings.n`` samples (``model.generate`` prefills every copy), and a row leaves
    the batch — and the cache — once it has written ``eos_id`` (``generate`` computes finished rows until
    the longest is done; an untouched SmolLM2's answers average ~40 tokens against a cap of 96).
    Greedy: the same tokens as ``generate`` (tests/test_rollouts.py); sampling: the same distribution
    (:func:`sample_next`), other draws. Rows come back prompt-major, as ``generate`` returns them."""
    import torch
    from transformers import DynamicCache

    device, n = model.device, settings.n
    ids, attn = ids.to(device), attn.to(device)
    cache, key = DynamicCache(), cache_keyword(model)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=attn, position_ids=(attn.cumsum(-1) - 1).clamp(min=0),
                       **{key: cache}, use_cache=True, logits_to_keep=1).logits[:, -1]
        if n > 1:
            cache.batch_repeat_interleave(n)
            logits, attn = logits.repeat_interleave(n, 0), attn.repeat_interleave(n, 0)
        rows = list(range(attn.shape[0]))
        out_rows: list[list[int]] = [[] for _ in rows]
        position = attn.sum(-1)  # the next token's position in each row
        for step in range(settings.max_new_tokens):
            token = sample_next(logits, settings)
            for row, t in zip(rows, token.tolist()):
                out_rows[row].append(t)
            if step == settings.max_new_tokens - 1:
                break
            live = (token != eos_id).nonzero().squeeze(1) if eos_id is not None else None
            if live is not None and live.numel() < len(rows):
                if live.numel() == 0:
                    break
                cache.batch_select_indices(live)
                attn, token, position = attn[live], token[live], position[live]
                rows = [rows[i] for i in live.tolist()]
            attn = torch.cat([attn, torch.ones_like(attn[:, :1])], dim=1)
            logits = model(input_ids=token[:, None], attention_mask=attn, position_ids=position[:, None],
                           **{key: cache}, use_cache=True).logits[:, -1]
            position = position + 1
    return out_rows


def generate(model, tok, prompts: list[str], *, max_new_tokens: int, temperature: float = 0.0,
             top_p: float = 1.0, min_p: float = 0.0, num_return_sequences: int = 1, seed: int | None = None,
             matmul_dtype=None):
    """One batched, KV-cached ``generate`` call over many prompt texts (notebooks, evaluation).

    Returns ``(prompt_ids, completion_ids)``: per-sequence token lists (padding removed),
    completions ordered prompt-major (all samples of prompt 0 first). Greedy when
    ``temperature == 0``. ``seed`` re-seeds torch's global generator first. ``matmul_dtype``: as
    :func:`sample_ids`.
    """
    import torch

    if seed is not None:
        torch.manual_seed(seed)
    settings = SamplingSettings(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, min_p=min_p,
                                n=num_return_sequences)
    prompt_ids = encode_prompts(tok, prompts)
    return prompt_ids, generate_ids(model, tok, prompt_ids, settings, matmul_dtype)


def _merged_copy(model):
    """A plain model holding ``model``'s effective weights: PEFT's ``unload`` of a copy gives the base
    model's modules, and :func:`refresh_merged` writes into them what the policy computes (a plain
    ``merge_and_unload`` would merge the adapters even inside ``disable_adapter()``)."""
    sampler = copy.deepcopy(model).unload().eval()
    if not refresh_merged(sampler, model):
        raise RuntimeError("the policy's merged weights do not fit its own unloaded copy; please report this as a bug")
    return sampler


class TransformersBackend:
    """Batched, KV-cached ``model.generate``: all B·G samples of a round in one call.

    A LoRA policy samples from a merged copy (``W + B·A·scale`` in one matrix per layer), made
    once per optimizer step in :meth:`load_policy` — the same idea as pushing weights into vLLM:
    each decoding step then runs one matmul per layer instead of three, and the trained model is
    not touched. The copy holds what the policy computes at that moment
    (:func:`kimina_edu.merged_weights.effective_weights`): inside ``model.disable_adapter()``, the base. Its speed against the article's per-question loop is measured by
    ``benchmarks/bench_rollouts.py`` (README, "Speed").
    """

    name = "transformers"

    def __init__(self) -> None:
        self._sampler = None
        self._kept: tuple[Any, Any] | None = None  # (policy, its merged copy), kept across steps: small models

    def load_policy(self, model) -> None:
        """Take the policy's current weights; call again after every optimizer step.

        A small model's merged copy is kept between steps and refreshed in place (:func:`refresh_merged`:
        the same sums ``merge_and_unload`` writes, bit for bit) — copying the whole model every step cost
        the pocket model's step ~7% of its time. A large model the plain-torch decoder runs is read as it
        is (:meth:`kimina_edu.smalldecode.SmallLlama.from_model` computes its weights); another large
        model's copy is made each step and dropped by :meth:`release`, so that it does not sit in memory
        while the policy learns."""
        if not hasattr(model, "peft_config"):
            self._sampler = model.eval()
            return
        if arithmetic_bound(model) and smalldecode.supported(model) is None:
            self._sampler = model  # the plain-torch decoder reads what the policy computes itself: no copy
            return
        if self._kept is not None and self._kept[0] is model and refresh_merged(self._kept[1], model):
            self._sampler = self._kept[1]
            return
        self._sampler = _merged_copy(model)
        self._kept = None if arithmetic_bound(model) else (model, self._sampler)

    def generate(self, tok, prompt_ids: list[list[int]], settings: SamplingSettings) -> Generation:
        """All rows of a round; ``sampler_logp`` is set where the sampler's arithmetic differs from the
        learner's (bf16 matrices on the CPU: :func:`sample_ids`)."""
        if self._sampler is None:
            raise RuntimeError("TransformersBackend.generate before load_policy(model): load the policy first")
        return sample_ids(self._sampler, tok, prompt_ids, settings)

    def release(self) -> None:
        """Drop the merged copy (a whole model's worth of memory) before the learning phase; a small
        model's stays kept for the next step's :meth:`load_policy`."""
        self._sampler = None


# ------------------------------------------------------------------ vLLM sampling

class VLLMBackend:
    """vLLM rollouts in the learner's process, on a CUDA GPU. Pinned: vLLM 0.30.0 (the ``gpu`` extra).

    **Engine access** (read in vLLM 0.30.0's source, ``vllm/v1/engine/llm_engine.py``): ``LLMEngine``
    sets ``self.model_executor`` only when it is *not* in multiprocess mode (lines 128–130), and it
    takes that mode from ``VLLM_ENABLE_V1_MULTIPROCESSING`` (default 1: lines 161 and 179). So the
    backend sets it to 0 before building ``LLM``; TRL gets the same by passing
    ``distributed_executor_backend="external_launcher"`` under ``accelerate`` (that backend sets the
    variable itself: ``vllm/config/parallel.py:962``), which a single-process course run does not
    need. The model then sits at ``llm.llm_engine.model_executor.driver_worker.model_runner.model``
    (the path vLLM itself reads in ``LLMEngine._get_driver_model_for_cleanup``, lines 449–452;
    ``driver_worker`` forwards attributes to the GPU worker, ``vllm/v1/worker/worker_base.py:357``).

    **Weights**: :meth:`load_policy` pushes the merged weights (:func:`vllm_weights`) once per
    optimizer step — not once per ``generate`` call — then calls ``llm.reset_prefix_cache()``: with
    prefix caching on, the chat-template prefix every prompt shares would otherwise keep KV blocks
    computed with the old weights.

    **dtype**: by default the one the learner loads its weights in on this GPU
    (:func:`kimina_edu.models.policy_dtype`), so both engines hold the same numbers. vLLM's own
    ``"auto"`` agrees on a bf16 GPU but turns an fp32 checkpoint into fp16 on an older one, where the
    learner stays fp32 (``_resolve_auto_dtype`` in ``vllm/config/model.py``; ``supported_dtypes`` in
    ``vllm/platforms/cuda.py``).

    **Sampler–learner gap**: ``logprobs_mode="raw_logprobs"`` (vLLM's default, written out:
    ``vllm/config/model.py:259-265``) makes vLLM return the sampled token's log-probability before
    temperature and top-p — the quantity the learner computes — so the difference between the two
    is only the engines' numerics, which the trainer corrects with truncated importance sampling.
    TRL sets ``"processed_logprobs"`` because its learner divides logits by the temperature; ours
    does not.

    **Seeding**: ``LLM(seed=…)`` seeds vLLM's global generator; each request also carries its own
    seed drawn from ``settings.seed`` and the call count, so a rerun samples the same completions
    (vLLM gives the ``n`` samples of a request seeds ``seed + index``:
    ``vllm/v1/engine/parallel_sampling.py:75-80``).
    """

    name = "vllm"

    def __init__(self, model_path: str, *, gpu_memory_utilization: float = 0.3, max_model_len: int | None = None,
                 seed: int = 0, dtype: str | None = None, **llm_kwargs: Any):
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # in-process engine: see the class docstring
        if dtype is None:  # the learner's: vLLM's "auto" samples an fp32 checkpoint in fp16 on a GPU without bf16
            from kimina_edu.models import policy_dtype

            dtype = str(policy_dtype("cuda")).removeprefix("torch.")
        try:
            from vllm import LLM
        except ImportError:
            raise RuntimeError("VLLMBackend needs vLLM on a CUDA machine: pip install -e '.[gpu]'") from None
        if max_model_len is not None:  # else vLLM derives it from the model's config
            llm_kwargs["max_model_len"] = max_model_len
        self.llm = LLM(model=model_path, gpu_memory_utilization=gpu_memory_utilization, enable_prefix_caching=True,
                       seed=seed, dtype=dtype, logprobs_mode="raw_logprobs", **llm_kwargs)
        self.syncs = 0  # weight pushes so far: one per optimizer step
        self._calls = 0
        self._loaded = False

    def engine_model(self):
        """vLLM's in-process ``nn.Module`` (the path is explained in the class docstring)."""
        try:
            return self.llm.llm_engine.model_executor.driver_worker.model_runner.model
        except AttributeError as exc:
            raise RuntimeError(
                f"vLLM's model is not reachable in this process ({exc}). VLLMBackend needs vLLM 0.30 with "
                "VLLM_ENABLE_V1_MULTIPROCESSING=0 set before vLLM is imported; install the pinned "
                "version with pip install -e '.[gpu]'") from None

    def load_policy(self, model) -> None:
        """Push the policy's merged weights into vLLM and drop the KV blocks computed with the old ones."""
        target = self.engine_model()
        for name, tensor in vllm_weights(model):
            target.load_weights([(name, tensor)])  # one tensor at a time, as TRL does: no second copy
        self.llm.reset_prefix_cache()
        self.syncs += 1
        self._loaded = True

    def release(self) -> None:
        """Nothing to free: vLLM keeps its weights and KV cache between steps (its share of the GPU is
        ``gpu_memory_utilization``); the pushed weights stay valid until the next :meth:`load_policy`."""

    def generate(self, tok, prompt_ids: list[list[int]], settings: SamplingSettings) -> Generation:
        from vllm import SamplingParams

        if not self._loaded:
            raise RuntimeError("VLLMBackend.generate before load_policy(model): vLLM still holds the base weights")
        if not prompt_ids or any(not row for row in prompt_ids):
            raise ValueError("generate needs at least one prompt, each with at least one token")
        if settings.logp_temperature != 1.0:  # raw_logprobs: before temperature (the class docstring)
            raise ValueError(f"VLLMBackend returns log-probs under the model's own T = 1 softmax, and the learner "
                             f"scores at T = {settings.logp_temperature}: set score_at_temperature=False with vLLM")
        rng = random.Random(f"{settings.seed}/{self._calls}")
        self._calls += 1
        params = [SamplingParams(n=settings.n, temperature=settings.temperature, top_p=settings.top_p,
                                 min_p=settings.min_p, max_tokens=settings.max_new_tokens, logprobs=0,
                                 seed=None if settings.seed is None else rng.randrange(2**31))
                  for _ in prompt_ids]
        requests = [{"prompt_token_ids": list(p)} for p in prompt_ids]
        outs = self.llm.generate(requests, params, use_tqdm=False)
        return _read_vllm_outputs(outs, prompt_ids, settings.n)


def _read_vllm_outputs(outs, prompt_ids: list[list[int]], n: int) -> Generation:
    """Completions and their sampled-token log-probs from vLLM's ``RequestOutput`` list; anything
    unexpected (a missing request, a wrong count, a token without its log-prob) is an error."""
    if len(outs) != len(prompt_ids):
        raise RuntimeError(f"vLLM returned {len(outs)} results for {len(prompt_ids)} prompts")
    completions, logps = [], []
    for k, (out, sent) in enumerate(zip(outs, prompt_ids)):
        if list(out.prompt_token_ids) != list(sent):
            raise RuntimeError(f"vLLM result {k} answers another prompt than the one sent")
        if len(out.outputs) != n:
            raise RuntimeError(f"vLLM returned {len(out.outputs)} samples for prompt {k}, expected {n}")
        for sample in out.outputs:
            ids = list(sample.token_ids)
            if sample.logprobs is None or len(sample.logprobs) != len(ids):
                raise RuntimeError(f"vLLM returned no log-prob for some tokens of prompt {k} (logprobs=0 was asked)")
            row = []
            for position, token in zip(sample.logprobs, ids):
                if token not in position:
                    raise RuntimeError(f"vLLM's log-probs for prompt {k} miss the sampled token {token}")
                row.append(float(position[token].logprob))
            completions.append(ids)
            logps.append(row)
    return Generation([list(p) for p in prompt_ids], completions, logps)


__all__ = [
    "Generation",
    "SamplingSettings",
    "TransformersBackend",
    "VLLMBackend",
    "chat_prompt",
    "encode_prompts",
    "generate",
    "generate_ids",
    "sample_ids",
    "trim_completion",
]
