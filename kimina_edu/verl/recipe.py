"""The Kimina-Prover-RL run as verl 0.9.1 Hydra overrides — generated, commented, checked.

    overrides = recipe_overrides("full")        # [(override, source), …]
    print(launch_script("full"))                # the bash a learner runs on an 8-GPU node

Every value names its source: ``recipe`` = ``kimina_prover_1.7B.sh`` in
project-numina/kimina-prover-rl; ``Dr.GRPO`` = arXiv 2503.20783 as verl documents it
(``docs/algo/grpo.md``); ``verl 0.9.1`` = a key that changed since the recipe's fork.
"""

from __future__ import annotations

import shlex
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent  # where verl loads our files from when run on this machine
PACKAGE_IN_REPO = Path("kimina_edu/verl")  # the same folder, as the launch script names it: from the repository root
MODELS = {"1.7B": "AI-MO/Kimina-Prover-Distill-1.7B", "0.6B": "AI-MO/Kimina-Prover-Distill-0.6B"}
PRESETS = ("full", "dry_run", "one_gpu")


def preset_model(preset: str) -> str:
    """The policy a preset trains when no ``model`` is given: the 0.6B prover for ``one_gpu``, else the 1.7B."""
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {PRESETS}; got {preset!r}")
    return MODELS["0.6B" if preset == "one_gpu" else "1.7B"]


