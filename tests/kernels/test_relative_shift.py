"""The relative-shift kernel: the same values and gradients as its reference and as both models' own code, with
half the memory.

On a CPU-only machine the kernels run under Triton's interpreter (``tests.kernels.support``);
``test_cuda_rerun.py`` re-runs this file with compiled kernels on a GPU.
"""

import importlib
import json
import tempfile
from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from asr_kernels import count_calls, use_kernels
from asr_kernels.relative_shift import (
    RelativeShift,
    relative_shift,
    relative_shift_kernel,
    relative_shift_reference,
)
from asr_pipeline.modules.attention import RelativePositionalEncoding
from asr_pipeline.modules.zipformer_blocks import compact_relative_positions
from tests.kernels.support import DEVICE, kernels_are_interpreted_on_cpu

# The module itself, for monkeypatching its tile sizes; `asr_kernels.relative_shift` may be shadowed by the
# function once the package exports it.
relative_shift_module = importlib.import_module("asr_kernels.relative_shift")

# (..., T, 2T-1): T = 1 alone and in a batch, primes, a power of two and either side of one, no leading dims.
SHAPES = [(1, 1), (4, 1, 1), (3, 7, 13), (2, 3, 16, 31), (2, 2, 17, 33), (1, 5, 31, 61), (5, 9)]
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
# Every dtype is exact (rtol = atol = 0): forward and backward only move values (each score is read by at most
# one output, so the backward never adds two gradients), and every value they do not move is an exact 0.
EXACT = {"rtol": 0.0, "atol": 0.0}


_kernels_are_interpreted_on_cpu = kernels_are_interpreted_on_cpu(relative_shift_module)


def make_scores(shape, dtype=torch.float32, seed=0, device=DEVICE):
    """Position scores (..., T, 2T-1)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator).to(device=device, dtype=dtype)


def make_grad_out(shape, dtype=torch.float32, seed=1, device=DEVICE):
    """An upstream gradient for an output of (..., T, T), given the scores' shape (..., T, 2T-1)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn((*shape[:-1], shape[-2]), generator=generator).to(device=device, dtype=dtype)


def output_and_input_grad(fn, scores, grad_out):
    scores = scores.detach().requires_grad_()
    out = fn(scores)
    out.backward(grad_out)
    return out.detach(), scores.grad


