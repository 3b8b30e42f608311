"""How an op's Triton path is entered: ``KernelOp`` holds the op's launcher as a ``torch.library`` custom op,
for ``torch.compile``, and as a plain ``torch.autograd.Function``, for eager calls.

A compiled graph needs the custom op: an opaque node with a fake function for its output's shape (no graph
break), and a registered backward. In eager the custom op is only dispatch: its Python backend wrapper, the
check that its outputs alias no input, the autograd function torch.library builds around it. On the dev box
that cost more CPU time per forward+backward than the autograd engine's own work
(``benchmarks/bench_kernel_overhead.py``). An eager training step on a GPU is bound by how fast the CPU
launches its kernels, so that time was the step's. Eager calls now go through an ``autograd.Function`` over the
same launcher, ``setup_context`` and backward.

A ``KernelOp`` takes its custom op inside a ``torch.compile`` trace. It takes it too under any dispatch mode
(fake tensors, or a census of the ops a step dispatches: ``benchmarks/bench_forward_bytes.py`` counts a kernel
as its one op), under a functorch transform (vmap, functionalize), and for a tensor the launcher cannot take as
it is (a subclass, a fake tensor outside its mode, a meta tensor). Otherwise the launcher runs through the
``Function`` when autograd records the call, and alone when it does not (no input needs a gradient, or grad mode
is off). Every argument is given, positionally: the ``Function`` binds no defaults (``inspect`` would cost more
than the call).

A backward runs its own ``KernelOp`` (the backward launcher), so a traced backward holds the backward custom op.
No op has a double backward: a backward op has no autograd formula, and it is called as the custom op whenever
an input needs a gradient (a backward with ``create_graph``), so a second derivative raises rather than coming
out silently zero, on both paths.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

# The tensors a launcher takes as they are; any other (a subclass, a functorch wrapper) goes to the custom op.
_PLAIN = (Tensor, nn.Parameter)


class KernelOp:
    """``asr_kernels::<name>``: ``launcher`` as a custom op (``fake`` gives its output's shape) and, with
    ``backward`` and ``setup_context`` (torch.library's ``register_autograd`` signatures), as an
    ``autograd.Function`` for eager calls."""

    def __init__(
        self,
        name: str,
        launcher: Callable,
        fake: Callable,
        setup_context: Callable | None = None,
        backward: Callable | None = None,
    ) -> None:
        self.launcher = launcher
        self.op = torch.library.custom_op(f"asr_kernels::{name}", launcher, mutates_args=())
        self.op.register_fake(fake)
        self.function: type[torch.autograd.Function] | None = None
        if backward is not None:
            self.op.register_autograd(backward, setup_context=setup_context)

            # Forward and context in one (the older form): a Function with its own setup_context binds every
            # call's arguments to the forward's signature with inspect, which cost more than the rest of it.
            def forward(ctx, *args):
                output = launcher(*args)
                setup_context(ctx, args, output)
                return output

            # named as its grad_fn shows it: asr_kernels_<name>Backward
            self.function = type(
                f"asr_kernels_{name}",
                (torch.autograd.Function,),
                {"forward": staticmethod(forward), "backward": staticmethod(backward)},
            )
        self.__doc__ = launcher.__doc__

    def __call__(self, *args):
        """The op on ``args``, every argument given, positionally."""
        if (
            torch.compiler.is_compiling()
            or torch._C._len_torch_dispatch_stack()
            or torch._C._are_functorch_transforms_active()  # vmap, grad, functionalize: they wrap the tensors
        ):
            return self.op(*args)
        tensors = [arg for arg in args if isinstance(arg, Tensor)]
        # a fake tensor, a wrapper subclass or a meta tensor: the custom op's fake (or the subclass) handles it
        if any(type(t) not in _PLAIN or t.is_meta for t in tensors):
            return self.op(*args)
        if not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors)):
            return self.launcher(*args)  # no graph to record: neither the Function nor the op's autograd
        if self.function is None:  # a backward op inside a create_graph backward: its grad_fn will raise
            return self.op(*args)
        return self.function.apply(*args)
