"""benchmarks/bench_forward_bytes.py (issue 36) on the CPU, as it always runs: exact counts for a Linear under
CUDA's autocast on fake CUDA tensors, SDPA counted as one fused kernel, and the tiny Zipformer's bf16 forward
free of the float32 detours it had (the Swoosh references, the residual casts, the attention softmax)."""

from __future__ import annotations

import argparse
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from .conftest import imported_script

TINY_BATCH = argparse.Namespace(batch_frames=800, max_frames=200)  # 4 utterances, the longest 2 s


@pytest.fixture
def bench(monkeypatch):
    yield from imported_script(monkeypatch, "bench_forward_bytes")


@pytest.fixture
def fake():
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode(allow_non_fake_inputs=True)


def census_of(bench, fake, module: nn.Module, x: torch.Tensor, precision: str):
    """The census of ``module(x)`` on fake CUDA tensors under ``precision`` (f32 or bf16 autocast)."""
    census = bench.Census()
    with fake:
        module, x = module.to("cuda"), x.to("cuda")
        with (
            bench.cuda_autocast(bench.PRECISIONS[precision]),
            bench.module_stack([]) as modules,
            bench.FusedAttention(),
            bench.CensusMode(census, bench.innermost(modules)),
        ):
            module(x)
    return census


def test_a_linear_under_bf16_autocast_casts_its_input_weight_and_bias(bench, fake):
    census = census_of(bench, fake, nn.Linear(8, 16), torch.randn(2, 5, 8), "bf16")
    totals = census.totals()
    # casts: input 2*5*8, weight 16*8, bias 16 values to bf16; addmm writes 2*5*16 bf16; the reshapes move nothing
    assert totals["casts"] == 3 and totals["cast_gb"] * 1e9 == 2 * (80 + 128 + 16)
    assert totals["ops"] == 4 and totals["written_gb"] * 1e9 == 2 * (80 + 128 + 16) + 2 * 160
    assert census.ops[("Linear", "addmm", "bfloat16")] == 1
    assert totals["written_f32_gb"] == 0
    f32 = census_of(bench, fake, nn.Linear(8, 16), torch.randn(2, 5, 8), "f32").totals()
    assert f32["casts"] == 0 and f32["written_gb"] * 1e9 == 4 * 160


class Attention(nn.Module):
    def forward(self, x):
        return F.scaled_dot_product_attention(
            x,
            x,
            x,
            attn_mask=torch.ones(x.shape[-2], x.shape[-2], dtype=torch.bool, device=x.device),
            dropout_p=0.1,
        )


def test_sdpa_counts_as_one_fused_kernel_not_its_math_decomposition(bench, fake):
    census = census_of(bench, fake, Attention(), torch.randn(2, 4, 50, 16), "bf16")
    names = {name for _, name, _ in census.ops}
    assert census.ops[("Attention", "_scaled_dot_product_efficient_attention", "bfloat16,float32,int64")] == 1
    assert not names & {"bmm", "_softmax", "_safe_softmax", "native_dropout"}  # the math path's passes


class KeywordAttention(nn.Module):
    def forward(self, x):
        return F.scaled_dot_product_attention(query=x, key=x, value=x, is_causal=True)


def test_sdpa_given_by_keyword_or_causal_is_one_kernel_too(bench, fake):
    census = census_of(bench, fake, KeywordAttention(), torch.randn(2, 4, 50, 16), "bf16")
    assert (
        census.ops[("KeywordAttention", "_scaled_dot_product_efficient_attention", "bfloat16,float32,int64")]
        == 1
    )
    with fake, pytest.raises(ValueError, match="attn_mask or is_causal"), bench.FusedAttention():
        x = torch.randn(1, 1, 4, 8, device="cuda")
        F.scaled_dot_product_attention(x, x, x, attn_mask=torch.zeros(4, 4, device="cuda"), is_causal=True)


class LearnedBias(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(50, 50))

    def forward(self, x):
        return F.scaled_dot_product_attention(x, x, x, attn_mask=self.bias)


def attention_ops_on_the_cpu(bench, fake, module: nn.Module) -> set[str]:
    census = bench.Census()
    with fake:
        module, x = module, torch.randn(2, 4, 50, 16, requires_grad=True)
        with bench.FusedAttention(), bench.CensusMode(census, lambda: "-"):
            module(x).sum().backward()
    return {name for _, name, _ in census.ops}


def test_on_the_cpu_sdpa_is_the_cpus_flash_attention_but_with_a_mask_that_needs_its_gradient(bench, fake):
    fused = attention_ops_on_the_cpu(bench, fake, Attention())
    assert "_scaled_dot_product_flash_attention_for_cpu" in fused and "bmm" not in fused
    math_path = attention_ops_on_the_cpu(
        bench, fake, LearnedBias()
    )  # the CPU's kernel gives a mask no gradient
    assert "bmm" in math_path and "_scaled_dot_product_flash_attention_for_cpu" not in math_path


def zipformer_census(bench, fake, precision: str):
    model = bench.fake_model("zipformer:tiny", fake)
    batch = bench.fake_batch("zipformer:tiny", TINY_BATCH, fake)
    with fake:
        return bench.census_of(model, batch, (precision, "off"))


def test_the_zipformer_bf16_forward_stays_bf16_where_float32_bought_nothing(bench, fake):
    # Its forward reads int(lengths.min()): answered from the real lengths beside the fakes, or it would raise.
    bf16, f32 = zipformer_census(bench, fake, "bf16"), zipformer_census(bench, fake, "f32")
    float32_writers = {module for (module, _, dtypes) in bf16.ops if "float32" in dtypes}
    assert "Swoosh" not in float32_writers  # softplus kept bf16 (CUDA's autocast widens it)
    assert ("RelPositionAttentionWeights", "_softmax", "bfloat16") in bf16.ops
    assert not [key for key in bf16.ops if key[0] == "ZipformerEncoderLayer" and key[1] == "_to_copy"]
    assert bf16.totals()["written_gb"] < 0.7 * f32.totals()["written_gb"]
    assert 0 < bf16.totals()["saved_gb"] < f32.totals()["saved_gb"]


