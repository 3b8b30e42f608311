"""Parity of the fused ResidualAddMaskTime kernels (``x + scale * y``, padded frames zeroed) with the reference.

On a CPU-only machine the kernels run under Triton's interpreter (``tests.kernels.support``);
``test_cuda_rerun.py`` re-runs this file with compiled kernels on a GPU.
"""

import importlib

import pytest
import torch

from asr_kernels import count_calls, use_kernels
from asr_kernels.residual_add_mask import (
    residual_add_mask_time,
    residual_add_mask_time_kernel,
    residual_add_mask_time_reference,
)
from tests.kernels.support import DEVICE, MASKED_TIME_CASES, kernels_are_interpreted_on_cpu

residual_module = importlib.import_module("asr_kernels.residual_add_mask")

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
HALF_DTYPES = [torch.bfloat16, torch.float16]
# A Python float (rounded to fp32 as eager does: 0.7 is not exact), a 0-d tensor, a learned per-channel (C,).
SCALE_KINDS = ["float", "scalar", "channel"]
FLOAT_SCALE = 0.7

# Kernel vs the eager reference run in the same dtype: out, grad_x, grad_y.
# fp64 / fp32: identical under the interpreter (measured: 0 difference; same operations, same order). The
#   tolerance is for CUDA, where Triton contracts x + scale * y into one FMA, saving the rounding of
#   scale * y: at most half an ulp of |scale * y| < 8 here, 5e-7 in fp32.
# bf16 / fp16: the kernel computes in fp32 and rounds once, at the store; eager rounds scale * y to the dtype
#   before adding, so where x and scale * y cancel its error is ~eps * |scale * y|, not eps * |out| (measured
#   beyond rtol = eps: 7.4e-3 in bf16, 9.4e-4 in fp16; the kernel is within eps of fp64 math, see
#   test_half_precision_kernel_is_within_one_rounding_of_fp64_math). grad_x and grad_y match to eps.
TOLERANCE_VS_EAGER = {
    torch.float64: {"rtol": 1e-12, "atol": 1e-12},
    torch.float32: {"rtol": 1e-6, "atol": 1e-6},
    torch.bfloat16: {"rtol": 1.6e-2, "atol": 1.6e-2},
    torch.float16: {"rtol": 2e-3, "atol": 2e-3},
}
# grad_scale, a sum over B * T (and C for a 0-d scale) of grad_out * y: the kernel sums per tile and then
# across tiles, eager in its own order, so they differ by the summation error, ~eps * sqrt(n) * |term| (fp32,
# measured on up to 10.8 k terms: 1.2e-5; fp64 5e-14). In bf16 / fp16 eager also rounds every product to the
# dtype before summing, ~eps / 2 * sqrt(n) * |term| absolute on sums of ~sqrt(n) (measured beyond rtol = eps:
# 0.115 in bf16, 9.5e-3 in fp16), where the kernel sums in fp32 and rounds once.
GRAD_SCALE_TOLERANCE_VS_EAGER = {
    torch.float64: {"rtol": 1e-12, "atol": 1e-12},
    torch.float32: {"rtol": 1e-5, "atol": 1e-4},
    torch.bfloat16: {"rtol": 1.6e-2, "atol": 0.25},
    torch.float16: {"rtol": 2e-3, "atol": 2e-2},
}


_kernels_are_interpreted_on_cpu = kernels_are_interpreted_on_cpu(residual_module)


def make_activation(shape, dtype=torch.float32, seed=0, device=DEVICE):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator).to(device=device, dtype=dtype)


def make_scale(kind, channels, dtype=torch.float32, seed=2, device=DEVICE):
    """A bypass-like scale in [0.2, 1.2): a Python float, a 0-d tensor or a (C,) tensor."""
    if kind == "float":
        return FLOAT_SCALE
    generator = torch.Generator().manual_seed(seed)
    shape = () if kind == "scalar" else (channels,)
    return (0.2 + torch.rand(shape, generator=generator)).to(device=device, dtype=dtype)


def make_lengths(lengths, dtype=torch.int64, device=DEVICE):
    return torch.tensor(lengths, dtype=dtype, device=device)