def zipformer_shift(pos_scores):
    """Zipformer's own relative shift (``RelPositionAttentionWeights.forward``): a strided view of contiguous
    (B, H, T, 2T-1) scores, row i column j at relative index (T-1) + j - i."""
    batch, heads, frames, _ = pos_scores.shape
    s0, s1, s2, s3 = pos_scores.stride()
    return pos_scores.as_strided(
        (batch, heads, frames, frames), (s0, s1, s2 - s3, s3), pos_scores.storage_offset() + s3 * (frames - 1)
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_kernel_matches_the_reference_exactly(shape, dtype):
    scores, grad_out = make_scores(shape, dtype), make_grad_out(shape, dtype)
    out, grad_scores = output_and_input_grad(relative_shift_kernel, scores, grad_out)
    expected_out, expected_grad = output_and_input_grad(relative_shift_reference, scores, grad_out)
    assert out.shape == (*shape[:-1], shape[-2]) and out.dtype == dtype and grad_scores.dtype == dtype
    torch.testing.assert_close(out, expected_out, **EXACT)
    torch.testing.assert_close(grad_scores, expected_grad, **EXACT)


@pytest.mark.parametrize("shape", [(2, 3, 7, 13), (1, 2, 16, 31)], ids=str)
def test_kernel_matches_the_squeezeformer_and_zipformer_code_it_replaces(shape):
    # Squeezeformer / W2V-BERT used the pad + reshape (now relative_shift_reference), Zipformer an as_strided
    # view: the same index map, so one op serves both position layouts.
    scores = make_scores(shape)
    out = relative_shift_kernel(scores)
    torch.testing.assert_close(out, relative_shift_reference(scores), **EXACT)
    torch.testing.assert_close(out, zipformer_shift(scores), **EXACT)


def test_each_layout_puts_the_pair_i_j_at_its_relative_position():
    # Scores that hold their own position label: the shifted matrix must then read i - j (Squeezeformer's
    # distances, laid out from T-1 down) and j - i (Zipformer's offsets, from -(T-1) up) at [i, j].
    frames = 6
    distance = torch.arange(
        frames - 1, -frames, -1, dtype=torch.float32, device=DEVICE
    )  # as the encoding does
    assert RelativePositionalEncoding(4)(frames).shape[0] == distance.numel() == 2 * frames - 1
    offset = torch.arange(-(frames - 1), frames, dtype=torch.float32, device=DEVICE)
    assert compact_relative_positions(frames, 4).shape[0] == offset.numel()
    i = torch.arange(frames, device=DEVICE)[:, None]
    j = torch.arange(frames, device=DEVICE)[None, :]
    query_rows = (frames, 2 * frames - 1)
    torch.testing.assert_close(relative_shift_kernel(distance.expand(query_rows)), (i - j).float(), **EXACT)
    torch.testing.assert_close(relative_shift_kernel(offset.expand(query_rows)), (j - i).float(), **EXACT)


def test_backward_writes_the_gradient_where_read_and_zero_everywhere_else():
    frames = 5
    scores = make_scores((2, frames, 2 * frames - 1)).requires_grad_()
    relative_shift_kernel(scores).backward(torch.ones(2, frames, frames, device=DEVICE))
    i = torch.arange(frames, device=DEVICE)[:, None]
    column = torch.arange(2 * frames - 1, device=DEVICE)[None, :]
    read = (column >= frames - 1 - i) & (column <= 2 * frames - 2 - i)  # row i reads T-1-i .. 2T-2-i
    assert read.sum() == frames * frames
    torch.testing.assert_close(scores.grad, read.float().expand(2, -1, -1), **EXACT)


def test_gradcheck_in_float64():
    scores = make_scores((2, 3, 5, 9), torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(relative_shift_kernel, (scores,))


def test_ragged_tiles_are_masked_at_every_edge(monkeypatch):
    # Shrink the tiles so rows (3 * 11 = 33 = 8 * 4 + 1) and columns (11 = 4 + 4 + 3 forward, 21 = 5 * 4 + 1
    # backward) all end in a partial tile.
    monkeypatch.setattr(relative_shift_module, "_MAX_BLOCK_COLS", 4)
    monkeypatch.setattr(relative_shift_module, "_TILE_ELEMENTS", 16)
    shape = (3, 11, 21)
    assert relative_shift_module.launch_config(33, 11)[:2] == (4, 4)
    scores, grad_out = make_scores(shape), make_grad_out(shape)
    out, grad_scores = output_and_input_grad(relative_shift_kernel, scores, grad_out)
    expected_out, expected_grad = output_and_input_grad(relative_shift_reference, scores, grad_out)
    torch.testing.assert_close(out, expected_out, **EXACT)
    torch.testing.assert_close(grad_scores, expected_grad, **EXACT)


def test_strided_scores_are_read_in_place():
    # Each row padded to a wider buffer (row stride 2T-1 + 3), and a (2T-1, T) buffer seen transposed
    # (column stride T): both flatten to (N, T, 2T-1) as views, so the kernel reads them without a copy.
    frames = 7
    padded = make_scores((2, 3, frames, 2 * frames - 1 + 3))[..., : 2 * frames - 1]
    transposed = make_scores((2, 2 * frames - 1, frames)).transpose(1, 2)
    for scores in (padded, transposed):
        assert not scores.is_contiguous()
        assert scores.reshape(-1, frames, 2 * frames - 1).data_ptr() == scores.data_ptr()
        grad_out = make_grad_out(scores.shape)
        out, grad_scores = output_and_input_grad(relative_shift_kernel, scores, grad_out)
        expected_out, expected_grad = output_and_input_grad(relative_shift_reference, scores, grad_out)
        torch.testing.assert_close(out, expected_out, **EXACT)
        torch.testing.assert_close(grad_scores, expected_grad, **EXACT)


def test_stride_zero_upstream_gradient_from_sum_matches():
    # .sum().backward() hands backward an expanded gradient whose strides are all 0.
    scores = make_scores((2, 3, 6, 11)).requires_grad_()
    relative_shift_kernel(scores).sum().backward()
    scores_reference = scores.detach().requires_grad_()
    relative_shift_reference(scores_reference).sum().backward()
    torch.testing.assert_close(scores.grad, scores_reference.grad, **EXACT)


def test_backward_saves_nothing():
    out = relative_shift_kernel(make_scores((2, 4, 7)).requires_grad_())
    assert out.grad_fn.saved_tensors == ()


def test_double_backward_is_refused_rather_than_silently_wrong():
    scores = make_scores((1, 3, 5), torch.float64).requires_grad_()
    grad_out = make_grad_out(scores.shape, torch.float64).requires_grad_()
    (grad_scores,) = torch.autograd.grad(relative_shift_kernel(scores), scores, grad_out, create_graph=True)
    with pytest.raises(
        RuntimeError, match=r"backward through asr_kernels.relative_shift_backward.*no autograd formula"
    ):
        grad_scores.sum().backward()


@pytest.mark.parametrize("shape", [(0, 4, 7), (2, 0, 3, 5), (3, 0, 0)], ids=str)
def test_empty_inputs_give_empty_outputs_and_gradients(shape):
    scores, grad_out = make_scores(shape), make_grad_out(shape)
    out, grad_scores = output_and_input_grad(relative_shift_kernel, scores, grad_out)
    assert out.shape == (*shape[:-1], shape[-2])
    assert grad_scores.shape == shape
    assert relative_shift_reference(scores).shape == out.shape


@pytest.mark.parametrize("shape", [(2, 5, 8), (2, 5, 10), (7,), (0, 1)], ids=str)
def test_scores_without_2t_minus_1_positions_are_rejected_with_the_shape(shape):
    scores = make_scores(shape)
    with pytest.raises(ValueError, match=r"relative_shift .*shape \(" + ", ".join(map(str, shape))):
        relative_shift(scores)
    with pytest.raises(ValueError, match="relative_shift"):
        relative_shift_reference(scores)


def peak_allocated_bytes(run, prepare=lambda: None) -> int:
    """The most bytes ``run(prepare())`` holds on DEVICE at once beyond what existed before it started.

    On CUDA the caching allocator's peak counter; on the CPU the profiler's allocation and free records, in
    the order they happened (read from its Chrome trace: the per-op summaries credit a free inside an op to the
    op's start, before allocations that preceded it). Frees of blocks allocated before the call are left out:
    Triton's interpreter holds on to a launch's tensors until the next launch, so the first launch inside
    the call frees tensors of the one before. One unmeasured call first, so that lazy initialisation is not
    counted.
    """
    run(prepare())
    inputs = prepare()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        run(inputs)
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as recorded:
        run(inputs)
    with tempfile.TemporaryDirectory() as directory:
        trace_path = Path(directory) / "trace.json"
        recorded.export_chrome_trace(str(trace_path))
        trace = json.loads(trace_path.read_text())
    records = sorted(
        (event["ts"], event["args"]["Bytes"], event["args"]["Addr"])
        for event in trace["traceEvents"]
        if event.get("name") == "[memory]"
    )
    allocated_here: set[int] = set()
    held = peak = 0
    for _, change, address in records:  # + bytes allocated, - bytes freed
        if change > 0:
            allocated_here.add(address)
        elif address in allocated_here:
            allocated_here.remove(address)
        else:
            continue  # a block from before the call
        held += change
        peak = max(peak, held)
    return peak


@pytest.mark.filterwarnings("ignore:.*Profiler clears events.*:UserWarning")
def test_the_kernel_needs_at_most_half_the_reference_peak_memory_forward_and_backward():
    # N = 8 rows of heads, T = 64: the output is N T^2 fp32 = 128 KiB. The reference's forward writes the
    # padded (N, T, 2T) copy and returns a view of it (2x); its backward builds a zeroed (N, T, 2T-1) gradient
    # for the slice and a zeroed (N, 2T-1, T) one for the row drop, both alive at once (~4x). The kernel
    # allocates its output, then the (N, T, 2T-1) gradient: 1x and ~2x.
    shape = (2, 4, 64, 127)
    out_bytes = 2 * 4 * 64 * 64 * 4
    scores, grad_out = make_scores(shape), make_grad_out(shape)

    def forward(fn):
        return peak_allocated_bytes(lambda _: fn(scores))

    def backward(fn):
        # The graph is built outside the measurement and its output freed, as in a model, where the shifted
        # scores are consumed by the next op before backward runs.
        def prepare():
            leaf = scores.detach().requires_grad_()
            return leaf, fn(leaf)

        return peak_allocated_bytes(lambda inputs: inputs[1].backward(grad_out), prepare)

    kernel_forward, reference_forward = forward(relative_shift_kernel), forward(relative_shift_reference)
    kernel_backward, reference_backward = backward(relative_shift_kernel), backward(relative_shift_reference)
    # The measurement sees the allocations at all: the output, and the gradient of (2T-1)/T its size.
    assert kernel_forward >= out_bytes and kernel_backward >= out_bytes * 127 // 64
    assert kernel_forward <= 0.5 * reference_forward, (kernel_forward, reference_forward)
    assert kernel_backward <= 0.5 * reference_backward, (kernel_backward, reference_backward)


def test_relative_shift_runs_the_kernel_where_triton_can_run():
    scores = make_scores((2, 3, 5)).requires_grad_()
    out = relative_shift(scores)
    assert type(out.grad_fn).__name__ == "asr_kernels_relative_shiftBackward"


def test_reference_choice_skips_the_kernel_and_triton_choice_refuses_what_it_cannot_run(monkeypatch):
    scores = make_scores((2, 3, 5)).requires_grad_()
    with use_kernels("reference"):
        assert type(relative_shift(scores).grad_fn).__name__ == "SliceBackward0"  # the reference's last slice
    with use_kernels("auto"):
        kernel_on_this_device = DEVICE == "cuda"  # auto: Triton on CUDA, the reference on the CPU
        assert ("asr_kernels_relative_shift" in type(relative_shift(scores).grad_fn).__name__) == (
            kernel_on_this_device
        )
        torch.testing.assert_close(  # integer scores take the reference
            relative_shift(torch.arange(6, device=DEVICE).view(2, 3)),
            torch.tensor([[1, 2], [3, 4]], device=DEVICE),
        )
    with use_kernels("triton"):
        assert "asr_kernels_relative_shift" in type(relative_shift(scores).grad_fn).__name__
        with pytest.raises(RuntimeError, match=r"relative_shift.s kernel does not cover.*int64"):
            relative_shift(torch.zeros(2, 3, dtype=torch.int64, device=DEVICE))
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        with pytest.raises(
            RuntimeError, match=r"relative_shift cannot run its Triton kernel: the tensor is on cpu"
        ):
            relative_shift(torch.zeros(2, 3))


def test_calls_are_counted_on_both_paths():
    scores = make_scores((2, 3, 5))
    with count_calls() as calls:
        relative_shift(scores)
        with use_kernels("reference"):
            RelativeShift()(scores)
    assert calls == {"relative_shift": 2}


def test_the_kernel_path_compiles_without_a_graph_break():
    # Squeezeformer's use: the shifted position scores scaled into an attention bias.
    scores = make_scores((2, 2, 5, 9)).requires_grad_()
    explanation = torch._dynamo.explain(lambda s: relative_shift(2 * s) / 4.0)(scores)
    assert explanation.graph_break_count == 0
    assert explanation.graph_count == 1


@pytest.mark.kernels("auto")
def test_relative_shift_falls_back_to_the_reference_on_cpu_without_the_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    scores = make_scores((2, 3, 5), device="cpu").requires_grad_()
    out = relative_shift(scores)
    assert type(out.grad_fn).__name__ == "SliceBackward0"
    torch.testing.assert_close(out, relative_shift_reference(scores), **EXACT)
