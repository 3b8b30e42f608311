"""The mask kernels: bool and additive masks from lengths, bit for bit what the references and the house's
``modules.masks.padding_mask`` give.

On a CPU-only machine the kernels run under Triton's interpreter (``tests.kernels.support``);
``test_cuda_rerun.py`` re-runs this file with compiled kernels on a GPU.
"""

import importlib

import pytest
import torch

from asr_kernels import count_calls, use_kernels
from asr_kernels.masks import (
    attention_mask,
    attention_mask_4d,
    attention_mask_4d_kernel,
    attention_mask_4d_reference,
    attention_mask_kernel,
    attention_mask_reference,
    padding_mask,
    padding_mask_kernel,
    padding_mask_reference,
    sequence_mask,
    sequence_mask_kernel,
    sequence_mask_reference,
)
from asr_pipeline.modules.masks import padding_mask as house_padding_mask
from tests.kernels.support import DEVICE, kernels_are_interpreted_on_cpu

masks_module = importlib.import_module("asr_kernels.masks")

# (lengths, max_length): T = 1; all padded; lengths 0 and full side by side; primes; either side of a power of
# two; T from lengths.max() (None); T past the longest (a batch padded further); T below it (cropped), and a
# negative length (all padding, not an error).
CASES = [
    ([1], 1),
    ([0, 0, 0], 3),
    ([0, 13, 13, 5], 13),
    ([17, 5, 31, 0, 2], None),
    ([32, 33, 31], 33),
    ([63, 1], 64),
    ([7, 3], 11),
    ([9, 4], 6),
    ([-2, 3], 4),
]
CASE_IDS = [f"{lengths}-T{max_length}" for lengths, max_length in CASES]
BOOL_OPS = {
    "sequence_mask": (sequence_mask_kernel, sequence_mask_reference),
    "padding_mask": (padding_mask_kernel, padding_mask_reference),
    "attention_mask": (attention_mask_kernel, attention_mask_reference),
}
ADDITIVE_DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# Every comparison is exact (rtol = atol = 0) in every dtype: each element is one comparison of integers and
# one of two constants (0 or finfo(dtype).min, both exact in the fp32 the kernel stores from), no arithmetic.
EXACT = {"rtol": 0.0, "atol": 0.0}


_kernels_are_interpreted_on_cpu = kernels_are_interpreted_on_cpu(masks_module)


def make_lengths(values, dtype=torch.int64, device=DEVICE):
    return torch.tensor(values, dtype=dtype, device=device)


def resolved(lengths, max_length):
    return int(lengths.max()) if max_length is None else max_length


@pytest.mark.parametrize("length_dtype", [torch.int64, torch.int32], ids=str)
@pytest.mark.parametrize(("values", "max_length"), CASES, ids=CASE_IDS)
@pytest.mark.parametrize("op", list(BOOL_OPS))
def test_bool_mask_kernels_match_their_references_exactly(op, values, max_length, length_dtype):
    kernel, reference = BOOL_OPS[op]
    lengths = make_lengths(values, length_dtype)
    frames = resolved(lengths, max_length)
    out = kernel(lengths, frames)
    expected = reference(lengths, max_length)
    assert out.dtype == torch.bool and out.device == lengths.device
    assert (
        out.shape == expected.shape == (len(values), frames) + ((frames,) if op == "attention_mask" else ())
    )
    torch.testing.assert_close(out, expected, **EXACT)


@pytest.mark.parametrize("num_heads", [1, 3])
@pytest.mark.parametrize("dtype", ADDITIVE_DTYPES, ids=str)
@pytest.mark.parametrize(("values", "max_length"), CASES, ids=CASE_IDS)
def test_additive_mask_kernel_matches_its_reference_exactly(values, max_length, dtype, num_heads):
    lengths = make_lengths(values)
    frames = resolved(lengths, max_length)
    out = attention_mask_4d_kernel(lengths, frames, num_heads, dtype)
    expected = attention_mask_4d_reference(lengths, max_length, num_heads, dtype)
    assert out.dtype == dtype and out.shape == (len(values), num_heads, frames, frames)
    torch.testing.assert_close(out, expected, **EXACT)


