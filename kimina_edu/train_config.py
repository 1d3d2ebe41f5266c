"""The settings of a GRPO run (chapters 4–5): :class:`TrainConfig`, a plain dataclass whose defaults
are the reference article's, and its presets for the pocket model and SmolLM2 on a CPU or a GPU.

Both trainers read it: ours (:mod:`kimina_edu.trainer`) directly, TRL's through
:mod:`kimina_edu.trl_bridge`. A checkpoint stores it, and a resume compares against it field by field
(:func:`kimina_edu.checkpoints.check_config`): ``RESUMABLE`` and ``VALUE_WHEN_MISSING`` say how.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kimina_edu.rollouts import SamplingSettings

QUICK_FRACTION = 3  # QUICK runs a third of the preset's GRPO steps (TrainConfig.preset)


@dataclass
class TrainConfig:
    """Defaults are the reference article's hyper-parameters (SmolLM-135M on reasoning-gym).

    ``buffer_size``: rollouts collected before a learning phase (ceil(buffer/(B·G)) rounds).
    ``grad_accum``: minibatches whose gradients are summed per optimizer step.
    """

    task: str = "syllogism"
    steps: int = 100
    questions_per_batch: int = 8  # B
    group_size: int = 6  # G
    max_new_tokens: int = 300
    temperature: float = 0.7
    top_p: float = 0.95
    min_p: float = 0.0  # drop tokens under min_p × the top token's probability (0: off, the article)
    buffer_size: int = 500
    minibatch_size: int = 16
    grad_accum: int = 12
    epochs: int = 1  # passes over the buffer per learning phase
    lr: float = 1e-6
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    loss_type: str = "grpo"
    scale: str = "group"
    eps_low: float = 0.2
    eps_high: float | None = None
    beta: float = 0.0  # k3 KL to the reference (the model with adapters disabled)
    mask_truncated: bool = False
    # vLLM samples only: cap C of the truncated importance weight min(π_learner/π_vLLM, C) that
    # corrects the two engines' numerical gap (TRL's vllm_importance_sampling_clip_max default)
    tis_cap: float = 3.0
    eval_every: int = 0  # held-out accuracy every N steps (0: only when asked)
    log_rollouts: int = 4  # rollouts per step written to rollouts.jsonl for the browser
    checkpoint_every: int = 0
    seed: int = 0
    # stop early once at most a tenth of the last `silent_window` steps learned anything (every
    # group all-right or all-wrong: zero advantage, no gradient); 0 runs every step
    silent_window: int = 0
    # each step's questions split evenly between the task's answers ("Yes"/"No"): with a few
    # questions a step, a step of mostly "No" questions pays "No" itself, whatever the premises say
    balance_answers: bool = False
    # collapse guard: stop once the sampled accuracy of the last `guard_window` steps has fallen
    # `guard_drop` below the best earlier window's, and put back the weights of that best window
    guard_window: int = 0
    guard_drop: float = 0.15
    # every update's effect, measured: at step 1 and every `shift_every` steps, the learned buffer is
    # scored (no gradient) before and after its optimizer step(s) → log keys shift_pos / shift_neg,
    # the mean change of the per-token log-prob of the completions with A > 0 / A < 0 (0: never)
    shift_every: int = 10
    # the dev check: greedy accuracy on the dev split (tasks.dev_split) before step 1 and every `dev_every`
    # steps; the run ends with the weights of the best check (the warm-up's own among them), so a run whose
    # sampled reward rises while its greedy answers fall ends no worse than where it started (0: off)
    dev_every: int = 0

    # the learner's log-probs under softmax(logits / temperature) — the distribution the samples were
    # drawn from, as TRL and verl score them — instead of the model's own T = 1 distribution
    score_at_temperature: bool = False

    # fields that may differ on resume without changing what is being trained
    RESUMABLE = ("steps", "eval_every", "checkpoint_every", "log_rollouts", "silent_window", "guard_window",
                 "guard_drop", "shift_every")
    # fields added after the checkpoint format, each with the value that trains as runs did before the
    # field existed: a checkpoint that lacks one is read as holding this value (checkpoints.restore_trainer).
    # A field added later whose default does not train as runs did before it stays out: a checkpoint
    # without such a field is refused, naming it.
    VALUE_WHEN_MISSING: ClassVar[dict[str, object]] = {
        "balance_answers": False,  # questions drawn uniformly at random, as every run drew them before
        "score_at_temperature": False,  # log-probs under the model's own T = 1 softmax, as before
        "dev_every": 0,  # the run ended with its last step's weights, as before
    }

    @classmethod
    def preset(cls, model_id: str = "pocket", *, smoke: bool = False, quick: bool = False, device: str = "cpu",
               **overrides) -> TrainConfig:
        """Chapter 4's (and 5's) settings for ``model_id`` — the one place they live.

        Pocket model: :meth:`cpu_pocket`. Hub models: the article's hyper-parameters, except the
        learning rate — the article's 1e-6 is for full fine-tuning; a LoRA adapter needs ~10×
        more to move (TRL's PEFT examples train GRPO LoRAs at 1e-5 – 1e-4). ``smoke``: sizes
        that run in seconds on a CPU. ``overrides`` (notebook parameters) win over both; an
        override of ``None`` means "not given". A hub model's SMOKE completions are 32 tokens, not
        the pocket model's 48: a hub model that has not learned to stop (the tests' random-weight
        SmolLM-shaped folder, or SmolLM before its warm-up) runs every sample to the cap, and SMOKE
        checks that the path runs, not that it learns. ``quick``: a learner's first pass — a third of
        the preset's steps, everything else unchanged (ignored under ``smoke``); what it shows on
        the pocket model is measured over seeds in benchmarks/README.md ("QUICK mode"). ``device``
        ("cpu", "cuda", "auto"): SmolLM2 on a GPU gets :meth:`gpu_smollm2`, on a CPU :meth:`cpu_smollm2`.
        """
        # the hub models' lr; the pocket model and SmolLM2 have their own presets, which set theirs
        base: dict = {} if model_id in ("pocket", "smollm2") else {"lr": 1e-5}
        if smoke:
            base.update(steps=6, eval_every=3, questions_per_batch=4, buffer_size=24, minibatch_size=12,
                        grad_accum=2, max_new_tokens=48 if model_id == "pocket" else 32,
                        lr=5e-3 if model_id == "pocket" else 1e-4, silent_window=0, shift_every=1)
            if model_id == "smollm2":  # real weights: two questions a step keep `make test` in minutes
                base.update(questions_per_batch=2, buffer_size=12, minibatch_size=12, grad_accum=1)
        base.update({k: v for k, v in overrides.items() if v is not None})
        if model_id == "pocket":
            cfg = cls.cpu_pocket(**base)
        elif model_id == "smollm2" and not smoke:
            from kimina_edu.runtime import resolve_device

            gpu = resolve_device(device).startswith("cuda")
            cfg = cls.gpu_smollm2(**base) if gpu else cls.cpu_smollm2(**base)
        else:
            cfg = cls(**base)
        if quick and not smoke and overrides.get("steps") is None:
            cfg.steps = max(1, cfg.steps // QUICK_FRACTION)
        return cfg

    @classmethod
    def cpu_smollm2(cls, **overrides) -> TrainConfig:
        """The CPU preset for the real SmolLM2-135M-Instruct (chapter 4, ``MODEL_ID=smollm2``).

        Sized for a 2-core CPU, where one step of 96 completions costs one to two minutes: 24 steps of
        B = 16 questions × G = 6 (2,304 rollouts; at 12 steps of 8 × 6 the gains of seven seeds sat inside
        their own noise), 96 new tokens (chapter 3's evaluation length: the warm-up's answers end well
        before it), lr 3e-5, one optimizer step per batch over minibatches of two whole groups (each prompt
        run once for its six completions: :meth:`~kimina_edu.trainer.GRPOTrainer.minibatch_order`),
        ``balance_answers`` (half "Yes" questions, half "No" in every step) and the collapse guard. Held-out
        accuracy on chapter 4's 200 in-run questions every 6 steps: the run's curve, and the step chapter 5
        compares TRL at (:func:`~kimina_edu.trl_bridge.compare_steps`). Measurements behind each choice:
        benchmarks/README.md ("SmolLM2, chapter 4") and benchmarks/LOG.md.
        """
        base = dict(steps=24, eval_every=6, questions_per_batch=16, group_size=6, max_new_tokens=96,
                    buffer_size=96, minibatch_size=12, grad_accum=8, epochs=1, lr=3e-5, loss_type="grpo",
                    scale="group", eps_high=0.28, balance_answers=True, guard_window=4, guard_drop=0.15)
        base.update(overrides)
        return cls(**base)

    @classmethod
    def gpu_smollm2(cls, **overrides) -> TrainConfig:
        """The GPU preset for the real SmolLM2 (chapter 4 with ``DEVICE`` a GPU;
        ``benchmarks/gpu_smollm2.py`` runs chapters 3 → 4 with it).

        The article's sampling (T 0.7, top-p 0.95, 300 new tokens, groups of 6 → 8) with far more
        questions a step: on a GPU, ``generate`` is latency-bound at the article's 48 rows (10× the
        rows gave 10× the tokens per second on an H200, benchmarks/README.md), so 32 questions × 8
        cost about what 8 × 6 do and give a reward curve with a quarter of the noise. One optimizer
        step per batch (on-policy, as the CPU preset), balanced answers and the collapse guard as
        on the CPU, held-out accuracy every 10 steps.
        """
        base = dict(steps=40, eval_every=10, questions_per_batch=32, group_size=8, max_new_tokens=300,
                    buffer_size=256, minibatch_size=64, grad_accum=4, epochs=1, lr=1e-5, loss_type="grpo",
                    scale="group", eps_high=0.28, balance_answers=True, guard_window=4, guard_drop=0.15)
        base.update(overrides)
        return cls(**base)

    def sampling(self) -> SamplingSettings:
        """What the rollout backend needs from this config (:mod:`kimina_edu.rollouts`)."""
        return SamplingSettings(max_new_tokens=self.max_new_tokens, temperature=self.temperature, top_p=self.top_p,
                                min_p=self.min_p, n=self.group_size, seed=self.seed,
                                logp_temperature=self.score_temperature)

    @property
    def score_temperature(self) -> float:
        """The temperature the learner scores log-probs at (``score_at_temperature``; else 1)."""
        return self.temperature if self.score_at_temperature and self.temperature > 0 else 1.0

    @classmethod
    def cpu_pocket(cls, **overrides) -> TrainConfig:
        """The CPU preset for the pocket model (chapter 4, `make course`).

        Changes from the article, and why: the pocket model's completions are well under 64
        tokens (notebook 04 prints their mean length), so 64 new tokens cover them; one collection
        round per learning phase (buffer = B·G = 48 rollouts, 3 minibatches of 16, one optimizer
        step) keeps generation — the expensive part on a CPU — from dominating; ``min_p=0.1``
        because a ~1 M-parameter model's flat tail turns samples into typos at T=0.7, so the reward
        taught spelling, not logic; a LoRA on this model needs lr ~1e-4 rather than 1e-6 to move,
        and 2e-4 collapsed some seeds below their SFT start; and
        ``silent_window=20``: once the policy answers every training question the same way in
        all six samples, steps stop carrying signal but still pay for generation — stop there.
        Measurements behind each choice: benchmarks/README.md.
        """
        base = dict(steps=300, eval_every=25, max_new_tokens=64, min_p=0.1, buffer_size=48, minibatch_size=16,
                    grad_accum=3, epochs=1, lr=1e-4, loss_type="grpo", scale="group", eps_high=0.28,
                    silent_window=20)
        base.update(overrides)
        return cls(**base)
