"""Chapter 4 keeps what it trained: its LoRA adapter on disk, and a description — the base model, then each
adapter in order — from which transformers and PEFT alone rebuild the very policy the run ended with."""

import json
import os
import subprocess
import sys

import pytest
import torch

from kimina_edu.lora import lora_config
from kimina_edu.models import load_policy, save_policy

pytestmark = pytest.mark.usefixtures("offline_shared_cache")

# The learner's way back, as chapter 4 shows it: transformers and PEFT, nothing of the course's package. It runs
# in a fresh interpreter so that nothing the course imported can help it; it fails if kimina_edu got imported.
REBUILD = """
import json, sys
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM


def load(spec):
    model = AutoModelForCausalLM.from_pretrained(spec["base"], dtype=getattr(torch, spec["dtype"]))
    *merged, last = spec["adapters"]
    for folder in merged:  # each earlier adapter becomes part of the base
        model = PeftModel.from_pretrained(model, folder).merge_and_unload()
    return PeftModel.from_pretrained(model, last).eval()


specs, ids, out = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
with torch.no_grad():
    logits = [load(spec)(torch.tensor(ids)).logits for spec in specs]
assert not any(name.startswith("kimina_edu") for name in sys.modules), "the rebuild must need transformers + PEFT only"
torch.save(logits, out)
"""


def _rebuilt_logits(specs, ids, tmp_path):
    """The logits of each described policy, rebuilt in a fresh interpreter."""
    out = tmp_path / "logits.pt"
    subprocess.run([sys.executable, "-c", REBUILD, json.dumps(specs), json.dumps(ids), str(out)], check=True,
                   env={**os.environ, "HF_HUB_OFFLINE": "1"}, cwd=tmp_path)
    return torch.load(out)


def _nudge_lora(model, seed):
    """What training does to a fresh LoRA: its B matrices leave zero, so the adapter changes the logits."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name and p.requires_grad:
                p.add_(0.05 * torch.randn(p.shape, generator=g))


@pytest.fixture
def trained_like_chapter_4(tmp_path):
    """Chapter 4's policy, shaped as it builds it: the pocket model, a warm-up adapter merged in, a fresh LoRA on
    top — both adapters moved off their initial (no-op) weights, as SFT and GRPO move them."""
    warm, tok = load_policy("pocket", lora=lora_config(r=4, alpha=8), seed=1, verbose=False)
    _nudge_lora(warm, seed=1)
    warm.save_pretrained(tmp_path / "warmup")
    policy, tok = load_policy("pocket", adapter=tmp_path / "warmup", lora=lora_config(r=4, alpha=8), seed=2,
                              verbose=False)
    _nudge_lora(policy, seed=2)
    return policy.eval(), tok, tmp_path / "warmup"


def test_the_saved_policy_rebuilds_with_transformers_and_peft_alone(trained_like_chapter_4, tmp_path):
    from kimina_edu.models import base_model_path

    policy, tok, warmup = trained_like_chapter_4
    spec = save_policy(policy, tmp_path / "grpo_run" / "policy", base=base_model_path("pocket"), merged=[warmup])
    assert spec["base"] == str(base_model_path("pocket")) and spec["dtype"] == "float32"
    assert spec["adapters"] == [str(warmup.resolve()), str((tmp_path / "grpo_run" / "policy").resolve())]
    ids = [tok("<|im_start|>user\nAll cats are dogs. Does it follow?<|im_end|>\n")["input_ids"]]
    with torch.no_grad():
        mine = policy(torch.tensor(ids)).logits
    # the warm-up adapter is part of the policy: left out of the list, the logits are another model's
    rebuilt, without = _rebuilt_logits([spec, {**spec, "adapters": spec["adapters"][1:]}], ids, tmp_path)
    assert torch.allclose(rebuilt, mine, atol=1e-5), (rebuilt - mine).abs().max()
    assert (without - mine).abs().max() > 1e-3


def test_saving_a_policy_without_an_adapter_says_what_to_pass(tmp_path):
    plain, _ = load_policy("pocket", verbose=False)
    with pytest.raises(ValueError, match="LoRA"):
        save_policy(plain, tmp_path / "policy", base="pocket")


def test_a_hub_id_stays_a_hub_id_and_a_folder_becomes_absolute(trained_like_chapter_4, tmp_path, monkeypatch):
    policy, _, warmup = trained_like_chapter_4
    spec = save_policy(policy, tmp_path / "p", base="HuggingFaceTB/SmolLM-135M-Instruct", merged=[warmup])
    assert spec["base"] == "HuggingFaceTB/SmolLM-135M-Instruct"
    (tmp_path / "my_base").mkdir()
    monkeypatch.chdir(tmp_path)
    spec = save_policy(policy, "q", base="my_base", merged=["warmup"])  # relative folders, as a learner types them
    assert spec["base"] == str(tmp_path / "my_base")
    assert spec["adapters"] == [str(tmp_path / "warmup"), str(tmp_path / "q")]