def test_masks_say_what_each_frame_is():
    # Example 0 has 2 real frames of 4, example 1 none.
    lengths = make_lengths([2, 0])
    real = torch.tensor([[True, True, False, False], [False] * 4], device=DEVICE)
    torch.testing.assert_close(sequence_mask(lengths, 4), real, **EXACT)
    torch.testing.assert_close(padding_mask(lengths, 4), ~real, **EXACT)
    torch.testing.assert_close(attention_mask(lengths, 4), (~real)[:, None, :].expand(2, 4, 4), **EXACT)
    additive = attention_mask_4d(lengths, 4, num_heads=2, dtype=torch.float16)
    expected_row = torch.tensor([0.0, 0.0, -65504.0, -65504.0], dtype=torch.float16, device=DEVICE)
    torch.testing.assert_close(additive[0], expected_row.expand(2, 4, 4), **EXACT)
    assert (additive[1] == torch.finfo(torch.float16).min).all()


@pytest.mark.parametrize(("values", "max_length"), CASES, ids=CASE_IDS)
def test_padding_mask_is_a_drop_in_for_the_house_padding_mask(values, max_length):
    lengths = make_lengths(values)
    torch.testing.assert_close(
        padding_mask(lengths, max_length), house_padding_mask(lengths, max_length), **EXACT
    )
    torch.testing.assert_close(
        sequence_mask(lengths, max_length), ~house_padding_mask(lengths, max_length), **EXACT
    )


def test_additive_mask_is_the_bias_the_attention_layers_build_by_hand():
    # W2V-BERT and Squeezeformer: a zero bias filled with finfo.min at padded keys, broadcast over heads/queries.
    lengths = make_lengths([5, 2, 0])
    key_padding = house_padding_mask(lengths, 5)  # (B, T)
    for dtype in ADDITIVE_DTYPES:
        by_hand = torch.zeros(3, 1, 5, 5, dtype=dtype, device=DEVICE).masked_fill(
            key_padding[:, None, None, :], torch.finfo(dtype).min
        )
        torch.testing.assert_close(attention_mask_4d(lengths, 5, dtype=dtype), by_hand, **EXACT)


def test_ragged_tiles_are_masked_at_every_edge(monkeypatch):
    # Shrink the tiles so rows (B H T = 2 * 3 * 11 = 66 = 16 * 4 + 2) and columns (11 = 4 + 4 + 3) both end in a
    # partial tile.
    monkeypatch.setattr(masks_module, "_MAX_BLOCK_COLS", 4)
    monkeypatch.setattr(masks_module, "_TILE_ELEMENTS", 16)
    assert masks_module.launch_config(66, 11)[:2] == (4, 4)
    lengths = make_lengths([11, 6])
    torch.testing.assert_close(
        attention_mask_4d_kernel(lengths, 11, 3, torch.float32),
        attention_mask_4d_reference(lengths, 11, 3),
        **EXACT,
    )
    torch.testing.assert_close(
        attention_mask_kernel(lengths, 11), attention_mask_reference(lengths, 11), **EXACT
    )


def test_strided_lengths_are_read_in_place():
    lengths = make_lengths([3, 99, 0, 99, 5])[::2]  # (3,), stride 2
    assert not lengths.is_contiguous()
    torch.testing.assert_close(padding_mask_kernel(lengths, 6), padding_mask_reference(lengths, 6), **EXACT)
    torch.testing.assert_close(
        attention_mask_4d_kernel(lengths, 6, 2, torch.float32),
        attention_mask_4d_reference(lengths, 6, 2),
        **EXACT,
    )


@pytest.mark.parametrize(("values", "max_length"), [([], None), ([], 4), ([3, 0], 0)], ids=str)
def test_empty_batches_and_zero_frames_give_empty_masks(values, max_length):
    lengths = make_lengths(values)
    frames = 0 if max_length is None else max_length
    assert sequence_mask(lengths, max_length).shape == (len(values), frames)
    assert padding_mask(lengths, max_length).shape == (len(values), frames)
    assert attention_mask(lengths, max_length).shape == (len(values), frames, frames)
    assert attention_mask_4d(lengths, max_length, num_heads=2).shape == (len(values), 2, frames, frames)


