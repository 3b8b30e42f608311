"""modules.conformer: a block keeps (B, T, D); a padded utterance computes what it computes alone; every
sub-layer takes part (gradients reach every parameter) and the output is layer-normalized."""

from __future__ import annotations

import torch

from asr_pipeline.modules.attention import RelativePositionalEncoding
from asr_pipeline.modules.conformer import ConformerBlock
from asr_pipeline.modules.masks import padding_mask

D_MODEL = 16


def block() -> ConformerBlock:
    torch.manual_seed(0)
    return ConformerBlock(D_MODEL, num_heads=2, ff_expansion=2, conv_kernel_size=5, dropout=0.0).eval()


def run(conformer: ConformerBlock, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    pos_emb = RelativePositionalEncoding(D_MODEL)(x.size(1))  # (2T-1, D)
    return conformer(x, pos_emb, lengths, padding_mask(lengths, x.size(1)))


def test_a_padded_utterance_computes_what_it_computes_alone():
    conformer = block()
    short, long = torch.randn(1, 7, D_MODEL), torch.randn(1, 12, D_MODEL)
    batch = torch.zeros(2, 12, D_MODEL)
    batch[0, :7], batch[1] = short[0], long[0]
    batch[0, 7:] = 50.0  # whatever sits in the padding

    together = run(conformer, batch, torch.tensor([7, 12]))

    assert together.shape == (2, 12, D_MODEL)
    torch.testing.assert_close(
        together[0, :7], run(conformer, short, torch.tensor([7]))[0], rtol=1e-4, atol=1e-5
    )
    torch.testing.assert_close(together[1], run(conformer, long, torch.tensor([12]))[0], rtol=1e-4, atol=1e-5)


def test_every_parameter_takes_part_and_the_output_is_normalized():
    conformer = block().train()
    x = torch.randn(2, 9, D_MODEL)

    out = run(conformer, x, torch.tensor([9, 6]))
    out[0].pow(2).sum().backward()

    assert [n for n, p in conformer.named_parameters() if p.grad is None or not p.grad.abs().sum()] == []
    # the closing LayerNorm: each frame of the first utterance has mean 0 and variance 1 (before its affine,
    # which starts as the identity)
    torch.testing.assert_close(out[0].mean(-1), torch.zeros(9), atol=1e-5, rtol=0)
