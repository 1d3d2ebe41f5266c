"""The course's decoders decode what a PEFT policy computes: the base weights inside
``model.disable_adapter()`` (the KL reference), the merged DoRA weights of a DoRA adapter; and an
evaluation is cached under the weights it actually evaluated."""

from __future__ import annotations

import copy

import pytest
import torch

from kimina_edu import eval as ev
from kimina_edu import smalldecode
from kimina_edu.lora import lora_config
from kimina_edu.merged_weights import effective_weights, refresh_merged, vllm_weights
from kimina_edu.models import load_policy
from kimina_edu.pocket import PocketRecipe
from kimina_edu.rollouts import (
    SamplingSettings,
    TransformersBackend,
    chat_prompt,
    encode_prompts,
    generate_ids,
)
from kimina_edu.tasks import SEEDS, held_out, make_entries

SMOKE = PocketRecipe.smoke()
ENTRIES = make_entries("syllogism", 8, SEEDS["rl"])
GREEDY = SamplingSettings(max_new_tokens=16, temperature=0.0)

pytestmark = pytest.mark.usefixtures("offline_shared_cache")


def _policy(*, dora: bool = False):
    """The pocket model with a trained-looking adapter: B is zero at init, which would change nothing."""
    cfg = lora_config(r=8, alpha=16)
    cfg.use_dora = dora
    model, tok = load_policy("pocket", recipe=SMOKE, lora=cfg, seed=0, verbose=False)
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.3)
    return model.eval(), tok


def _by_generate(monkeypatch, model, tok, prompt_ids):
    """transformers' ``generate`` on the model as it stands: the reference for what it computes."""
    with monkeypatch.context() as m:
        m.setattr(smalldecode, "supported", lambda model: "the reference is model.generate")
        return generate_ids(model, tok, prompt_ids, GREEDY)


def _prompts(tok):
    return encode_prompts(tok, [chat_prompt(tok, e["question"]) for e in ENTRIES])


def test_tokens_under_disable_adapter_are_the_base_models_greedy_tokens(monkeypatch):
    model, tok = _policy()
    base, _ = load_policy("pocket", recipe=SMOKE, verbose=False)
    ids = _prompts(tok)
    assert smalldecode.supported(model) is None, "this test is about the course's own decoder"
    adapted = generate_ids(model, tok, ids, GREEDY)
    expected = generate_ids(base.eval(), tok, ids, GREEDY)
    assert adapted != expected, "the adapter must change the tokens for this test to mean anything"
    with model.disable_adapter():
        assert generate_ids(model, tok, ids, GREEDY) == expected
        assert _by_generate(monkeypatch, model, tok, ids) == expected
    assert generate_ids(model, tok, ids, GREEDY) == adapted, "leaving the context brings the adapter back"


def test_the_transformers_backends_merged_copy_follows_disable_adapter():
    """Both ways the backend makes its sampler: a fresh copy, and a kept copy refreshed in place."""
    model, tok = _policy()
    base, _ = load_policy("pocket", recipe=SMOKE, verbose=False)
    ids = _prompts(tok)
    adapted = generate_ids(model, tok, ids, GREEDY)
    expected = generate_ids(base.eval(), tok, ids, GREEDY)
    assert adapted != expected
    with model.disable_adapter():
        fresh = TransformersBackend()
        fresh.load_policy(model)
        assert fresh.generate(tok, ids, GREEDY).completion_ids == expected
    kept = TransformersBackend()
    kept.load_policy(model)
    assert kept.generate(tok, ids, GREEDY).completion_ids == adapted
    kept.release()
    with model.disable_adapter():
        kept.load_policy(model)
        assert kept.generate(tok, ids, GREEDY).completion_ids == expected
    kept.release()
    kept.load_policy(model)
    assert kept.generate(tok, ids, GREEDY).completion_ids == adapted


def test_an_evaluation_under_disable_adapter_after_the_adapted_one_is_not_a_cache_hit(
        offline_private_cache, monkeypatch, capsys):
    model, tok = _policy()
    questions = held_out("syllogism", 6)
    adapted = ev.evaluate_policy(model, tok, questions, max_new_tokens=12, progress=False, keep_completions=True)
    capsys.readouterr()
    with model.disable_adapter():
        key_disabled = ev.evaluation_key(model, tok, questions, 12, 100)
        reference = ev.evaluate_policy(model, tok, questions, max_new_tokens=12, progress=False,
                                       keep_completions=True)
    assert "read back" not in capsys.readouterr().out, "the adapted policy's result was read back for the base"
    assert key_disabled != ev.evaluation_key(model, tok, questions, 12, 100)
    assert reference["completions"] != adapted["completions"]
    base, _ = load_policy("pocket", recipe=SMOKE, verbose=False)
    again = ev.evaluate_policy(base, tok, questions, max_new_tokens=12, progress=False, keep_completions=True)
    assert again["completions"] == reference["completions"]


