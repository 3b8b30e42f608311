"""asr_kernels._precision: an op kept in its input's dtype under autocast, autocast itself left as it was."""

from __future__ import annotations

import torch

from asr_kernels import in_input_dtype


def product(x: torch.Tensor) -> torch.Tensor:
    return x.prod(dim=-1)  # on CPU autocast's float32 list (CUDA's widens softplus and softmax the same way)


def test_an_op_autocast_widens_keeps_the_input_dtype_and_value():
    x = torch.rand(4, 8, dtype=torch.bfloat16) + 0.5
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert product(x).dtype == torch.float32  # what autocast does on its own
        kept = in_input_dtype(product, x)
        assert torch.is_autocast_enabled("cpu")  # on again after the op
        assert product(x).dtype == torch.float32
    assert kept.dtype == torch.bfloat16
    assert torch.equal(kept, product(x))  # the op as it runs without autocast


def test_without_autocast_the_op_runs_as_it_is():
    x = torch.rand(3, 5, dtype=torch.float64)
    assert (
        torch.equal(in_input_dtype(product, x), product(x))
        and in_input_dtype(product, x).dtype == torch.float64
    )


def test_under_torch_compile_the_graph_keeps_the_dtype():
    compiled = torch.compile(lambda x: in_input_dtype(product, x * 2), backend="aot_eager", fullgraph=True)
    x = torch.rand(2, 6, dtype=torch.bfloat16) + 0.5
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert compiled(x).dtype == torch.bfloat16
