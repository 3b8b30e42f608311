"""Parity of the fused SwooshL / SwooshR kernels (both forms) with their references and with fp64 math.

On a CPU-only machine the kernels run under Triton's interpreter (``tests.kernels.support``);
``test_cuda_rerun.py`` re-runs this file with compiled kernels on a GPU.
"""

import importlib

import pytest
import torch
import torch.nn.functional as F

from asr_kernels import count_calls, use_kernels
from asr_kernels.swoosh import (
    Swoosh,
    swoosh_l,
    swoosh_l_kernel,
    swoosh_l_reference,
    swoosh_r,
    swoosh_r_kernel,
    swoosh_r_reference,
)
from tests.kernels.support import DEVICE, kernels_are_interpreted_on_cpu

swoosh_module = importlib.import_module("asr_kernels.swoosh")

# side -> (public function, custom op, reference)
SIDES = {
    "l": (swoosh_l, swoosh_l_kernel, swoosh_l_reference),
    "r": (swoosh_r, swoosh_r_kernel, swoosh_r_reference),
}
FORMS = ["paper", "sigmoid"]
# Elementwise on any shape: a single value, primes, a power of two, just under and just over one, and a 4-D
# (B, C, T, F) conv activation as in Zipformer's subsampling.
SHAPES = [(1,), (3, 7, 13), (2, 31, 64), (5, 17, 127), (2, 3, 257), (2, 3, 5, 9)]
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
HALF_DTYPES = [torch.bfloat16, torch.float16]

# Kernel vs the eager reference run in the same dtype.
# fp64: both compute in fp64 and differ in softplus/sigmoid's evaluation (measured: 1.8e-15 absolute; up to
#   3.5e-11 relative only where the slope s - 0.08 cancels to ~1e-5, hence the atol).
# fp32: measured under the interpreter, 1.4e-6 absolute beyond eps relative, from the fp32 cancellation in
#   s + x*s*(1 - s) (both sides are that far from fp64 math). 1e-5 because on CUDA tl.exp and tl.log are the
#   ~2 ulp ex2/lg2.approx instructions, an error that grows with |x|; still 100x tighter than a kernel that
#   computed in bf16 or fp16 could pass.
# bf16 / fp16: the kernel computes in fp32 and rounds once, at the store. Eager rounds every intermediate
#   (softplus, 0.08 * x, sigmoid, 1 - s) to the dtype; where terms cancel its error is ~eps times the largest
#   term, not the result (measured beyond rtol = eps on 4 * randn inputs: 3.1e-2 in bf16 and 3.8e-3 in fp16,
#   the sigmoid form's gradient; eager is that far from fp64 math too, the kernel is not). That is eager's
#   error; test_half_precision_kernel_is_within_one_rounding_of_fp64_math is the tight check.
TOLERANCE_VS_EAGER = {
    torch.float64: {"rtol": 1e-12, "atol": 1e-12},
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
    torch.bfloat16: {"rtol": 1.6e-2, "atol": 4e-2},
    torch.float16: {"rtol": 2e-3, "atol": 5e-3},
}


_kernels_are_interpreted_on_cpu = kernels_are_interpreted_on_cpu(swoosh_module)


def make_input(shape, dtype=torch.float32, seed=0, device=DEVICE):
    """Pre-activations scaled by 4, so x - 4 and x - 1 reach both flat tails (|z| > 10) and the bend."""
    generator = torch.Generator().manual_seed(seed)
    return (4 * torch.randn(shape, generator=generator)).to(device=device, dtype=dtype)


def make_grad_out(shape, dtype=torch.float32, seed=1, device=DEVICE):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator).to(device=device, dtype=dtype)


def exact_swoosh(side):
    """An fp64 oracle: softplus as logaddexp(z, 0), exact for every z. (F.softplus returns z itself above its
    threshold of 20, so in fp64 its slope is off by e^-z there, up to 2e-9; in fp32 that is below an ulp.)"""
    shift, offset = {"l": (4.0, 0.035), "r": (1.0, 0.313261687)}[side]

    def swoosh(x, form):
        z = x - shift
        if form == "sigmoid":
            return x * torch.sigmoid(z)
        return torch.logaddexp(z, torch.zeros_like(z)) - 0.08 * x - offset

    return swoosh


