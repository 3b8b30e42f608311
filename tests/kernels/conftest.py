"""Kernel parity tests run the Triton path: ``kernels="triton"`` (interpreted on the CPU, where ``auto`` takes
the references), unless a test says otherwise with ``@pytest.mark.kernels("auto")`` or ``use_kernels``."""

import pytest

from asr_kernels import use_kernels


@pytest.fixture(autouse=True)
def _kernels_choice(request):
    marker = request.node.get_closest_marker("kernels")
    with use_kernels(marker.args[0] if marker else "triton"):
        yield
