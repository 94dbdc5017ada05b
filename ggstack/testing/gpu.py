"""Whether the tests have a GPU (``--gpu``). GPU tests without one are skipped, so the patch is
held, never judged on a CPU runner's word. nvidia-smi answers first, else torch where a driver is."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from ggstack.errors import UserError
from ggstack.model import Stack
from ggstack.testing import environment, processes

GPU_MODES = ("auto", "require", "off")
_GPU_DRIVER_PATHS = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/kfd")
_TORCH_PROBE = "import torch; print(torch.cuda.is_available())"


def check_gpu_mode(gpu: str) -> None:
    if gpu not in GPU_MODES:
        raise UserError(f"--gpu must be one of {', '.join(GPU_MODES)}, not {gpu!r}")


def detect_gpu(stack: Stack) -> tuple[bool, str]:
    """(present, how it was found out)."""
    env = environment.base_env(stack)
    listed, said = _nvidia_smi(env)
    if listed:
        return True, listed
    if sys.platform == "linux" and not any(os.path.exists(p) for p in _GPU_DRIVER_PATHS):
        # CUDA (and ROCm) need their kernel driver: without it torch could only say False, slowly.
        return False, "no GPU on this machine (" + "; ".join(
            [said, "no GPU driver: " + ", ".join(_GPU_DRIVER_PATHS)]
        ) + ")"
    python = environment.interpreter(environment.expand(stack.config.tests.gpu or stack.config.tests.cpu, ()), env)
    present, torch_said = _torch(python, env)
    if present:
        return True, torch_said
    return False, "no GPU on this machine (" + "; ".join([said, torch_said]) + ")"


def _nvidia_smi(env: dict[str, str]) -> tuple[str, str]:
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if not smi:
        return "", "nvidia-smi: not found"
    try:
        proc = processes.ask([smi, "-L"], env, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return "", "nvidia-smi: no GPU listed"
    gpus = [line for line in proc.stdout.splitlines() if line.startswith("GPU ")] if proc.returncode == 0 else []
    return (_listed(gpus), "") if gpus else ("", "nvidia-smi: no GPU listed")


def _listed(gpus: list[str]) -> str:
    return f"nvidia-smi: {gpus[0]}" + (f" (+{len(gpus) - 1})" if len(gpus) > 1 else "")


def _torch(python: str, env: dict[str, str]) -> tuple[bool, str]:
    try:
        proc = processes.ask([python, "-c", _TORCH_PROBE], env, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return False, "torch probe failed"
    answer = proc.stdout.strip().splitlines()[-1:] if proc.returncode == 0 else []
    if answer == ["True"]:
        return True, "torch.cuda.is_available() is True"
    return False, "torch.cuda.is_available() is False" if answer else "torch is not importable"
