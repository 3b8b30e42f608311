"""Triton kernels for the ASR models, one file per op: reference, kernel(s), launcher, autograd.Function, module.

Each op falls back to its plain-PyTorch reference where Triton cannot run (see ``_dispatch.py``).
"""

from asr_kernels._dispatch import triton_available
from asr_kernels.glu import GLU, glu

__all__ = ["GLU", "glu", "triton_available"]
