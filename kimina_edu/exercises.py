"""The cases each notebook's grader cell checks a learner's stub on, and the references with the stub's
signature — in one place, so the notebooks and tests/test_stubs.py grade on the same inputs.

Chapter by chapter: ``extract_answer_cases`` and ``format_reward_cases`` (01), ``group_advantages_cases``,
``policy_loss_cases`` and ``kl_k3_cases`` (02), ``completion_logprobs_cases``, ``grpo_loss_cases`` and
``grpo_iteration_cases`` (04, the last on a toy task: :class:`OneTokenTask`, run by :func:`toy_loop`),
``feedback_cases`` (07), ``pass_at_k_cases`` (09). Grading itself is :func:`kimina_edu.graders.grade`. Chapter
4's phase that learns one buffer in several minibatch steps (:func:`learn_one_buffer`) lives here too: the
notebook and its solutions run it.
This module sits downstream of every chapter's module and nothing in the package imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kimina_edu.graders import Case, short

# ---- chapter 1: text → reward


def extract_answer_cases() -> dict[str, str]:
    """Ordinary, adversarial and empty completions; the last one is long enough that a quadratic scan shows."""
    return {
        "one answer": "<think>hmm</think><answer> Yes </answer>",
        "changed its mind": "<answer>No</answer> wait <answer>Yes</answer>",
        "never closed": "<answer>Yes",
        "never opened": "Yes</answer>",
        "empty string": "",
        "no tags at all": "no tags at all",
        "close before open": "</answer><answer>",
        "unicode": "<answer>∀ x, ¬P x</answer>",
        "nested open": "<answer><answer>Yes</answer>",
        "1000 opens": "<answer>" * 1000 + "x</answer>",
    }


def format_reward_cases() -> dict[str, str]:
    """Each thing that breaks the format on its own: text before ``<think>``, between the blocks or after
    them (a stub that looks outside the blocks in only one place passes the others), a second block, a
    nested or swapped one; and whitespace around the tags, which is allowed."""
    return {
        "well formed": "<think>All A are B…</think>\n<answer>Yes</answer>",
        "whitespace around": "  \n<think>x</think>\n\n<answer>Yes</answer>\n ",
        "text before think": "Sure! <think>x</think><answer>Yes</answer>",
        "text between blocks": "<think>x</think> So: <answer>Yes</answer>",
        "empty blocks": "<think></think><answer></answer>",
        "no think": "<answer>Yes</answer>",
        "text after": "<think>x</think><answer>Yes</answer> I hope",
        "two answers": "<think>x</think><answer>No</answer><answer>Yes</answer>",
        "answer inside think": "<think><answer>Yes</answer></think>",
        "order swapped": "<answer>Yes</answer><think>x</think>",
        "unicode inside": "<think>∀ x ∈ ℝ, x² ≥ 0</think><answer>Да</answer>",
        "empty string": "",
        "huge": "<think>" + "a" * 200_000 + "</think><answer>Yes</answer>",
    }


# ---- chapter 2: tensors → advantages, losses


def group_advantages_cases(seed: int = 0) -> dict[str, Case]:
    """Random rewards, 0/1 rewards, an all-equal group (the float32 trap), G = 2; both std conventions."""
    import torch

    g = torch.Generator().manual_seed(seed)
    trials = {"random [5, 6]": torch.rand(5, 6, generator=g),
              "0/1 rewards [8, 4]": torch.randint(0, 2, (8, 4), generator=g).float(),
              "all equal 0.85": torch.full((3, 3), 0.85), "G = 2": torch.tensor([[1.0, -1.0]])}
    return {f"{name}, unbiased={u}": Case((r,), {"unbiased": u}) for name, r in trials.items() for u in (True, False)}


def _ragged_logps(g, n: int, t: int, spread: float):
    """``(new, old, mask)``: old log-probs in (−3, 0], new = old + ``spread``·noise (trainable), lengths 2…t."""
    import torch

    mask = (torch.arange(t)[None, :] < torch.randint(2, t + 1, (n, 1), generator=g)).float()
    old = -torch.rand(n, t, generator=g) * 3
    return (old + spread * torch.randn(n, t, generator=g)).requires_grad_(), old, mask


def policy_loss_cases(seed: int = 0, n: int = 6, t: int = 10, max_len: int = 64) -> dict[str, Case]:
    """One ragged batch (padding masked), ratios well outside the clip range too, under each loss type;
    arguments ``(logp, old_logp, advantages, mask, loss_type, max_len)``, gradients compared on ``logp``.
    ``dr_grpo`` twice: once with ``max_len`` = the batch's padded width ``t``, once with ``max_len`` = 64 >
    ``t`` (a batch whose longest completion stopped early), where dividing by the padded width is wrong."""
    import torch

    from kimina_edu.grpo import LOSS_TYPES, group_advantages

    g = torch.Generator().manual_seed(seed)
    new, old, mask = _ragged_logps(g, n, t, spread=0.4)
    adv = group_advantages(torch.rand(1, n, generator=g))[0]
    cases = {lt: Case((new, old, adv, mask, lt, t), grad_wrt=[new]) for lt in LOSS_TYPES}
    cases[f"dr_grpo, max_len {max_len}"] = Case((new, old, adv, mask, "dr_grpo", max_len), grad_wrt=[new])
    return cases


def per_token_loss_reference(logp, old_logp, advantages, eps_low: float = 0.2, eps_high: float = 0.2):
    """The package's per-token clipped loss, as ``policy_loss`` computes it before aggregating."""
    import torch

    ratio = torch.exp(logp - old_logp)
    a = advantages[:, None]
    return -torch.min(ratio * a, torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * a)


