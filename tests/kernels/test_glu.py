"""Parity of the fused GLU kernel with its reference, ``torch.nn.functional.glu`` and fp32 math.

On a CPU-only machine the kernels run under Triton's interpreter (``tests.kernels.support``);
``test_cuda_rerun.py`` re-runs this file with compiled kernels on a GPU.
"""

import importlib

import pytest
import torch
import torch.nn.functional as F

from asr_kernels import (
    AUTO_KERNELS,
    GLU,
    _dispatch,
    count_calls,
    glu,
    kernels_choice,
    set_kernels,
    triton_available,
    use_kernels,
)
from asr_kernels.glu import glu_kernel, glu_reference
from tests.kernels.support import DEVICE, kernels_are_interpreted_on_cpu

# The module itself, for monkeypatching its tile sizes; `asr_kernels.glu` the attribute is the function.
glu_module = importlib.import_module("asr_kernels.glu")

# (..., 2C): a single pair, primes, a power of two, just under and just over one.
SHAPES = [(1, 1, 2), (3, 7, 2 * 13), (2, 31, 2 * 64), (5, 17, 2 * 127), (2, 3, 2 * 257)]
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
HALF_DTYPES = [torch.bfloat16, torch.float16]

# Kernel vs an eager implementation run in the same dtype.
# fp32 / fp64: both sides compute in that precision and differ only in their exp / sigmoid (measured under
#   the interpreter: 1.7e-6 absolute in fp32 on values up to ~10, 9e-16 in fp64). fp32 allows 1e-5 because on
#   CUDA tl.exp is ex2.approx.f32 (~2 ulp) after rounding b * log2(e), an error that grows with |b| and reaches
#   grad_b through 1 - sigmoid(b); still 100x tighter than a kernel that computed in bf16 or fp16 could pass.
# bf16 / fp16: the kernel rounds once, at the store. Eager rounds sigmoid(b) to the dtype first, and near
#   saturation 1 - sigmoid(b) then loses every bit, so eager's grad_b is off by up to ~eps * |grad_out * a|
#   however small grad_b is (measured with these inputs, beyond the rtol: 1.5e-2 in bf16, 2.6e-3 in fp16, for
#   both glu_reference and F.glu on the CPU). That is eager's error, not the kernel's; test_half_precision_kernel_is_within_one_ulp_of_fp32_math
#   is the tight check for these dtypes.
TOLERANCE_VS_EAGER = {
    torch.float64: {"rtol": 1e-12, "atol": 1e-12},
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
    torch.bfloat16: {"rtol": 1.6e-2, "atol": 3e-2},
    torch.float16: {"rtol": 2e-3, "atol": 5e-3},
}


_kernels_are_interpreted_on_cpu = kernels_are_interpreted_on_cpu(glu_module)


def make_hidden(shape, dtype=torch.float32, seed=0, device=DEVICE):
    """The pointwise-conv output (..., 2C). Scaled by 2 so some gates sit near saturation (|b| > 5)."""
    generator = torch.Generator().manual_seed(seed)
    return (2 * torch.randn(shape, generator=generator)).to(device=device, dtype=dtype)