@pytest.mark.parametrize(
    "op", [sequence_mask, padding_mask, attention_mask, attention_mask_4d], ids=lambda op: op.__name__
)
def test_bad_lengths_and_sizes_are_rejected_with_what_was_expected(op):
    with pytest.raises(ValueError, match=rf"{op.__name__}: lengths must be 1-D \(B,\), got shape \(2, 3\)"):
        op(torch.zeros(2, 3, dtype=torch.int64, device=DEVICE))
    with pytest.raises(ValueError, match=rf"{op.__name__}: max_length must be >= 0, got -1"):
        op(make_lengths([2]), -1)


def test_additive_mask_needs_at_least_one_head():
    with pytest.raises(ValueError, match="num_heads must be >= 1, got 0"):
        attention_mask_4d(make_lengths([2]), 3, num_heads=0)


def test_masks_run_the_kernel_where_triton_can_run(monkeypatch):
    launches = []
    fill = masks_module._fill_from_lengths
    monkeypatch.setattr(
        masks_module, "_fill_from_lengths", lambda *args, **kw: launches.append(1) or fill(*args, **kw)
    )
    lengths = make_lengths([3, 1])
    for op in (sequence_mask, padding_mask, attention_mask, attention_mask_4d):
        op(lengths, 3)
    assert len(launches) == 4
    with use_kernels("reference"):
        for op in (sequence_mask, padding_mask, attention_mask, attention_mask_4d):
            op(lengths, 3)
    assert len(launches) == 4


@pytest.mark.kernels("auto")
def test_auto_takes_the_reference_for_what_the_kernel_leaves_out_and_triton_refuses_it(monkeypatch):
    lengths = make_lengths([3, 1])
    float_lengths = lengths.float()
    # fp64: finfo(fp64).min does not fit the fp32 scalar the kernel stores from; float lengths: not int32 / int64.
    torch.testing.assert_close(
        attention_mask_4d(lengths, 3, dtype=torch.float64),
        attention_mask_4d_reference(lengths, 3, dtype=torch.float64),
        **EXACT,
    )
    torch.testing.assert_close(padding_mask(float_lengths, 3), padding_mask_reference(lengths, 3), **EXACT)
    with use_kernels("triton"):
        with pytest.raises(RuntimeError, match=r"attention_mask_4d.s kernel does not cover"):
            attention_mask_4d(lengths, 3, dtype=torch.float64)
        with pytest.raises(RuntimeError, match=r"sequence_mask.s kernel does not cover.*float32"):
            sequence_mask(float_lengths, 3)
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        with pytest.raises(
            RuntimeError, match=r"padding_mask cannot run its Triton kernel: the tensor is on cpu"
        ):
            padding_mask(make_lengths([3, 1], device="cpu"), 3)


@pytest.mark.kernels("auto")
def test_masks_fall_back_to_the_reference_on_cpu_without_the_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    lengths = make_lengths([3, 0], device="cpu")
    torch.testing.assert_close(padding_mask(lengths), house_padding_mask(lengths), **EXACT)
    torch.testing.assert_close(
        attention_mask_4d(lengths, 3, 2), attention_mask_4d_reference(lengths, 3, 2), **EXACT
    )


def test_calls_are_counted_on_both_paths():
    lengths = make_lengths([3, 1])
    with count_calls() as calls:
        for choice in ("auto", "reference"):
            with use_kernels(choice):
                sequence_mask(lengths, 3)
                padding_mask(lengths)
                attention_mask(lengths, 3)
                attention_mask_4d(lengths, 3, num_heads=2)
    assert calls == {"sequence_mask": 2, "padding_mask": 2, "attention_mask": 2, "attention_mask_4d": 2}


def test_the_kernel_paths_compile_without_a_graph_break():
    # A layer's masks from lengths with T known (the padded tensor's), as the models call them.
    def layer_masks(lengths):
        additive = attention_mask_4d(lengths, 5, num_heads=2)  # (B, 2, T, T)
        keys = attention_mask(lengths, 5)[:, None]  # (B, 1, T, T)
        frames = sequence_mask(lengths, 5) & ~padding_mask(lengths, 5)  # (B, T)
        return additive.masked_fill(keys, 1.0) * frames[:, None, :, None]

    explanation = torch._dynamo.explain(layer_masks)(make_lengths([5, 2, 0]))
    assert explanation.graph_break_count == 0
    assert explanation.graph_count == 1