def policy_loss_reference(eps_low: float, eps_high: float) -> Callable:
    """``policy_loss``'s value with the arguments of a per-token loss + aggregate pair."""
    from kimina_edu.grpo import policy_loss

    def policy_loss_value(logp, old_logp, advantages, mask, loss_type, max_len):
        return policy_loss(logp, old_logp, advantages, mask, loss_type=loss_type, eps_low=eps_low,
                           eps_high=eps_high, max_len=max_len)[0]

    return policy_loss_value


def compose_loss(per_token_loss: Callable, aggregate: Callable, eps_low: float, eps_high: float) -> Callable:
    """The learner's two pieces as one function with :func:`policy_loss_reference`'s arguments."""

    def composed(logp, old_logp, advantages, mask, loss_type, max_len):
        return aggregate(per_token_loss(logp, old_logp, advantages, eps_low, eps_high), mask, loss_type, max_len)

    return composed


def kl_k3_cases(seed: int = 0) -> dict[str, tuple]:
    """``(logp, ref_logp)``: close policies, far ones, equal ones (k3 = 0 exactly)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(6, 10, generator=g) * 3
    return {"close": (logp, logp + 0.3 * torch.randn(6, 10, generator=g)),
            "far": (logp, logp + 3.0 * torch.randn(6, 10, generator=g)),
            "equal": (logp, logp.clone()), "one token": (torch.tensor([[-0.5]]), torch.tensor([[-2.0]]))}


# ---- chapter 4: a model's log-probs and the GRPO loss


def model_atol(model, fp32: float = 1e-4, low_precision: float = 1e-1) -> float:
    """The tolerance for comparing two log-prob computations on ``model``: ``fp32`` when its weights are float32
    (every CPU run, the tests), ``low_precision`` in bf16/fp16 (CUDA, :func:`kimina_edu.models.policy_dtype`).
    Two correct functions that take different kernel paths (every position's logits or ``logits_to_keep``, a
    mask or none) can differ there by one bf16 rounding of a logit, ~0.03 at |logit| ≈ 8 (an estimate, not
    measured on a GPU here); a wrong position or a missing log-softmax is off by whole units."""
    import torch

    dtype = model.get_input_embeddings().weight.dtype if hasattr(model, "get_input_embeddings") else torch.float32
    return fp32 if dtype == torch.float32 else low_precision


def completion_logprobs_one(model, prompt: list[int], completion: list[int]):
    """The package's ``completion_logprobs`` on a batch of one: the completion's ``[T]`` log-probs."""
    from kimina_edu.logprobs import Rollout, completion_logprobs

    logp, _ = completion_logprobs(model, [Rollout(list(prompt), list(completion), [], 0.0, 0.0, False)], pad_id=0)
    return logp[0]


def completion_logprobs_cases(model, rollouts: list) -> dict[str, tuple]:
    """The shortest and the longest completion of the batch, and the first two."""
    by_length = sorted(range(len(rollouts)), key=lambda i: len(rollouts[i].completion_ids))
    picks = dict.fromkeys([0, 1, by_length[0], by_length[-1]])
    return {f"rollout {i} ({len(rollouts[i].completion_ids)} tokens)":
            (model, rollouts[i].prompt_ids, rollouts[i].completion_ids) for i in picks}


def grpo_loss_reference(cfg: Any, pad_id: int) -> Callable:
    """The package trainer's loss on one minibatch of the buffer: ``π_old`` is each rollout's stored
    ``old_logp`` (the log-probs recorded when it was sampled), as ``GRPOTrainer._minibatch_backward`` reads
    it whenever a buffer is learned in more than one optimizer step."""
    import torch

    from kimina_edu.grpo import policy_loss
    from kimina_edu.logprobs import completion_logprobs, pad_batch

    def grpo_loss(model, batch):
        logp, mask = completion_logprobs(model, batch, pad_id)
        old = pad_batch(batch, pad_id)[3].to(logp.device)
        adv = torch.tensor([r.advantage for r in batch], device=logp.device)
        return policy_loss(logp, old, adv, mask, loss_type=cfg.loss_type, eps_low=cfg.eps_low,
                           eps_high=cfg.eps_high, max_len=cfg.max_new_tokens)[0]

    return grpo_loss


def with_old_logprobs(model, rollouts: list, shift: float = 0.0, seed: int = 0) -> list:
    """Copies of ``rollouts`` whose ``old_logp`` is their log-prob under ``model`` now, plus ``shift``·noise:
    ``shift`` = 0 is the first minibatch step on a fresh buffer (ratio 1); ``shift`` > 0 a later step, after
    the weights moved (ratios off 1, some beyond the clip range)."""
    import dataclasses

    import torch

    from kimina_edu.logprobs import completion_logprobs

    with torch.no_grad():
        logp, _ = completion_logprobs(model, rollouts, 0)
    g = torch.Generator().manual_seed(seed)
    noise = shift * torch.randn(logp.shape, generator=g)
    return [dataclasses.replace(r, old_logp=(lp.float().cpu() + z)[: len(r.completion_ids)].tolist())
            for r, lp, z in zip(rollouts, logp, noise)]


def grpo_loss_cases(model, rollouts: list, group_size: int) -> dict[str, Case]:
    """The batch's first two groups (what is averaged across sequences) and its first group; value and
    gradient on every trainable (LoRA) weight. Once with the stored old log-probs equal to the current ones
    (a buffer's first minibatch step), then with stored ones that differ (a later step: ratios off 1, some
    clipped), where ``old = new.detach()`` gives another value and another gradient. Not the whole batch:
    on a real model each case is a forward and backward pass per function (48 rollouts of SmolLM2: 2 minutes)."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    two = rollouts[: 2 * group_size]
    return {f"two groups ({len(two)} rollouts), stored old log-probs = current":
            Case((model, with_old_logprobs(model, two)), grad_wrt=trainable),
            f"two groups ({len(two)} rollouts), stored old log-probs ≠ current (a later minibatch step)":
            Case((model, with_old_logprobs(model, two, shift=0.3, seed=1)), grad_wrt=trainable),
            "the first group, stored old log-probs ≠ current":
            Case((model, with_old_logprobs(model, rollouts[:group_size], shift=0.3, seed=2)), grad_wrt=trainable)}