def outputs_and_grads(fn, x, y, lengths, scale, grad_out):
    """(out, grad_x, grad_y, grad_scale or None)."""
    x, y = x.detach().requires_grad_(), y.detach().requires_grad_()
    if isinstance(scale, torch.Tensor):
        scale = scale.detach().requires_grad_()
    out = fn(x, y, lengths, scale)
    out.backward(grad_out)
    return out.detach(), x.grad, y.grad, scale.grad if isinstance(scale, torch.Tensor) else None


def kernel_path(x, y, lengths, scale):
    """The public function forced onto the kernel: the custom op takes only tensor scales."""
    with use_kernels("triton"):
        return residual_add_mask_time(x, y, lengths, scale)


def run_both(shape, lengths, dtype, scale):
    x, y = make_activation(shape, dtype, seed=0), make_activation(shape, dtype, seed=1)
    out_dtype = residual_add_mask_time_reference(x, y, lengths, scale).dtype
    grad_out = make_activation(shape, out_dtype, seed=3)
    kernel = outputs_and_grads(kernel_path, x, y, lengths, scale, grad_out)
    reference = outputs_and_grads(residual_add_mask_time_reference, x, y, lengths, scale, grad_out)
    return kernel, reference


@pytest.mark.parametrize("scale_kind", SCALE_KINDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("shape", "lengths"), MASKED_TIME_CASES, ids=str)
def test_kernel_matches_reference(shape, lengths, dtype, scale_kind):
    scale = make_scale(scale_kind, shape[2], dtype)
    kernel, reference = run_both(shape, make_lengths(lengths), dtype, scale)
    for value, expected in zip(kernel[:3], reference[:3], strict=True):
        assert value.dtype == expected.dtype == dtype
        torch.testing.assert_close(value, expected, **TOLERANCE_VS_EAGER[dtype])
    if scale_kind != "float":
        assert kernel[3].dtype == dtype and kernel[3].shape == scale.shape
        torch.testing.assert_close(kernel[3], reference[3], **GRAD_SCALE_TOLERANCE_VS_EAGER[dtype])


@pytest.mark.parametrize("scale_kind", SCALE_KINDS)
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_half_precision_kernel_is_within_one_rounding_of_fp64_math(dtype, scale_kind):
    # The kernel computes in fp32 and rounds each result once, so it is within one ulp of the exact value:
    # eps relative, or eps * tiny among subnormals. (One ulp, not half: the interpreter truncates fp32 -> bf16
    # where CUDA rounds to nearest.) grad_scale adds fp32's summation error (< 1e-5 on these ~100-term sums).
    shape, lengths = (5, 17, 127), make_lengths([17, 1, 9, 0, 30])
    x, y = make_activation(shape, dtype, seed=0), make_activation(shape, dtype, seed=1)
    grad_out = make_activation(shape, dtype, seed=3)
    scale = make_scale(scale_kind, shape[2], dtype)
    kernel = outputs_and_grads(kernel_path, x, y, lengths, scale, grad_out)
    # The float scale as the kernel (and eager) uses it: rounded to fp32.
    exact_scale = torch.tensor(scale).float().double() if scale_kind == "float" else scale.double()
    exact = outputs_and_grads(
        residual_add_mask_time_reference, x.double(), y.double(), lengths, exact_scale, grad_out.double()
    )
    finfo = torch.finfo(dtype)
    for value, expected in zip(kernel[:3], exact[:3], strict=True):
        torch.testing.assert_close(value.double(), expected, rtol=finfo.eps, atol=finfo.eps * finfo.tiny)
    if scale_kind != "float":
        torch.testing.assert_close(kernel[3].double(), exact[3], rtol=finfo.eps, atol=1e-5)


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_fp32_scale_with_half_activations_promotes_like_eager(dtype):
    # A learned fp32 scale with bf16 / fp16 activations: eager's x + scale * y is fp32, so is the kernel's out;
    # grad_x and grad_y come back in the activations' dtype (each one rounding of the same fp32 value: one
    # ulp apart at most), grad_scale in fp32.
    shape, lengths = (5, 17, 127), make_lengths([17, 1, 9, 0, 30])
    kernel, reference = run_both(shape, lengths, dtype, make_scale("channel", shape[2], torch.float32))
    assert [t.dtype for t in kernel] == [torch.float32, dtype, dtype, torch.float32]
    assert [t.dtype for t in reference] == [torch.float32, dtype, dtype, torch.float32]
    finfo = torch.finfo(dtype)
    torch.testing.assert_close(kernel[0], reference[0], **TOLERANCE_VS_EAGER[torch.float32])
    for value, expected in zip(kernel[1:3], reference[1:3], strict=True):
        torch.testing.assert_close(value, expected, rtol=finfo.eps, atol=finfo.eps * finfo.tiny)
    torch.testing.assert_close(kernel[3], reference[3], **GRAD_SCALE_TOLERANCE_VS_EAGER[torch.float32])


