"""Chapter 3 — teacher data and the LoRA SFT warm-up.

Why a warm-up: a small model asked for ``<think>…</think><answer>…</answer>`` mostly
produces neither, so every completion in a GRPO group earns the same (zero) reward and the
advantage — hence the gradient — is zero. ~200 teacher examples fix the format (the
reference article: SmolLM-135M syllogisms 46% after SFT, 60% after RL).

Two teachers, one output shape:
- :class:`OpenAITeacher` — any OpenAI-compatible endpoint (the article used a small hosted
  model), bounded concurrency, backoff, disk cache, malformed answers dropped and counted;
- :func:`rule_based_teacher` — offline: a short, correct trace written from the task's
  metadata. Notebooks say which one produced the data.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kimina_edu.cache import build_once
from kimina_edu.errors import TeacherUnavailableError
from kimina_edu.models import base_model_path
from kimina_edu.pocket import PocketRecipe
from kimina_edu.retry import backoff_delay
from kimina_edu.rewards import SYSTEM_PROMPT, chat_messages, correctness_reward, extract_answer, format_reward
from kimina_edu.runtime import cache_dir, recipe_hash, resolve_device, run_sync, use_progress_bar
from kimina_edu.tasks import SEEDS, dev_split, make_entries, oracle_answer, teacher_trace

# ---------------------------------------------------------------- rule-based teacher


def rule_based_teacher(entry: dict[str, Any], valid: bool | None = None, trace: str = "restate") -> str:
    """A correct ``<think>…</think><answer>…</answer>`` completion written from metadata.

    The trace restates the question (the forms and terms of each statement) and states the
    verdict; ``trace="derive"`` writes what follows about the claim's terms between the two. See
    :func:`kimina_edu.tasks.teacher_trace`. A syllogism's ``valid`` given: that verdict and its
    answer instead, right or not.
    """
    answer = oracle_answer(entry) if valid is None else ("Yes" if valid else "No")
    return f"<think>{teacher_trace(entry, valid, trace)}</think>\n<answer>{answer}</answer>"


def chat_example(entry: dict[str, Any], text: str) -> dict:
    """One SFT example: ``entry``'s chat prompt and ``text`` as the assistant's completion."""
    return {"prompt": chat_messages(entry["question"]), "completion": [{"role": "assistant", "content": text.strip()}]}


def both_verdict_examples(entries: list[dict[str, Any]]) -> list[dict]:
    """The format without the answer: each syllogism twice, its restatement ending once in "follows" /
    "Yes" and once in "does not follow" / "No". A warm-up on these learns to read a question out and
    to answer as its trace concludes, while which verdict a question gets stays a coin: the choice GRPO
    is then rewarded for (``SFTRecipe.verdicts="both"``)."""
    if any(e["metadata"]["source_dataset"] != "syllogism" for e in entries):
        raise ValueError("both-verdict examples need yes/no questions: only syllogism has them")
    return [chat_example(e, rule_based_teacher(e, valid)) for e in entries for valid in (True, False)]


# ---------------------------------------------------------------- hosted teacher


@dataclass
class TeacherReport:
    """What the teacher produced: kept examples and every dropped one counted by reason."""

    teacher: str
    kept: int = 0
    dropped: Counter = field(default_factory=Counter)
    failures: str = ""  # the hosted teacher's unanswered questions by reason (OpenAITeacher.failure_summary)


class OpenAITeacher:
    """Teacher on any OpenAI-compatible ``/chat/completions`` endpoint.

    The teacher sees the question *and* the oracle answer (as in the article) and must
    write a trace that ends in it. Concurrency is bounded by a semaphore; 429/5xx/timeouts
    are retried with exponential backoff; every answer is cached on disk by a hash of
    (model, question), so a rerun costs nothing.

    Fail fast, and say why: ``deadline`` bounds a whole :meth:`complete` call (questions still
    open then get no answer), and once ``concurrency`` requests have failed to reach the endpoint
    (connection refused, DNS, timeouts) with nothing answered yet, the rest are not tried — a dead
    endpoint costs one round of requests, not ``max_retries`` rounds of backoff per question.
    :attr:`failures` counts every unanswered question by reason; :meth:`failure_summary` says it
    in one line.
    """

    def __init__(self, base_url: str | None = None, api_key: str | None = None, model: str = "gpt-4.1-mini",
                 *, concurrency: int = 16, max_retries: int = 5, timeout: float = 60.0,
                 cache_path: str | os.PathLike | None = None, backoff_base: float = 1.0, transport=None,
                 deadline: float | None = 600.0):
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY", "")
        self.model, self.concurrency, self.max_retries = model, concurrency, max_retries
        self.timeout, self.backoff_base, self.deadline = timeout, backoff_base, deadline
        self.failures: Counter = Counter()  # reason → questions left unanswered, for the last complete()
        self._answered = self._unreachable = 0
        self.transport = transport  # an httpx transport; tests pass a mock, None means the network
        self.cache_path = Path(cache_path or cache_dir() / "teacher" / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', model)}.jsonl")
        self.cache_path.parent.mkdir(parents=True, exist_ok=True)
        self._cache = self._load_cache()

    def _load_cache(self) -> dict[str, str]:
        cache = {}
        if self.cache_path.exists():
            for line in self.cache_path.read_text().splitlines():
                try:
                    row = json.loads(line)
                    cache[row["key"]] = row["text"]
                except (ValueError, KeyError):
                    continue  # a torn last line from an interrupted run: skip it
        return cache

    def _key(self, entry: dict[str, Any]) -> str:
        return hashlib.sha256(f"{self.model}\n{entry['question']}".encode()).hexdigest()[:20]

    def _messages(self, entry: dict[str, Any]) -> list[dict[str, str]]:
        oracle = oracle_answer(entry)
        return chat_messages(f"Question: {entry['question']}\nTrue answer: {oracle}",
                             system=SYSTEM_PROMPT + " You are also given the true answer: your reasoning must end in it.")

    async def _ask(self, client, sem, entry) -> str | None:
        import httpx

        key = self._key(entry)
        if key in self._cache:
            return self._cache[key]
        reason = "no attempt"
        async with sem:
            for attempt in range(self.max_retries):
                if self._endpoint_dead():
                    self.failures[f"{reason}, then gave up" if attempt else "not sent: endpoint unreachable"] += 1
                    return None
                try:
                    resp = await client.post(f"{self.base_url}/chat/completions",
                                             json={"model": self.model, "messages": self._messages(entry)})
                    if resp.status_code == 429 or resp.status_code >= 500:
                        raise httpx.HTTPStatusError("retryable", request=resp.request, response=resp)
                    resp.raise_for_status()
                    text = resp.json()["choices"][0]["message"]["content"]
                    if not isinstance(text, str):
                        self.failures["malformed reply"] += 1
                        return None
                    self._answered += 1
                    self._cache[key] = text
                    with self.cache_path.open("a") as fh:
                        fh.write(json.dumps({"key": key, "text": text}) + "\n")
                    return text
                except (httpx.TimeoutException, httpx.TransportError, httpx.HTTPStatusError) as exc:
                    status = getattr(getattr(exc, "response", None), "status_code", None)
                    reason = f"HTTP {status}" if status is not None else type(exc).__name__
                    if status is not None and status < 500 and status != 429:
                        self.failures[reason] += 1
                        return None  # 4xx other than 429: retrying will not help
                    if status is None:
                        self._unreachable += 1
                    await asyncio.sleep(backoff_delay(attempt, self.backoff_base))
                except (ValueError, KeyError, IndexError, TypeError):
                    self.failures["malformed reply"] += 1
                    return None  # malformed JSON body: counted as malformed by the caller
            self.failures[f"{reason} after {self.max_retries} tries"] += 1
            return None

    def _endpoint_dead(self) -> bool:
        return self._answered == 0 and self._unreachable >= self.concurrency

    def gave_up(self) -> bool:
        """True when the last :meth:`complete` got no answer at all because the endpoint could not be
        reached or the deadline passed — not merely because every answer was refused or malformed."""
        deadline = any(reason.startswith("deadline") for reason in self.failures)
        return self._answered == 0 and (self._endpoint_dead() or deadline)

    def failure_summary(self) -> str:
        """``"ConnectError ×16, not tried: endpoint unreachable ×184"`` for the last :meth:`complete`."""
        return ", ".join(f"{reason} ×{n}" for reason, n in self.failures.most_common()) or "no failures"

    async def acomplete(self, entries: list[dict[str, Any]]) -> list[str | None]:
        import httpx

        sem = asyncio.Semaphore(self.concurrency)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self.failures, self._answered, self._unreachable = Counter(), 0, 0
        async with httpx.AsyncClient(timeout=self.timeout, headers=headers, transport=self.transport) as client:
            tasks = [asyncio.ensure_future(self._ask(client, sem, e)) for e in entries]
            if not tasks:
                return []
            _, pending = await asyncio.wait(tasks, timeout=self.deadline)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
                self.failures[f"deadline of {self.deadline:g} s passed"] += len(pending)
            return [None if task.cancelled() else task.result() for task in tasks]

    def complete(self, entries: list[dict[str, Any]]) -> list[str | None]:
        return run_sync(self.acomplete(entries))


# ---------------------------------------------------------------- SFT data


def make_sft_examples(entries: list[dict[str, Any]], teacher: OpenAITeacher | None = None, trace: str = "restate"):
    """Chat prompt/completion pairs for SFT, plus a :class:`TeacherReport`.

    A teacher answer is kept only if it has the exact format *and* the right answer: a
    malformed or wrong example would teach the very thing RL must later unlearn.
    """
    if not entries:
        raise ValueError("make_sft_examples got no questions (N_SFT=0?): ask for at least one example")
    if teacher is None:
        texts, report = [rule_based_teacher(e, trace=trace) for e in entries], TeacherReport("rule-based (offline)")
    else:
        texts, report = teacher.complete(entries), TeacherReport(f"{teacher.model} at {teacher.base_url}")
        report.failures = teacher.failure_summary()
        if teacher.gave_up():
            raise TeacherUnavailableError(
                f"the teacher {teacher.model} at {teacher.base_url} answered none of {len(entries)} questions "
                f"({teacher.failure_summary()}): check OPENAI_BASE_URL and OPENAI_API_KEY, or use TEACHER='rule-based' "
                "(offline)")
    examples = []
    for entry, text in zip(entries, texts):
        if text is None:
            report.dropped["no_response"] += 1
        elif format_reward(text) < 1.0:
            report.dropped["bad_format"] += 1
        elif correctness_reward(extract_answer(text), entry) < 1.0:
            report.dropped["wrong_answer"] += 1
        else:
            examples.append(chat_example(entry, text))
    report.kept = len(examples)
    return examples, report


# ---------------------------------------------------------------- LoRA SFT


class DevTargetStop:
    """Stop SFT at the end of the first epoch whose greedy accuracy on held-out *dev* questions
    reaches ``target`` (checked from epoch ``from_epoch`` on; ``history`` keeps every check).
    ``every`` > 0 checks every ``every`` optimizer steps instead, from the first step of epoch
    ``from_epoch`` on: a finer stop for a model that learns most of its warm-up within one epoch.

    Why: with 200 examples, the data order and LoRA init alone move the accuracy a fixed epoch
    count reaches by several points from seed to seed. Stopping on a dev target lands every seed
    near the same accuracy: enough for GRPO's groups to carry signal, room left for RL to add.
    The dev questions are their own split (:func:`kimina_edu.tasks.dev_split`), never the
    held-out questions the chapters report.
    """

    def __init__(self, entries: list[dict[str, Any]], target: float, *, from_epoch: int = 1,
                 max_new_tokens: int = 96, every: int = 0):
        if every < 0:
            raise ValueError(f"DevTargetStop(every={every}): a number of optimizer steps ≥ 1, or 0 for epoch ends")
        self.entries, self.target, self.from_epoch, self.max_new_tokens = entries, target, from_epoch, max_new_tokens
        self.every = every
        self.history: list[dict[str, float]] = []

    def callback(self):
        """A ``transformers.TrainerCallback`` that runs this check at each epoch's end."""
        from transformers import TrainerCallback

        rule = self

        class _Check(TrainerCallback):
            def on_epoch_end(self, args, state, control, model=None, processing_class=None, **_):
                epoch = round(state.epoch or 0)
                if rule.every or epoch < rule.from_epoch or model is None or processing_class is None:
                    return control
                if rule.reached(model, processing_class, epoch, state.global_step):
                    control.should_training_stop = True
                return control

            def on_step_end(self, args, state, control, model=None, processing_class=None, **_):
                # state.epoch is fractional here: 1.5 is halfway through the second epoch
                in_range = math.ceil(round(state.epoch or 0, 6)) >= rule.from_epoch
                if (not rule.every or state.global_step % rule.every or not in_range or model is None
                        or processing_class is None):
                    return control
                if rule.reached(model, processing_class, round(state.epoch, 2), state.global_step):
                    control.should_training_stop = True
                return control

        return _Check()

    def reached(self, model, tok, epoch: float, step: int) -> bool:
        from kimina_edu.eval import evaluate_policy

        side, was_training = tok.padding_side, model.training
        tok.padding_side = "left"
        model.eval()
        try:
            acc = evaluate_policy(model, tok, self.entries, max_new_tokens=self.max_new_tokens, progress=False)["accuracy"]
        finally:
            tok.padding_side = side
            model.train(was_training)
        self.history.append({"epoch": epoch, "step": step, "dev_accuracy": acc})
        return acc >= self.target


