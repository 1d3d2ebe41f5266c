"""Error correction inside verl: a dataset that mixes cached second-turn prompts into batches.

The recipe's fork patches verl's trainer; upstream verl 0.9.1 already has the hook it needs,
in one place only: the legacy trainer (``verl/trainer/ppo/ray_trainer.py``, selected with
``trainer.use_v1=False``) calls ``train_dataset.on_batch_end(batch=batch)`` after every step.
The default v1 trainer has no per-batch dataset hook (its ``on_step_end`` gets no batch), so
the recipe config selects the legacy trainer instead of patching verl. When verl drops it, the
next-smallest extension is a ``@register_trainer`` subclass of ``PPOTrainerSync`` that calls
``on_batch_end`` from ``step`` — selected with ``trainer.v1.trainer_mode``.

verl loads this file by path (``data.custom_cls.path``) in the verl environment. The mixing
logic is :class:`SecondTurnMixin`, plain Python, tested in the main environment.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kimina_edu.lean.feedback import SecondTurnCache

MULTITURN_SOURCE = "multiturn"  # data_source of second-turn prompts, as in the recipe


class SecondTurnMixin:
    """``mix(row)`` swaps a first-turn row for a cached second turn at the sampling rate;
    ``on_batch_end(batch)`` offers every rollout of a finished step to the cache."""

    def init_second_turn(self, config: Any, tokenizer: Any = None) -> None:
        get = config.get if hasattr(config, "get") else (lambda k, d=None: getattr(config, k, d))
        self.multiturn = bool(get("multiturn", False))
        self.second_turns = SecondTurnCache(
            capacity=int(get("multiturn_n_samples_in_cache", 5000)),
            sampling_rate=float(get("multiturn_sampling_rate", 0.5)),
            max_feedback_chars=int(get("multiturn_max_feedback_length", 3000)),
            max_prompt_tokens=get("max_prompt_length", None), tokenizer=tokenizer)
        self.format_errors: Counter = Counter()

    def mix(self, row: dict[str, Any]) -> dict[str, Any]:
        info = dict(row.get("extra_info") or {})
        info.setdefault("prompt", list(row["raw_prompt"]))
        row = {**row, "extra_info": info}
        if not self.multiturn:
            return row
        cached = self.second_turns.draw(None)
        if cached is None:
            return row
        messages = cached["messages"]
        return {**row, "raw_prompt": messages, "data_source": MULTITURN_SOURCE,
                "extra_info": {**info, "prompt": messages, "formal_statement": cached["formal_statement"],
                               "index": cached["index"]}}

    def on_batch_end(self, batch: Any) -> dict[str, int]:
        """Called by verl's legacy trainer with the step's ``DataProto``; returns the counts."""
        nt = batch.non_tensor_batch
        before = Counter(self.second_turns.counts)
        for info, response, feedback, fmt in zip(nt["extra_info"], nt["response"], nt["tool_feedback"],
                                                 nt["format_error"]):
            self.format_errors[fmt] += 1
            if self.multiturn:
                self.second_turns.add(info["prompt"], response, feedback,
                                      formal_statement=info["formal_statement"], index=info.get("index"))
        return dict(Counter(self.second_turns.counts) - before)


try:
    from verl.utils.dataset.rl_dataset import RLHFDataset
except ImportError:  # the main environment: only the mixin is available
    RLHFDataset = None

if RLHFDataset is not None:

    class SecondTurnRLDataset(SecondTurnMixin, RLHFDataset):
        """verl's ``RLHFDataset`` + the recipe's error-correction cache."""

        def __init__(self, data_files, tokenizer, config, processor=None, max_samples: int = -1):
            super().__init__(data_files, tokenizer, config, processor=processor, max_samples=max_samples)
            self.init_second_turn(config, tokenizer)

        def __getitem__(self, item):
            return self.mix(super().__getitem__(item))