def make_grad_out(shape, dtype=torch.float32, seed=1, device=DEVICE):
    """An upstream gradient for an output of (..., C), given the input shape (..., 2C)."""
    generator = torch.Generator().manual_seed(seed)
    out_shape = (*shape[:-1], shape[-1] // 2)
    return torch.randn(out_shape, generator=generator).to(device=device, dtype=dtype)


def output_and_input_grad(fn, h, grad_out):
    h = h.detach().requires_grad_()
    out = fn(h)
    out.backward(grad_out)
    return out.detach(), h.grad


def assert_matches(fn_expected, h, grad_out, **tolerance):
    out, grad_h = output_and_input_grad(glu_kernel, h, grad_out)
    expected_out, expected_grad_h = output_and_input_grad(fn_expected, h, grad_out)
    assert out.dtype == expected_out.dtype and grad_h.dtype == expected_grad_h.dtype
    torch.testing.assert_close(out, expected_out, **tolerance)
    torch.testing.assert_close(grad_h, expected_grad_h, **tolerance)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_kernel_matches_glu_reference(shape, dtype):
    assert_matches(
        glu_reference, make_hidden(shape, dtype), make_grad_out(shape, dtype), **TOLERANCE_VS_EAGER[dtype]
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_kernel_matches_torch_functional_glu(shape, dtype):
    assert_matches(F.glu, make_hidden(shape, dtype), make_grad_out(shape, dtype), **TOLERANCE_VS_EAGER[dtype])


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_half_precision_kernel_is_within_one_ulp_of_fp32_math(shape, dtype):
    # The kernel computes in fp32 and rounds once; so does this oracle. Two roundings of fp32 values a few fp32
    # ulp apart land at most one ulp of the dtype apart: eps relative, or eps * tiny among subnormals.
    h, grad_out = make_hidden(shape, dtype), make_grad_out(shape, dtype)
    out, grad_h = output_and_input_grad(glu_kernel, h, grad_out)
    oracle_out, oracle_grad_h = output_and_input_grad(glu_reference, h.float(), grad_out.float())
    finfo = torch.finfo(dtype)
    one_ulp = {"rtol": finfo.eps, "atol": finfo.eps * finfo.tiny}
    torch.testing.assert_close(out, oracle_out.to(dtype), **one_ulp)
    torch.testing.assert_close(grad_h, oracle_grad_h.to(dtype), **one_ulp)


def test_gradcheck_in_float64():
    h = make_hidden((2, 3, 2 * 5), torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(glu_kernel, (h,))


def test_ragged_tiles_are_masked_at_every_edge(monkeypatch):
    # Default tiles cover these small shapes in one program; shrink them so rows (85 = 21 * 4 + 1) and
    # channels (127 = 7 * 16 + 15) both end in a partial tile.
    monkeypatch.setattr(glu_module, "_MAX_BLOCK_C", 16)
    monkeypatch.setattr(glu_module, "_TILE_ELEMENTS", 64)
    shape = (5, 17, 2 * 127)
    assert glu_module.launch_config(5 * 17, 127)[:2] == (4, 16)
    assert_matches(
        glu_reference, make_hidden(shape), make_grad_out(shape), **TOLERANCE_VS_EAGER[torch.float32]
    )


def test_strided_views_match_without_being_made_contiguous():
    # Rows padded to a wider buffer (row stride 2C + 6), and a channels-first (B=1, 2C, T) conv output seen as
    # (B, T, 2C): channel stride T. Both flatten to (R, 2C) as views, so the kernel reads them in place.
    padded = make_hidden((3, 7, 2 * 13 + 6))[..., : 2 * 13]
    channels_first = make_hidden((1, 2 * 13, 7)).transpose(1, 2)
    for h in (padded, channels_first):
        assert not h.is_contiguous()
        assert h.reshape(-1, 2 * 13).data_ptr() == h.data_ptr()
        assert_matches(glu_reference, h, make_grad_out(h.shape), **TOLERANCE_VS_EAGER[torch.float32])


def test_stride_zero_upstream_gradient_from_sum_matches():
    # .sum().backward() hands backward an expanded gradient whose strides are all 0.
    h = make_hidden((2, 5, 2 * 11)).requires_grad_()
    glu_kernel(h).sum().backward()
    h_reference = h.detach().requires_grad_()
    glu_reference(h_reference).sum().backward()
    torch.testing.assert_close(h.grad, h_reference.grad, **TOLERANCE_VS_EAGER[torch.float32])


# The interpreter evaluates tl.exp with numpy, which warns where exp(-b) overflows to inf; that is the case tested.
@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_saturated_gates_give_finite_outputs_and_gradients(dtype):
    # exp(-b) overflows fp32 for b < -88; sigmoid must reach 0 (and 1 for large b) without inf / inf.
    a = torch.tensor([[1.5, -2.0, 3.0, 0.5]], device=DEVICE, dtype=dtype)
    b = torch.tensor([[-1e4, -100.0, 100.0, 1e4]], device=DEVICE, dtype=dtype)
    h = torch.cat([a, b], dim=-1)
    out, grad_h = output_and_input_grad(glu_kernel, h, torch.ones_like(a))
    assert torch.isfinite(out).all() and torch.isfinite(grad_h).all()
    torch.testing.assert_close(out, torch.tensor([[0.0, 0.0, 3.0, 0.5]], device=DEVICE, dtype=dtype))
    torch.testing.assert_close(grad_h, torch.tensor([[0, 0, 1, 1, 0, 0, 0, 0]], device=DEVICE, dtype=dtype))


def test_backward_saves_only_the_input_and_recomputes_the_gate():
    h = make_hidden((2, 3, 2 * 7)).requires_grad_()
    out = glu_kernel(h)
    saved = out.grad_fn.saved_tensors
    assert len(saved) == 1
    assert saved[0].data_ptr() == h.data_ptr() and saved[0].shape == h.shape


def test_double_backward_is_refused_rather_than_silently_wrong():
    # A gradient of the gradient (e.g. gradgradcheck, gradient penalties) must raise, not return zeros.
    h = make_hidden((1, 2, 2 * 3), torch.float64).requires_grad_()
    grad_out = make_grad_out(h.shape, torch.float64).requires_grad_()
    (grad_h,) = torch.autograd.grad(glu_kernel(h), h, grad_out, create_graph=True)
    with pytest.raises(RuntimeError, match=r"backward through asr_kernels.glu_backward.*no autograd formula"):
        grad_h.sum().backward()


@pytest.mark.parametrize("shape", [(0, 2 * 4), (2, 0, 2 * 3), (3, 0)], ids=str)
def test_empty_inputs_give_empty_outputs_and_gradients(shape):
    out, grad_h = output_and_input_grad(glu_kernel, make_hidden(shape), make_grad_out(shape))
    assert out.shape == (*shape[:-1], shape[-1] // 2)
    assert grad_h.shape == shape


@pytest.mark.parametrize("interpreter", ["1", None])
def test_odd_channels_are_rejected_with_the_shape_and_a_fix(monkeypatch, interpreter):
    if interpreter is None:
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    h = torch.randn(2, 3, 2 * 13 + 1)
    with pytest.raises(ValueError, match=r"\(2, 3, 27\) has odd size 27.*2 \* C"):
        glu(h)
    with pytest.raises(ValueError, match="odd size 27"):
        glu_reference(h)


def test_glu_runs_the_kernel_where_triton_can_run():
    h = make_hidden((2, 3, 2 * 5)).requires_grad_()
    assert triton_available(h)
    assert type(glu(h).grad_fn).__name__ == "asr_kernels_gluBackward"


def test_reference_choice_skips_the_kernel_and_triton_choice_refuses_what_it_cannot_run(monkeypatch):
    h = make_hidden((2, 3, 2 * 5)).requires_grad_()
    with use_kernels("reference"):
        assert type(glu(h).grad_fn).__name__ == "MulBackward0"
    with use_kernels("triton"):
        assert "asr_kernels_glu" in type(glu(h).grad_fn).__name__
        with pytest.raises(RuntimeError, match=r"glu.s kernel does not cover.*int64"):
            glu(torch.zeros(2, 4, dtype=torch.int64, device=DEVICE))
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        with pytest.raises(
            RuntimeError, match=r"glu cannot run its Triton kernel: the tensor is on cpu.*TRITON_INTERPRET"
        ):
            glu(torch.zeros(2, 4))
    assert kernels_choice() == "triton", "use_kernels restores the previous choice (conftest: triton)"
    with use_kernels("auto"):  # on CUDA as AUTO_KERNELS says; the reference on the CPU, even interpreted
        kernel = DEVICE == "cuda" and "glu" in AUTO_KERNELS
        expected = "asr_kernels_gluBackward" if kernel else "MulBackward0"
        assert type(glu(h).grad_fn).__name__ == expected
    with pytest.raises(ValueError, match="kernels must be one of auto, reference, triton, got 'cuda'"):
        set_kernels("cuda")


def test_calls_are_counted_on_both_paths():
    h = make_hidden((2, 3, 2 * 5))
    with count_calls() as calls:
        glu(h)
        with use_kernels("reference"):
            GLU()(h)
    assert calls == {"glu": 2}


def test_the_kernel_path_compiles_without_a_graph_break():
    h = make_hidden((2, 3, 2 * 5)).requires_grad_()
    explanation = torch._dynamo.explain(lambda x: glu(2 * x) + 1)(h)
    assert explanation.graph_break_count == 0
    assert explanation.graph_count == 1


def test_glu_falls_back_to_the_reference_on_cpu_without_the_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    h = make_hidden((2, 3, 2 * 5), device="cpu").requires_grad_()
    assert not triton_available(h)
    with use_kernels("auto"):
        out = glu(h)
    assert type(out.grad_fn).__name__ == "MulBackward0"  # glu_reference's a * sigmoid(b)
    torch.testing.assert_close(out, F.glu(h), rtol=0, atol=0)


@pytest.mark.parametrize("value", ["0", "", "false"])
def test_interpreter_is_off_unless_the_variable_says_true(monkeypatch, value):
    monkeypatch.setenv("TRITON_INTERPRET", value)
    assert not triton_available(torch.zeros(2, device="cpu"))


def test_triton_is_unavailable_without_triton_or_on_other_devices(monkeypatch):
    assert not triton_available(torch.zeros(2, device="meta"))
    monkeypatch.setattr(_dispatch, "HAS_TRITON", False)
    assert not triton_available(make_hidden((1, 2)))


@pytest.mark.kernels("auto")
def test_other_dims_use_the_reference():
    h = make_hidden((3, 2 * 7, 5)).requires_grad_()
    out = glu(h, dim=1)
    assert type(out.grad_fn).__name__ == "MulBackward0"
    torch.testing.assert_close(out, F.glu(h, dim=1), **TOLERANCE_VS_EAGER[torch.float32])


def test_module_is_a_drop_in_for_nn_glu():
    h = make_hidden((2, 9, 2 * 8))
    module = GLU(dim=-1)
    assert repr(module) == repr(torch.nn.GLU(dim=-1))
    torch.testing.assert_close(module(h), torch.nn.GLU(dim=-1)(h), **TOLERANCE_VS_EAGER[torch.float32])
