"""The plain-torch decoder of small Llamas: model.generate's tokens when greedy, model.generate's
distribution when sampling, on the pocket model with and without its LoRA adapter."""

from __future__ import annotations

import pytest
import torch

from kimina_edu import rollouts, smalldecode
from kimina_edu.lora import lora_config
from kimina_edu.models import load_policy
from kimina_edu.pocket import PocketRecipe
from kimina_edu.rollouts import SamplingSettings, chat_prompt, encode_prompts, generate_ids, sampling_probs
from kimina_edu.tasks import SEEDS, make_entries
from kimina_edu.tiny import tiny_random_llama

SMOKE = PocketRecipe.smoke()
ENTRIES = make_entries("syllogism", 16, SEEDS["rl"])

pytestmark = pytest.mark.usefixtures("offline_shared_cache")


def _by_generate(monkeypatch, *args):
    with monkeypatch.context() as m:
        m.setattr(smalldecode, "supported", lambda model: "the reference is model.generate")
        return generate_ids(*args)


def _tiny():
    model = tiny_random_llama(vocab_size=8, eos_token_id=3, pad_token_id=0)
    return model, type("Tok", (), {"pad_token_id": 0, "eos_token_id": 3})()


@pytest.mark.parametrize("which", ["pocket", "pocket+lora", "tiny"])
def test_greedy_tokens_are_generates(which, monkeypatch):
    """Left padding, prompts of different lengths, rows that stop at different steps, and a LoRA policy
    whose merged weights the decoder reads without merging the model."""
    if which == "tiny":  # random weights, eos = 3 in a vocabulary of 8: rows stop early and at different steps
        model, tok = _tiny()
        g = torch.Generator().manual_seed(1)
        prompt_ids = [torch.randint(4, 8, (n,), generator=g).tolist() for n in (1, 5, 3, 7, 2, 6, 4, 4)]
    else:
        model, tok = load_policy("pocket", recipe=SMOKE, seed=0, verbose=False,
                                 **({"lora": lora_config()} if which == "pocket+lora" else {}))
        if which == "pocket+lora":  # a trained-looking adapter: B is zero at init, which would merge to nothing
            with torch.no_grad():
                for name, p in model.named_parameters():
                    if "lora_B" in name:
                        p.normal_(0, 0.05)
        prompt_ids = encode_prompts(tok, [chat_prompt(tok, e["question"]) for e in ENTRIES[:6]])
    assert smalldecode.supported(model) is None
    settings = SamplingSettings(max_new_tokens=24, temperature=0.0)
    ours = generate_ids(model, tok, prompt_ids, settings)
    assert ours == _by_generate(monkeypatch, model, tok, prompt_ids, settings)
    if which == "tiny":
        assert len({len(row) for row in ours}) > 1, "the rows must finish at different steps for this test to mean anything"