def test_a_dora_policy_generates_and_evaluates_on_a_cpu(offline_private_cache, monkeypatch):
    model, tok = _policy(dora=True)
    ids = _prompts(tok)
    expected = _by_generate(monkeypatch, model, tok, ids)
    assert generate_ids(model, tok, ids, GREEDY) == expected
    backend = TransformersBackend()
    backend.load_policy(model)
    assert backend.generate(tok, ids, GREEDY).completion_ids == expected
    out = ev.evaluate_policy(model, tok, held_out("syllogism", 4), max_new_tokens=8, progress=False)
    assert out["n"] == 4
    with model.disable_adapter():
        base, _ = load_policy("pocket", recipe=SMOKE, verbose=False)
        assert generate_ids(model, tok, ids, GREEDY) == generate_ids(base.eval(), tok, ids, GREEDY)


def test_dora_merged_weights_are_pefts_merge_and_vllm_still_refuses_them():
    model, _ = _policy(dora=True)
    merged = dict(copy.deepcopy(model).merge_and_unload().named_parameters())
    got = dict(effective_weights(model))
    assert set(got) == set(merged)
    assert all(torch.equal(got[n], merged[n]) for n in merged)
    with pytest.raises(ValueError, match="vLLM"):
        dict(vllm_weights(model))


def test_modules_to_save_follow_disable_adapter():
    """A fully trained module (``modules_to_save``) counts once, and inside ``disable_adapter`` it is
    the original module again, as PEFT's forward computes."""
    cfg = lora_config(r=4, alpha=8)
    cfg.modules_to_save = ["model.norm"]
    model, _ = load_policy("pocket", recipe=SMOKE, lora=cfg, seed=0, verbose=False)
    base, _ = load_policy("pocket", recipe=SMOKE, verbose=False)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "modules_to_save" in name:
                p.add_(1.0)
    names = [n for n, _ in effective_weights(model)]
    assert len(names) == len(set(names)) and set(names) == {n for n, _ in base.named_parameters()}
    norm = dict(effective_weights(model))["model.norm.weight"]
    assert torch.equal(norm, dict(base.named_parameters())["model.norm.weight"] + 1.0)
    with model.disable_adapter():
        norm = dict(effective_weights(model))["model.norm.weight"]
    assert torch.equal(norm, dict(base.named_parameters())["model.norm.weight"])


def test_refresh_merged_writes_the_base_inside_disable_adapter():
    model, _ = _policy()
    merged = copy.deepcopy(model).merge_and_unload()
    base, _ = load_policy("pocket", recipe=SMOKE, verbose=False)
    with model.disable_adapter():
        assert refresh_merged(merged, model)
    want = dict(base.named_parameters())
    assert all(torch.equal(p, want[n]) for n, p in merged.named_parameters())


def test_the_forward_paths_cache_key_follows_disable_adapter_and_the_generation_config(offline_private_cache,
                                                                                      monkeypatch, capsys):
    """Where ``model.generate`` runs the PEFT layers (a model the plain-torch decoder does not take),
    the key still tells the reference from the policy, and a generation setting the call does not
    override (``repetition_penalty`` in the model's generation config) is part of what was evaluated."""
    monkeypatch.setattr(smalldecode, "supported", lambda model: "this test is about model.generate")
    model, tok = _policy()
    questions = held_out("syllogism", 4)
    adapted = ev.evaluation_key(model, tok, questions, 8, 100)
    ev.evaluate_policy(model, tok, questions, max_new_tokens=8, progress=False)
    capsys.readouterr()
    with model.disable_adapter():
        assert ev.evaluation_key(model, tok, questions, 8, 100) != adapted
        ev.evaluate_policy(model, tok, questions, max_new_tokens=8, progress=False)
    assert "read back" not in capsys.readouterr().out
    model.generation_config.repetition_penalty = 1.5
    assert ev.evaluation_key(model, tok, questions, 8, 100) != adapted