def completion_loss(model, inputs: dict[str, Any], num_items_in_batch=None):
    """The SFT loss — mean negative log-likelihood of the completion tokens — with the LM head run
    only where a label is kept (``-100`` marks the prompt and padding).

    Why not TRL's own: on a CPU, TRL 1.16's fused head scores *every* position (its compact path
    is Triton-only) and adds entropy and top-1 metrics, and SmolLM2's chat prompt is 70% of each
    example (111 of 159 tokens): the head took half of an SFT step (4.6 of 9.5 s, profile in
    benchmarks/README.md, "Learning: SmolLM2 › Chapter 3: SFT"). The loss is the same sum, divided by the same token count
    (``num_items_in_batch``, the Trainer's count across accumulation steps, else this batch's);
    ``tests/test_sft.py`` checks it against TRL's.
    """
    import torch

    causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    backbone = getattr(causal_lm, causal_lm.base_model_prefix)
    hidden = backbone(input_ids=inputs["input_ids"], attention_mask=inputs.get("attention_mask"),
                      use_cache=False).last_hidden_state[:, :-1]
    labels = inputs["labels"][:, 1:].to(hidden.device)
    keep = labels != -100
    logits = causal_lm.get_output_embeddings()(hidden[keep]).float()
    token_logp = torch.log_softmax(logits, dim=-1).gather(-1, labels[keep].unsqueeze(-1)).squeeze(-1)
    count = keep.sum() if num_items_in_batch is None else num_items_in_batch
    return -token_logp.sum() / torch.as_tensor(count, device=hidden.device).clamp(min=1)


