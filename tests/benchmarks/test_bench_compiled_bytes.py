"""benchmarks/bench_compiled_bytes.py (issue 36) on the CPU, as it always runs: inductor's lowering and fusion
for a CUDA device that is not there, exact bytes for a one-kernel forward and backward, the patches undone,
and (slow) the tiny Zipformer's compiled step against its eager one."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from .conftest import imported_script


@pytest.fixture
def bench(monkeypatch):
    yield from imported_script(monkeypatch, "bench_compiled_bytes", "bench_forward_bytes")


@pytest.fixture
def fake():
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode(allow_non_fake_inputs=True)


class Scale(nn.Module):
    """y = x * w + 1: one pointwise kernel forward; the backward one reduction (w's gradient)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, features, lengths):
        return features * self.weight + 1, lengths


def fake_inputs(fake, module: nn.Module, shape: tuple[int, ...]):
    with fake:
        module = module._apply(fake.from_tensor)
        batch = {
            "features": fake.from_tensor(torch.randn(shape)),
            "lengths": fake.from_tensor(torch.ones(shape[0])),
        }
    return module, batch


def test_one_pointwise_kernel_forward_and_one_reduction_backward_with_exact_bytes(bench, fake):
    module, batch = fake_inputs(fake, Scale(16), (4, 8, 16))
    forward, backward = bench.compiled_step(module, batch, "f32", fake)
    x = 4 * 8 * 16 * 4  # bytes of x, of y and of y's gradient (float32)
    # forward: reads x and w, writes y; x is an input, so the backward gets it without the forward saving it
    assert forward.count == {("Scale", "pointwise"): 1}
    assert forward.moved[("Scale", "pointwise")] == x + 16 * 4 + x
    assert forward.saved_bytes == 0
    # backward: w's gradient, the sum over (B, T) of dy * x: reads both, writes (16,)
    assert backward.count == {("Scale", "reduction"): 1}
    assert backward.gb() * 1e9 == pytest.approx(x + x + 16 * 4)


class Projection(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(16, 24)

    def forward(self, features, lengths):
        return torch.tanh(self.linear(features)), lengths


def test_a_linear_under_bf16_is_one_product_each_way_and_saves_its_bf16_input_and_output(bench, fake):
    module, batch = fake_inputs(fake, Projection(), (4, 8, 16))
    forward, backward = bench.compiled_step(module, batch, "bf16", fake)
    assert forward.kernels(("addmm",)) == 1 and forward.count[("Linear", "addmm")] == 1
    assert backward.kernels(("mm",)) == 1  # the weight's gradient: the features need none
    # kept for the backward: the features cast to bf16 (32 x 16, not the 24 x 16 weight) and tanh's bf16 output
    assert forward.saved_bytes == 2 * (32 * 16 + 4 * 8 * 24)


class Heads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(16, 32), nn.Linear(16, 32)

    def forward(self, features, lengths):
        return torch.tanh(self.a(features)) + torch.sigmoid(self.b(features)), lengths


def test_combo_kernels_give_independent_small_kernels_one_launch(bench, fake):
    from torch._inductor import config

    counts = {}
    for combo in (False, True):
        module, batch = fake_inputs(fake, Heads(), (4, 8, 16))
        with config.patch(combo_kernels=combo):
            counts[combo] = bench.compiled_step(module, batch, "bf16", fake)
    (forward, backward), (combo_forward, combo_backward) = counts[False], counts[True]
    # bf16 casts of the input, two weights and two biases: five kernels, or one combo kernel
    assert forward.count[("Linear", "pointwise")] == 5 and ("Linear", "combo") not in forward.count
    assert (
        combo_forward.count[("Linear", "combo")] == 1 and ("Linear", "pointwise") not in combo_forward.count
    )
    for kernels in (forward, backward, combo_forward, combo_backward):  # the products stay apart
        assert kernels.kernels(("addmm", "mm")) == 2
    assert combo_backward.kernels() == backward.kernels() - 2  # two reductions, two casts: one launch each
    assert combo_forward.gb() == pytest.approx(forward.gb())


def test_compile_options_are_the_engines_and_a_bad_one_is_an_argparse_error(bench, capsys):
    from training_step import compile_options

    assert compile_options("combo_kernels=True") == {"combo_kernels": True}
    with pytest.raises(SystemExit):
        bench.main(["--compile-options", "no_such_setting=1"])
    assert "torch._inductor.config setting" in capsys.readouterr().err


class Convolution(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(16, 16, 3, padding=1)

    def forward(self, features, lengths):
        return self.conv(features.transpose(1, 2)).transpose(1, 2), lengths


def test_what_inductor_caches_of_the_fake_device_is_forgotten_after_use(bench, fake):
    from torch._inductor import scheduler
    from torch._inductor.runtime.hints import DeviceProperties
    from torch._inductor.utils import is_big_gpu

    before = (torch.cuda.get_device_properties, scheduler.has_triton)
    with bench.sm90():
        assert torch.cuda.get_device_properties(0).multi_processor_count == 132 and scheduler.has_triton()
        assert is_big_gpu(0) and is_big_gpu.cache_info().currsize == 1  # the fake's answer, cached
    assert is_big_gpu.cache_info().currsize == DeviceProperties.create.cache_info().currsize == 0
    assert (torch.cuda.get_device_properties, scheduler.has_triton) == before
    # a convolution's lowering asks whether the device is a big GPU: nothing of it stays
    module, batch = fake_inputs(fake, Convolution(), (4, 8, 16))
    forward, _ = bench.compiled_step(module, batch, "f32", fake)
    assert forward.kernels(("convolution",)) == 1
    assert is_big_gpu.cache_info().currsize == DeviceProperties.create.cache_info().currsize == 0


def test_an_unknown_model_is_a_one_line_error(bench, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--models", "zipformer:xxl"])
    assert "--models zipformer:xxl" in capsys.readouterr().err


@pytest.mark.slow
def test_the_tiny_zipformers_compiled_step_fuses_what_eager_runs_op_by_op(bench, capsys):
    (f32, bf16) = bench.main(["--models", "zipformer:tiny", "--batch-frames", "800", "--max-frames", "200"])
    for row in (f32, bf16):
        compiled = row["forward_gb"] + row["backward_gb"]
        assert compiled < 0.6 * row["eager_gb"]
        assert row["forward_kernels"] + row["backward_kernels"] < 0.6 * row["eager_ops"]
    # bf16 moves fewer bytes than f32 once compiled (the float32 detours are fused into their neighbours)
    assert bf16["forward_gb"] + bf16["backward_gb"] < 0.7 * (f32["forward_gb"] + f32["backward_gb"])
    assert "step GB" in capsys.readouterr().out


class RelativeKeyAttention(nn.Module):
    """W2V-BERT's relative_key self-attention (2 heads of 16: the smallest FlexAttention's CUDA kernel takes)."""

    def __init__(self, attention: str) -> None:
        from asr_pipeline.models.w2v_bert_blocks import SelfAttention
        from asr_pipeline.models.w2v_bert_spec import w2v_bert_config

        super().__init__()
        config = w2v_bert_config("tiny", num_heads=2, dropout=0.0, relative_key_attention=attention)
        self.attention = SelfAttention(config, config.d_model, "relative_key")

    def forward(self, features, lengths):
        return self.attention(features, lengths, None), lengths


def test_flex_relative_key_attention_lowers_to_one_template_each_way_and_moves_no_t_by_t_bias(bench, fake):
    from torch._dynamo import trace_rules
    from torch._dynamo.variables import torch as dynamo_torch

    # dynamo's tables of torch's functions as in a fresh process (FlexAttention's reference traces with dynamo)
    trace_rules.get_torch_obj_rule_map.cache_clear()
    dynamo_torch.tracing_state_functions.cache_clear()
    dynamo_torch.TorchInGraphFunctionVariable._get_handlers.cache_clear()
    batch, frames = 2, 256
    steps = {}
    for attention in ("dense", "flex"):
        module = RelativeKeyAttention(attention)
        with fake:
            module = module._apply(fake.from_tensor)
            inputs = {
                "features": fake.from_tensor(torch.randn(batch, frames, 32)),
                "lengths": fake.from_tensor(torch.tensor([frames, 100])),
            }
        steps[attention] = bench.compiled_step(module, inputs, "bf16", fake)

    def kinds(kernels):
        return {kind for _, kind in kernels.count}

    dense, flex = steps["dense"], steps["flex"]
    assert "template" in kinds(flex[0]) and "template" in kinds(flex[1])  # the fused attention, each way
    assert "template" not in kinds(dense[0]) | kinds(dense[1])
    # one (B, H, T, T) bf16 tensor: the dense path writes and reads several
    bias = batch * 2 * frames * frames * 2
    assert dense[0].gb() * 1e9 > flex[0].gb() * 1e9 + bias
    assert dense[1].gb() * 1e9 > flex[1].gb() * 1e9 + bias
    assert flex[0].saved_bytes < dense[0].saved_bytes - bias

    # and the process's later traces still see is_compiling as dynamo does (not the bench's patch of it)
    def doubled_when_compiled(x):
        return 2 * x if torch.compiler.is_compiling() else x

    compiled = torch.compile(doubled_when_compiled, backend="eager", fullgraph=True)
    assert compiled(torch.ones(1)).item() == 2.0