def test_the_backward_on_the_cpu_is_charged_to_modules_and_its_forward_matches_cudas(bench, fake):
    # The backward runs on fake CPU tensors under the CPU's autocast: for the Zipformer that forward writes what
    # CUDA's policy writes, op for op, except dropout, which the CPU decomposes.
    model, batch = (
        bench.fake_model("zipformer:tiny", fake, "cpu"),
        bench.fake_batch("zipformer:tiny", TINY_BATCH, fake, "cpu"),
    )
    with fake:
        forward, backward = bench.step_census_on_cpu(model, batch, "bf16")
    on_cuda = zipformer_census(bench, fake, "bf16")
    differ = {
        key
        for key in set(forward.written) | set(on_cuda.written)
        if forward.written[key] != on_cuda.written[key]
    }
    # ... and the Zipformer's check of the shortest length, which it makes only where the lengths are on the CPU
    assert {module for module, _, _ in differ} == {"Dropout", "Zipformer"}
    assert {key for key in differ if key[0] == "Zipformer"} == {("Zipformer", "min", "int64")}
    assert backward.written[("Swoosh", "softplus_backward", "bfloat16")] > 0
    charged = sum(v for (module, _, _), v in backward.written.items() if module != "-")
    assert charged > 0.95 * sum(backward.written.values())  # nearly every backward byte has its module
    # The same-values rewrites: Swoosh adds -0.08 x (no negated gradient), BiasNorm adds the negated bias (its
    # gradient negated at (D,) only), the attention's q, k, p split (no slice backward beyond the shift's two).
    assert ("Swoosh", "neg", "bfloat16") not in backward.ops
    assert backward.written[("BiasNorm", "neg", "float32")] < 0.01 * sum(
        v for key, v in backward.written.items() if key[0] == "BiasNorm"
    )
    layers = sum(1 for _ in model.modules() if type(_).__name__ == "ZipformerEncoderLayer")
    assert backward.ops[("RelPositionAttentionWeights", "slice_backward", "bfloat16")] == 2 * layers
    with fake:
        again = bench.step_census_on_cpu(model, batch, "bf16")[1]
    assert again.written == backward.written  # no gradient left over to add into


@pytest.mark.parametrize(
    ("model_name", "apart"),
    [("squeezeformer:xs", {"Dropout", "BatchNorm1d"}), ("w2v-bert:tiny", {"Dropout"})],
)
def test_the_cpu_step_has_cudas_float32_ops_and_attention_kernel(bench, fake, model_name, apart):
    # CudaFloat32Ops: LayerNorm (and softmax, pow, ...) of a bf16 input give float32 on the CPU too, as CUDA's
    # autocast gives them; W2V-BERT's attention, whose mask needs its gradient, is CUDA's kernel each way.
    # Apart: dropout (the CPU decomposes it) and BatchNorm (its saved statistics are float32 on CUDA).
    model, batch = bench.fake_model(model_name, fake), bench.fake_batch(model_name, TINY_BATCH, fake)
    cpu_model, cpu_batch = (
        bench.fake_model(model_name, fake, "cpu"),
        bench.fake_batch(model_name, TINY_BATCH, fake, "cpu"),
    )
    with fake:
        on_cuda = bench.census_of(model, batch, ("bf16", "off"))
        forward, backward = bench.step_census_on_cpu(cpu_model, cpu_batch, "bf16")
    differ = {
        key
        for key in set(forward.written) | set(on_cuda.written)
        if forward.written[key] != on_cuda.written[key]
    }
    assert {module for module, _, _ in differ} == apart
    if model_name.startswith("w2v-bert"):
        assert (
            backward.ops[("SelfAttention", "_scaled_dot_product_efficient_attention_backward", "bfloat16")]
            > 0
        )


def test_the_table_compares_arms_of_each_model(bench, capsys):
    rows = bench.main(
        [
            "--backward",
            "--models",
            "zipformer:tiny",
            "--batch-frames",
            "800",
            "--max-frames",
            "200",
            "--arms",
            "f32:off",
            "bf16:auto",
        ]
    )
    assert [row["arm"] for row in rows] == ["f32:off", "bf16:auto"]
    assert rows[0]["backward_gb"] > 0 and math.isnan(rows[1]["backward_gb"])  # no Triton backward on the CPU
    out = capsys.readouterr().out
    assert "zipformer:tiny bf16:auto, batch 4x200" in out and "1.00x" in out


def test_an_arm_names_precision_and_kernels(bench):
    assert bench.parse_arm("bf16:relative_shift") == ("bf16", "relative_shift")
    for wrong in ("bf16", "fp16:off", "bf16:swish"):
        with pytest.raises(argparse.ArgumentTypeError, match="PRECISION:KERNELS"):
            bench.parse_arm(wrong)


@pytest.mark.parametrize(
    ("model", "says"),
    [("zipformer:xxl", "unknown zipformer variant 'xxl'"), ("paraformer:tiny", "float tensors")],
)
def test_a_model_it_cannot_count_is_a_one_line_error(bench, capsys, model, says):
    with pytest.raises(SystemExit):
        bench.main(["--models", model, "--batch-frames", "800", "--max-frames", "200", "--arms", "f32:off"])
    assert says in capsys.readouterr().err