def _completion_loss_trainer():
    """TRL's ``SFTTrainer`` with :func:`completion_loss` as its loss (everything else TRL's)."""
    from trl import SFTTrainer

    class CompletionLossSFTTrainer(SFTTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if return_outputs:  # nothing here asks for outputs; TRL's own path still serves that case
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            return completion_loss(model, inputs, num_items_in_batch)

    return CompletionLossSFTTrainer


def sft_train(model_path: str, examples: list[dict], *, output_dir: str | os.PathLike, lora=None, epochs: int = 3,
              lr: float = 2e-3, batch_size: int = 8, seed: int = 0, max_length: int = 512, use_cpu: bool = True,
              dtype: Any = None, stop: DevTargetStop | None = None):
    """LoRA SFT with TRL's ``SFTTrainer``; loss on completion tokens only (:func:`completion_loss`).

    Returns ``(peft_model, tokenizer, loss_log)``. ``seed`` sets the data order *and* the LoRA
    initialisation. ``dtype`` defaults to :func:`kimina_edu.models.policy_dtype` for the device
    SFT runs on (``use_cpu``: the CPU, else the GPU when there is one), as
    :func:`kimina_edu.models.load_policy` loads it, so "before" and "after SFT" are the same kind
    of model. Per-model settings: :meth:`SFTRecipe.preset`. ``stop``: end early once a dev
    accuracy target is reached (:class:`DevTargetStop`); ``epochs`` is then the most it runs.
    """
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed
    from trl import SFTConfig

    from kimina_edu.lora import lora_config
    from kimina_edu.models import policy_dtype

    dtype = dtype or policy_dtype("cpu" if use_cpu else resolve_device("auto"))

    set_seed(seed)  # the LoRA matrices are initialised before the Trainer seeds itself: seed them too
    tok = AutoTokenizer.from_pretrained(model_path)
    tok.padding_side = "right"  # training pads on the right; generation switches back to left
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
    args = SFTConfig(
        output_dir=str(output_dir), num_train_epochs=epochs, learning_rate=lr, per_device_train_batch_size=batch_size,
        lr_scheduler_type="cosine", warmup_steps=5, logging_steps=1, save_strategy="no", report_to="none",
        seed=seed, max_length=max_length, completion_only_loss=True, bf16=False, use_cpu=use_cpu,
        activation_checkpointing=False, dataloader_num_workers=0, disable_tqdm=True,
    )
    trainer = _completion_loss_trainer()(model=model, args=args, train_dataset=Dataset.from_list(examples), processing_class=tok,
                         peft_config=lora or lora_config(), callbacks=[stop.callback()] if stop else None)
    use_progress_bar(trainer, "SFT").train()
    log = [{"step": r["step"], "loss": r["loss"]} for r in trainer.state.log_history if "loss" in r]
    tok.padding_side = "left"
    trainer.model.eval()
    return trainer.model, tok, log


# ---------------------------------------------------------------- the cached warm-up


@dataclass(frozen=True)
class SFTRecipe:
    """The warm-up as the article ran it: ~200 teacher examples, LoRA r=32/alpha=64.

    Build it with :meth:`preset` — the one place the per-model settings live — so chapters 3, 4
    and 5 hash the same recipe and find the same adapter. ``seed`` is the course's ``SEED``: it
    sets the SFT data order and the LoRA initialisation. ``data_seed`` picks which questions the
    teacher answers and stays fixed, so every seed learns from the same 200 examples.

    Pocket model: lr 3e-3, at most ``epochs`` epochs, stopped at the first epoch (from
    ``dev_from_epoch`` on) whose greedy accuracy on ``dev_questions`` dev questions reaches
    ``dev_target`` — under-trained on purpose, like the article's warm-up, so chapter 4's RL has
    room to add something. A fixed epoch count landed the seeds several points apart, and RL's
    gain shrinks as the start rises (benchmarks/LOG.md, 2026-11-30). SmolLM-135M and other hub models: the
    article's ~2e-4 and 3 epochs, no dev target (``dev_target=None``). SmolLM2 (``smollm2``): the same, with
    traces that state what follows about the claim's terms before the verdict (``trace="derive"``).
    """

    task: str = "syllogism"
    n_examples: int = 200
    epochs: int = 10
    lr: float = 3e-3
    batch_size: int = 8
    lora_r: int = 32
    lora_alpha: int = 64
    seed: int = 0
    data_seed: int = SEEDS["sft"]
    teacher: str = "rule-based"
    verdicts: str = "right"  # "both": the format without the answer (:func:`both_verdict_examples`); "half": the
    # first half of the questions with their right verdict, the rest with both
    trace: str = "restate"  # "derive": what follows about the claim's terms before the verdict (tasks.teacher_trace)
    dev_target: float | None = None
    dev_questions: int = 200
    dev_from_epoch: int = 5
    dev_every: int = 0  # > 0: the dev check every this many optimizer steps (from epoch dev_from_epoch), not at epoch ends

    @classmethod
    def preset(cls, model_id: str = "pocket", *, smoke: bool = False, **overrides) -> SFTRecipe:
        """The recipe for ``model_id``; ``smoke`` shrinks it to seconds; ``overrides`` win over both.

        An override of ``None`` means "not given" (notebook parameters left at ``None``).
        """
        base: dict[str, Any] = {"epochs": 14, "dev_target": 0.70} if model_id == "pocket" else {"lr": 2e-4, "epochs": 3}
        if model_id == "smollm2":  # traces that state what follows (GRPO from them: benchmarks/LOG.md, 2026-12-07)
            base["trace"] = "derive"
        if smoke:  # seconds; the pocket model's dev check runs once (epoch 3, 16 questions) so its code runs too
            base.update(n_examples=64, epochs=4, lr=5e-3 if model_id == "pocket" else 5e-4)
            if model_id == "pocket":
                base.update(dev_target=0.0, dev_questions=16, dev_from_epoch=3)
            if model_id == "smollm2":  # real weights, ~10 s per step of 8 on 2 cores: 16 steps, not 32 (8 left
                base.update(epochs=2)   # its greedy answers looping on "<think>"; 16 reach loss ~0.1)
        base.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**base)

    def stop_rule(self) -> DevTargetStop | None:
        """The early stop this recipe asks for (``None`` without a ``dev_target``). Its settings all
        come from the recipe, so every adapter cached under this recipe's hash stopped alike."""
        if self.dev_target is None:
            return None
        return DevTargetStop(dev_split(self.task, self.dev_questions), self.dev_target, from_epoch=self.dev_from_epoch,
                             every=self.dev_every)