@pytest.mark.parametrize("scale_kind", SCALE_KINDS)
def test_gradcheck_in_float64(scale_kind):
    # Small: gradcheck runs the forward twice per input element, each an interpreted launch.
    x, y = make_activation((2, 3, 2), torch.float64, 0), make_activation((2, 3, 2), torch.float64, 1)
    lengths = make_lengths([3, 1])
    scale = make_scale(scale_kind, 2, torch.float64)
    inputs = [x.requires_grad_(), y.requires_grad_()]
    if scale_kind == "float":
        assert torch.autograd.gradcheck(lambda x, y: kernel_path(x, y, lengths, scale), inputs)
    else:
        inputs.append(scale.requires_grad_())
        assert torch.autograd.gradcheck(
            lambda x, y, s: residual_add_mask_time_kernel(x, y, lengths, s), inputs
        )


def test_ragged_tiles_are_masked_at_every_edge(monkeypatch):
    # Default tiles cover these small shapes in one program; shrink them so frames (17 = 4 * 4 + 1) and
    # channels (127 = 7 * 16 + 15) end in a partial tile, and the backward's last chunk of 2 tiles (frames
    # 16..23) holds one partial tile and one wholly past T.
    monkeypatch.setattr(residual_module, "_MAX_BLOCK_C", 16)
    monkeypatch.setattr(residual_module, "_TILE_ELEMENTS", 64)
    monkeypatch.setattr(residual_module, "_BACKWARD_TILES", 2)
    assert residual_module.launch_config(17, 127, tiles=2) == (4, 16, 3)
    kernel, reference = run_both(
        (5, 17, 127), make_lengths([17, 1, 9, 0, 30]), torch.float32, make_scale("channel", 127)
    )
    for value, expected in zip(kernel[:3], reference[:3], strict=True):
        torch.testing.assert_close(value, expected, **TOLERANCE_VS_EAGER[torch.float32])
    torch.testing.assert_close(kernel[3], reference[3], **GRAD_SCALE_TOLERANCE_VS_EAGER[torch.float32])


def test_strided_views_match_without_being_made_contiguous():
    # x a (B, C, T) conv output seen as (B, T, C), y with channels padded to a wider buffer, scale every other
    # value of a longer vector, lengths a strided int32 view: all taken through their strides.
    x = make_activation((3, 13, 7), seed=0).transpose(1, 2)
    y = make_activation((3, 7, 13 + 6), seed=1)[..., :13]
    scale = make_scale("channel", 2 * 13)[::2]
    lengths = make_lengths([7, -1, 0, -1, 3, -1], torch.int32)[::2]
    assert not any(t.is_contiguous() for t in (x, y, scale, lengths))
    grad_out = make_activation((3, 7, 13), seed=3)
    kernel = outputs_and_grads(residual_add_mask_time_kernel, x, y, lengths, scale, grad_out)
    reference = outputs_and_grads(residual_add_mask_time_reference, x, y, lengths, scale, grad_out)
    for value, expected in zip(kernel[:3], reference[:3], strict=True):
        torch.testing.assert_close(value, expected, **TOLERANCE_VS_EAGER[torch.float32])
    torch.testing.assert_close(kernel[3], reference[3], **GRAD_SCALE_TOLERANCE_VS_EAGER[torch.float32])