def learn_one_buffer(model, rollouts: list, loss_fn: Callable, cfg: Any, pad_id: int, *, epochs: int,
                     minibatch_size: int, lr: float | None = None, seed: int = 0) -> list[dict]:
    """Learn ONE buffer in several optimizer steps, as the article's buffer of 500 is learned in minibatches:
    ``epochs`` shuffled passes, one AdamW step (``lr``, default ``cfg.lr``) per minibatch, each on ``loss_fn(model,
    minibatch)``, which must read ``π_old`` from the rollouts' stored ``old_logp``. Rollouts with advantage 0
    carry no gradient and are left out, as the trainer does. Before each step the ratio π/π_old of the
    minibatch's tokens is measured (no gradient) against the clip range of ``cfg`` — one row per step:
    ``clip_frac`` (tokens where the clip binds: ratio < 1 − ε_low with A < 0, or > 1 + ε_high with A > 0),
    ``outside`` (tokens beyond the range either way), the ratio's spread and extremes, and approx-KL (k3)."""
    import random

    import torch

    from kimina_edu.grpo import policy_loss
    from kimina_edu.logprobs import completion_logprobs, pad_batch

    buffer = [r for r in rollouts if r.advantage != 0.0]
    if not buffer:
        raise ValueError("learn_one_buffer: every advantage in this buffer is 0, so no step can move anything; "
                         "sample a batch where some group's rewards differ")
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr if lr is None else lr, weight_decay=cfg.weight_decay)
    rng, rows = random.Random(seed), []
    eps_high = cfg.eps_low if cfg.eps_high is None else cfg.eps_high
    model.train()
    for epoch in range(epochs):
        order = list(range(len(buffer)))
        rng.shuffle(order)
        for k in range(0, len(order), minibatch_size):
            mb = [buffer[i] for i in order[k: k + minibatch_size]]
            with torch.no_grad():
                logp, mask = completion_logprobs(model, mb, pad_id)
                old = pad_batch(mb, pad_id)[3].to(logp.device)
                adv = torch.tensor([r.advantage for r in mb], device=logp.device)
                _, stats = policy_loss(logp, old, adv, mask, eps_low=cfg.eps_low, eps_high=eps_high)
                ratio = torch.exp(logp - old)[mask.bool()]
            optimizer.zero_grad(set_to_none=True)
            loss_fn(model, mb).backward()
            torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
            optimizer.step()
            rows.append({"step": len(rows) + 1, "epoch": epoch + 1,
                         "clip_frac": stats["clip_frac_low"] + stats["clip_frac_high"],
                         "outside": float(((ratio < 1 - cfg.eps_low) | (ratio > 1 + eps_high)).float().mean()),
                         "ratio_std": float(ratio.std()) if ratio.numel() > 1 else 0.0,
                         "ratio_min": float(ratio.min()), "ratio_max": float(ratio.max()),
                         "approx_kl": stats["approx_kl"]})
    model.eval()
    return rows


