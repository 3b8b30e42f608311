"""models.w2v_bert_blocks: the adapter's length arithmetic is a real Conv1d's; rotary positions rotate each
head (norms kept, scores depend on the offset only); self-attention under every position scheme ignores what
padded frames hold, and relative_key's FlexAttention path computes what its dense one does; the convolution
module never sees the future. Shapes follow the module's legend."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.attention.flex_attention as flex_attention_module

from asr_pipeline.models import w2v_bert_blocks
from asr_pipeline.models.w2v_bert import w2v_bert_tiny
from asr_pipeline.models.w2v_bert_blocks import (
    ConvolutionModule,
    RotaryEmbedding,
    SelfAttention,
    adapter_output_lengths,
    rotate,
)
from asr_pipeline.models.w2v_bert_spec import w2v_bert_config

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/models/conftest.py


@pytest.mark.parametrize(("kernel", "stride"), [(3, 2), (5, 2), (4, 3)])
def test_adapter_output_lengths_are_a_conv1d_with_half_stride_padding(kernel, stride):
    lengths = torch.tensor([3, 4, 7, 16, 97])  # each at least one window long
    conv = torch.nn.Conv1d(1, 1, kernel, stride=stride, padding=stride // 2)

    expected = [conv(torch.zeros(1, 1, int(n))).size(-1) for n in lengths]

    assert adapter_output_lengths(lengths, kernel, stride).tolist() == expected


def test_the_adapter_of_kernel_3_stride_2_halves_97_frames_to_49():
    # floor((97 + 2 * 1 - 3) / 2) + 1 = 49; floor((5 + 2 - 3) / 2) + 1 = 3
    assert adapter_output_lengths(torch.tensor([97, 5]), 3, 2).tolist() == [49, 3]


def test_rotary_positions_keep_each_heads_norm_and_make_scores_depend_on_the_offset_only():
    heads, head_size, length = 2, 8, 12
    cos, sin = RotaryEmbedding(head_size, base=10000)(length)  # (T, 1, K) each
    generator = torch.Generator().manual_seed(0)
    query, key = torch.randn(2, heads * head_size, generator=generator)
    # The same query and key at every frame: after rotation, score(t, s) may depend only on t - s.
    q = rotate(query.expand(1, length, -1), cos, sin, heads).unflatten(-1, (heads, head_size))  # (1, T, H, K)
    k = rotate(key.expand(1, length, -1), cos, sin, heads).unflatten(-1, (heads, head_size))

    assert torch.allclose(
        q.norm(dim=-1), query.unflatten(-1, (heads, head_size)).norm(dim=-1).expand(1, length, -1)
    )
    scores = torch.einsum("thk,shk->hts", q[0], k[0])  # (H, T, T)
    for offset in (-3, 0, 5):
        diagonal = scores.diagonal(offset=offset, dim1=-2, dim2=-1)  # (H, T - |offset|)
        assert torch.allclose(diagonal, diagonal[:, :1].expand_as(diagonal), atol=1e-5), offset
    assert not torch.allclose(scores[:, 0, 0], scores[:, 5, 0]), (
        "the offset changes the score: positions count"
    )


@pytest.mark.parametrize("scheme", [None, "relative_key", "rotary"])
def test_self_attention_output_at_real_frames_ignores_what_the_padded_frames_hold(scheme):
    config = w2v_bert_config("tiny", position_embeddings_type=scheme, dropout=0.0)
    torch.manual_seed(0)
    attention = SelfAttention(config, config.d_model, scheme).eval()
    lengths = torch.tensor([13, 7])
    x = torch.randn(2, 13, config.d_model)  # (B, T, D)
    noisy = x.clone()
    noisy[1, 7:] = 100 * torch.randn(6, config.d_model)  # only example 1's padding changes
    positions = (
        RotaryEmbedding(config.head_size, config.rotary_embedding_base)(13) if scheme == "rotary" else None
    )

    with torch.no_grad():
        clean_out, noisy_out = attention(x, lengths, positions), attention(noisy, lengths, positions)

    assert clean_out.shape == (2, 13, config.d_model)
    assert torch.allclose(clean_out[1, :7], noisy_out[1, :7], atol=1e-5)
    assert torch.equal(clean_out[0], noisy_out[0])


def test_the_convolution_module_is_causal_a_frame_never_sees_a_later_one():
    config = w2v_bert_config("tiny", dropout=0.0)
    torch.manual_seed(0)
    convolution = ConvolutionModule(config).eval()
    lengths = torch.tensor([20])
    x = torch.randn(1, 20, config.d_model)  # (B, T, D)
    changed = x.clone()
    changed[0, 12:] = torch.randn(8, config.d_model)

    with torch.no_grad():
        before, after = convolution(x, lengths), convolution(changed, lengths)

    assert torch.allclose(before[0, :12], after[0, :12], atol=1e-6), "frames 0..11 do not see frames 12.."
    assert not torch.allclose(before[0, 12:], after[0, 12:])


# --- relative_key_attention 'flex': the position scores added inside FlexAttention ---------------------------
def relative_key_attention(flex: bool) -> SelfAttention:
    # 2 heads of 16: the narrowest FlexAttention's CUDA kernel takes
    config = w2v_bert_config(
        "tiny", num_heads=2, dropout=0.0, relative_key_attention="flex" if flex else "dense"
    )
    torch.manual_seed(0)
    return SelfAttention(config, config.d_model, "relative_key")


@pytest.fixture
def flex_backward_on_cpu(monkeypatch):
    """torch's FlexAttention refuses a backward on the CPU (its compiled CPU kernel has none); its eager
    reference (the scores built in full, autograd through them) has one, and is what this lifts the check for:
    the score_mod's gradients (into q, k and the per-distance scores) checked on CPU arithmetic."""
    monkeypatch.setattr(flex_attention_module, "_validate_device", lambda *tensors: None)


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_flex_relative_key_attention_gives_the_dense_outputs_and_gradients(flex_backward_on_cpu, monkeypatch):
    dense, flex = relative_key_attention(False), relative_key_attention(True)
    flex.load_state_dict(dense.state_dict())
    monkeypatch.setattr(flex, "fused_relative_key", lambda q: True)  # as inside torch.compile on CUDA
    # 13 frames reach both clips of tiny's distances [-8, 2]; example 2 attends to one key.
    lengths = torch.tensor([13, 7, 1])
    x = torch.randn(3, 13, dense.linear_q.in_features, generator=torch.Generator().manual_seed(1))
    outputs, gradients = [], []
    for attention in (dense, flex):
        inputs = x.clone().requires_grad_()
        out = attention.train()(inputs, lengths, None)
        out.square().sum().backward()
        outputs.append(out)
        gradients.append([inputs.grad, *(p.grad for p in attention.parameters())])

    torch.testing.assert_close(outputs[1], outputs[0], rtol=1e-5, atol=1e-5)
    assert flex.distance_embedding.weight.grad.abs().sum() > 0  # the per-distance scores got gradients
    for got, want in zip(gradients[1], gradients[0], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_flex_averages_a_zero_length_example_as_the_dense_mask_does(monkeypatch):
    dense, flex = relative_key_attention(False).eval(), relative_key_attention(True).eval()
    flex.load_state_dict(dense.state_dict())
    monkeypatch.setattr(flex, "fused_relative_key", lambda q: True)
    lengths = torch.tensor([9, 0])
    x = torch.randn(2, 9, dense.linear_q.in_features, generator=torch.Generator().manual_seed(2))

    with torch.no_grad():
        want, got = dense(x, lengths, None), flex(x, lengths, None)

    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_flex_is_taken_only_inside_torch_compile_on_cuda(monkeypatch):
    from torch._subclasses.fake_tensor import FakeTensorMode

    flex, dense = relative_key_attention(True), relative_key_attention(False)
    with FakeTensorMode():  # a CUDA tensor's shape and device, no GPU
        on_cuda = torch.empty(1, 2, 3, 16, device="cuda")
    on_cpu = torch.zeros(1, 2, 3, 16)

    assert not flex.fused_relative_key(on_cuda)  # eager: FlexAttention would build the T x T scores
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert flex.fused_relative_key(on_cuda)
    # torch's compiled CPU FlexAttention: no backward, and wrong numbers for this score_mod without one
    assert not flex.fused_relative_key(on_cpu)
    assert not dense.fused_relative_key(on_cuda)


def test_a_compiled_model_with_flex_traces_flexattention_and_matches_eager(monkeypatch):
    # The trace (dynamo, one graph) with torch's reference run on its graph: the fused kernel is CUDA's.
    monkeypatch.setattr(w2v_bert_blocks, "flex_runs_here", lambda q: True)
    model = w2v_bert_tiny(
        input_dim=20, vocab_size=11, dropout=0.0, num_heads=2, relative_key_attention="flex"
    ).eval()
    traced = []

    def backend(graph: torch.fx.GraphModule, inputs):
        traced.extend(str(node.target) for node in graph.graph.nodes)
        return graph.forward

    features = torch.randn(2, 13, 20, generator=torch.Generator().manual_seed(3))
    lengths = torch.tensor([13, 6])
    with torch.no_grad():
        want, want_lengths = model(features, lengths)
        got, got_lengths = torch.compile(model, backend=backend, fullgraph=True)(features, lengths)

    assert any("flex_attention" in target for target in traced)
    assert torch.equal(got_lengths, want_lengths)
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[1, :6], want[1, :6], rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("precision", ["f32", "bf16", "f16"])
def test_compiled_flex_on_cuda_gives_the_dense_outputs_and_gradients(precision):
    # FlexAttention's fused CUDA kernel, forward and backward (the per-distance scores' gradient is its
    # atomic scatter), against the dense path in eager; 2 heads of 16 (the kernel's smallest head width),
    # 300 frames (several of its blocks), a batch with a one-frame example.
    config = w2v_bert_config("tiny", num_heads=2, dropout=0.0)
    torch.manual_seed(0)
    dense = SelfAttention(config, config.d_model, "relative_key").cuda()
    flex = SelfAttention(
        dataclasses.replace(config, relative_key_attention="flex"), config.d_model, "relative_key"
    )
    flex.load_state_dict(dense.state_dict())
    compiled = torch.compile(flex.cuda(), fullgraph=True)
    lengths = torch.tensor([300, 171, 1], device="cuda")
    x = torch.randn(3, 300, config.d_model, device="cuda")
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}.get(precision)
    results = []
    for attention in (dense, compiled):
        inputs = x.clone().requires_grad_()
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            out = attention(inputs, lengths, None)
        out.float().square().sum().backward()
        results.append([out.float(), inputs.grad, *(p.grad for p in attention.parameters())])

    tolerance = 1e-4 if dtype is None else 3e-2
    for got, want in zip(results[1], results[0], strict=True):
        assert torch.isfinite(got).all()
        assert ((got - want).norm() / want.norm()).item() < tolerance


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("checkpointing", [False, True])
def test_a_compiled_flex_model_on_cuda_trains_as_the_dense_one_over_two_lengths(checkpointing):
    # The whole model compiled as a run compiles it: a second length (dynamo's dynamic recompile), a
    # zero-length example, and activation checkpointing's recomputation of each layer.
    torch.manual_seed(0)
    options = dict(
        input_dim=20, vocab_size=11, dropout=0.0, num_heads=2, activation_checkpointing=checkpointing
    )
    dense = w2v_bert_tiny(**options).cuda().train()
    flex = w2v_bert_tiny(**options, relative_key_attention="flex").cuda().train()
    flex.load_state_dict(dense.state_dict())
    compiled = torch.compile(flex)
    for frames, lengths in ((200, [200, 90, 0]), (260, [260, 260, 7])):
        features = torch.randn(3, frames, 20, device="cuda")
        lengths = torch.tensor(lengths, device="cuda")
        results = []
        for model in (dense, compiled):
            model.zero_grad()
            log_probs, out_lengths = model(features, lengths)  # (B, T, V), (B,)
            real = torch.arange(log_probs.size(1), device="cuda") < out_lengths[:, None]  # (B, T)
            (log_probs * real[..., None]).sum().backward()
            results.append([log_probs[real], *(p.grad.clone() for p in model.parameters())])

        for got, want in zip(results[1], results[0], strict=True):
            assert torch.isfinite(got).all()
            assert ((got - want).norm() / want.norm()).item() < 1e-4, frames