def test_stride_zero_upstream_gradient_from_sum_matches():
    # .sum().backward() hands backward an expanded gradient whose strides are all 0.
    x, y = make_activation((2, 5, 11), seed=0), make_activation((2, 5, 11), seed=1)
    lengths, scale = make_lengths([3, 5]), make_scale("channel", 11)
    grads = []
    for fn in (residual_add_mask_time_kernel, residual_add_mask_time_reference):
        inputs = [t.detach().requires_grad_() for t in (x, y, scale)]
        fn(inputs[0], inputs[1], lengths, inputs[2]).sum().backward()
        grads.append([t.grad for t in inputs])
    for value, expected in zip(*grads, strict=True):
        torch.testing.assert_close(value, expected, **GRAD_SCALE_TOLERANCE_VS_EAGER[torch.float32])


def test_padded_frames_are_not_read_so_nan_there_leaks_nowhere():
    # Eager reads padded y for grad_scale = sum(grad_out * y): 0 * NaN poisons it. The kernel skips them.
    x, y = make_activation((2, 4, 3), seed=0), make_activation((2, 4, 3), seed=1)
    x[0, 2:], y[0, 2:] = float("nan"), float("inf")
    lengths, scale = make_lengths([2, 4]), make_scale("channel", 3)
    grad_out = make_activation((2, 4, 3), seed=3)
    kernel = outputs_and_grads(residual_add_mask_time_kernel, x, y, lengths, scale, grad_out)
    assert all(torch.isfinite(t).all() for t in kernel)
    clean_x, clean_y = x.nan_to_num(0.0, 0.0, 0.0), y.nan_to_num(0.0, 0.0, 0.0)
    expected = outputs_and_grads(residual_add_mask_time_reference, clean_x, clean_y, lengths, scale, grad_out)
    for value, reference in zip(kernel, expected, strict=True):
        torch.testing.assert_close(value, reference, **GRAD_SCALE_TOLERANCE_VS_EAGER[torch.float32])


@pytest.mark.parametrize("scale_needs_grad", [True, False])
def test_backward_saves_lengths_and_scale_and_y_only_for_the_scale_gradient(scale_needs_grad):
    x, y = (
        make_activation((2, 3, 7), seed=0).requires_grad_(),
        make_activation((2, 3, 7), seed=1).requires_grad_(),
    )
    lengths, scale = make_lengths([1, 3]), make_scale("channel", 7).requires_grad_(scale_needs_grad)
    out = residual_add_mask_time_kernel(x, y, lengths, scale)
    saved = out.grad_fn.saved_tensors
    assert [t.data_ptr() for t in saved[:2]] == [lengths.data_ptr(), scale.data_ptr()]
    if scale_needs_grad:
        assert len(saved) == 3 and saved[2].data_ptr() == y.data_ptr()
    else:
        assert len(saved) == 2 or saved[2] is None
    assert x.data_ptr() not in [t.data_ptr() for t in saved if t is not None]
    out.backward(torch.ones_like(out))
    assert (scale.grad is not None) == scale_needs_grad and x.grad is not None and y.grad is not None


def test_double_backward_is_refused_rather_than_silently_wrong():
    x, y = make_activation((1, 2, 3), torch.float64, 0), make_activation((1, 2, 3), torch.float64, 1)
    scale = make_scale("channel", 3, torch.float64).requires_grad_()
    x.requires_grad_()
    grad_out = make_activation((1, 2, 3), torch.float64, 3).requires_grad_()
    out = residual_add_mask_time_kernel(x, y, make_lengths([1]), scale)
    (grad_scale,) = torch.autograd.grad(out, scale, grad_out, create_graph=True)
    with pytest.raises(
        RuntimeError,
        match=r"backward through asr_kernels.residual_add_mask_time_backward.*no autograd formula",
    ):
        grad_scale.sum().backward()


@pytest.mark.parametrize(("shape", "lengths"), [((0, 4, 3), []), ((2, 0, 3), [0, 5]), ((2, 4, 0), [1, 4])])
def test_empty_inputs_give_empty_outputs_and_zero_scale_gradients(shape, lengths):
    scale = make_scale("channel", shape[2])
    out, grad_x, grad_y, grad_scale = outputs_and_grads(
        residual_add_mask_time_kernel,
        make_activation(shape),
        make_activation(shape),
        make_lengths(lengths),
        scale,
        make_activation(shape),
    )
    assert out.shape == grad_x.shape == grad_y.shape == shape
    torch.testing.assert_close(grad_scale, torch.zeros_like(scale))


