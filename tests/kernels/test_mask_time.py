"""Parity of the fused MaskTime (B, T, C) and MaskChannelTime (B, C, T) kernels with their references.

On a CPU-only machine the kernels run under Triton's interpreter (``tests.kernels.support``);
``test_cuda_rerun.py`` re-runs this file with compiled kernels on a GPU.
"""

import importlib

import pytest
import torch

from asr_kernels import count_calls, use_kernels
from asr_kernels.mask_time import (
    MaskTime,
    mask_channel_time,
    mask_channel_time_kernel,
    mask_channel_time_reference,
    mask_time,
    mask_time_kernel,
    mask_time_reference,
)
from tests.kernels.support import DEVICE, MASKED_TIME_CASES, kernels_are_interpreted_on_cpu

mask_module = importlib.import_module("asr_kernels.mask_time")

# layout -> (public function, custom op, reference, whether x is channels-first (B, C, T))
LAYOUTS = {
    "BTC": (mask_time, mask_time_kernel, mask_time_reference, False),
    "BCT": (mask_channel_time, mask_channel_time_kernel, mask_channel_time_reference, True),
}
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
# Masking copies a value or writes a zero; no arithmetic, so the kernel equals the reference exactly in every
# dtype (the same bits, NaN and -0.0 included).
EXACT = {"rtol": 0, "atol": 0, "equal_nan": True}


_kernels_are_interpreted_on_cpu = kernels_are_interpreted_on_cpu(mask_module)


def make_input(shape_btc, channels_first, dtype=torch.float32, seed=0, device=DEVICE):
    """An activation of (B, T, C), laid out as (B, C, T) when ``channels_first``."""
    batch, num_frames, channels = shape_btc
    shape = (batch, channels, num_frames) if channels_first else shape_btc
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator).to(device=device, dtype=dtype)


def make_lengths(lengths, dtype=torch.int64, device=DEVICE):
    return torch.tensor(lengths, dtype=dtype, device=device)


def output_and_input_grad(fn, x, lengths, grad_out):
    x = x.detach().requires_grad_()
    out = fn(x, lengths)
    out.backward(grad_out)
    return out.detach(), x.grad


