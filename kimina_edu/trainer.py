"""Chapter 4 — GRPO from scratch: the whole loop in one readable file.

    for step in range(steps):
        rollouts = collect_experience(...)   # sample B questions × G completions, score, advantages,
                                             # old log-probs; stored unpadded in a buffer
        learn(rollouts)                      # shuffled minibatches → policy_loss → AdamW

The math (advantages, the clipped loss) is chapter 2's :mod:`kimina_edu.grpo`; the rewards are
chapter 1's :mod:`kimina_edu.rewards`; the settings are :class:`~kimina_edu.train_config.TrainConfig`;
the per-token log-probs the loss differentiates come from :mod:`kimina_edu.logprobs`, and the probes
that watch a run from :mod:`kimina_edu.probes`. This file only wires them to a model: everything
from sampling to the optimizer step, and the loop around it, is here.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable
from pathlib import Path

import torch

from kimina_edu import precision
from kimina_edu.checkpoints import (
    DeferredInterrupt,
    append_jsonl,
    latest_checkpoint,
    restore_trainer,
    rewind_jsonl,
    rewind_logs,
    save_trainer,
)
from kimina_edu.grpo import group_advantages, policy_loss
from kimina_edu.logprobs import Rollout, completion_logprobs, pad_batch, truncated_importance_weights
from kimina_edu.probes import ProbeSet, update_shift
from kimina_edu.rewards import RewardBreakdown, score_completion
from kimina_edu.rollouts import TransformersBackend, arithmetic_bound, chat_prompt, encode_prompts
from kimina_edu.tasks import SEEDS, dev_split, make_entries
from kimina_edu.token_dynamics import TOKEN_SHIFT_FILE, token_shift_record
from kimina_edu.train_config import TrainConfig


class GRPOTrainer:
    """From-scratch GRPO. ``train()`` runs ``cfg.steps`` steps; every step logs one JSON line."""

    def __init__(self, model, tok, cfg: TrainConfig, *, train_entries: list[dict] | None = None,
                 eval_entries: list[dict] | None = None, output_dir: str | Path = "grpo_run",
                 reward_fn: Callable[[str, dict], RewardBreakdown] = score_completion, backend=None,
                 progress: bool = True, probes: ProbeSet | None = None, dev_entries: list[dict] | None = None):
        self.model, self.tok, self.cfg = model, tok, cfg
        self.output_dir = Path(output_dir)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        # the course's RL questions (its task settings, its own seed) unless given
        self.train_entries = train_entries if train_entries is not None else make_entries(cfg.task, 5000, SEEDS["rl"])
        self.eval_entries = eval_entries or []
        # the dev check's questions (cfg.dev_every): the dev split unless given, never the held-out ones
        self.dev_entries = dev_entries if dev_entries is not None or not cfg.dev_every else dev_split(cfg.task)
        self.dev_checks: list[dict[str, float]] = []  # {"step", "accuracy"} of every dev check so far
        self.dev_kept: int | None = None  # the step whose weights the run ended with, when not its last
        self.reward_fn, self.progress = reward_fn, progress
        self.backend = backend or TransformersBackend()
        self.params = [p for p in model.parameters() if p.requires_grad]
        # the learner's matrix multiplies: bf16 under autocast where the CPU has bf16 units (kimina_edu.precision),
        # the trained weights staying fp32; the update-shift measurement always scores in fp32
        self.bf16 = precision.matmul_dtype(arithmetic_bound(model), str(model.device.type)) == torch.bfloat16
        self._log_ratios: list[torch.Tensor] = []  # the sampler–learner gap of this learning phase's tokens
        self.optimizer = torch.optim.AdamW(self.params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.step = 0
        self.data_rng = random.Random(cfg.seed)
        torch.manual_seed(cfg.seed)
        self.log_path = self.output_dir / "log.jsonl"
        self.rollout_path = self.output_dir / "rollouts.jsonl"
        # fixed completions scored at the start, every probes.every steps and at the end (ProbeSet)
        self.probes, self.probe_path = probes, self.output_dir / "probes.jsonl"
        # each measured update's per-token changes (token_dynamics.token_shift_record): nested rows kept
        # beside log.jsonl, whose rows stay flat numbers for the curves that read every key
        self.token_shift_path = self.output_dir / TOKEN_SHIFT_FILE

    def path_line(self) -> str:
        """:func:`path_line` for this trainer's model, settings and sampler."""
        return path_line(self.model, self.cfg, self.backend.name)

    # ---- experience collection
    @torch.no_grad()
    def collect_experience(self) -> tuple[list[Rollout], dict[str, float]]:
        cfg, tok = self.cfg, self.tok
        rounds = max(1, math.ceil(cfg.buffer_size / (cfg.questions_per_batch * cfg.group_size)))
        buffer, rewards_all, parts, lengths, truncated, gen_tokens, gen_seconds = [], [], [], [], [], 0, 0.0
        logged = []
        self.model.eval()
        settings = cfg.sampling()
        t0 = time.perf_counter()
        self.backend.load_policy(self.model)  # once per step: the weights have moved since the last collection
        gen_seconds += time.perf_counter() - t0
        for _ in range(rounds):
            entries = self.draw_questions()
            prompt_ids = encode_prompts(tok, [chat_prompt(tok, e["question"]) for e in entries])
            t0 = time.perf_counter()
            gen = self.backend.generate(tok, prompt_ids, settings)
            prompt_ids, completions = gen.prompt_ids, gen.completion_ids
            gen_seconds += time.perf_counter() - t0
            gen_tokens += sum(len(c) for c in completions)
            texts = tok.batch_decode(completions, skip_special_tokens=True)
            scores = [self.reward_fn(t, entries[i // cfg.group_size]) for i, t in enumerate(texts)]
            rewards = torch.tensor([s.total for s in scores]).view(cfg.questions_per_batch, cfg.group_size)
            adv = group_advantages(rewards, scale=cfg.scale).flatten()
            rows = [Rollout(prompt_ids[i // cfg.group_size], c, [], float(adv[i]), scores[i].total,
                            tok.eos_token_id not in c, None if gen.sampler_logp is None else gen.sampler_logp[i])
                    for i, c in enumerate(completions)]
            if not self.on_policy_update():  # scored as the learner will score them: π/π_old is 1 until a step moves it
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
                    old_logp, _ = completion_logprobs(self.model, rows, tok.pad_token_id,
                                                      temperature=self.score_temperature)
                for r, lp in zip(rows, old_logp):
                    r.old_logp = lp[: len(r.completion_ids)].tolist()
            buffer.extend(rows)
            rewards_all.append(rewards)
            parts.extend(scores)
            lengths.extend(len(c) for c in completions)
            truncated.extend(r.truncated for r in rows)
            for i in range(min(cfg.log_rollouts, len(rows))):
                j = i * cfg.group_size % len(rows)  # the first completion of the first few questions
                logged.append({"step": self.step, "question": entries[j // cfg.group_size]["question"],
                               "completion": texts[j], "reward": rows[j].reward, "advantage": rows[j].advantage})
        self.backend.release()  # the sampler's weights are not needed while the policy learns
        rewards = torch.cat(rewards_all)
        zero_std = (rewards.max(1).values == rewards.min(1).values).float().mean().item()
        per_question = rewards.mean(1)  # questions are the independent draws; a group's samples are not
        reward_se = per_question.std().item() / math.sqrt(len(per_question)) if len(per_question) > 1 else 0.0
        advantages = torch.tensor([r.advantage for r in buffer])
        self._pending_rollouts = logged  # written with the step's log row, when the step has finished
        stats = {
            "reward_mean": rewards.mean().item(), "reward_std": rewards.std().item(), "reward_se": reward_se,
            # ≈ 0 and ≈ the share of groups with signal under scale="group": what the gradient is fed
            "adv_mean": advantages.mean().item(), "adv_std": advantages.std().item() if len(advantages) > 1 else 0.0,
            "format": sum(p.format for p in parts) / len(parts), "correct": sum(p.correct for p in parts) / len(parts),
            "frac_zero_std_groups": zero_std, "completion_length": sum(lengths) / len(lengths),
            "truncation_rate": sum(truncated) / len(truncated), "gen_tokens_per_s": gen_tokens / max(gen_seconds, 1e-9),
        }
        return buffer, stats

    def draw_questions(self) -> list[dict]:
        """One round's questions, drawn with replacement; with ``balance_answers`` the i-th question
        is drawn among those whose answer is the (i mod k)-th of the task's k answers."""
        n, pool = self.cfg.questions_per_batch, self.train_entries
        if not self.cfg.balance_answers:
            return [pool[self.data_rng.randrange(len(pool))] for _ in range(n)]
        if not hasattr(self, "_by_answer"):
            by: dict[str, list[dict]] = {}
            for e in pool:
                if e.get("answer") is None:
                    raise ValueError("balance_answers needs a task whose questions each have one answer; "
                                     f"this one is open-ended ({e['question'][:60]!r}…): set balance_answers=False")
                by.setdefault(e["answer"], []).append(e)
            self._by_answer = [by[a] for a in sorted(by)]
        offset = self.data_rng.randrange(len(self._by_answer))  # which answer an odd batch has one more of
        buckets = [self._by_answer[(i + offset) % len(self._by_answer)] for i in range(n)]
        return [b[self.data_rng.randrange(len(b))] for b in buckets]

    @property
    def score_temperature(self) -> float:
        """The temperature the learner scores log-probs at (``cfg.score_at_temperature``; else 1)."""
        return self.cfg.score_temperature

    def on_policy_update(self) -> bool:
        """True when the learning phase makes exactly one optimizer step over the buffer: the
        policy that sampled is the policy being updated, so the old log-probs equal the new ones
        (detached) and their separate forward pass can be skipped — as TRL does in this case."""
        cfg = self.cfg
        per_round = cfg.questions_per_batch * cfg.group_size
        collected = max(1, math.ceil(cfg.buffer_size / per_round)) * per_round
        return cfg.epochs == 1 and math.ceil(collected / cfg.minibatch_size) <= cfg.grad_accum

    # ---- learning phase
    def learn(self, buffer: list[Rollout]) -> dict[str, float]:
        cfg, _tok = self.cfg, self.tok
        if cfg.mask_truncated:
            buffer = [r for r in buffer if not r.truncated]
        buffer = [r for r in buffer if r.advantage != 0.0 or cfg.beta > 0]
        if not buffer:
            return {"skipped": 1.0}
        step = self.step + 1  # the step this update belongs to (train_step counts it after learning)
        measure = bool(cfg.shift_every) and (step == 1 or step % cfg.shift_every == 0)
        before = self._token_logps(buffer) if measure else None
        self.model.train()
        totals: dict[str, float] = {}
        n_mb, n_tokens, t0 = 0, 0, time.perf_counter()
        self._log_ratios = []
        for _ in range(cfg.epochs):
            order = self.minibatch_order(buffer)
            minibatches = [[buffer[i] for i in order[k : k + cfg.minibatch_size]]
                           for k in range(0, len(order), cfg.minibatch_size)]
            for start in range(0, len(minibatches), cfg.grad_accum):
                group = minibatches[start : start + cfg.grad_accum]
                self.optimizer.zero_grad(set_to_none=True)
                for mb in group:
                    stats = self._minibatch_backward(mb, scale=1.0 / len(group))
                    for k, v in stats.items():
                        totals[k] = totals.get(k, 0.0) + v
                    n_mb += 1
                    n_tokens += sum(len(r.prompt_ids) + len(r.completion_ids) for r in mb)
                grad_norm = torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm)
                totals["grad_norm"] = totals.get("grad_norm", 0.0) + float(grad_norm) * len(group)
                self.optimizer.step()
        self.model.eval()
        out = {k: v / n_mb for k, v in totals.items()}
        out["train_tokens_per_s"] = n_tokens / (time.perf_counter() - t0)
        out.update(mismatch_stats(self._log_ratios))
        out["skipped"] = 0.0
        if before is not None:
            self._measure_update(step, buffer, before, self._token_logps(buffer), out)
        return out

    def minibatch_order(self, buffer: list[Rollout]) -> list[int]:
        """The buffer's rollouts in the order the minibatches take them, shuffled by ``data_rng``.

        When ``minibatch_size`` is a multiple of the group size G, whole groups are shuffled and kept
        together, so a minibatch holds G completions of each of its prompts and the learner runs each
        prompt once for all of them (:func:`kimina_edu.logprobs.completion_logprobs`); shuffling single
        rollouts into minibatches of 8 left SmolLM2's learner running most prompts once per completion.
        Otherwise single rollouts are shuffled."""
        order = list(range(len(buffer)))
        self.data_rng.shuffle(order)
        if self.cfg.minibatch_size % self.cfg.group_size:
            return order
        # groups in the order their first rollout came in the shuffle (a uniformly random order of groups);
        # the same random draws as a plain shuffle, so the questions drawn next do not depend on this choice
        rank: dict[tuple[int, ...], int] = {}
        for i in order:
            rank.setdefault(tuple(buffer[i].prompt_ids), len(rank))
        return sorted(order, key=lambda i: rank[tuple(buffer[i].prompt_ids)])

    def _measure_update(self, step: int, buffer: list[Rollout], before: list[list[float]],
                        after: list[list[float]], out: dict[str, float]) -> None:
        """One update's effect from the same two scorings: per-completion means into the log row
        (``shift_*``), the per-token record into ``token_shift.jsonl`` (written with the step's row)."""
        advantages = [r.advantage for r in buffer]
        out.update(update_shift(advantages, [_mean(b) for b in before], [_mean(a) for a in after]))
        texts = [[self._token_text(t) for t in r.completion_ids] for r in buffer]
        self._pending_token_shift = [token_shift_record(step, advantages, before, after, texts)]

    def _token_text(self, token_id: int) -> str:
        """A token's decoded text, cached: a buffer repeats a few hundred distinct ids."""
        cache = self.__dict__.setdefault("_token_texts", {})
        if token_id not in cache:
            cache[token_id] = self.tok.decode([token_id])
        return cache[token_id]

    def _mean_token_logps(self, rollouts: list[Rollout]) -> list[float]:
        """Each rollout's mean per-token completion log-prob under the current weights."""
        return [_mean(lp) for lp in self._token_logps(rollouts)]

    @torch.no_grad()
    def _token_logps(self, rollouts: list[Rollout]) -> list[list[float]]:
        """Each rollout's per-token completion log-probs under the current weights (evaluation mode,
        no gradient), in minibatch-sized chunks: what update_shift and token_shift.jsonl both read."""
        was_training = self.model.training
        self.model.eval()
        out: list[list[float]] = []
        for k in range(0, len(rollouts), self.cfg.minibatch_size):
            chunk = rollouts[k : k + self.cfg.minibatch_size]
            logp, _ = completion_logprobs(self.model, chunk, self.tok.pad_token_id, temperature=self.score_temperature)
            out.extend(logp[i, : len(r.completion_ids)].float().cpu().tolist() for i, r in enumerate(chunk))
        self.model.train(was_training)
        return out

    def _minibatch_backward(self, mb: list[Rollout], scale: float) -> dict[str, float]:
        cfg = self.cfg
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
            logp, mask, entropy = completion_logprobs(self.model, mb, self.tok.pad_token_id, with_entropy=True,
                                                      temperature=self.score_temperature)
        if self.on_policy_update():  # the weights have not moved since sampling: old = new, exactly
            old = logp.detach()
        else:
            old = pad_batch(mb, self.tok.pad_token_id)[3].to(logp.device)
        adv = torch.tensor([r.advantage for r in mb], device=logp.device)
        ref_logp = None
        if cfg.beta > 0:
            ref_logp = self._reference_logprobs(mb)
        weight = self._sampler_weights(mb, old, mask)
        loss, stats = policy_loss(logp, old, adv, mask, loss_type=cfg.loss_type, eps_low=cfg.eps_low,
                                  eps_high=cfg.eps_high, max_len=cfg.max_new_tokens, ref_logp=ref_logp, beta=cfg.beta,
                                  token_weight=weight)
        (loss * scale).backward()
        stats["loss"] = loss.item()
        stats["entropy"] = ((entropy * mask).sum() / mask.sum()).item()
        if weight is not None:
            stats["tis_weight_mean"] = ((weight * mask).sum() / mask.sum()).item()
            stats["tis_capped_frac"] = (((weight >= cfg.tis_cap).float() * mask).sum() / mask.sum()).item()
        return stats

    def _sampler_weights(self, mb: list[Rollout], learner_logp: torch.Tensor, mask: torch.Tensor):
        """Truncated importance weights when the sampler computed differently from the learner (vLLM, or the
        plain-torch decoder in bf16), each token's log-ratio kept for :func:`mismatch_stats`; ``None`` when the
        sampler returned no log-probs (it ran the learner's own fp32 arithmetic), where the ratio is 1."""
        given = [r.sampler_logp is not None for r in mb]
        if not any(given):
            return None
        if not all(given) or any(len(r.sampler_logp) != len(r.completion_ids) for r in mb):
            raise RuntimeError("sampler log-probs are missing or mis-sized for some rollouts of this minibatch: "
                               "every rollout must come from the same backend, one log-prob per completion token")
        sampler = torch.zeros_like(learner_logp)
        for i, r in enumerate(mb):
            sampler[i, : len(r.sampler_logp)] = torch.tensor(r.sampler_logp, dtype=sampler.dtype)
        self._log_ratios.append((learner_logp.detach().float() - sampler.float())[mask.bool()])
        return truncated_importance_weights(learner_logp, sampler, mask, self.cfg.tis_cap)

    @torch.no_grad()
    def _reference_logprobs(self, mb: list[Rollout]) -> torch.Tensor:
        """With LoRA the reference is the same model with adapters off: no second copy."""
        if not hasattr(self.model, "disable_adapter"):
            raise ValueError("beta > 0 needs a PEFT (LoRA) model: its reference is the model with adapters disabled")
        with self.model.disable_adapter(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
            ref, _ = completion_logprobs(self.model, mb, self.tok.pad_token_id, temperature=self.score_temperature)
        return ref

    # ---- evaluation, checkpoints, the loop
    def evaluate(self) -> dict[str, float]:
        from kimina_edu.eval import evaluate_policy

        r = evaluate_policy(self.model, self.tok, self.eval_entries, max_new_tokens=self.cfg.max_new_tokens,
                            progress=False)
        return {"eval_accuracy": r["accuracy"], "eval_format_rate": r["format_rate"]}

    def train(self, on_step: Callable[[dict], None] | None = None) -> list[dict]:
        from tqdm.auto import tqdm

        if getattr(self, "_torn", False):
            raise RuntimeError(f"this trainer was stopped in the middle of step {self.step + 1}, so its weights are "
                               "half-updated: call resume_from(latest_checkpoint(output_dir)) first, or make a new trainer")
        rewind_logs(self)  # rows past this step (an older run in the same folder) would be duplicated
        self._rewind_token_shift()
        self._record_probes(start=True)
        if self.cfg.dev_every and not self.dev_checks:  # a resumed run brings its checks from the checkpoint
            self._dev_check()  # the weights the run starts from: a candidate like every later check
        bar = tqdm(total=self.cfg.steps, initial=self.step, desc="GRPO", disable=not self.progress)
        in_step = False
        try:
            with DeferredInterrupt() as ctrl_c:  # first Ctrl-C: the step finishes, is saved, then we stop
                # the guard looks before every step, the first included: a run resumed from a checkpoint
                # written at (or after) the collapse stops there, as the uninterrupted run did
                while not self.collapsed() and self.step < self.cfg.steps:
                    in_step = True
                    row = self.train_step()
                    in_step = False
                    bar.update(1)
                    bar.set_postfix(reward=f"{row['reward_mean']:.2f}", len=f"{row['completion_length']:.0f}")
                    if on_step:
                        on_step(row)
                    if ctrl_c.requested:
                        raise KeyboardInterrupt
                    if self.cfg.checkpoint_every and self.step % self.cfg.checkpoint_every == 0:
                        self.save_checkpoint()
                    if self.out_of_signal():
                        print(f"stopped at step {self.step}: at most a tenth of the last {self.cfg.silent_window} "
                              "steps had a group whose rewards differed — nothing left to learn from these samples")
                        break
            if self.probes is not None and getattr(self, "_probe_step", None) != self.step:
                self._record_probes()  # the run's last step, when it fell between two probe steps
            self._keep_best_dev()
        except BaseException as exc:
            if in_step:  # a half-finished step is no state to resume from: keep the last clean checkpoint
                self._torn = True
                if isinstance(exc, KeyboardInterrupt):
                    print(f"interrupted in the middle of step {self.step + 1}: nothing saved; the last clean "
                          f"checkpoint is {latest_checkpoint(self.output_dir) or 'none (checkpoint_every=0)'}")
            elif isinstance(exc, KeyboardInterrupt):
                print(f"interrupted after step {self.step}: checkpoint saved to {self.save_checkpoint()}")
            raise
        finally:
            bar.close()
        return read_log(self.log_path)

    def _dev_check(self) -> float:
        """Greedy accuracy on the dev questions under the current weights (``cfg.dev_every``), recorded in
        ``dev_checks``; the weights are kept (LoRA: a few MB) when they beat every earlier check."""
        from kimina_edu.eval import evaluate_policy

        acc = evaluate_policy(self.model, self.tok, self.dev_entries, max_new_tokens=self.cfg.max_new_tokens,
                              progress=False)["accuracy"]
        if not self.dev_checks or acc > max(c["accuracy"] for c in self.dev_checks):  # a tie keeps the earlier
            self._dev_best = (self.step, acc, self.snapshot())
        self.dev_checks.append({"step": self.step, "accuracy": acc})
        return acc

    def _keep_best_dev(self) -> None:
        """At the end of a run with dev checks: check the last weights too, then put back the best check's
        weights when they are not the last ones, and say so in one line."""
        if not self.cfg.dev_every:
            return
        if self.dev_checks[-1]["step"] != self.step or getattr(self, "guard_stopped", None):
            self._dev_check()  # the weights the run ends with (the collapse guard may have put others back)
        best_step, best, weights = self._dev_best
        last = self.dev_checks[-1]["accuracy"]
        if best > last:  # strictly: on a tie the run keeps its last weights
            self.put_back(weights)
            self.dev_kept = best_step
            print(f"dev check: the run ends with the weights after step {best_step} (dev accuracy {best:.1%} on "
                  f"{len(self.dev_entries)} questions), not those after step {self.step} ({last:.1%})")
        else:
            print(f"dev check: the last weights are the best ({last:.1%} on {len(self.dev_entries)} dev questions; "
                  f"the run started at {self.dev_checks[0]['accuracy']:.1%})")

    def collapsed(self) -> bool:
        """The collapse guard (``cfg.guard_window``): True — after restoring the weights of the best
        window and printing one line — once the last window's sampled accuracy fell ``guard_drop``
        below the best earlier window's. Windows are consecutive, non-overlapping blocks of steps.
        The best window's weights are kept by name and saved with every checkpoint, so a resumed run
        puts back the same weights as the run that never stopped."""
        w = self.cfg.guard_window
        if not w or self.step % w:
            return False
        acc = [r["correct"] for r in read_log(self.log_path)]
        windows = [sum(acc[k : k + w]) / w for k in range(0, len(acc) - w + 1, w)]
        if not windows:
            return False
        best = max(range(len(windows) - 1), key=windows.__getitem__, default=None)
        if best is not None and windows[-1] < windows[best] - self.cfg.guard_drop:
            snap = getattr(self, "_guard_best", None)
            put_back = ""
            if snap is not None and snap[0] == (best + 1) * w:
                self.put_back(snap[1])
                put_back = f"; the weights after step {snap[0]} are back"
            print(f"collapse guard: stopped at step {self.step}: sampled accuracy {windows[-1]:.0%} over the last {w} "
                  f"steps, down from {windows[best]:.0%} in steps {best * w + 1}–{(best + 1) * w}{put_back}")
            self.guard_stopped = self.step
            return True
        if windows[-1] >= max(windows):  # the best window so far: keep its weights (LoRA: a few MB)
            self._guard_best = (self.step, self.snapshot())
        return False

    def snapshot(self) -> dict[str, torch.Tensor]:
        """A copy of the trained weights (LoRA: a few MB), for :meth:`put_back`: the collapse guard's best
        window and the dev check's best step keep theirs this way."""
        return {n: p.detach().clone() for n, p in self.trainable().items()}

    def put_back(self, weights: dict[str, torch.Tensor]) -> None:
        """Copy a :meth:`snapshot` back into the trained weights."""
        trainable = self.trainable()
        with torch.no_grad():
            for name, value in weights.items():
                trainable[name].copy_(value)

    def trainable(self) -> dict[str, torch.nn.Parameter]:
        """The weights this run trains, by name: what a checkpoint and the collapse guard keep."""
        return {n: p for n, p in self.model.named_parameters() if p.requires_grad}

    def out_of_signal(self) -> bool:
        """True when at most a tenth of the last ``cfg.silent_window`` steps made an update."""
        if not self.cfg.silent_window or self.step < self.cfg.silent_window:
            return False
        return signal_exhausted([bool(r.get("skipped")) for r in read_log(self.log_path)], self.cfg.silent_window)

    def train_step(self) -> dict:
        buffer, stats = self.collect_experience()
        if stats["frac_zero_std_groups"] == 1.0 and self.cfg.beta == 0:
            learn_stats = {"skipped": 1.0, "skip_reason": "every group has zero reward variance: no signal"}
        else:
            learn_stats = self.learn(buffer)
        self.step += 1
        row = {"step": self.step, **stats, **learn_stats}
        if self.cfg.eval_every and self.eval_entries and self.step % self.cfg.eval_every == 0:
            row.update(self.evaluate())
        if self.cfg.dev_every and self.step % self.cfg.dev_every == 0:
            row["dev_accuracy"] = self._dev_check()
        # the step's rows land together, after the step: an interrupted step leaves no rows behind
        append_jsonl(self.rollout_path, getattr(self, "_pending_rollouts", []))
        self._pending_rollouts = []
        append_jsonl(self.log_path, [row])
        append_jsonl(self.token_shift_path, getattr(self, "_pending_token_shift", []))
        self._pending_token_shift = []
        if self.probes is not None and self.step % self.probes.every == 0:
            self._record_probes()
        return row

    def _record_probes(self, start: bool = False) -> None:
        """Score the probe completions under the current weights into ``probes.jsonl``; at the start of
        ``train()``, first drop rows from this step on (an older run's, or a resumed run's future)."""
        if self.probes is None:
            return
        if start:
            rewind_jsonl(self.probe_path, lambda row: row.get("step", self.step) < self.step)
        append_jsonl(self.probe_path, self.probes.rows(self.model, self.tok.pad_token_id, self.step))
        self._probe_step = self.step

    def save_checkpoint(self) -> Path:
        """``checkpoints/step_NNNNN``: weights, optimizer and RNG state, written atomically and
        checksummed, no pickle (:mod:`kimina_edu.checkpoints`)."""
        return save_trainer(self)

    def resume_from(self, path: str | Path) -> None:
        """Continue a run: same weights, optimizer, data order and RNG state as when saved; the
        checkpoint is verified first, and log rows after its step are dropped (they will be rewritten)."""
        restore_trainer(self, path)
        self._rewind_token_shift()

    def _rewind_token_shift(self) -> None:
        """Drop ``token_shift.jsonl`` rows of updates after the current step: they will be measured again."""
        rewind_jsonl(self.token_shift_path, lambda row: row.get("step", self.step + 1) <= self.step)


def path_line(model, cfg: TrainConfig, sampler: str = TransformersBackend.name) -> str:
    """One line: the arithmetic the sampler and learner run on this machine and why (:mod:`kimina_edu.precision`),
    the sampler, and its batch."""
    return (f"{precision.path_line(arithmetic_bound(model), str(model.device.type))}; sampler: {sampler}, "
            f"{cfg.questions_per_batch} questions × {cfg.group_size} samples, ≤ {cfg.max_new_tokens} new tokens; "
            "greedy evaluation: fp32")


def mismatch_stats(log_ratios: list[torch.Tensor]) -> dict[str, float]:
    """The sampler–learner gap over one learning phase's tokens, from ``log r = log π_learner − log π_sampler``
    at each sampled token: ``mismatch_kl`` — the mean of (r − 1) − log r, an estimate of KL(sampler ‖
    learner) per token that is never negative (Schulman's k3) — and the importance weight r's 1st, 50th
    and 99th percentiles. Empty when the learner's own model sampled."""
    if not log_ratios:
        return {}
    lr = torch.cat(log_ratios).double()
    r = lr.exp()
    q = torch.quantile(r, torch.tensor([0.01, 0.5, 0.99], dtype=torch.float64)).tolist()
    return {"mismatch_kl": float(((r - 1) - lr).mean()), "is_weight_p01": q[0], "is_weight_p50": q[1],
            "is_weight_p99": q[2]}


def _mean(values: list[float]) -> float:
    """The mean of a completion's per-token log-probs (0 for an empty one, as a masked mean gives)."""
    return sum(values) / len(values) if values else 0.0


def signal_exhausted(silent: list[bool], window: int) -> bool:
    """The early-stop rule (``TrainConfig.silent_window``), shared by our trainer and TRL's callback:
    ``silent`` flags each step that had no group with differing rewards; stop once the last
    ``window`` steps are all known and at most a tenth of them learned anything."""
    recent = silent[-window:] if window else []
    return bool(window) and len(recent) == window and sum(not s for s in recent) <= window // 10


def reward_at_ends(log: list[dict]) -> tuple[float, float]:
    """The mean sampled reward over the first and over the last quarter of a run's steps. Each step
    draws new questions, so one step's reward is noisy; a quarter of the run averages that out."""
    if not log:
        raise ValueError("reward_at_ends needs at least one logged step")
    quarter = max(1, len(log) // 4)
    return (sum(r["reward_mean"] for r in log[:quarter]) / quarter,
            sum(r["reward_mean"] for r in log[-quarter:]) / quarter)


def read_log(path: str | Path) -> list[dict]:
    path = Path(path)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


__all__ = ["GRPOTrainer", "path_line", "read_log", "reward_at_ends", "signal_exhausted"]
