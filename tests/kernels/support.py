"""What every kernel parity file shares: the device its tensors live on, the check that its kernels run in the
interpreter there, and the cases of the ops alike.

``cpu`` (default): the kernels run in Triton's interpreter, which ``tests/conftest.py`` turns on before anything
imports Triton. ``cuda``: ``test_cuda_rerun.py`` re-runs the parity files in a fresh process with
``ASR_KERNELS_TEST_DEVICE=cuda`` and the interpreter off, so the same checks cover the compiled kernels.
"""

import os
from types import ModuleType

import pytest

from asr_kernels import built_for_interpreter

DEVICE = os.environ.get("ASR_KERNELS_TEST_DEVICE", "cpu")

# ((B, T, C), lengths) for the ops that zero padded frames (mask_time, residual_add_mask): one value; T = 1
# fully padded; a full, an all-padded and a partial row at primes; lengths past T near a power of two; 0, 1,
# full and past-T rows together; a channel count just over 256.
MASKED_TIME_CASES = [
    ((1, 1, 1), [1]),
    ((2, 1, 5), [0, 1]),
    ((3, 7, 13), [7, 0, 3]),
    ((2, 31, 64), [40, 16]),
    ((5, 17, 127), [17, 1, 9, 0, 30]),
    ((2, 3, 257), [2, 3]),
]


def kernels_are_interpreted_on_cpu(op_module: ModuleType):
    """An autouse fixture for a parity file of ``op_module``: on ``cpu`` it fails each test, naming the fix,
    when the module's kernels were built for a GPU (``asr_kernels`` imported before ``TRITON_INTERPRET=1``).

    In the file: ``_kernels_are_interpreted_on_cpu = kernels_are_interpreted_on_cpu(op_module)``."""

    @pytest.fixture(autouse=True)
    def _kernels_are_interpreted_on_cpu():
        if DEVICE != "cpu":
            return
        if not built_for_interpreter(op_module):
            pytest.fail(
                "asr_kernels was imported before TRITON_INTERPRET=1 was set, so its kernels were compiled for a "
                "GPU and cannot run on CPU tensors; set TRITON_INTERPRET=1 in tests/conftest.py (or the environment)"
            )

    return _kernels_are_interpreted_on_cpu
