"""Triton kernels for the ASR models, one file per op: reference, kernel(s), launcher, custom op, module.

Each op runs its Triton kernel or its plain-PyTorch reference by the rule in ``_dispatch.py``
(``set_kernels("auto" | "reference" | "triton")``; ``auto`` runs the kernels of ``AUTO_KERNELS`` on CUDA).
"""

from asr_kernels._dispatch import (
    AUTO_KERNELS,
    KERNEL_CHOICES,
    OPS,
    auto_runs_kernel,
    built_for_interpreter,
    count_calls,
    kernel_ops,
    kernels_choice,
    set_kernels,
    triton_available,
    use_kernels,
)
from asr_kernels._precision import in_input_dtype
from asr_kernels.glu import GLU, glu

__all__ = [
    "AUTO_KERNELS",
    "GLU",
    "KERNEL_CHOICES",
    "OPS",
    "auto_runs_kernel",
    "built_for_interpreter",
    "count_calls",
    "glu",
    "in_input_dtype",
    "kernel_ops",
    "kernels_choice",
    "set_kernels",
    "triton_available",
    "use_kernels",
]
