"""Triton kernels for the ASR models, one file per op: reference, kernel(s), launcher, custom op, module.

Each op runs its Triton kernel or its plain-PyTorch reference by the rule in ``_dispatch.py``
(``set_kernels("auto" | "reference" | "triton")``).
"""

from asr_kernels._dispatch import (
    KERNEL_CHOICES,
    built_for_interpreter,
    count_calls,
    kernels_choice,
    set_kernels,
    triton_available,
    use_kernels,
)
from asr_kernels.glu import GLU, glu

__all__ = [
    "GLU",
    "KERNEL_CHOICES",
    "built_for_interpreter",
    "count_calls",
    "glu",
    "kernels_choice",
    "set_kernels",
    "triton_available",
    "use_kernels",
]