@pytest.mark.parametrize("which", ["pocket", "tiny"])
def test_a_shared_prefix_run_once_and_finished_rows_dropped_write_generates_tokens(which, monkeypatch):
    """The real-model options (``share_prefix``, ``drop_finished``): prompts that share their first tokens
    (a system turn) with their own tails of different lengths, rows that finish at different steps (so
    the batch is compacted more than once); greedy, the tokens must be ``model.generate``'s."""
    if which == "tiny":  # (this seed's rows stop after 1, 1, 2, 4, 4, 6, 24 and 24 tokens)
        model = tiny_random_llama(vocab_size=8, seed=2, eos_token_id=3, pad_token_id=0)
        tok = type("Tok", (), {"pad_token_id": 0, "eos_token_id": 3})()
        g = torch.Generator().manual_seed(0)
        shared = torch.randint(4, 8, (5,), generator=g).tolist()
        prompt_ids = [shared + torch.randint(4, 8, (n,), generator=g).tolist() for n in (1, 4, 2, 6, 3, 1, 5, 2)]
    else:
        model, tok = load_policy("pocket", recipe=SMOKE, seed=0, verbose=False)
        prompt_ids = encode_prompts(tok, [chat_prompt(tok, e["question"]) for e in ENTRIES[:6]])
    width = max(map(len, prompt_ids))
    ids = torch.tensor([[tok.pad_token_id] * (width - len(r)) + r for r in prompt_ids])
    attn = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in prompt_ids])
    settings = SamplingSettings(max_new_tokens=24, temperature=0.0)
    decoder = smalldecode.SmallLlama.from_model(model)
    ours = decoder.decode(ids, attn, settings, tok.eos_token_id, share_prefix=True, drop_finished=True)
    theirs = _by_generate(monkeypatch, model, tok, prompt_ids, settings)
    assert [rollouts.trim_completion(r, tok.eos_token_id, tok.pad_token_id) for r in ours] == theirs
    assert smalldecode._common_prefix(prompt_ids, width) >= 5
    if which == "tiny":
        lengths = sorted(len(row) for row in ours)
        assert len(set(lengths)) >= 4 and lengths[len(lengths) // 2] < lengths[-1], \
            f"rows must finish at several steps, half of them early, for the batch to be compacted: {lengths}"
        # the matmul sizes the benchmark's "limit at that batch" is timed at: the shared run (one row of
        # 5 tokens, no logits), the prefill (8 rows of their own tokens), then one row per live row a step
        rows = decoder.matmul_rows
        assert rows[0] == (5, 0) and rows[1] == (8 * (width - 5), 8)
        steps = [m for m, _ in rows[2:]]
        assert [m for _, m in rows[2:]] == steps and len(steps) == lengths[-1] - 1
        assert steps == sorted(steps, reverse=True) and steps[-1] < 8, f"the batch was never compacted: {steps}"
        assert sum(steps) >= sum(lengths) - 8


@pytest.mark.parametrize("share_prefix", [False, True])
def test_the_first_logits_are_the_models(share_prefix):
    """The prefill's last-position logits against ``model.forward`` on the same left-padded batch (the
    shared system turn run once, or with every prompt)."""
    model, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    prompt_ids = encode_prompts(tok, [chat_prompt(tok, e["question"]) for e in ENTRIES[:4]])
    width = max(map(len, prompt_ids))
    ids = torch.tensor([[tok.pad_token_id] * (width - len(r)) + r for r in prompt_ids])
    attn = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in prompt_ids])
    with torch.no_grad():
        theirs = model(input_ids=ids, attention_mask=attn, position_ids=(attn.cumsum(-1) - 1).clamp(min=0)).logits[:, -1]
    captured = {}
    real_draw = smalldecode.draw_next

    def spy(logits, settings):
        captured.setdefault("first", logits.clone())
        return real_draw(logits, settings)

    smalldecode.draw_next = spy
    try:
        smalldecode.SmallLlama.from_model(model).decode(ids, attn, SamplingSettings(max_new_tokens=1, temperature=0.0),
                                                         tok.eos_token_id, share_prefix=share_prefix)
    finally:
        smalldecode.draw_next = real_draw
    assert torch.allclose(captured["first"], theirs, atol=1e-4), (captured["first"] - theirs).abs().max()


@pytest.mark.parametrize(("temperature", "top_p", "min_p"), [(0.7, 0.95, 0.1), (0.7, 0.95, 0.0), (1.0, 1.0, 0.1),
                                                             (0.7, 0.9, 0.05), (2.0, 0.5, 0.0), (1.0, 1.0, 0.0)])
def test_the_candidates_are_the_sampling_distribution(temperature, top_p, min_p):
    """``candidates`` ranks only what min-p keeps; scattered back over the vocabulary it must be
    ``sampling_probs`` (generate's warpers: tests/test_rollouts.py), flat and peaked rows alike."""
    g = torch.Generator().manual_seed(0)
    logits = torch.cat([torch.randn(6, 300, generator=g) * 3, torch.randn(2, 300, generator=g) * 0.01])
    settings = SamplingSettings(max_new_tokens=1, temperature=temperature, top_p=top_p, min_p=min_p)
    probs, ids = smalldecode.candidates(logits, settings)
    full = torch.zeros_like(logits).scatter(1, ids, probs)
    expected = sampling_probs(logits, settings)
    assert torch.allclose(full, expected, atol=1e-6)
    assert ((full == 0) == (expected == 0)).all(), "the same tokens must be ruled out"


def test_draws_follow_the_distribution():
    """20,000 draws of one row: each token's frequency within 1.5 points of its probability, and a
    token the warpers rule out never drawn."""
    logits = torch.tensor([[2.0, 1.5, 1.0, 0.0, -1.0, -5.0]]).repeat(20_000, 1)
    settings = SamplingSettings(max_new_tokens=1, temperature=1.0, top_p=0.95, min_p=0.05)
    torch.manual_seed(0)
    counts = torch.bincount(smalldecode.draw_next(logits, settings), minlength=6).float() / 20_000
    expected = sampling_probs(logits[:1], settings)[0]
    assert (counts - expected).abs().max() < 0.015, (counts, expected)
    assert counts[expected == 0].sum() == 0


def test_what_it_does_not_cover_goes_to_generate():
    model, _ = _tiny()
    assert smalldecode.supported(model) is None
    assert "dtype" in smalldecode.supported(model.to(torch.bfloat16))
    assert "activation" in smalldecode.supported(tiny_random_llama(hidden_act="gelu"))
    assert "biases" in smalldecode.supported(tiny_random_llama(attention_bias=True))
    assert "not a Llama" in smalldecode.supported(torch.nn.Linear(2, 2))
    assert rollouts.arithmetic_bound(model) is False