def test_bad_inputs_are_rejected_with_what_was_expected():
    x, lengths = torch.zeros(2, 3, 4, device=DEVICE), make_lengths([1, 2])
    for fn in (residual_add_mask_time, residual_add_mask_time_reference):
        with pytest.raises(
            ValueError, match=r"x and y of one shape \(B, T, C\), got x \(2, 3, 4\) and y \(2, 3, 5\)"
        ):
            fn(x, torch.zeros(2, 3, 5, device=DEVICE), lengths)
        with pytest.raises(ValueError, match=r"lengths must be \(B,\) = \(2,\).*got shape \(2, 1\)"):
            fn(x, x, lengths[:, None])
        with pytest.raises(ValueError, match=r"integer frame counts, got dtype torch.float32"):
            fn(x, x, lengths.float())
        with pytest.raises(ValueError, match=r"scalar \(\) or per channel \(4,\).*got shape \(1, 4\)"):
            fn(x, x, lengths, torch.ones(1, 4, device=DEVICE))
        with pytest.raises(ValueError, match="scale must be a float or a tensor, got str"):
            fn(x, x, lengths, "0.5")


def test_public_function_runs_the_kernel_where_triton_can_run():
    x = make_activation((2, 3, 5)).requires_grad_()
    out = residual_add_mask_time(x, make_activation((2, 3, 5), seed=1), make_lengths([1, 3]), 0.5)
    assert "asr_kernels_residual_add_mask_time" in type(out.grad_fn).__name__


def test_reference_choice_skips_the_kernel_and_triton_choice_refuses_what_it_cannot_run(monkeypatch):
    x = make_activation((2, 3, 5)).requires_grad_()
    y, lengths = make_activation((2, 3, 5), seed=1), make_lengths([1, 3])
    with use_kernels("reference"):
        assert type(residual_add_mask_time(x, y, lengths).grad_fn).__name__ == "MaskedFillBackward0"
    with use_kernels("triton"):
        assert "asr_kernels" in type(residual_add_mask_time(x, y, lengths).grad_fn).__name__
        with pytest.raises(RuntimeError, match=r"residual_add_mask_time.s kernel does not cover"):
            residual_add_mask_time(x, y, lengths, torch.tensor(2))  # a tensor scale must be floating
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        with pytest.raises(
            RuntimeError, match=r"residual_add_mask_time cannot run its Triton kernel: the tensor is on cpu"
        ):
            residual_add_mask_time(x.cpu(), y.cpu(), lengths.cpu())


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_a_narrower_branch_onto_a_float32_stream_runs_the_kernel_and_promotes_like_eager(dtype):
    # Under autocast a bf16 branch meets the float32 residual stream: the kernel takes it (cast for it, as
    # x + y promotes) where the models used to cast it first, and the reference reads it as it is.
    shape, lengths = (3, 9, 17), make_lengths([9, 0, 4])
    x, y = make_activation(shape, torch.float32, seed=0), make_activation(shape, dtype, seed=1)
    grad_out = make_activation(shape, torch.float32, seed=3)
    kernel = outputs_and_grads(kernel_path, x, y, lengths, 0.5, grad_out)
    with use_kernels("reference"):
        reference = outputs_and_grads(residual_add_mask_time, x, y, lengths, 0.5, grad_out)
    assert (
        [t.dtype for t in kernel[:3]]
        == [t.dtype for t in reference[:3]]
        == [torch.float32, torch.float32, dtype]
    )
    for value, expected in zip(kernel[:3], reference[:3], strict=True):
        torch.testing.assert_close(value, expected, **TOLERANCE_VS_EAGER[value.dtype])