# ---- chapter 4: the learner's GRPO iteration, graded on a toy task


class OneTokenTask:
    """The loop grader's toy task: a tiny random Llama (:func:`kimina_edu.tiny.tiny_random_llama`, 6 tokens:
    0 = end/padding, 1 = start, 2–5 words) answers each of four prompts with up to ``max_new_tokens`` tokens;
    the reward is 1 when the first token is that prompt's preferred one, else 0. A one-token preference: a
    loop that learns moves that token's probability up in a few iterations; the completions' lengths vary
    (1–4 tokens), so how the loss is averaged changes the update. Sampling draws from the task's own
    generator, so two loops that compute the same thing draw the same samples."""

    pad_id = 0
    eos_id = 0
    vocab_size = 6

    def __init__(self, cfg: Any, seed: int = 0):
        import torch

        self.group_size, self.max_new_tokens = cfg.group_size, cfg.max_new_tokens
        self.generator = torch.Generator().manual_seed(seed)

    def questions(self, n: int) -> list[dict]:
        """``n`` questions, cycling through the four prompts."""
        return [{"prompt_ids": [1, 2 + k % 4], "preferred": 2 + (k + 1) % 4} for k in range(n)]

    def sample(self, model, questions: list[dict]) -> tuple[list[list[int]], list[list[int]]]:
        """``(prompt_ids, completions)``: one prompt per question; G completions per question, question i's at
        ``completions[i*G:(i+1)*G]``, each ending with its end token unless it ran to ``max_new_tokens``."""
        import torch

        prompts = [q["prompt_ids"] for q in questions]
        ids = torch.tensor([p for p in prompts for _ in range(self.group_size)])
        out: list[list[int]] = [[] for _ in range(len(ids))]
        done = [False] * len(ids)
        with torch.no_grad():
            for _ in range(self.max_new_tokens):
                probs = torch.softmax(model(input_ids=ids).logits[:, -1].float(), -1)
                nxt = torch.multinomial(probs, 1, generator=self.generator)
                for i, t in enumerate(nxt[:, 0].tolist()):
                    if not done[i]:
                        out[i].append(t)
                        done[i] = t == self.eos_id
                ids = torch.cat([ids, nxt], 1)
                if all(done):
                    break
        return prompts, out

    def reward(self, question: dict, completion: list[int]) -> float:
        return 1.0 if completion and completion[0] == question["preferred"] else 0.0

    def preferred_probability(self, model) -> float:
        """The mean probability of each prompt's preferred first token: what the loop should raise."""
        import torch

        qs = self.questions(4)
        with torch.no_grad():
            probs = torch.softmax(model(input_ids=torch.tensor([q["prompt_ids"] for q in qs])).logits[:, -1].float(), -1)
        return float(sum(probs[i, q["preferred"]] for i, q in enumerate(qs)) / len(qs))


