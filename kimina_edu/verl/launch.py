"""Preflight for a verl run — one clear line per problem, before Ray starts.

    python -m kimina_edu.verl.launch --preset full --data-dir prompt_sets          # checks only
    python -m kimina_edu.verl.launch --preset full --data-dir prompt_sets --run    # checks, then verl
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from kimina_edu.verl.recipe import PRESETS, overrides_list


class PreflightError(RuntimeError):
    pass


def count_gpus() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except ImportError:
        if shutil.which("nvidia-smi") is None:
            return 0
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
        return sum(line.startswith("GPU ") for line in out.splitlines())


def preflight(preset: str, data_dir: str | Path, *, n_gpus: int | None = None, gpus_available: int | None = None,
              lean_ok: bool | None = None) -> None:
    """Raise :class:`PreflightError` with one line for the first thing that would fail."""
    needed = n_gpus or (1 if preset == "one_gpu" else 8)
    have = count_gpus() if gpus_available is None else gpus_available
    if have < needed:
        raise PreflightError(f"preset {preset!r} needs {needed} CUDA GPU(s); this machine has {have}. "
                             "Use a GPU node, or --preset one_gpu on a single card.")
    if lean_ok is None:
        from kimina_edu.lean.client import LeanVerifier

        lean_ok = LeanVerifier().health()
    if not lean_ok:
        url = os.environ.get("LEAN_SERVER_API_URL", "http://localhost:8000")
        raise PreflightError(f"no kimina-lean-server answers at {url}/health. Start one: "
                             "docker run -d -p 8000:8000 projectnumina/kimina-lean-server:2.0.0 "
                             "and export LEAN_SERVER_API_URL=http://localhost:8000")
    for split in ("train", "test"):
        path = Path(data_dir) / f"{split}.parquet"
        if not path.exists():
            raise PreflightError(f"missing {path}. Build it: python -c \"from kimina_edu.verl.data import prepare_data; "
                                 f"prepare_data('{data_dir}', online=True)\"")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=PRESETS, default="full")
    parser.add_argument("--data-dir", default="prompt_sets")
    parser.add_argument("--run", action="store_true", help="after the checks, exec verl with the recipe overrides")
    args, extra = parser.parse_known_args(argv)
    try:
        preflight(args.preset, args.data_dir)
    except PreflightError as exc:
        print(f"preflight failed: {exc}", file=sys.stderr)
        return 1
    print("preflight ok")
    if args.run:
        cmd = [sys.executable, "-m", "verl.trainer.main_ppo", *overrides_list(args.preset, data_dir=args.data_dir), *extra]
        os.execvp(cmd[0], cmd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