def recipe_overrides(preset: str = "full", *, n_gpus: int | None = None, model: str | None = None,
                     data_dir: str | Path = "prompt_sets", logger: str = "console",
                     package_dir: str | Path = PACKAGE_DIR) -> list[tuple[str, str]]:
    """``[(hydra_override, source_comment), …]`` for ``python -m verl.trainer.main_ppo``.

    Presets: ``full`` — the recipe on one 8-GPU node; ``dry_run`` — the recipe's debug run
    (8 samples, short lengths, no error correction); ``one_gpu`` — the 0.6B model on one 80 GB card.
    ``package_dir``: where verl finds ``dataset.py`` and ``reward.py`` — this machine's copy by
    default; :func:`launch_script` passes :data:`PACKAGE_IN_REPO` so a script carries no local path.
    ``model``: a key of :data:`MODELS` ("1.7B", "0.6B") or a hub id / path; by default the preset's
    (0.6B for ``one_gpu``, else 1.7B). A model given is the model used, in every preset.
    """
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {PRESETS}; got {preset!r}")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise ValueError(f"model must be one of {list(MODELS)} or a hub id / path; got {model!r}")
    full = preset == "full"
    one = preset == "one_gpu"
    n_gpus = n_gpus or (1 if one else 8)
    model_path = MODELS.get(model, model) if model else preset_model(preset)
    prompt_len, response_len = {"full": (8192, 24576), "dry_run": (1684, 6508), "one_gpu": (2048, 8192)}[preset]
    batch, mini = {"full": (256, 32), "dry_run": (8, 8), "one_gpu": (32, 8)}[preset]
    data, package = Path(data_dir), Path(package_dir)
    o: list[tuple[str, str]] = [
        ("algorithm.adv_estimator=grpo", "recipe: group-relative advantages, no critic"),
        ("algorithm.norm_adv_by_std_in_grpo=False", "recipe + Dr.GRPO: r - mean(group), no std division"),
        ("algorithm.use_kl_in_reward=False", "recipe: no KL penalty in the reward"),
        (f"data.train_files=[{data / 'train.parquet'}]", "kimina_edu.verl.data.prepare_data"),
        (f"data.val_files=[{data / 'test.parquet'}]", "miniF2F-test, as the recipe validates on"),
        (f"data.train_batch_size={batch}", "recipe: 256 prompts per step" if full else f"{preset} preset"),
        (f"data.max_prompt_length={prompt_len}", "recipe: 8192 (second turns are long)" if full else f"{preset} preset"),
        (f"data.max_response_length={response_len}", "recipe: 32768 - 8192" if full else f"{preset} preset"),
        ("data.filter_overlong_prompts=True", "recipe"),
        ("data.truncation=error", "recipe: a too-long second-turn prompt must fail loudly"),
        ("data.return_raw_chat=True", "recipe: the dataset keeps the chat messages"),
        ("data.dataloader_num_workers=0", "recipe: on_batch_end mutates the dataset in the driver process"),
        (f"data.custom_cls.path={package / 'dataset.py'}", "ours: second-turn prompts mixed into batches"),
        ("data.custom_cls.name=SecondTurnRLDataset", "ours"),
        (f"+data.multiturn={full}", "recipe: error correction on (off in the dry run, as in the recipe)"),
        ("+data.multiturn_sampling_rate=0.5", "recipe: half of each batch from the cache"),
        ("+data.multiturn_n_samples_in_cache=5000", "recipe"),
        ("+data.multiturn_max_feedback_length=3000", "recipe default (dataset.py): longer feedback is dropped"),
        (f"actor_rollout_ref.model.path={model_path}", "recipe" if not one else "recipe's 0.6B model"),
        ("actor_rollout_ref.model.use_remove_padding=True", "recipe"),
        ("actor_rollout_ref.model.enable_gradient_checkpointing=True", "recipe"),
        ("actor_rollout_ref.actor.optim.lr=2e-6", "recipe"),
        (f"actor_rollout_ref.actor.ppo_mini_batch_size={mini}", "recipe: 32 prompts × n=8 per update" if full else f"{preset} preset"),
        ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", "recipe"),
        (f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={prompt_len + response_len}", "recipe: prompt + response"),
        ("actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm", "recipe + Dr.GRPO: token sum / constant"),
        (f"actor_rollout_ref.actor.loss_scale_factor={response_len}", "verl 0.9.1 + Dr.GRPO: the constant = max response length"),
        ("actor_rollout_ref.actor.use_kl_loss=False", "recipe: no KL loss"),
        ("actor_rollout_ref.actor.kl_loss_coef=0.0", "recipe"),
        ("actor_rollout_ref.actor.entropy_coeff=0", "recipe: no entropy bonus"),
        ("actor_rollout_ref.actor.clip_ratio_low=0.2", "recipe"),
        ("actor_rollout_ref.actor.clip_ratio_high=0.3", "recipe: clip-higher (DAPO)"),
        (f"actor_rollout_ref.actor.fsdp_config.param_offload={one}", "recipe: False on 8 GPUs; offload on one card"),
        (f"actor_rollout_ref.actor.fsdp_config.optimizer_offload={one}", "recipe: False on 8 GPUs; offload on one card"),
        ("actor_rollout_ref.rollout.name=vllm", "recipe"),
        ("actor_rollout_ref.rollout.tensor_model_parallel_size=1", "recipe"),
        (f"actor_rollout_ref.rollout.gpu_memory_utilization={0.5 if one else 0.6}", "recipe: 0.6"),
        ("actor_rollout_ref.rollout.n=8", "recipe: 8 rollouts per prompt"),
        ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2", "recipe"),
        (f"actor_rollout_ref.rollout.max_num_batched_tokens={prompt_len + response_len}", "recipe"),
        ("actor_rollout_ref.rollout.val_kwargs.do_sample=True", "recipe: best@8 needs sampling"),
        ("actor_rollout_ref.rollout.val_kwargs.n=8", "recipe: best@8"),
        ("actor_rollout_ref.rollout.val_kwargs.temperature=1.0", "recipe"),
        ("actor_rollout_ref.rollout.val_kwargs.top_p=0.95", "recipe"),
        ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2", "recipe (inert: no reference model without KL)"),
        (f"reward.custom_reward_function.path={package / 'reward.py'}", "verl 0.9.1 reads reward.custom_reward_function"),
        ("reward.custom_reward_function.name=compute_score", "ours: format × Lean validity, plus acc/pred/tool_feedback"),
        ("trainer.use_v1=False", "ours: verl 0.9.1's legacy trainer calls train_dataset.on_batch_end; v1 has no such hook"),
        ("trainer.critic_warmup=0", "recipe"),
        (f"trainer.logger=[{logger}]", "recipe uses [console,wandb]"),
        ("trainer.project_name=kimina-prover", "recipe"),
        (f"trainer.experiment_name=kimina-edu-{preset}", "ours"),
        (f"trainer.n_gpus_per_node={n_gpus}", "recipe: one 8-GPU node"),
        ("trainer.nnodes=1", "recipe"),
        ("trainer.save_freq=5", "recipe"),
        ("trainer.test_freq=5", "recipe: best@8 on miniF2F every 5 steps"),
        (f"trainer.val_before_train={preset != 'dry_run'}", "recipe (the dry run skips it)"),
        (f"trainer.total_epochs={15 if full else 1}", "recipe: 15 epochs"),
    ]
    return o


def overrides_list(preset: str = "full", **kwargs) -> list[str]:
    return [ov for ov, _ in recipe_overrides(preset, **kwargs)]


# The script's first move: to the root of the repository holding the directory it is run from, else of the
# one holding the script; its paths are relative to that root, so it runs on any machine with a checkout.
GO_TO_REPO_ROOT = """\
cd "$(git rev-parse --show-toplevel 2>/dev/null || git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || pwd)"
test -f kimina_edu/verl/reward.py || { echo "run this script from inside a kimina-edu checkout" >&2; exit 1; }"""


def launch_script(preset: str = "full", **kwargs) -> str:
    """The bash a learner runs: preflight checks first (one line each), then verl.

    Every path in it is relative to the repository root, which the script moves to first, so the
    same file runs on a GPU node's checkout wherever it is stored. (An absolute ``data_dir`` you
    pass is kept as given.)
    """
    data_dir = shlex.quote(str(kwargs.get("data_dir", "prompt_sets")))
    lines = [
        "#!/usr/bin/env bash",
        f"# generated by kimina_edu.verl.recipe.launch_script — preset {preset!r}",
        "set -euo pipefail",
        GO_TO_REPO_ROOT,
        f"python -m kimina_edu.verl.launch --preset {preset} --data-dir {data_dir}  # preflight: GPUs, Lean server, data",
        "python -m verl.trainer.main_ppo \\",
    ]
    body = recipe_overrides(preset, **{"package_dir": PACKAGE_IN_REPO, **kwargs})
    for i, (ov, _source) in enumerate(body):
        cont = " \\" if i < len(body) - 1 else ' "$@"'
        lines.append(f"    {shlex.quote(ov)}{cont}")
    return "\n".join(lines) + "\n"
