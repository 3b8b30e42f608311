"""What every kernel parity file shares: the device its tensors live on.

``cpu`` (default): the kernels run in Triton's interpreter, which ``tests/conftest.py`` turns on before anything
imports Triton. ``cuda``: ``test_cuda_rerun.py`` re-runs the parity files in a fresh process with
``ASR_KERNELS_TEST_DEVICE=cuda`` and the interpreter off, so the same checks cover the compiled kernels.
"""

import os

DEVICE = os.environ.get("ASR_KERNELS_TEST_DEVICE", "cpu")
