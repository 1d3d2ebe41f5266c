
import pytest

from kimina_edu.errors import ModelUnavailableError
from kimina_edu.lora import lora_config
from kimina_edu.models import choose_model, load_policy
from kimina_edu.pocket import PocketRecipe
from kimina_edu.rollouts import chat_prompt, generate
from kimina_edu.tiny import tiny_random_llama

SMOKE = PocketRecipe.smoke()


pytestmark = pytest.mark.usefixtures("offline_shared_cache")


def test_load_policy_pocket_generates_and_cuts_at_eos():
    model, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    prompt = chat_prompt(tok, "Consider these statements: 1. All cats are dogs")
    assert prompt.endswith("<|im_start|>assistant\n")
    _, comps = generate(model, tok, [prompt, prompt], max_new_tokens=8, temperature=1.0, num_return_sequences=3, seed=0)
    assert len(comps) == 6
    for c in comps:
        assert 0 < len(c) <= 8
        assert tok.eos_token_id not in c[:-1]


def test_hub_path_by_local_folder(tmp_path):
    """The hub path, without a network: a tiny model saved with save_pretrained, loaded by path."""
    _, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    tiny = tiny_random_llama(vocab_size=len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    tiny.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    model, tok2 = load_policy(str(tmp_path), lora=lora_config(r=4, alpha=8), verbose=False)
    assert model.config.hidden_size == 32
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) > 0
    assert tok2.padding_side == "left"


def test_unknown_model_offline_is_one_clear_line():
    with pytest.raises(ModelUnavailableError) as err:
        choose_model("no-such-org/no-such-model")
    msg = str(err.value)
    assert "\n" not in msg and "MODEL_ID='pocket'" in msg and "huggingface-cli download" in msg
    assert choose_model("auto")[0] == "pocket"


def test_lora_defaults_are_the_articles():
    cfg = lora_config()
    assert (cfg.r, cfg.lora_alpha, cfg.lora_dropout) == (32, 64, 0.0)
    assert set(cfg.target_modules) == {"q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "gate_proj"}


def test_a_fresh_lora_is_a_function_of_the_seed_alone():
    """Two runs of one SEED must start GRPO from the same adapter, whatever drew random numbers
    before (the bug: the fresh LoRA drew from torch's global generator as it stood, so two
    processes with the same seed trained different adapters)."""
    import torch

    from kimina_edu.lora import lora_config

    def lora_weights(seed, noise):
        torch.manual_seed(noise)
        torch.rand(7)  # something earlier in the process drew random numbers
        model, _ = load_policy("pocket", lora=lora_config(), seed=seed, verbose=False)
        return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}

    a, b, c = lora_weights(3, noise=1), lora_weights(3, noise=2), lora_weights(4, noise=1)
    assert all(torch.equal(a[n], b[n]) for n in a)
    assert any(not torch.equal(a[n], c[n]) for n in a)
    state = torch.random.get_rng_state()
    load_policy("pocket", lora=lora_config(), seed=3, verbose=False)
    assert torch.equal(state, torch.random.get_rng_state()), "seeding the adapter leaves the global generator alone"


@pytest.mark.parametrize("contents", [{}, {"notes.txt": "hello"}, {"tokenizer.json": "{}"}, {"config.json": "{}"},
                                      {"config.json": "{}", "model.safetensors": "x"}])
def test_a_folder_without_a_model_is_one_clear_line(tmp_path, contents):
    """MODEL_ID pointing at a folder that holds no model (an empty folder, the wrong folder) used
    to end in a page of tokenizer-conversion traceback; it must say which folder and what to do."""
    for name, text in contents.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ModelUnavailableError) as err:
        load_policy(str(tmp_path), verbose=False)
    msg = str(err.value)
    assert "\n" not in msg and str(tmp_path) in msg and "config.json" in msg and "MODEL_ID='pocket'" in msg
    with pytest.raises(ModelUnavailableError):
        choose_model(str(tmp_path))


def test_a_folder_of_a_model_without_a_chat_template_is_one_clear_line(tmp_path):
    """A base model (say SmolLM2-135M rather than -Instruct) has no chat template: every chapter prompts
    in chat turns, so it is refused before loading, naming what is missing and what to use instead."""
    _, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    tiny = tiny_random_llama(vocab_size=len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    tiny.save_pretrained(tmp_path)
    tok.chat_template = None
    tok.save_pretrained(tmp_path)
    for call in (lambda: choose_model(str(tmp_path)), lambda: load_policy(str(tmp_path), verbose=False)):
        with pytest.raises(ModelUnavailableError) as err:
            call()
        msg = str(err.value)
        assert "\n" not in msg and str(tmp_path) in msg and "chat template" in msg, msg
        assert "Instruct" in msg and "MODEL_ID='pocket'" in msg, msg


def test_a_loaded_tokenizer_without_a_chat_template_is_one_clear_line(tmp_path, monkeypatch):
    """The same refusal where no folder check runs first (a hub id): after the tokenizer loads."""
    from kimina_edu import models

    _, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    tiny = tiny_random_llama(vocab_size=len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    tiny.save_pretrained(tmp_path)
    tok.chat_template = None
    tok.save_pretrained(tmp_path)
    monkeypatch.setattr(models, "base_model_path", lambda *a, **k: str(tmp_path))
    with pytest.raises(ModelUnavailableError) as err:
        load_policy("some-org/some-base-model", verbose=False)
    msg = str(err.value)
    assert "\n" not in msg and "chat template" in msg and "Instruct" in msg, msg


def test_a_folder_whose_weights_file_is_damaged_is_one_clear_line(tmp_path):
    """A garbled safetensors header used to surface as safetensors' own SafetensorError traceback."""
    _, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    tiny = tiny_random_llama(vocab_size=len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    tiny.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[8] = ord("!")  # the header's first byte: JSON's '{'
    weights.write_bytes(bytes(data))
    with pytest.raises(ModelUnavailableError) as err:
        load_policy(str(tmp_path), verbose=False)
    msg = str(err.value)
    assert "\n" not in msg and "model.safetensors" in msg and "damaged" in msg, msg