def output_and_input_grad(fn, x, grad_out, form):
    x = x.detach().requires_grad_()
    out = fn(x, form)
    out.backward(grad_out)
    return out.detach(), x.grad


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("side", SIDES)
def test_kernel_matches_reference(side, form, shape, dtype):
    _, kernel, reference = SIDES[side]
    x, grad_out = make_input(shape, dtype), make_grad_out(shape, dtype)
    out, grad_x = output_and_input_grad(kernel, x, grad_out, form)
    expected_out, expected_grad_x = output_and_input_grad(reference, x, grad_out, form)
    assert out.dtype == dtype and grad_x.dtype == dtype
    torch.testing.assert_close(out, expected_out, **TOLERANCE_VS_EAGER[dtype])
    torch.testing.assert_close(grad_x, expected_grad_x, **TOLERANCE_VS_EAGER[dtype])


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("side", SIDES)
def test_half_precision_kernel_is_within_one_rounding_of_fp64_math(side, form, dtype):
    # The kernel computes in fp32 and rounds once; its fp32 error (~1e-6 absolute) is far below a bf16 / fp16
    # ulp, so the result is within one ulp of the exact value: eps relative, or eps * tiny among subnormals.
    # (One ulp, not half: the interpreter truncates fp32 -> bf16 where CUDA rounds to nearest.)
    _, kernel, _ = SIDES[side]
    x, grad_out = make_input((5, 17, 127), dtype), make_grad_out((5, 17, 127), dtype)
    out, grad_x = output_and_input_grad(kernel, x, grad_out, form)
    exact_out, exact_grad_x = output_and_input_grad(exact_swoosh(side), x.double(), grad_out.double(), form)
    finfo = torch.finfo(dtype)
    one_ulp = {"rtol": finfo.eps, "atol": finfo.eps * finfo.tiny}
    torch.testing.assert_close(out.double(), exact_out, **one_ulp)
    torch.testing.assert_close(grad_x.double(), exact_grad_x, **one_ulp)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_references_are_the_formulas_the_models_used_bit_for_bit(dtype):
    # The models switch from src/asr_pipeline/modules/swoosh.py to these functions; on the reference path
    # nothing may change, not even the last bit, so the constants and the order of operations are pinned.
    x = make_input((3, 7, 13), dtype)
    exact = {"rtol": 0, "atol": 0}
    torch.testing.assert_close(swoosh_l_reference(x), F.softplus(x - 4.0) - 0.08 * x - 0.035, **exact)
    torch.testing.assert_close(swoosh_r_reference(x), F.softplus(x - 1.0) - 0.08 * x - 0.313261687, **exact)
    torch.testing.assert_close(swoosh_l_reference(x, "sigmoid"), x * (x - 4.0).sigmoid(), **exact)
    torch.testing.assert_close(swoosh_r_reference(x, "sigmoid"), x * (x - 1.0).sigmoid(), **exact)


def test_paper_constants_put_swoosh_r_through_the_origin_and_keep_a_slope_of_minus_0_08():
    x = torch.tensor([0.0, -1e4], dtype=torch.float64, requires_grad=True)
    out = swoosh_r_reference(x)
    torch.testing.assert_close(out[0], torch.tensor(0.0, dtype=torch.float64), rtol=0, atol=1e-9)
    (grad_x,) = torch.autograd.grad(out[1], x)
    assert grad_x[1].item() == pytest.approx(-0.08)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("side", SIDES)
