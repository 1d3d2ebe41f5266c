"""The weights a PEFT policy computes with, as one plain checkpoint: what every decoder that does not
run PEFT's own layers reads (the plain-torch decoder, the transformers backend's merged copy, vLLM)
and what an evaluation is cached under.

"What it computes" follows PEFT's forward, not the adapter's presence: base + each active adapter's
delta; the base alone inside ``model.disable_adapter()`` (the trainer's KL reference); a fully trained
module (``modules_to_save``) in place of the original only while its adapter is active; and adapters
that are more than ``B·A`` (DoRA's magnitude, a LoRA bias) merged by PEFT's own ``merge`` on a copy of
the layer. Its own module because the decoder (:mod:`kimina_edu.smalldecode`) and the backends
(:mod:`kimina_edu.rollouts`) both need it, and neither should import the other for it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

# PEFT wraps the model as ``base_model.model.<the original names>``; a LoRA layer keeps the
# original weight under ``.base_layer`` and adds ``lora_A``/``lora_B``/… tensors vLLM has no slot
# for (its loader raises ValueError on an unknown name: vllm/model_executor/models/utils.py:417,
# v0.30.0). Same cleaning as TRL 1.16 (trl/generation/vllm_generation.py, _iter_named_params).
_PEFT_PREFIX = "base_model.model."
_LORA_TENSOR = re.compile(r"\.lora_[A-Za-z_]+\.")
_SAVED = re.compile(r"\.modules_to_save\.([^.]+)\.")
_ORIGINAL = ".original_module."


def _adapters_off(layer) -> bool:
    """Whether PEFT's forward skips this layer's adapters: ``disable_adapter()`` (or no active one)."""
    return bool(getattr(layer, "disable_adapters", False)) or not getattr(layer, "active_adapters", None)


def _is_plain(layer, adapter: str) -> bool:
    """A plain LoRA adapter merges as ``W + get_delta_weight``; DoRA and a LoRA bias need PEFT's merge."""
    return (adapter not in (getattr(layer, "lora_variant", None) or {})
            and not (getattr(layer, "use_dora", None) or {}).get(adapter, False)
            and not (getattr(layer, "lora_bias", None) or {}).get(adapter, False))


def _pefts_merge(layer, adapters: list[str]) -> dict[str, Any]:
    """The base layer's parameters after PEFT's own ``merge`` of ``adapters``, on a copy of the layer
    (the policy is not touched): the only place a DoRA magnitude or a LoRA bias is merged."""
    import torch

    with torch.no_grad():
        twin = copy.deepcopy(layer)
        twin.merge(adapter_names=adapters)
        return {name: p.detach() for name, p in twin.get_base_layer().named_parameters()}


def _merged_leaf(layer, leaf: str, tensor, merged_layers: dict[int, dict[str, Any]]):
    """``tensor`` (the base layer's ``leaf``) as the LoRA ``layer`` computes with it."""
    import torch

    if getattr(layer, "merged", False):
        if _adapters_off(layer):
            raise RuntimeError("a LoRA layer is merged in place inside disable_adapter(): call "
                               "model.unmerge_adapter() first, then read its weights")
        return tensor  # merged in place: the base weight already holds the adapters
    if _adapters_off(layer):
        return tensor
    adapters = [a for a in layer.active_adapters
                if a in getattr(layer, "lora_A", {}) or a in getattr(layer, "lora_embedding_A", {})]
    if not adapters:
        return tensor
    if not all(_is_plain(layer, a) for a in adapters):
        if id(layer) not in merged_layers:
            merged_layers[id(layer)] = _pefts_merge(layer, adapters)
        return merged_layers[id(layer)][leaf]
    if leaf != "weight":
        return tensor
    with torch.no_grad():
        tensor = tensor.clone()
        for adapter in adapters:
            # PEFT's merge: `weight += delta` in place — an fp32 delta into a bf16 base is rounded
            # once; `base + delta.to(bf16)` would round twice
            tensor += layer.get_delta_weight(adapter)
    return tensor


