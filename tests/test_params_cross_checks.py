"""Values that pass a parameter's own range but break the chapter that uses them are refused by the
parameter check, in one line: too few samples for the pass@k the chapter reports, a latency the
chapter divides by, and device strings torch would refuse later (checked with a GPU made visible)."""

import math

import pytest
import torch

from kimina_edu.params import ParameterError, check_params

BASE = {"SMOKE": False, "SEED": 0, "DEVICE": "cpu", "MODEL_ID": "pocket", "OUTPUT_DIR": "."}


def _refusal(**changes) -> str:
    with pytest.raises(ParameterError) as info:
        check_params({**BASE, **changes}, verbose=False)
    text = str(info.value)
    assert "\n" not in text and "parameters cell" in text
    return text


@pytest.mark.parametrize("n", [1, 4, 7])
def test_fewer_samples_than_the_largest_reported_k_are_refused(n):
    """Chapter 9 reports pass@k and best@k for k = 1, 2, 4, 8: pass@8 from 4 samples has no meaning
    (k > n), and the refusal says how many are needed."""
    text = _refusal(N_SAMPLES=n)
    assert "N_SAMPLES" in text and "8" in text and "pass@" in text


def test_enough_samples_pass():
    for n in (8, 9, 32):
        assert check_params({**BASE, "N_SAMPLES": n}, verbose=False)["N_SAMPLES"] == n


@pytest.mark.parametrize("latency", [0, 0.0, 1e-320, -0.0])
def test_a_latency_the_chapter_divides_by_must_be_positive(latency):
    """Chapter 6 draws the ideal throughput WORKERS / LATENCY: zero divides by zero, a denormal gives inf."""
    text = _refusal(LATENCY=latency)
    assert "LATENCY" in text and "WORKERS / LATENCY" in text


def test_a_working_latency_passes_and_its_ideal_is_finite():
    values = check_params({**BASE, "LATENCY": 0.001, "WORKERS": 1024}, verbose=False)
    assert math.isfinite(values["WORKERS"] / values["LATENCY"])


@pytest.fixture
def two_visible_gpus(monkeypatch):
    """This machine has no GPU: make the check see two, as a GPU machine would."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


@pytest.mark.parametrize("device", ["cuda:00", "cuda:01", "cuda:007", "cuda:+1", "cuda:1 "])
def test_device_strings_torch_refuses_are_refused_with_a_visible_gpu(two_visible_gpus, device):
    with pytest.raises(RuntimeError):
        torch.device(device)  # what would happen minutes later, in the first tensor move
    text = _refusal(DEVICE=device)
    assert "DEVICE" in text and repr(device) in text


def test_a_zero_padded_index_is_refused_with_the_canonical_spelling(two_visible_gpus):
    assert "'cuda:0'" in _refusal(DEVICE="cuda:00")
    assert "'cuda:1'" in _refusal(DEVICE="cuda:01")


@pytest.mark.parametrize("device", ["cuda", "cuda:0", "cuda:1"])
def test_canonical_cuda_strings_pass_with_a_visible_gpu(two_visible_gpus, device):
    assert check_params({**BASE, "DEVICE": device}, verbose=False)["DEVICE"] == device
    torch.device(device)  # and torch agrees
