"""Which arithmetic the CPU path runs: bf16 matrix multiplies where the CPU has bf16 units, fp32 elsewhere.

A CPU with AVX512-BF16 (or AMX) multiplies bf16 matrices through oneDNN faster than fp32 at SmolLM2's
shapes (``benchmarks/bench_rl_speed.py`` times both; benchmarks/README.md, "SmolLM2, chapter 4's step"); one
without them runs bf16 no faster, and then the course stays in fp32. Only the matrix multiplies change: the weights the optimizer updates stay fp32
(master weights), and log-probabilities, norms and softmaxes are taken in fp32. The pocket model
(~1 M parameters) stays fp32 everywhere: its steps cost Python and kernel launches, not arithmetic.

``KIMINA_EDU_PRECISION`` (``auto`` by default, ``fp32``, ``bf16``) is the one setting that forces a path,
so the tests run both on any box; :func:`path_line` says in one line which path runs and why.
"""

from __future__ import annotations

import os

ENV = "KIMINA_EDU_PRECISION"
CHOICES = ("auto", "fp32", "bf16")


def bf16_units() -> str | None:
    """The CPU's bf16 matrix unit (``"AMX-BF16"`` or ``"AVX512-BF16"``) when torch's oneDNN can use it, else None."""
    import torch

    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            flags = next((ln.split(":", 1)[1].split() for ln in fh if ln.startswith("flags")), [])
    except OSError:
        flags = []
    unit = "AMX-BF16" if "amx_bf16" in flags else "AVX512-BF16" if "avx512_bf16" in flags else None
    try:
        usable = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        usable = False
    return unit if usable else None


def requested() -> str:
    """``KIMINA_EDU_PRECISION``, checked: one of :data:`CHOICES`."""
    value = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if value not in CHOICES:
        raise ValueError(f"{ENV}={value!r}: use one of {', '.join(CHOICES)}")
    return value


def matmul_dtype(large: bool, device: str = "cpu"):
    """The dtype of a model's matrix multiplies on the CPU path: ``torch.bfloat16`` for a model whose
    steps cost arithmetic (``large``: :func:`kimina_edu.rollouts.arithmetic_bound`), on a CPU with bf16
    units, unless ``KIMINA_EDU_PRECISION=fp32``; else float32."""
    return choose(large, device)[0]


def choose(large: bool, device: str = "cpu"):
    """``(dtype, why)``: :func:`matmul_dtype` and the reason, in a few words."""
    import torch

    want = requested()
    if str(device) != "cpu":
        return torch.float32, f"the model is on {device}, not this CPU path"
    if want == "fp32":
        return torch.float32, f"{ENV}=fp32"
    unit = bf16_units()
    if want == "bf16":
        if unit is None:
            raise RuntimeError(f"{ENV}=bf16, but this CPU has no bf16 matrix unit torch can use: unset it or use fp32")
        return torch.bfloat16, f"{ENV}=bf16 ({unit})"
    if not large:
        return torch.float32, "a small model: its steps cost Python and kernel launches, not arithmetic"
    if unit is None:
        return torch.float32, "this CPU has no bf16 matrix unit (AVX512-BF16 or AMX)"
    return torch.bfloat16, f"this CPU has {unit}"


def path_line(large: bool, device: str = "cpu") -> str:
    """One line: which arithmetic the sampler and the learner run, and why."""
    import torch

    dtype, why = choose(large, device)
    if dtype == torch.bfloat16:
        return (f"arithmetic: bf16 matrix multiplies, fp32 master weights and log-probs ({why}; "
                f"{ENV}=fp32 forces fp32)")
    return f"arithmetic: fp32 ({why})"