def test_gradcheck_in_float64(side, form):
    _, kernel, _ = SIDES[side]
    x = make_input((2, 7), torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(lambda x: kernel(x, form), (x,))


@pytest.mark.parametrize("form", FORMS)
def test_ragged_tiles_are_masked_at_every_edge(monkeypatch, form):
    # Default tiles cover these small shapes in one program; shrink them so rows (85 = 21 * 4 + 1) and
    # channels (127 = 7 * 16 + 15) both end in a partial tile.
    monkeypatch.setattr(swoosh_module, "_MAX_BLOCK_C", 16)
    monkeypatch.setattr(swoosh_module, "_TILE_ELEMENTS", 64)
    shape = (5, 17, 127)
    assert swoosh_module.launch_config(5 * 17, 127)[:2] == (4, 16)
    x, grad_out = make_input(shape), make_grad_out(shape)
    out, grad_x = output_and_input_grad(swoosh_l_kernel, x, grad_out, form)
    expected_out, expected_grad_x = output_and_input_grad(swoosh_l_reference, x, grad_out, form)
    torch.testing.assert_close(out, expected_out, **TOLERANCE_VS_EAGER[torch.float32])
    torch.testing.assert_close(grad_x, expected_grad_x, **TOLERANCE_VS_EAGER[torch.float32])


def test_strided_views_match_without_being_made_contiguous():
    # Rows padded to a wider buffer (row stride C + 6), and a channels-first (B=1, C, T) conv output seen as
    # (B, T, C): channel stride T. Both flatten to (R, C) as views, so the kernel reads them in place.
    padded = make_input((3, 7, 13 + 6))[..., :13]
    channels_first = make_input((1, 13, 7)).transpose(1, 2)
    for x in (padded, channels_first):
        assert not x.is_contiguous()
        assert x.reshape(-1, 13).data_ptr() == x.data_ptr()
        grad_out = make_grad_out(x.shape)
        out, grad_x = output_and_input_grad(swoosh_r_kernel, x, grad_out, "paper")
        expected_out, expected_grad_x = output_and_input_grad(swoosh_r_reference, x, grad_out, "paper")
        torch.testing.assert_close(out, expected_out, **TOLERANCE_VS_EAGER[torch.float32])
        torch.testing.assert_close(grad_x, expected_grad_x, **TOLERANCE_VS_EAGER[torch.float32])


def test_stride_zero_upstream_gradient_from_sum_matches():
    # .sum().backward() hands backward an expanded gradient whose strides are all 0.
    x = make_input((2, 5, 11)).requires_grad_()
    swoosh_l_kernel(x, "paper").sum().backward()
    x_reference = x.detach().requires_grad_()
    swoosh_l_reference(x_reference).sum().backward()
    torch.testing.assert_close(x.grad, x_reference.grad, **TOLERANCE_VS_EAGER[torch.float32])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("side", SIDES)
def test_extreme_inputs_give_finite_outputs_and_exact_slopes(side, form, dtype):
    # softplus(z) = log(1 + e^z) overflows in fp32 from z = 89 when evaluated naively, and 1 / (1 + e^-z)
    # from z = -89; the kernel builds both from e^-|z| <= 1. Far out, the slopes are exact: 1 - 0.08 and
    # -0.08 (paper), 1 and 0 (sigmoid).
    _, kernel, _ = SIDES[side]
    x = torch.tensor([-1e4, -100.0, -30.0, 0.0, 30.0, 100.0, 1e4], device=DEVICE, dtype=dtype)
    out, grad_x = output_and_input_grad(kernel, x, torch.ones_like(x), form)
    assert torch.isfinite(out).all() and torch.isfinite(grad_x).all()
    ones = torch.ones_like(x.double())
    expected_out, expected_grad_x = output_and_input_grad(exact_swoosh(side), x.double(), ones, form)
    torch.testing.assert_close(out, expected_out.to(dtype), **TOLERANCE_VS_EAGER[dtype])
    torch.testing.assert_close(grad_x, expected_grad_x.to(dtype), **TOLERANCE_VS_EAGER[dtype])
    far_slopes = [-0.08, 0.92] if form == "paper" else [0.0, 1.0]
    torch.testing.assert_close(grad_x[[0, -1]].cpu(), torch.tensor(far_slopes).to(dtype))


def test_backward_saves_only_the_input_and_recomputes_the_slope():
    x = make_input((2, 3, 7)).requires_grad_()
    out = swoosh_l_kernel(x, "paper")
    saved = out.grad_fn.saved_tensors
    assert len(saved) == 1
    assert saved[0].data_ptr() == x.data_ptr() and saved[0].shape == x.shape


def test_double_backward_is_refused_rather_than_silently_wrong():
    # A gradient of the gradient (e.g. gradgradcheck, gradient penalties) must raise, not return zeros.
    x = make_input((1, 2, 3), torch.float64).requires_grad_()
    grad_out = make_grad_out(x.shape, torch.float64).requires_grad_()
    (grad_x,) = torch.autograd.grad(swoosh_r_kernel(x, "paper"), x, grad_out, create_graph=True)
    with pytest.raises(
        RuntimeError, match=r"backward through asr_kernels.swoosh_backward.*no autograd formula"
    ):
        grad_x.sum().backward()


@pytest.mark.parametrize("shape", [(0,), (2, 0, 3), (3, 0), ()], ids=str)
def test_empty_and_zero_dim_inputs_keep_their_shape(shape):
    x, grad_out = make_input(shape), make_grad_out(shape)
    out, grad_x = output_and_input_grad(swoosh_l_kernel, x, grad_out, "paper")
    assert out.shape == shape and grad_x.shape == shape
    expected_out, expected_grad_x = output_and_input_grad(swoosh_l_reference, x, grad_out, "paper")
    torch.testing.assert_close(out, expected_out, **TOLERANCE_VS_EAGER[torch.float32])
    torch.testing.assert_close(grad_x, expected_grad_x, **TOLERANCE_VS_EAGER[torch.float32])


def test_unknown_form_is_rejected_with_the_choices():
    x = make_input((2, 3))
    for fn in (swoosh_l, swoosh_r, swoosh_l_reference, swoosh_r_reference):
        with pytest.raises(ValueError, match=r"form must be one of \('paper', 'sigmoid'\).*got 'swish'"):
            fn(x, "swish")


def test_public_functions_run_the_kernel_where_triton_can_run():
    x = make_input((2, 3, 5)).requires_grad_()
    assert type(swoosh_l(x).grad_fn).__name__ == "asr_kernels_swoosh_lBackward"
    assert type(swoosh_r(x).grad_fn).__name__ == "asr_kernels_swoosh_rBackward"


def test_reference_choice_skips_the_kernel_and_triton_choice_refuses_what_it_cannot_run(monkeypatch):
    x = make_input((2, 3, 5)).requires_grad_()
    with use_kernels("reference"):
        assert type(swoosh_l(x).grad_fn).__name__ == "SubBackward0"  # softplus(x - 4) - 0.08x - 0.035
        assert type(swoosh_r(x, "sigmoid").grad_fn).__name__ == "MulBackward0"  # x * sigmoid(x - 1)
    with use_kernels("triton"):
        assert "asr_kernels_swoosh_r" in type(swoosh_r(x, "sigmoid").grad_fn).__name__
        with pytest.raises(RuntimeError, match=r"swoosh_l.s kernel does not cover.*int64"):
            swoosh_l(torch.zeros(2, 4, dtype=torch.int64, device=DEVICE))
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        with pytest.raises(
            RuntimeError, match=r"swoosh_r cannot run its Triton kernel: the tensor is on cpu"
        ):
            swoosh_r(torch.zeros(2, 4))


def test_auto_falls_back_to_the_reference_on_cpu_without_the_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    x = make_input((2, 3, 5), device="cpu").requires_grad_()
    with use_kernels("auto"):
        out = swoosh_l(x)
    assert type(out.grad_fn).__name__ == "SubBackward0"
    torch.testing.assert_close(out, swoosh_l_reference(x), rtol=0, atol=0)


def test_calls_are_counted_per_side_on_both_paths():
    x = make_input((2, 3, 5))
    with count_calls() as calls:
        swoosh_l(x)
        swoosh_r(x, "sigmoid")
        with use_kernels("reference"):
            Swoosh("l")(x)
            Swoosh("r", "sigmoid")(x)
            Swoosh("r")(x)
    assert calls == {"swoosh_l": 2, "swoosh_r": 3}


@pytest.mark.parametrize("form", FORMS)
def test_the_kernel_path_compiles_without_a_graph_break(form):
    x = make_input((2, 3, 5)).requires_grad_()
    explanation = torch._dynamo.explain(lambda x: swoosh_r(swoosh_l(2 * x, form), form) + 1)(x)
    assert explanation.graph_break_count == 0
    assert explanation.graph_count == 1


def test_module_validates_and_describes_itself_as_before():
    # The constructor, its errors and repr are the ones of src/asr_pipeline/modules/swoosh.py's Swoosh.
    assert repr(Swoosh("l")) == "Swoosh(side='l', form='paper')"
    assert repr(Swoosh("r", "sigmoid")) == "Swoosh(side='r', form='sigmoid')"
    assert (Swoosh("l").shift, Swoosh("r").shift) == (4.0, 1.0)
    with pytest.raises(ValueError, match="Swoosh side must be 'l' or 'r', got 'x'"):
        Swoosh("x")
    with pytest.raises(ValueError, match=r"Swoosh form must be one of \('paper', 'sigmoid'\), got 'swish'"):
        Swoosh("l", "swish")


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("side", SIDES)
def test_module_matches_its_reference_on_either_path(side, form):
    x = make_input((2, 9, 8))
    _, _, reference = SIDES[side]
    module = Swoosh(side, form)
    torch.testing.assert_close(module(x), reference(x, form), **TOLERANCE_VS_EAGER[torch.float32])
    with use_kernels("reference"):
        torch.testing.assert_close(module(x), reference(x, form), rtol=0, atol=0)
