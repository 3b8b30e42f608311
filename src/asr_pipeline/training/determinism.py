"""``run.deterministic`` (``--deterministic``): a run whose weights are bitwise the same every time it runs
with the same config, data, world size and machine type.

What the run already fixes on its own: the batch plan is a pure function of (data, seed, epoch)
(``data.sampler``), augmentation draws come from seeded generators (``data.audio_dataset``, the loaders'
per-rank generators), initial weights from ``run.seed`` on every rank, and rank-dependent dropout from
``run.seed + 1 + rank``. What ``deterministic`` adds, in every rank before anything is built:

- Python's ``random`` and NumPy's global generator seeded from ``run.seed`` (for code outside ours, e.g. a
  model option that draws from them);
- ``torch.use_deterministic_algorithms(True)``: an op without a deterministic implementation raises
  instead of silently varying (on CUDA, e.g. ``index_add_`` / ``scatter_add_`` backward on float);
- cuDNN: ``deterministic = True`` and ``benchmark = False`` (no autotuner picking kernels by timing);
- CUDA: ``CUBLAS_WORKSPACE_CONFIG=:4096:8``, which cuBLAS needs for reproducible GEMMs; it must be in the
  environment before the first CUDA call, so the launcher sets it for the workers (``launch_training``) and
  ``apply`` sets it too for a worker started by hand.

Costs: some CUDA kernels are slower in their deterministic form; CPU training is unaffected. The settings in
force are written as a "deterministic" event. Bitwise equality needs the same thread count per rank
(``run.threads_per_rank``) as well: reductions split across threads add in a different order.
"""

from __future__ import annotations

import os
import random
from typing import Any

import numpy as np
import torch

CUBLAS_WORKSPACE_ENV = "CUBLAS_WORKSPACE_CONFIG"
CUBLAS_WORKSPACE_VALUE = ":4096:8"


def environment(deterministic: bool) -> dict[str, str]:
    """The environment a deterministic run's workers need (before CUDA starts); {} otherwise."""
    if not deterministic:
        return {}
    return {CUBLAS_WORKSPACE_ENV: os.environ.get(CUBLAS_WORKSPACE_ENV, CUBLAS_WORKSPACE_VALUE)}


def apply(seed: int) -> dict[str, Any]:
    """Put this process in deterministic mode (module docstring); returns the settings in force."""
    os.environ.setdefault(CUBLAS_WORKSPACE_ENV, CUBLAS_WORKSPACE_VALUE)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    return settings()


def settings() -> dict[str, Any]:
    """The determinism settings of this process, as the "deterministic" event records them."""
    return {
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        CUBLAS_WORKSPACE_ENV: os.environ.get(CUBLAS_WORKSPACE_ENV),
        "threads": torch.get_num_threads(),
    }


__all__ = ["CUBLAS_WORKSPACE_ENV", "CUBLAS_WORKSPACE_VALUE", "apply", "environment", "settings"]