@pytest.mark.parametrize(
    ("stream", "branch"),
    [(torch.bfloat16, torch.float32), (torch.float16, torch.bfloat16), (torch.float32, torch.float64)],
    ids=str,
)
def test_any_other_branch_joins_in_the_streams_dtype_on_both_paths(stream, branch):
    # What the models cast every branch to before they left it to this function: a wider branch (or fp16 onto
    # bf16, whose promotion is float32) does not widen the stream, and the kernel takes it.
    shape, lengths = (2, 6, 8), make_lengths([6, 2])
    x, y = make_activation(shape, stream, seed=0), make_activation(shape, branch, seed=1)
    grad_out = make_activation(shape, stream, seed=3)
    kernel = outputs_and_grads(kernel_path, x, y, lengths, 0.5, grad_out)
    with use_kernels("reference"):
        reference = outputs_and_grads(residual_add_mask_time, x, y, lengths, 0.5, grad_out)
    cast_first = outputs_and_grads(residual_add_mask_time_reference, x, y.to(stream), lengths, 0.5, grad_out)
    assert [t.dtype for t in kernel[:3]] == [t.dtype for t in reference[:3]] == [stream, stream, branch]
    torch.testing.assert_close(reference[0], cast_first[0], rtol=0, atol=0)
    for value, expected in zip(kernel[:3], reference[:3], strict=True):
        torch.testing.assert_close(value, expected, **TOLERANCE_VS_EAGER[stream])


def test_auto_falls_back_to_the_reference_for_an_integer_scale_and_without_the_interpreter(monkeypatch):
    x, y, lengths = make_activation((2, 3, 5)), make_activation((2, 3, 5), seed=1), make_lengths([1, 3])
    x.requires_grad_()
    with use_kernels("auto"):
        out = residual_add_mask_time(x, y, lengths, torch.tensor(2))
        assert type(out.grad_fn).__name__ == "MaskedFillBackward0"
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        out = residual_add_mask_time(x.cpu(), y.cpu(), lengths.cpu(), 0.5)
    assert type(out.grad_fn).__name__ == "MaskedFillBackward0"


def test_calls_are_counted_on_both_paths():
    x, y, lengths = make_activation((2, 3, 5)), make_activation((2, 3, 5), seed=1), make_lengths([1, 3])
    with count_calls() as calls:
        residual_add_mask_time(x, y, lengths)
        with use_kernels("reference"):
            residual_add_mask_time(x, y, lengths, make_scale("channel", 5))
    assert calls == {"residual_add_mask_time": 2}


@pytest.mark.parametrize("scale_kind", SCALE_KINDS)
def test_the_kernel_path_compiles_without_a_graph_break(scale_kind):
    x, y = make_activation((2, 3, 5)).requires_grad_(), make_activation((2, 3, 5), seed=1)
    lengths, scale = make_lengths([1, 3]), make_scale(scale_kind, 5)

    def bypass(x):  # Zipformer's orig + scale * (x - orig), masked
        return residual_add_mask_time(x, 2 * x - y, lengths, scale) + 1

    explanation = torch._dynamo.explain(bypass)(x)
    assert explanation.graph_break_count == 0
    assert explanation.graph_count == 1


def test_compiled_forward_and_backward_use_fake_shapes_and_dtypes_that_match_eager():
    # AOT autograd traces both custom ops through their fake implementations, backward included; a fake that
    # got a dtype wrong (fp32 out from a bf16 x with an fp32 scale, bf16 grad_x) would fail here.
    x, y = make_activation((3, 7, 5), torch.bfloat16, 0), make_activation((3, 7, 5), torch.bfloat16, 1)
    lengths, scale = make_lengths([7, 0, 3]), make_scale("channel", 5)
    compiled = torch.compile(residual_add_mask_time, backend="aot_eager", fullgraph=True)
    grad_out = make_activation((3, 7, 5), torch.float32, 3)
    kernel = outputs_and_grads(compiled, x, y, lengths, scale, grad_out)
    reference = outputs_and_grads(residual_add_mask_time_reference, x, y, lengths, scale, grad_out)
    assert [t.dtype for t in kernel] == [t.dtype for t in reference]
    for value, expected in zip(kernel, reference, strict=True):
        torch.testing.assert_close(value, expected, **GRAD_SCALE_TOLERANCE_VS_EAGER[torch.bfloat16])
