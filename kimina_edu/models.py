"""Chapter 3 — choose and load a policy: a hub model (SmolLM by default), a local folder, or the
offline pocket model (:mod:`kimina_edu.pocket`).

Two paths, one interface: :func:`load_policy` returns ``(model, tokenizer)`` — a real
``transformers`` causal LM and tokenizer with a chat template — so every later chapter
(from-scratch GRPO, TRL, PEFT) runs on either without a branch.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kimina_edu.pocket import PocketRecipe, pocket_path

HUB_DEFAULT = "HuggingFaceTB/SmolLM-135M-Instruct"


class ModelUnavailableError(RuntimeError):
    """Raised with a one-line message that says what to do next."""


def _hub_reachable(timeout: float = 3.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        return False
    import httpx

    try:
        return httpx.head("https://huggingface.co", timeout=timeout).status_code < 500
    except httpx.HTTPError:
        return False


def choose_model(model_id: str = "auto") -> tuple[str, str]:
    """Which model ``load_policy(model_id)`` will use, and why — without loading weights."""
    if model_id == "pocket":
        return "pocket", "MODEL_ID='pocket': the course's offline model, shipped in data/pocket/"
    candidate = HUB_DEFAULT if model_id == "auto" else model_id
    if Path(candidate).is_dir():
        return candidate, f"local folder {candidate}"
    if _in_hf_cache(candidate):
        return candidate, f"{candidate} found in the local Hugging Face cache"
    if _hub_reachable():
        return candidate, f"{candidate} will be downloaded from the hub"
    if model_id == "auto":
        return "pocket", f"{HUB_DEFAULT} is not cached and the hub is unreachable: using the offline pocket model"
    raise ModelUnavailableError(
        f"cannot load {model_id!r}: not a local folder, not in the Hugging Face cache, and the hub is unreachable. "
        f"Use MODEL_ID='pocket' (built offline) or pre-download it with `huggingface-cli download {model_id}`."
    )


def _in_hf_cache(model_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(model_id, "config.json"), str)
    except Exception:  # noqa: BLE001 — an invalid repo id is simply "not cached"
        return False


def lora_config(
    r: int = 32,
    alpha: int = 64,
    dropout: float = 0.0,
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "gate_proj"),
):
    """The reference article's LoRA: r=32, alpha=64, no dropout, every projection matrix."""
    from peft import LoraConfig

    return LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=list(target_modules),
                      task_type="CAUSAL_LM", bias="none")


def base_model_path(model_id: str = "auto", pocket: PocketRecipe | None = None, *, verbose: bool = False) -> str:
    """A loadable folder or hub id for ``model_id``; the pocket model's shipped (or built) folder."""
    chosen, why = choose_model(model_id)
    if verbose:
        print(f"model: {chosen} — {why}")
    return str(pocket_path(pocket, progress=verbose)) if chosen == "pocket" else chosen


def load_policy(
    model_id: str = "auto",
    *,
    device: str | None = None,
    dtype: Any = None,
    lora: Any = None,
    recipe: PocketRecipe | None = None,
    adapter: str | os.PathLike | None = None,
    verbose: bool = True,
):
    """``(model, tokenizer)`` for ``model_id``: "auto", "pocket", a hub id or a local folder.

    ``adapter``: a folder with a saved adapter (trainable). ``lora``: a ``LoraConfig`` for a
    fresh trainable adapter. Both: the saved adapter is merged into the base first, so the
    fresh adapter trains on top of it and "adapters disabled" means the SFT'd model — the
    right KL reference for GRPO. The tokenizer pads on the left for generation.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kimina_edu.runtime import resolve_device

    device = resolve_device(device)
    path = base_model_path(model_id, recipe, verbose=verbose)
    dtype = dtype or (torch.bfloat16 if device == "cuda" else torch.float32)
    try:
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    except OSError as exc:
        raise ModelUnavailableError(f"cannot load {path!r}: {str(exc).splitlines()[0]}") from None
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter), is_trainable=lora is None)
        if lora is not None:  # the SFT'd model becomes the base — and the KL reference
            model = model.merge_and_unload()
    if lora is not None:
        from peft import get_peft_model

        model = get_peft_model(model, lora)
    model.to(device)
    return model, tok


def tiny_random_llama(vocab_size: int = 64, seed: int = 0, **overrides):
    """A randomly initialised two-layer Llama for math demos and unit tests (no tokenizer)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = {"vocab_size": vocab_size, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128}
    cfg.update(overrides)
    return LlamaForCausalLM(LlamaConfig(**cfg)).eval()


__all__ = [
    "HUB_DEFAULT",
    "ModelUnavailableError",
    "PocketRecipe",
    "choose_model",
    "load_policy",
    "lora_config",
    "tiny_random_llama",
]


# chat_prompt and generate live in kimina_edu/rollouts.py (sampling) since issue 14; notebooks 03–04
# import them from here, so they stay importable from this module.
from kimina_edu.rollouts import chat_prompt, generate  # noqa: F401
