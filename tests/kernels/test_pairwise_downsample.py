"""The padding-aware downsampling kernel: parity with its reference and fp32 math, and how it relates to
icefall's ``SimpleDownsample`` rule, Zipformer's before this op (the same for factor 2 on every group with a real frame, not beyond).

On a CPU-only machine the kernels run under Triton's interpreter (``tests.kernels.support``);
``test_cuda_rerun.py`` re-runs this file with compiled kernels on a GPU.
"""

import importlib

import pytest
import torch

from asr_kernels import count_calls, use_kernels
from asr_kernels.pairwise_downsample import (
    PairwiseDownsample,
    pairwise_downsample,
    pairwise_downsample_kernel,
    pairwise_downsample_reference,
)
from tests.kernels.support import DEVICE, kernels_are_interpreted_on_cpu

pairwise_downsample_module = importlib.import_module("asr_kernels.pairwise_downsample")


class SimpleDownsample(torch.nn.Module):
    """icefall's SimpleDownsample rule in a padded batch (what Zipformer used before this op): every frame past
    an utterance's length is replaced by its last real frame, then each group of ``factor`` frames is averaged
    with softmax(bias) weights."""

    def __init__(self, factor: int) -> None:
        super().__init__()
        self.factor = factor
        self.bias = torch.nn.Parameter(torch.zeros(factor))

    def forward(self, x, lengths):
        batch, frames, dim = x.shape
        out_frames = -(-frames // self.factor)
        positions = torch.arange(out_frames * self.factor, device=x.device)
        source = torch.minimum(positions[None, :], (lengths - 1).clamp_min(0)[:, None])  # (B, T'')
        x = x.gather(1, source.unsqueeze(-1).expand(-1, -1, dim))
        weights = self.bias.softmax(dim=0).to(x.dtype)
        return torch.einsum("btfd,f->btd", x.view(batch, out_frames, self.factor, dim), weights)


# (B, T, D, factor, lengths): T = 1 with factor 1 and 2; lengths 0 and full side by side with odd T (the last
# group runs past T); primes; factor 4; factor = T and factor > T; near powers of two; all padded.
CASES = [
    (1, 1, 1, 1, [1]),
    (2, 1, 8, 2, [1, 0]),
    (3, 7, 5, 2, [0, 7, 3]),
    (2, 13, 17, 3, [13, 5]),
    (2, 9, 31, 4, [9, 6]),
    (2, 5, 3, 5, [2, 0]),
    (2, 6, 4, 8, [6, 3]),
    (4, 17, 8, 2, [17, 16, 1, 9]),
    (2, 31, 127, 2, [31, 20]),
    (3, 4, 6, 2, [0, 0, 0]),
]
CASE_IDS = [f"B{b}-T{t}-D{d}-F{f}-L{lengths}" for b, t, d, f, lengths in CASES]
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
HALF_DTYPES = [torch.bfloat16, torch.float16]

# Kernel vs the reference run in the same dtype.
# fp32 / fp64: both compute in that precision and differ in summation order and the softmax's exp (measured
#   under the interpreter: 0 on outputs and grad_x, 6e-8 on grad_weights in fp32, values up to ~17). 1e-5
#   leaves room for CUDA's ex2.approx exp (~2 ulp) and grad_weights' sum over B * K * D products.
# bf16 / fp16: the kernel rounds once, at the store. The reference rounds the softmax, each coefficient, their
#   sum and the quotient to the dtype and accumulates grad_weights over B * K * D products in it, so it is the
#   one off (measured vs fp64 math: 9e-3 out, 3.4e-2 grad_weights in bf16; 1.6e-3, 6.5e-3 in fp16, the kernel
#   half of that or less); allowed here: up to ~2 of the dtype's ulps at the largest values, 4 on grad_weights.
#   test_half_precision_kernel_is_one_rounding_of_fp32_math is the tight check for these dtypes.
TOLERANCE_VS_REFERENCE = {
    torch.float64: {"rtol": 1e-12, "atol": 1e-12},
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
    torch.bfloat16: {"rtol": 1.6e-2, "atol": 3.2e-2},
    torch.float16: {"rtol": 2e-3, "atol": 4e-3},
}
GRAD_WEIGHTS_TOLERANCE_VS_REFERENCE = {
    **TOLERANCE_VS_REFERENCE,
    torch.bfloat16: {"rtol": 1.6e-2, "atol": 6.4e-2},
    torch.float16: {"rtol": 2e-3, "atol": 1.6e-2},
}


_kernels_are_interpreted_on_cpu = kernels_are_interpreted_on_cpu(pairwise_downsample_module)


def make_inputs(batch, frames, channels, factor, lengths, dtype=torch.float32, weights_dtype=None, seed=0):
    """(x (B, T, D), lengths (B,), weights (F,), grad_out (B, ceil(T/F), D)); weights spread like learned ones."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, frames, channels, generator=generator)
    weights = torch.randn(factor, generator=generator)
    grad_out = torch.randn(batch, -(-frames // factor), channels, generator=generator)
    return (
        x.to(device=DEVICE, dtype=dtype),
        torch.tensor(lengths, dtype=torch.int64, device=DEVICE).reshape(batch),
        weights.to(device=DEVICE, dtype=weights_dtype or dtype),
        grad_out.to(device=DEVICE, dtype=dtype),
    )


def output_and_grads(fn, x, lengths, weights, grad_out):
    x, weights = x.detach().requires_grad_(), weights.detach().requires_grad_()
    out = fn(x, lengths, weights)
    out.backward(grad_out)
    return out.detach(), x.grad, weights.grad


def assert_matches_reference(x, lengths, weights, grad_out, dtype):
    out, grad_x, grad_weights = output_and_grads(pairwise_downsample_kernel, x, lengths, weights, grad_out)
    expected = output_and_grads(pairwise_downsample_reference, x, lengths, weights, grad_out)
    assert out.dtype == x.dtype and grad_x.dtype == x.dtype and grad_weights.dtype == weights.dtype
    torch.testing.assert_close(out, expected[0], **TOLERANCE_VS_REFERENCE[dtype])
    torch.testing.assert_close(grad_x, expected[1], **TOLERANCE_VS_REFERENCE[dtype])
    torch.testing.assert_close(grad_weights, expected[2], **GRAD_WEIGHTS_TOLERANCE_VS_REFERENCE[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_kernel_matches_the_reference(case, dtype):
    x, lengths, weights, grad_out = make_inputs(*case, dtype=dtype)
    assert_matches_reference(x, lengths, weights, grad_out, dtype)


@pytest.mark.parametrize("weights_dtype", [None, torch.float32], ids=["weights-same", "weights-fp32"])
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES[2:6], ids=CASE_IDS[2:6])
def test_half_precision_kernel_is_one_rounding_of_fp32_math(case, dtype, weights_dtype):
    # The kernel computes in fp32 from the half values and rounds once; the oracle is the reference on those
    # values upcast. Two roundings of fp32 values a few fp32 ulp apart land at most one ulp of the dtype apart
    # (eps relative, eps * tiny among subnormals). grad_weights with fp32 logits is not rounded at all; it and
    # the rounded half one carry the fp32 sum's error over B * K * D products, under 1e-5 (measured 1.3e-6 on
    # values up to ~17).
    x, lengths, weights, grad_out = make_inputs(*case, dtype=dtype, weights_dtype=weights_dtype)
    out, grad_x, grad_weights = output_and_grads(pairwise_downsample_kernel, x, lengths, weights, grad_out)
    oracle = output_and_grads(
        pairwise_downsample_reference, x.float(), lengths, weights.float(), grad_out.float()
    )
    finfo = torch.finfo(dtype)
    one_ulp = {"rtol": finfo.eps, "atol": finfo.eps * finfo.tiny}
    torch.testing.assert_close(out, oracle[0].to(dtype), **one_ulp)
    torch.testing.assert_close(grad_x, oracle[1].to(dtype), **one_ulp)
    weights_finfo = torch.finfo(weights.dtype)
    torch.testing.assert_close(
        grad_weights, oracle[2].to(weights.dtype), rtol=max(weights_finfo.eps, 1e-5), atol=1e-5
    )


def test_gradcheck_in_float64():
    # Lengths 0, full and mid-group; T = 4 so the last group of 3 runs past T. Small: every one of the 27
    # inputs costs two interpreted forwards.
    x, lengths, weights, _ = make_inputs(3, 4, 2, 3, [0, 4, 2], dtype=torch.float64)
    x.requires_grad_(), weights.requires_grad_()
    assert torch.autograd.gradcheck(lambda x, w: pairwise_downsample_kernel(x, lengths, w), (x, weights))


@pytest.mark.parametrize(
    ("frames", "lengths"), [(5, [5, 2, 0]), (5, [1, 4, 3]), (6, [6, 6, 6]), (6, [1, 4, 3])], ids=str
)
def test_factor_two_agrees_with_simple_downsample_on_every_group_with_a_real_frame(frames, lengths):
    # SimpleDownsample repeats the last real frame into the padding; for pairs, a half-real pair is then
    # (p0 + p1) x0 = x0, and so is the renormalised p0 x0 / p0. Groups k < ceil(length / 2) have a real frame.
    x, lengths, _, grad_out = make_inputs(3, frames, 8, 2, lengths)
    simple = SimpleDownsample(2).to(DEVICE)
    with torch.no_grad():
        simple.bias.copy_(torch.tensor([0.7, -0.4]))
    module = PairwiseDownsample(2).to(DEVICE)
    module.load_state_dict(simple.state_dict())  # the same parameter, under the same name
    real_groups = (
        torch.arange(-(-frames // 2), device=DEVICE)[None, :] < (lengths[:, None] + 1) // 2
    )  # (B, K)
    results = []
    for downsample in (simple, module):
        x_leaf = x.detach().requires_grad_()
        out = downsample(x_leaf, lengths)
        # The loss only reads real groups, as a model's masked loss does.
        (out * grad_out * real_groups[..., None]).sum().backward()
        results.append((out[real_groups], x_leaf.grad, downsample.bias.grad))
    for expected, actual in zip(*results, strict=True):
        torch.testing.assert_close(actual, expected, **TOLERANCE_VS_REFERENCE[torch.float32])


def test_larger_factors_differ_from_simple_downsample_where_a_group_straddles_the_end():
    # Factor 4, length 6: group 0 is all real (the two agree), group 1 has 2 real frames of 4. SimpleDownsample
    # gives frame 5 the weight of positions 1..3, p0 x4 + (p1 + p2 + p3) x5; this op renormalises over the
    # real ones, (p0 x4 + p1 x5) / (p0 + p1).
    x, lengths, _, _ = make_inputs(1, 8, 3, 4, [6])
    logits = torch.tensor([0.3, -0.2, 0.5, 0.1], device=DEVICE)
    simple = SimpleDownsample(4).to(DEVICE)
    with torch.no_grad():
        simple.bias.copy_(logits)
    ours = pairwise_downsample(x, lengths, logits)
    theirs = simple(x, lengths).detach()
    p = logits.softmax(0)
    torch.testing.assert_close(ours[0, 0], theirs[0, 0])
    torch.testing.assert_close(ours[0, 1], (p[0] * x[0, 4] + p[1] * x[0, 5]) / (p[0] + p[1]))
    torch.testing.assert_close(theirs[0, 1], p[0] * x[0, 4] + p[1:].sum() * x[0, 5])
    assert not torch.allclose(ours[0, 1], theirs[0, 1], atol=1e-3)


def test_groups_without_a_real_frame_give_zero_and_no_gradient():
    x, lengths, weights, grad_out = make_inputs(2, 6, 4, 2, [3, 0])
    out, grad_x, _ = output_and_grads(pairwise_downsample_kernel, x, lengths, weights, grad_out)
    assert (out[0, 2] == 0).all() and (out[1] == 0).all()  # frames 4-5 of example 0, all of example 1
    assert (grad_x[0, 3:] == 0).all() and (grad_x[1] == 0).all()
    torch.testing.assert_close(out[0, 1], x[0, 2])  # a group whose only real frame is frame 2


def test_padding_never_reaches_the_output_or_the_gradients():
    # Whatever the padded frames hold (here NaN and inf), the result is that of zero padding.
    x, lengths, weights, grad_out = make_inputs(2, 7, 5, 3, [4, 7])
    poisoned = x.clone()
    poisoned[0, 4:] = float("nan")
    poisoned[0, 5] = float("inf")
    for fn in (pairwise_downsample_kernel, pairwise_downsample_reference):
        clean = output_and_grads(fn, x, lengths, weights, grad_out)
        dirty = output_and_grads(fn, poisoned, lengths, weights, grad_out)
        for expected, actual in zip(clean, dirty, strict=True):
            torch.testing.assert_close(actual, expected, rtol=0, atol=0)


def test_saturated_weights_give_finite_outputs_and_gradients():
    # exp(1000) overflows; the max-shifted softmax gives (1, 0) and a gradient of exactly 0 for the logits.
    x, lengths, _, grad_out = make_inputs(2, 4, 3, 2, [4, 3])
    weights = torch.tensor([1000.0, -1000.0], device=DEVICE)
    out, grad_x, grad_weights = output_and_grads(pairwise_downsample_kernel, x, lengths, weights, grad_out)
    torch.testing.assert_close(out, x[:, 0::2])
    assert torch.isfinite(grad_x).all()
    torch.testing.assert_close(grad_weights, torch.zeros(2, device=DEVICE))


def test_ragged_channel_tiles_sum_their_weight_gradients(monkeypatch):
    # Shrink the tile so 37 channels take 3 programs per group (16 + 16 + 5): each writes its share of
    # dL/dp, which must all be summed.
    monkeypatch.setattr(pairwise_downsample_module, "_TILE_ELEMENTS", 64)
    assert pairwise_downsample_module.launch_config(3, 37) == (4, 16)
    x, lengths, weights, grad_out = make_inputs(2, 11, 37, 3, [11, 7])
    assert_matches_reference(x, lengths, weights, grad_out, torch.float32)


def test_strided_inputs_are_read_in_place_and_stride_zero_gradients_work():
    # x from a channels-first (B, D, T) conv output, lengths a strided slice; .sum().backward() hands backward
    # an expanded gradient whose strides are all 0.
    x, _, weights, _ = make_inputs(2, 7, 5, 2, [7, 3])
    x = x.transpose(1, 2).contiguous().transpose(1, 2)
    lengths = torch.tensor([7, 0, 3, 0], device=DEVICE)[::2]
    assert not x.is_contiguous() and not lengths.is_contiguous()
    grads = []
    for fn in (pairwise_downsample_kernel, pairwise_downsample_reference):
        x_leaf, weights_leaf = x.detach().requires_grad_(), weights.detach().requires_grad_()
        fn(x_leaf, lengths, weights_leaf).sum().backward()
        grads.append((x_leaf.grad, weights_leaf.grad))
    for expected, actual in zip(grads[1], grads[0], strict=True):
        torch.testing.assert_close(actual, expected, **TOLERANCE_VS_REFERENCE[torch.float32])


def test_backward_saves_only_the_inputs():
    x, lengths, weights, _ = make_inputs(2, 5, 3, 2, [5, 2])
    out = pairwise_downsample_kernel(x.requires_grad_(), lengths, weights.requires_grad_())
    saved = out.grad_fn.saved_tensors
    assert [tensor.data_ptr() for tensor in saved] == [x.data_ptr(), lengths.data_ptr(), weights.data_ptr()]


def test_double_backward_is_refused_rather_than_silently_wrong():
    x, lengths, weights, grad_out = make_inputs(1, 4, 3, 2, [3], dtype=torch.float64)
    x.requires_grad_()
    (grad_x,) = torch.autograd.grad(
        pairwise_downsample_kernel(x, lengths, weights), x, grad_out.requires_grad_(), create_graph=True
    )
    with pytest.raises(
        RuntimeError, match=r"backward through asr_kernels.pairwise_downsample_backward.*no autograd formula"
    ):
        grad_x.sum().backward()


@pytest.mark.parametrize(("batch", "frames", "channels"), [(0, 4, 3), (2, 0, 3), (2, 4, 0)], ids=str)
def test_empty_inputs_give_empty_outputs_and_gradients(batch, frames, channels):
    x, lengths, weights, grad_out = make_inputs(batch, frames, channels, 2, [frames] * batch)
    out, grad_x, grad_weights = output_and_grads(pairwise_downsample_kernel, x, lengths, weights, grad_out)
    assert out.shape == (batch, -(-frames // 2), channels)
    assert grad_x.shape == x.shape
    torch.testing.assert_close(grad_weights, torch.zeros(2, device=DEVICE))
    assert pairwise_downsample_reference(x, lengths, weights).shape == out.shape


def test_bad_shapes_are_rejected_with_what_was_expected():
    x, lengths, weights, _ = make_inputs(2, 4, 3, 2, [4, 2])
    with pytest.raises(ValueError, match=r"x of shape \(B, T, D\), got \(4, 3\)"):
        pairwise_downsample(x[0], lengths, weights)
    with pytest.raises(ValueError, match=r"lengths of shape \(B,\) = \(2,\) .* got \(3,\)"):
        pairwise_downsample(x, torch.tensor([4, 2, 1], device=DEVICE), weights)
    with pytest.raises(ValueError, match=r"shape \(factor,\) with factor >= 1, got \(0,\)"):
        pairwise_downsample(x, lengths, weights[:0])
    with pytest.raises(ValueError, match="factor >= 1, got 0"):
        PairwiseDownsample(0)


def test_pairwise_downsample_runs_the_kernel_where_triton_can_run():
    x, lengths, weights, _ = make_inputs(2, 5, 3, 2, [5, 2])
    out = pairwise_downsample(x.requires_grad_(), lengths, weights)
    assert type(out.grad_fn).__name__ == "asr_kernels_pairwise_downsampleBackward"


def test_reference_choice_skips_the_kernel_and_triton_choice_refuses_what_it_cannot_run(monkeypatch):
    x, lengths, weights, _ = make_inputs(2, 5, 3, 2, [5, 2])
    x.requires_grad_()
    with use_kernels("reference"):
        assert (
            type(pairwise_downsample(x, lengths, weights).grad_fn).__name__ == "ViewBackward0"
        )  # the einsum
    with use_kernels("auto"):  # float lengths take the reference
        torch.testing.assert_close(
            pairwise_downsample(x, lengths.float(), weights),
            pairwise_downsample_reference(x, lengths, weights),
        )
    with use_kernels("triton"):
        assert (
            "asr_kernels_pairwise_downsample"
            in type(pairwise_downsample(x, lengths, weights).grad_fn).__name__
        )
        with pytest.raises(RuntimeError, match=r"pairwise_downsample.s kernel does not cover"):
            pairwise_downsample(x, lengths.float(), weights)
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        with pytest.raises(
            RuntimeError, match=r"pairwise_downsample cannot run its Triton kernel: the tensor is on cpu"
        ):
            pairwise_downsample(x.cpu(), lengths.cpu(), weights.cpu())


@pytest.mark.kernels("auto")
def test_pairwise_downsample_falls_back_to_the_reference_on_cpu_without_the_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    x, lengths, _, _ = make_inputs(2, 5, 3, 2, [5, 2])
    out = PairwiseDownsample(2)(x.cpu().requires_grad_(), lengths.cpu())
    assert type(out.grad_fn).__name__ == "ViewBackward0"


def test_calls_are_counted_on_both_paths():
    x, lengths, weights, _ = make_inputs(2, 5, 3, 2, [5, 2])
    module = PairwiseDownsample(2).to(DEVICE)
    with count_calls() as calls:
        module(x, lengths)
        with use_kernels("reference"):
            pairwise_downsample(x, lengths, weights)
    assert calls == {"pairwise_downsample": 2}


def test_the_kernel_path_compiles_without_a_graph_break():
    # Zipformer's use between stacks: downsample, then the lower-rate stack's first op.
    x, lengths, _, _ = make_inputs(2, 7, 4, 2, [7, 3])
    module = PairwiseDownsample(2).to(DEVICE)
    explanation = torch._dynamo.explain(lambda x, lengths: module(2 * x, lengths) + 1)(
        x.requires_grad_(), lengths
    )
    assert explanation.graph_break_count == 0
    assert explanation.graph_count == 1


def test_module_is_a_drop_in_for_simple_downsample():
    simple, module = SimpleDownsample(3), PairwiseDownsample(3)
    assert module.state_dict().keys() == simple.state_dict().keys()
    assert module.bias.shape == simple.bias.shape and (module.bias == 0).all()
    assert repr(module) == "PairwiseDownsample(factor=3)"
