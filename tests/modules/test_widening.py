"""``modules.widening``: old tensors land in the leading slices of the wider ones, each fused part in its
own part. The layout check: a module widened with every new entry zeroed computes, on zero-padded input,
exactly the narrow module's output on the old channels and zeros on the new ones -- which fails if a fused
projection's parts (q/k/v, GLU halves) were copied as one plain prefix."""

from __future__ import annotations

import functools

import pytest
import torch
from torch import nn

from asr_kernels.swoosh import Swoosh
from asr_pipeline.modules.attention import RelativePositionalEncoding, RelPositionMultiHeadAttention
from asr_pipeline.modules.convolution import ConvolutionModule
from asr_pipeline.modules.cross_attention import CrossAttention
from asr_pipeline.modules.feed_forward import FeedForward
from asr_pipeline.modules.widening import FUSED_ATTRIBUTE, copy_into_wider, mark_fused, widen_into
from asr_pipeline.modules.zipformer_blocks import (
    ConvolutionModule as ZipformerConvolution,
)
from asr_pipeline.modules.zipformer_blocks import (
    NonlinAttention,
    RelPositionAttentionWeights,
    SelfAttention,
)


def test_plain_dimensions_take_the_old_values_in_their_leading_slice():
    old = torch.arange(6.0).reshape(2, 3)
    new = copy_into_wider("w", old, torch.full((4, 5), -1.0))
    assert torch.equal(new[:2, :3], old)
    assert (new[2:] == -1).all() and (new[:, 3:] == -1).all()


def test_a_fused_dimension_copies_each_part_into_its_own_part():
    old = torch.tensor([1.0, 2.0, 10.0, 20.0, 100.0, 200.0])  # q q k k v v, 2 channels each
    mark_fused(wider := torch.zeros(9), 0, (1, 1, 1))
    copy_into_wider("qkv", old, wider, getattr(wider, FUSED_ATTRIBUTE))
    assert wider.tolist() == [1, 2, 0, 10, 20, 0, 100, 200, 0]


def test_unequal_parts_and_scalars():
    old = torch.tensor([1.0, 2.0, 3.0])  # parts of proportions (2, 1): [1, 2] [3]
    wider = copy_into_wider("p", old, torch.zeros(6), {0: (2, 1)})
    assert wider.tolist() == [1, 2, 0, 0, 3, 0]
    assert copy_into_wider("s", torch.tensor(5.0), torch.tensor(0.0)).item() == 5.0


def test_shrinking_or_undividable_parts_are_refused():
    with pytest.raises(ValueError, match="never shrinks"):
        copy_into_wider("w", torch.zeros(4), torch.zeros(3))
    with pytest.raises(ValueError, match=r"proportions \(1, 1, 1\), which sizes 4 -> 9 do not divide"):
        copy_into_wider("w", torch.zeros(4), torch.zeros(9), {0: (1, 1, 1)})


class LengthsGiven(nn.Module):
    """A module that takes (x, lengths), called with every frame real."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.module(x, torch.full((x.size(0),), x.size(1)))


def widened_with_zeros(narrow: nn.Module, wide: nn.Module) -> nn.Module:
    """``wide`` holding ``narrow``'s tensors and zero everywhere else."""
    widen_into(narrow, wide)
    with torch.no_grad():
        for name, tensor in [*wide.named_parameters(), *wide.named_buffers()]:
            if tensor.dim() == 0 or not tensor.is_floating_point():
                continue
            old = dict([*narrow.named_parameters(), *narrow.named_buffers()])[name]
            mask = copy_into_wider(
                name, torch.ones_like(old), torch.zeros_like(tensor), getattr(tensor, FUSED_ATTRIBUTE, None)
            )
            tensor.mul_(mask)
    return wide.eval()


def padded(x: torch.Tensor, width: int) -> torch.Tensor:
    return torch.cat([x, x.new_zeros(*x.shape[:-1], width - x.size(-1))], dim=-1)