def _saved_module_in_use(wrapper, name: str) -> bool:
    """Whether ``name`` (under a ``modules_to_save`` wrapper) is what the wrapper's forward runs."""
    use_original = _adapters_off(wrapper) or wrapper.active_adapters[0] not in wrapper.modules_to_save
    if _ORIGINAL in name:
        return use_original
    match = _SAVED.search(name)
    return not use_original and match is not None and match.group(1) == wrapper.active_adapters[0]


def effective_weights(model) -> Iterator[tuple[str, Any]]:
    """``(name, tensor)`` pairs of the weights ``model`` computes with right now, under the names of
    the base checkpoint — computed without touching ``model``.

    For each plain LoRA layer the tensor is ``base + delta`` (PEFT's own ``get_delta_weight``: the same
    matrix ``merge_and_unload`` would write), one layer at a time, so the adapter stays separate and
    trainable and no second copy of the model is made. TRL instead merges in place and unmerges after
    a push (``merge_adapter`` … ``unmerge_adapter``), which leaves rounding drift in the base weights;
    computing the sum aside avoids it. Inside ``disable_adapter()`` the base weight comes unchanged.
    Tied embeddings come once (``named_parameters`` de-duplicates them), as vLLM wants.
    """
    modules = dict(model.named_modules())
    merged_layers: dict[int, dict[str, Any]] = {}
    seen: set[str] = set()
    for name, param in model.named_parameters():
        if _LORA_TENSOR.search(name):
            continue  # an adapter's own tensor: already inside the merged weight below
        tensor = param.detach()
        if _ORIGINAL in name or _SAVED.search(name):
            owner_name = name.split(_ORIGINAL)[0] if _ORIGINAL in name else name[: _SAVED.search(name).start()]
            if not _saved_module_in_use(modules[owner_name], name):
                continue
            name = _SAVED.sub(".", name.replace(_ORIGINAL, "."))
        if ".base_layer." in name:
            owner_name, _, leaf = name.partition(".base_layer.")
            tensor = _merged_leaf(modules[owner_name], leaf, tensor, merged_layers)
            name = f"{owner_name}.{leaf}"
        name = name.removeprefix(_PEFT_PREFIX)
        if "lora_" in name or "base_layer" in name or name.startswith("base_model.") or name in seen:
            raise RuntimeError(f"the merged weights could not map parameter {name!r} to a checkpoint name")
        seen.add(name)
        yield name, tensor


def vllm_weights(model) -> Iterator[tuple[str, Any]]:
    """:func:`effective_weights`, for a push into vLLM. DoRA adapters are refused here only: the
    course has not checked vLLM's kernels against a DoRA-merged policy (the CPU decoders take them)."""
    peft_cfg = getattr(model, "peft_config", None) or {}
    if any(getattr(c, "use_dora", False) for c in peft_cfg.values()):
        raise ValueError("vllm_weights does not merge DoRA adapters: train with use_dora=False to sample with vLLM")
    return effective_weights(model)


def refresh_merged(merged, model) -> bool:
    """Write ``model``'s effective weights (:func:`effective_weights`) into ``merged``, a plain copy
    made from it earlier. False, with nothing written, when the two no longer have the same
    parameters (then make a new copy)."""
    import torch

    params = dict(merged.named_parameters())
    weights = list(effective_weights(model))
    if {name for name, _ in weights} != set(params) or any(
            (params[n].shape, params[n].dtype, params[n].device) != (t.shape, t.dtype, t.device) for n, t in weights):
        return False  # the policy was reshaped, cast or moved since the copy was made
    with torch.no_grad():
        for name, tensor in weights:
            params[name].copy_(tensor)
    return True


__all__ = ["effective_weights", "refresh_merged", "vllm_weights"]