STOP_RECORD = "sft_stop.json"  # beside a cached adapter: the dev checks that ended its training


def write_stop_record(adapter_dir: str | os.PathLike, stop: DevTargetStop | None, log: list[dict]) -> None:
    """Keep, beside a saved adapter, the dev checks that ended its SFT and the steps it ran."""
    record = {"dev_checks": stop.history if stop else [], "steps": log[-1]["step"] if log else 0}
    (Path(adapter_dir) / STOP_RECORD).write_text(json.dumps(record))


def sft_stop_record(adapter_dir: str | os.PathLike) -> dict[str, Any]:
    """What ended a cached adapter's SFT (``{}`` for adapters cached before the record existed)."""
    try:
        return json.loads((Path(adapter_dir) / STOP_RECORD).read_text())
    except (OSError, ValueError):
        return {}


def warmup_examples(recipe: SFTRecipe, entries: list[dict[str, Any]]) -> list[dict]:
    """The rule-based teacher's examples for ``entries`` as ``recipe.verdicts`` asks: every question with its
    right verdict ("right"), with both verdicts ("both"), or the first half right and the rest both ("half")."""
    if recipe.verdicts not in ("right", "both", "half"):
        raise ValueError(f"SFTRecipe.verdicts is 'right', 'both' or 'half', not {recipe.verdicts!r}")
    if recipe.trace != "restate" and recipe.verdicts != "right":
        raise ValueError(f"SFTRecipe.trace={recipe.trace!r} states what follows, so its verdicts are the right ones "
                         f"(verdicts='right'), not {recipe.verdicts!r}")
    right = {"right": len(entries), "both": 0, "half": len(entries) // 2}[recipe.verdicts]
    examples = make_sft_examples(entries[:right], trace=recipe.trace)[0] if right else []
    return examples + (both_verdict_examples(entries[right:]) if right < len(entries) else [])


def sft_adapter_dir(base: str, recipe: SFTRecipe) -> Path:
    fields = asdict(recipe)
    for name, default in (("verdicts", "right"), ("trace", "restate"), ("dev_every", 0)):
        if fields[name] == default:  # a default hashes as before its field existed: cached adapters stay valid
            del fields[name]
    return cache_dir() / "sft" / recipe_hash({"base": base, **fields})


def _adapter_problem(path: Path) -> str | None:
    """None when a cached adapter folder is usable (checked on every use), else why not."""
    try:
        config = json.loads((path / "adapter_config.json").read_text())
        if not isinstance(config, dict) or "r" not in config:
            return "has an adapter_config.json without a LoRA rank"
        from safetensors import safe_open

        with safe_open(str(path / "adapter_model.safetensors"), framework="pt") as fh:
            for key in fh.keys():  # noqa: SIM118 — a safetensors handle is not iterable
                fh.get_tensor(key)
    except Exception as exc:  # noqa: BLE001 — any unreadable file means: retrain
        return f"has an unreadable file ({type(exc).__name__})"
    return None


def ensure_sft_adapter(model_id: str = "pocket", *, recipe: SFTRecipe | None = None,
                       pocket: PocketRecipe | None = None, device: str | None = None) -> tuple[str, Path]:
    """``(base_path, adapter_dir)`` — the chapter-3 adapter, trained now if not cached.

    Later chapters call this so each notebook runs on its own; `make course` trains it once. A
    damaged cached adapter is retrained with one line saying so. ``device`` (the chapter's
    ``DEVICE``; ``None``: a GPU when there is one) is where a missing adapter is trained, in that
    device's :func:`~kimina_edu.models.policy_dtype`, as notebook 03 trains it.
    """
    recipe = recipe or SFTRecipe.preset(model_id)
    base = base_model_path(model_id, pocket)
    out = sft_adapter_dir(base, recipe)

    def train(tmp: Path) -> None:
        print(f"no cached SFT adapter for {base}: training one now ({recipe.n_examples} examples, "
              f"{recipe.epochs} epochs, seed {recipe.seed})")
        examples = warmup_examples(recipe, make_entries(recipe.task, recipe.n_examples, recipe.data_seed))
        from kimina_edu.lora import lora_config

        stop = recipe.stop_rule()
        model, _, log = sft_train(base, examples, output_dir=tmp / "work", epochs=recipe.epochs, lr=recipe.lr,
                                  batch_size=recipe.batch_size, seed=recipe.seed, use_cpu=resolve_device(device) == "cpu",
                                  lora=lora_config(r=recipe.lora_r, alpha=recipe.lora_alpha), stop=stop)
        model.save_pretrained(tmp)
        write_stop_record(tmp, stop, log)
        import shutil

        shutil.rmtree(tmp / "work", ignore_errors=True)

    return base, build_once(out, train, _adapter_problem, what="SFT adapter")
