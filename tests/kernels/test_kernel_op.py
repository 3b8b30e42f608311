"""``asr_kernels._kernel_op.KernelOp``: eager calls skip the custom op's dispatch (an ``autograd.Function`` when
autograd records the call, the bare launcher when it does not) and give the custom op's values and gradients;
traces (torch.compile, fake tensors, dispatch modes) see the custom op. GLU stands for every op; each op's own
file tests its values, gradients and double backward."""

from __future__ import annotations

import importlib

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing._internal.two_tensor import TwoTensor
from torch.utils._python_dispatch import TorchDispatchMode

from tests.kernels.support import DEVICE

glu_module = importlib.import_module("asr_kernels.glu")
glu_kernel = glu_module.glu_kernel


def hidden(requires_grad: bool = True) -> torch.Tensor:
    return torch.randn(2, 5, 2 * 6, device=DEVICE, requires_grad=requires_grad)


def test_an_eager_call_with_a_gradient_runs_the_function_and_matches_the_custom_op():
    h = hidden()
    grad_out = torch.randn(2, 5, 6, device=DEVICE)
    out = glu_kernel(h)
    (grad,) = torch.autograd.grad(out, h, grad_out)
    through_op = glu_kernel.op(h)
    (grad_through_op,) = torch.autograd.grad(through_op, h, grad_out)

    assert type(out.grad_fn).__name__ == "asr_kernels_gluBackward"
    assert type(through_op.grad_fn).__name__ == "GeneratedBackwardFor_asr_kernels_glu_defaultBackward"
    torch.testing.assert_close(out, through_op, rtol=0, atol=0)
    torch.testing.assert_close(grad, grad_through_op, rtol=0, atol=0)


def test_a_call_autograd_does_not_record_runs_the_launcher_alone():
    h = hidden()
    with torch.no_grad():
        without_grad_mode = glu_kernel(h)
    without_grad_input = glu_kernel(h.detach())

    assert without_grad_mode.grad_fn is None and without_grad_input.grad_fn is None
    torch.testing.assert_close(without_grad_mode, glu_module._glu_forward(h.detach()), rtol=0, atol=0)


def test_fake_tensors_take_the_custom_ops_fake_and_launch_nothing():
    with FakeTensorMode():
        h = torch.empty(3, 4, 2 * 5, device=DEVICE, requires_grad=True)
        out = glu_kernel(h)
    assert out.shape == (3, 4, 5) and out.dtype == h.dtype


def test_a_dispatch_mode_sees_each_kernel_as_its_one_op():
    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(str(func))
            return func(*args, **(kwargs or {}))

    h = hidden()
    with Ops() as ops:
        out = glu_kernel(h)
    out.sum().backward()
    assert ops.names == ["asr_kernels.glu.default"]
    assert h.grad is not None and h.grad.shape == h.shape


def test_torch_compile_traces_the_custom_op():
    graphs: list[str] = []

    def backend(graph: torch.fx.GraphModule, example_inputs):
        graphs.append(str(graph.graph))
        return graph

    h = hidden()
    torch.compile(glu_kernel, backend=backend, fullgraph=True)(h).sum().backward()
    assert len(graphs) == 1 and "torch.ops.asr_kernels.glu.default" in graphs[0]


def test_wrapped_subclassed_and_meta_tensors_take_the_custom_op():
    # The launcher needs a plain tensor's storage; the custom op knows vmap's batching, subclasses and meta.
    h = hidden(requires_grad=False)
    batched = torch.func.vmap(glu_kernel)(h)
    torch.testing.assert_close(batched, glu_kernel(h), rtol=0, atol=0)

    meta = glu_kernel(torch.empty(3, 4, 2 * 5, device="meta"))
    assert meta.is_meta and meta.shape == (3, 4, 5)

    two = TwoTensor(h, 2 * h)
    out = glu_kernel(two)
    assert type(out) is TwoTensor
    torch.testing.assert_close(out.a, glu_kernel(h), rtol=0, atol=0)
