"""HostReads: the reads of device values back into Python a piece of code makes (each a wait for the GPU)."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode


class HostReads(TorchFunctionMode):
    """Every read of a tensor's value back into Python made under it, and every tensor made from Python
    data (on a GPU, both wait for the device: a copy from pageable host memory synchronizes its stream), as
    (the function, the caller's file:function). Torch's own C++ reads (inside CTC) are not seen."""

    READS = frozenset(
        {
            torch.Tensor.item,
            torch.Tensor.tolist,
            torch.Tensor.__bool__,
            torch.Tensor.__int__,
            torch.Tensor.__float__,
            torch.Tensor.__index__,
            torch.Tensor.cpu,
            torch.Tensor.numpy,
            torch.tensor,
            torch.as_tensor,
            torch.Tensor.new_tensor,
        }
    )

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[tuple[str, str]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        host_made = func in (torch.tensor, torch.as_tensor) and "device" not in (kwargs or {})
        if func in self.READS and not host_made:  # a tensor made on the host from host data: no wait
            caller = sys._getframe(1)
            self.reads.append(
                (func.__name__, f"{Path(caller.f_code.co_filename).name}:{caller.f_code.co_name}")
            )
        return func(*args, **(kwargs or {}))