class ChatTask:
    """The same interface as :class:`OneTokenTask` on chapter 4's model: chat prompts, ``generate`` with the
    config's sampling (a new seed each call), chapter 1's reward on the decoded completion."""

    def __init__(self, tok, cfg: Any, seed: int = 0):
        self.tok, self.cfg, self.seed, self.calls = tok, cfg, seed, 0
        self.pad_id = tok.pad_token_id

    def sample(self, model, questions: list[dict]) -> tuple[list[list[int]], list[list[int]]]:
        from kimina_edu.rollouts import chat_prompt, generate

        cfg = self.cfg
        self.calls += 1
        return generate(model, self.tok, [chat_prompt(self.tok, q["question"]) for q in questions],
                        max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, top_p=cfg.top_p,
                        min_p=cfg.min_p, num_return_sequences=cfg.group_size, seed=self.seed + self.calls)

    def reward(self, question: dict, completion: list[int]) -> float:
        from kimina_edu.rewards import score_completion

        return score_completion(self.tok.decode(completion, skip_special_tokens=True), question).total


def grpo_iteration(model, optimizer, task, questions: list[dict], cfg: Any, rng) -> dict:
    """One GRPO iteration, the package's way (the reference the learner's ``my_grpo_iteration`` is graded
    against): collect → score → group advantages → old log-probs into the buffer → learn on the buffer in
    ``cfg.epochs`` shuffled passes of ``cfg.minibatch_size``, one optimizer step per ``cfg.grad_accum``
    minibatches — ``GRPOTrainer.collect_experience`` and ``learn`` in one screen."""
    import torch

    from kimina_edu.grpo import group_advantages, policy_loss
    from kimina_edu.logprobs import Rollout, completion_logprobs, pad_batch

    G = cfg.group_size
    prompt_ids, completions = task.sample(model, questions)
    rewards = torch.tensor([task.reward(questions[i // G], c) for i, c in enumerate(completions)])
    adv = group_advantages(rewards.view(len(questions), G), scale=cfg.scale).flatten()
    buffer = [Rollout(prompt_ids[i // G], c, [], float(a), float(r), False)
              for i, (c, a, r) in enumerate(zip(completions, adv, rewards))]
    with torch.no_grad():
        old, _ = completion_logprobs(model, buffer, task.pad_id)
    for r, lp in zip(buffer, old):
        r.old_logp = lp[: len(r.completion_ids)].tolist()
    log = {"reward_mean": rewards.mean().item(), "updates": 0, "clip_frac": 0.0}
    buffer = [r for r in buffer if r.advantage != 0.0]
    if not buffer:
        return log
    params = [p for p in model.parameters() if p.requires_grad]
    clipped = []
    model.train()
    for _ in range(cfg.epochs):
        order = list(range(len(buffer)))
        rng.shuffle(order)
        minibatches = [[buffer[i] for i in order[k: k + cfg.minibatch_size]]
                       for k in range(0, len(order), cfg.minibatch_size)]
        for start in range(0, len(minibatches), cfg.grad_accum):
            group = minibatches[start: start + cfg.grad_accum]
            optimizer.zero_grad()
            for mb in group:
                logp, mask = completion_logprobs(model, mb, task.pad_id)
                loss, stats = policy_loss(logp, pad_batch(mb, task.pad_id)[3].to(logp.device),
                                          torch.tensor([r.advantage for r in mb], device=logp.device), mask,
                                          loss_type=cfg.loss_type, eps_low=cfg.eps_low, eps_high=cfg.eps_high,
                                          max_len=cfg.max_new_tokens)
                (loss / len(group)).backward()
                clipped.append(stats["clip_frac_low"] + stats["clip_frac_high"])
            torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
            optimizer.step()
            log["updates"] += 1
    model.eval()
    log["clip_frac"] = sum(clipped) / len(clipped)
    return log


LOOP_LOG_KEYS = ("reward_mean", "updates", "clip_frac")


def toy_loop_run(iteration: Callable, spec: dict) -> dict:
    """Run ``iteration`` for ``spec["steps"]`` iterations on a fresh :class:`OneTokenTask` (a fresh seeded
    tiny model, its optimizer, B questions a step) and return what it learned and what it logged, rounded
    to 4 decimals: the preferred token's probability after the run, and each logged key per iteration."""
    import types

    import torch

    cfg = types.SimpleNamespace(**spec["config"])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 6-token model's ops are too small to split: on a busy CPU one thread is ~10× faster
    try:
        return _toy_loop_rows(iteration, spec, cfg)
    finally:
        torch.set_num_threads(threads)


def _toy_loop_rows(iteration: Callable, spec: dict, cfg: Any) -> dict:
    import random

    import torch

    from kimina_edu.tiny import tiny_random_llama

    model = tiny_random_llama(vocab_size=OneTokenTask.vocab_size, seed=spec["seed"])
    task = OneTokenTask(cfg, seed=spec["seed"])
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = (torch.optim.SGD(params, lr=cfg.lr) if spec["optimizer"] == "sgd" else
                 torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0))
    rng, rows = random.Random(spec["seed"]), []
    for _ in range(spec["steps"]):
        row = iteration(model, optimizer, task, task.questions(spec["questions"]), cfg, rng)
        if not isinstance(row, dict) or any(k not in row for k in LOOP_LOG_KEYS):
            raise ValueError(f"it must return a dict with the keys {', '.join(LOOP_LOG_KEYS)}; got {short(row, 50)}")
        rows.append(row)
    out = {"P(preferred first token) after the run": round(task.preferred_probability(model), 4)}
    for key in LOOP_LOG_KEYS:
        out[f"{key} per iteration"] = [round(float(r[key]), 4) for r in rows]
    return out


def toy_loop(iteration: Callable) -> Callable:
    """``iteration`` as a function of one case's spec, for :func:`kimina_edu.graders.grade`."""

    def run(spec: dict) -> dict:
        return toy_loop_run(iteration, spec)

    run.__name__ = getattr(iteration, "__name__", "iteration")
    return run


def _loop_spec(seed: int, steps: int, optimizer: str, **config) -> dict:
    base = dict(group_size=8, max_new_tokens=4, scale="group", loss_type="grpo", eps_low=0.2, eps_high=0.28,
                epochs=1, minibatch_size=32, grad_accum=1, max_grad_norm=1.0, lr=0.05)
    return {"seed": seed, "steps": steps, "questions": 4, "optimizer": optimizer, "config": {**base, **config}}


def grpo_iteration_cases() -> dict[str, Case]:
    """Each case runs the loop a few iterations on the toy task (4 questions × 8 samples, 1–4 tokens each)
    from its own seed. Together they tell the wrong loops apart: the sign of the advantage (every case), the
    group normalisation (``scale="group"`` with 0/1 rewards: groups of different spread), a stored π_old
    (several optimizer steps per buffer, where the clip binds), the loss's averaging (``dapo`` and ``dr_grpo``
    over completions of different lengths; the average over accumulated minibatches under SGD, which, unlike
    Adam, is not blind to a gradient's scale) — and honours ``scale="none"``."""
    return {
        "grpo, one step per buffer (AdamW)": Case((_loop_spec(0, 4, "adamw"),)),
        "dapo, 2 epochs × 2 minibatches, a step each (AdamW)":
            Case((_loop_spec(1, 4, "adamw", loss_type="dapo", epochs=2, minibatch_size=16),)),
        "dr_grpo, scale none, 2 minibatches summed into a step (SGD)":
            Case((_loop_spec(3, 4, "sgd", loss_type="dr_grpo", scale="none", minibatch_size=16, grad_accum=2,
                             lr=2.0, max_grad_norm=100.0),)),
    }


# ---- chapter 5: TRL 1.x's loss variants, one line each


def surrogate_cases(seed: int = 0, n: int = 6, t: int = 10) -> dict[str, Case]:
    """One ragged batch, ratios well off 1, advantages of both signs, for each variant's per-token term;
    and a far off-policy batch (ratios up to e³ ≈ 20) where CISPO's cap at 5 binds. Arguments
    ``(logp, old_logp, advantages, mask, kind)``, gradients compared on ``logp``."""
    import torch

    g = torch.Generator().manual_seed(seed)
    new, old, mask = _ragged_logps(g, n, t, spread=0.6)
    adv = torch.tensor([1.2, -0.4, 0.7, -1.1, 0.0, 0.3])[:n]
    cases = {kind: Case((new, old, adv, mask, kind), grad_wrt=[new]) for kind in ("cispo", "sapo")}
    far_new, far_old, far_mask = _ragged_logps(g, n, t, spread=1.5)
    cases["cispo, ratios past the cap"] = Case((far_new, far_old, adv, far_mask, "cispo"), grad_wrt=[far_new])
    return cases


CISPO_CAP = 5.0  # CISPO's cap on the ratio (ε_high), as TRL's docs use it; SAPO keeps policy_loss's τ (TRL's)


def surrogate_reference(logp, old_logp, advantages, mask, kind):
    """``policy_loss`` with ``surrogate=kind`` (each sequence's mean, then the mean: TRL's ``grpo`` reduction)."""
    from kimina_edu.grpo import policy_loss

    return policy_loss(logp, old_logp, advantages, mask, loss_type="grpo", eps_high=CISPO_CAP, surrogate=kind)[0]


def compose_surrogate(per_token: Callable) -> Callable:
    """The learner's per-token term, reduced as :func:`surrogate_reference` reduces the package's."""
    from kimina_edu.grpo import aggregate

    def composed(logp, old_logp, advantages, mask, kind):
        return aggregate(per_token(logp, old_logp, advantages, kind), mask, "grpo")

    return composed


# ---- chapter 7: Lean's answer → feedback text


def feedback_reference(code: str, result: dict, max_errors: int = 3) -> str:
    """``build_feedback`` for a server that numbers lines from after the header (kimina-lean-server 2.0.0)."""
    from kimina_edu.lean.feedback import build_feedback

    return build_feedback(code, result, max_errors=max_errors, line_scheme="relative")


def feedback_cases(code: str, this_verdict: dict | None = None) -> dict[str, tuple]:
    """The shapes a server answers with: several errors (three are kept), warnings only, an error without a
    position, one on the first line, a system error, nothing; plus this notebook's own verdict."""

    def err(line: int, text: str) -> dict:
        return {"severity": "error", "pos": {"line": line, "column": 0}, "data": text}

    results = {} if this_verdict is None else {"this verdict": this_verdict}
    results.update({
        "five errors": {"response": {"messages": [err(n, f"error {n}") for n in range(1, 6)]}},
        "warning only": {"response": {"messages": [{"severity": "warning", "pos": {"line": 2}, "data": "unused"}]}},
        "no position": {"response": {"messages": [{"severity": "error", "data": "unknown constant"}]}},
        "first line": {"response": {"messages": [err(1, "at the top")]}},
        "system error": {"error": "Lean REPL timed out after 60 s"},
        "empty": {},
    })
    return {name: (code, result) for name, result in results.items()}


# ---- chapter 9: pass@k


def pass_at_k_cases(ns: tuple[int, ...] = (1, 8, 32, 100), big: int = 1000) -> dict[str, tuple[int, int, int]]:
    """Every (c, k) for several n: none right, all right, k = n; and a few with n = ``big``, whose factorials
    do not fit in a float (1000! ≈ 4e2567) while the answer does."""
    cases = {f"n={n}, c={c}, k={k}": (n, c, k) for n in ns for c in range(n + 1) for k in range(1, n + 1)}
    for c, k in ((1, 1), (1, big // 2), (10, 100), (big // 2, big // 2), (0, big), (big - 1, 2)):
        cases[f"n={big}, c={c}, k={k}"] = (big, c, k)
    return cases
