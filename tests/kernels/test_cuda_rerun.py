"""The kernel parity files again, with compiled kernels on a GPU (``ASR_KERNELS_TEST_DEVICE=cuda``)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.kernels.support import DEVICE

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.skipif(DEVICE != "cpu", reason="this is the CUDA re-run itself")
def test_parity_holds_for_the_compiled_kernels_on_cuda():
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env["ASR_KERNELS_TEST_DEVICE"] = "cuda"
    files = sorted(
        str(path) for path in Path(__file__).parent.glob("test_*.py") if path.name != Path(__file__).name
    )
    command = [sys.executable, "-m", "pytest", *files, "-q", "-p", "no:cacheprovider", "-m", "not gpu"]
    result = subprocess.run(command, env=env, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=3000)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-4000:]