def assert_kernel_matches_reference(layout, x, lengths, seed=1):
    _, kernel, reference, _ = LAYOUTS[layout]
    grad_out = torch.randn(x.shape, generator=torch.Generator().manual_seed(seed)).to(x)
    out, grad_x = output_and_input_grad(kernel, x, lengths, grad_out)
    expected_out, expected_grad_x = output_and_input_grad(reference, x, lengths, grad_out)
    assert out.dtype == x.dtype and grad_x.dtype == x.dtype
    torch.testing.assert_close(out, expected_out, **EXACT)
    torch.testing.assert_close(grad_x, expected_grad_x, **EXACT)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("shape", "lengths"), MASKED_TIME_CASES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_kernel_matches_reference_exactly(layout, shape, lengths, dtype):
    x = make_input(shape, LAYOUTS[layout][3], dtype)
    assert_kernel_matches_reference(layout, x, make_lengths(lengths))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_frames_from_each_length_on_are_zero_and_the_rest_untouched(layout):
    # The convention, spelled out frame by frame: t >= lengths[b] is padding (masks.py's padding_mask).
    public, _, _, channels_first = LAYOUTS[layout]
    x = make_input((4, 6, 5), channels_first)
    lengths = [6, 0, 2, 9]
    expected = x.clone()
    for batch, length in enumerate(lengths):
        if channels_first:
            expected[batch, :, length:] = 0.0
        else:
            expected[batch, length:] = 0.0
    torch.testing.assert_close(public(x, make_lengths(lengths)), expected, **EXACT)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_nan_and_inf_in_padding_become_zero_and_stay_in_real_frames(layout):
    # masked_fill semantics: a mask multiply would turn padded NaN into NaN; real frames pass through as is.
    _, kernel, reference, channels_first = LAYOUTS[layout]
    x = make_input((2, 4, 3), channels_first)
    time_dim = 2 if channels_first else 1
    x.select(time_dim, 3).fill_(float("nan"))  # frame 3: padding in row 0, real in row 1
    x.select(time_dim, 2).fill_(float("inf"))
    lengths = make_lengths([2, 4])
    out = kernel(x, lengths)
    assert (out[0].select(time_dim - 1, 3) == 0).all() and (out[0].select(time_dim - 1, 2) == 0).all()
    assert out[1].select(time_dim - 1, 3).isnan().all() and out[1].select(time_dim - 1, 2).isinf().all()
    torch.testing.assert_close(out, reference(x, lengths), **EXACT)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_gradcheck_in_float64(layout):
    _, kernel, _, channels_first = LAYOUTS[layout]
    x = make_input((3, 4, 2), channels_first, torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(kernel, (x, make_lengths([4, 0, 2])))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_ragged_tiles_are_masked_at_every_edge(monkeypatch, layout):
    # Default tiles cover these small shapes in one program; shrink them so frames (17 = 4 * 4 + 1) and
    # channels (127 = 7 * 16 + 15) both end in a partial tile, with the wide side on the contiguous dim.
    monkeypatch.setattr(mask_module, "_MAX_BLOCK", 16)
    monkeypatch.setattr(mask_module, "_TILE_ELEMENTS", 64)
    channels_first = LAYOUTS[layout][3]
    expected_config = (16, 4, 2) if channels_first else (4, 16, 5)
    assert mask_module.launch_config(17, 127, channels_first) == expected_config
    x = make_input((5, 17, 127), channels_first)
    assert_kernel_matches_reference(layout, x, make_lengths([17, 1, 9, 0, 30]))


def test_strided_views_and_lengths_match_without_being_made_contiguous():
    # A (B, C, T) conv output seen as (B, T, C) (channel stride T), channels padded to a wider buffer, and a
    # strided, int32 lengths view: the kernel takes all three through their strides.
    channels_last_view = make_input((3, 7, 13), channels_first=True).transpose(1, 2)
    padded_channels = make_input((3, 7, 13 + 6), channels_first=False)[..., :13]
    lengths = make_lengths([7, -1, 0, -1, 3, -1], torch.int32)[::2]
    assert not lengths.is_contiguous()
    for x in (channels_last_view, padded_channels):
        assert not x.is_contiguous()
        assert_kernel_matches_reference("BTC", x, lengths)
    assert_kernel_matches_reference("BCT", channels_last_view.transpose(1, 2)[..., :5], lengths)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_stride_zero_upstream_gradient_from_sum_matches(layout):
    _, kernel, reference, channels_first = LAYOUTS[layout]
    x = make_input((2, 5, 11), channels_first).requires_grad_()
    lengths = make_lengths([3, 5])
    kernel(x, lengths).sum().backward()
    x_reference = x.detach().requires_grad_()
    reference(x_reference, lengths).sum().backward()
    torch.testing.assert_close(x.grad, x_reference.grad, **EXACT)


def test_backward_saves_only_the_lengths():
    x = make_input((2, 3, 7), channels_first=False).requires_grad_()
    lengths = make_lengths([1, 3])
    out = mask_time_kernel(x, lengths)
    saved = out.grad_fn.saved_tensors
    assert len(saved) == 1 and saved[0].data_ptr() == lengths.data_ptr()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_double_backward_is_refused_rather_than_silently_wrong(layout):
    _, kernel, _, channels_first = LAYOUTS[layout]
    x = make_input((2, 3, 4), channels_first, torch.float64).requires_grad_()
    grad_out = torch.randn_like(x).requires_grad_()
    (grad_x,) = torch.autograd.grad(kernel(x, make_lengths([1, 3])), x, grad_out, create_graph=True)
    op = "mask_channel_time_backward" if channels_first else "mask_time_backward"
    with pytest.raises(RuntimeError, match=rf"backward through asr_kernels.{op}.*no autograd formula"):
        grad_x.sum().backward()


@pytest.mark.parametrize(("shape", "lengths"), [((0, 4, 3), []), ((2, 0, 3), [0, 5]), ((2, 4, 0), [1, 4])])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_empty_inputs_give_empty_outputs_and_gradients(layout, shape, lengths):
    x = make_input(shape, LAYOUTS[layout][3])
    out, grad_x = output_and_input_grad(LAYOUTS[layout][1], x, make_lengths(lengths), torch.ones_like(x))
    assert out.shape == x.shape and grad_x.shape == x.shape


@pytest.mark.parametrize("layout", LAYOUTS)
def test_bad_shapes_and_lengths_are_rejected_with_what_was_expected(layout):
    public, _, reference, _ = LAYOUTS[layout]
    for fn in (public, reference):
        with pytest.raises(ValueError, match=r"takes x of shape \(B, .*got a 2-d tensor of shape \(2, 3\)"):
            fn(torch.zeros(2, 3, device=DEVICE), make_lengths([1, 2]))
        with pytest.raises(ValueError, match=r"lengths must be \(B,\) = \(2,\).*got shape \(3,\)"):
            fn(torch.zeros(2, 3, 4, device=DEVICE), make_lengths([1, 2, 3]))
        with pytest.raises(
            ValueError, match=r"integer frame counts, got dtype torch.float32; pass lengths.long"
        ):
            fn(torch.zeros(2, 3, 4, device=DEVICE), torch.tensor([1.0, 2.0], device=DEVICE))


def test_lengths_on_the_cpu_are_moved_to_x_device():
    x = make_input((2, 3, 4), channels_first=False)
    torch.testing.assert_close(
        mask_time(x, torch.tensor([1, 3])), mask_time_reference(x, make_lengths([1, 3]))
    )


def test_public_functions_run_the_kernel_where_triton_can_run():
    x = make_input((2, 3, 5), channels_first=False).requires_grad_()
    lengths = make_lengths([1, 3])
    assert "asr_kernels_mask_time" in type(mask_time(x, lengths).grad_fn).__name__
    assert "asr_kernels_mask_channel_time" in type(mask_channel_time(x, lengths).grad_fn).__name__


def test_reference_choice_skips_the_kernel_and_triton_choice_refuses_what_it_cannot_run(monkeypatch):
    x = make_input((2, 3, 5), channels_first=False).requires_grad_()
    lengths = make_lengths([1, 3])
    with use_kernels("reference"):
        assert type(mask_time(x, lengths).grad_fn).__name__ == "MaskedFillBackward0"
        assert type(mask_channel_time(x, lengths).grad_fn).__name__ == "MaskedFillBackward0"
    with use_kernels("triton"):
        assert "asr_kernels_mask_time" in type(mask_time(x, lengths).grad_fn).__name__
        with pytest.raises(RuntimeError, match=r"mask_channel_time.s kernel does not cover.*int64"):
            mask_channel_time(torch.ones(2, 3, 5, dtype=torch.int64, device=DEVICE), lengths)
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        with pytest.raises(
            RuntimeError, match=r"mask_time cannot run its Triton kernel: the tensor is on cpu"
        ):
            mask_time(torch.zeros(2, 3, 5), torch.tensor([1, 3]))


def test_auto_falls_back_to_the_reference_on_cpu_without_the_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    x = make_input((2, 3, 5), channels_first=False, device="cpu").requires_grad_()
    with use_kernels("auto"):
        out = mask_time(x, torch.tensor([1, 3]))
    assert type(out.grad_fn).__name__ == "MaskedFillBackward0"


@pytest.mark.kernels("auto")
def test_integer_inputs_go_to_the_reference_under_auto():
    x = torch.ones(2, 3, 4, dtype=torch.int64, device=DEVICE)
    out = mask_channel_time(x, make_lengths([2, 0]))
    assert out.dtype == torch.int64 and out.sum().item() == 3 * 2


def test_calls_are_counted_per_op_on_both_paths():
    x = make_input((2, 3, 5), channels_first=False)
    lengths = make_lengths([1, 3])
    with count_calls() as calls:
        mask_time(x, lengths)
        MaskTime(channels_first=True)(x, lengths)
        with use_kernels("reference"):
            MaskTime()(x, lengths)
            mask_channel_time(x, lengths)
    assert calls == {"mask_time": 2, "mask_channel_time": 2}


def test_the_kernel_path_compiles_without_a_graph_break():
    x = make_input((2, 3, 5), channels_first=False).requires_grad_()
    lengths = make_lengths([1, 3])

    def block(x):
        h = mask_time(2 * x, lengths)  # (B, T, C)
        return mask_channel_time(h.transpose(1, 2), lengths) + 1  # (B, C, T)

    explanation = torch._dynamo.explain(block)(x)
    assert explanation.graph_break_count == 0
    assert explanation.graph_count == 1


def test_module_describes_its_layout():
    assert repr(MaskTime()) == "MaskTime(channels_first=False)"
    assert repr(MaskTime(channels_first=True)) == "MaskTime(channels_first=True)"