def assert_old_channels_kept(narrow_out: torch.Tensor, wide_out: torch.Tensor) -> None:
    old = narrow_out.size(-1)
    torch.testing.assert_close(wide_out[..., :old], narrow_out, atol=1e-5, rtol=1e-5)
    assert wide_out[..., old:].abs().max() < 1e-6


def seeded(build, seed):
    torch.manual_seed(seed)
    return build().eval()


@pytest.mark.parametrize(
    "build",
    [
        lambda d, h: FeedForward(d, 4, 0.0),
        lambda d, h: ConvolutionModule(d, 5, 2, use_glu=True),
        lambda d, h: ConvolutionModule(d, 5, 2, use_glu=False),
        lambda d, h: LengthsGiven(ZipformerConvolution(d, 5, Swoosh("r", "paper"))),
    ],
    ids=["feed_forward", "conv_glu", "conv_swish", "zipformer_conv"],
)
def test_widened_modules_compute_the_narrow_output_on_the_old_channels(build):
    narrow, wide = seeded(lambda: build(8, 2), 0), seeded(lambda: build(16, 4), 1)
    wide = widened_with_zeros(narrow, wide)
    x = torch.randn(2, 7, 8)
    with torch.no_grad():
        assert_old_channels_kept(narrow(x), wide(padded(x, 16)))


def test_widened_self_attention_keeps_the_old_heads():
    narrow = seeded(lambda: RelPositionMultiHeadAttention(8, 2), 0)
    wide = widened_with_zeros(narrow, seeded(lambda: RelPositionMultiHeadAttention(16, 4), 1))
    with torch.no_grad():
        for module in (narrow, wide):  # the zero-initialised position biases, made to matter
            module.pos_bias_u.normal_()
            module.pos_bias_v.normal_()
        wide.pos_bias_u[:2].copy_(narrow.pos_bias_u)
        wide.pos_bias_v[:2].copy_(narrow.pos_bias_v)
        x, pos = torch.randn(2, 6, 8), torch.randn(11, 8)
        assert_old_channels_kept(narrow(x, pos), wide(padded(x, 16), padded(pos, 16)))


def test_widened_cross_attention_keeps_the_old_heads():
    narrow = seeded(lambda: CrossAttention(8, 2), 0)
    wide = widened_with_zeros(narrow, seeded(lambda: CrossAttention(16, 4), 1))
    x, memory = torch.randn(2, 3, 8), torch.randn(2, 6, 8)
    with torch.no_grad():
        assert_old_channels_kept(narrow(x, memory), wide(padded(x, 16), padded(memory, 16)))


def test_widened_zipformer_attention_keeps_the_old_heads():
    weights_narrow = seeded(lambda: RelPositionAttentionWeights(8, 6, 1, 4, 2), 0)
    weights_wide = widened_with_zeros(
        weights_narrow, seeded(lambda: RelPositionAttentionWeights(16, 6, 2, 4, 2), 1)
    )
    x, pos, lengths = torch.randn(2, 5, 8), torch.randn(9, 6), torch.tensor([5, 4])
    with torch.no_grad():
        narrow_weights = weights_narrow(x, pos, lengths)  # (B, 1, T, T)
        wide_weights = weights_wide(padded(x, 16), pos, lengths)  # (B, 2, T, T)
        torch.testing.assert_close(wide_weights[:, :1], narrow_weights, atol=1e-6, rtol=1e-5)
        for build in (lambda d: SelfAttention(d, d // 8, 3), lambda d: NonlinAttention(d, 3 * d // 4)):
            narrow = seeded(functools.partial(build, 8), 2)
            wide = widened_with_zeros(narrow, seeded(functools.partial(build, 16), 3))
            assert_old_channels_kept(
                narrow(x, narrow_weights), wide(padded(x, 16), wide_weights[:, : 16 // 8])
            )


def test_buffers_derived_from_the_width_keep_the_wider_model_s_own_values():
    narrow, wide = RelativePositionalEncoding(8), RelativePositionalEncoding(16)
    own = wide.inverse_frequency.clone()
    assert widen_into(narrow, wide) == {"copied": 0, "widened": 0}  # nothing saved, nothing copied
    assert torch.equal(wide.inverse_frequency, own)
