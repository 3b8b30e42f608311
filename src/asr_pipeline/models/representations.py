"""A model's frame representations: the encoder's last hidden states, as its CTC head reads them.

Any CTC model of ours ends in one linear layer from hidden states to token logits (``ArchitectureSpec.ctc_head``);
a forward hook on it catches its input, so one function serves every architecture without each exposing an
encoder API: the pronunciation scoring head reads an ASR encoder (Zipformer, Squeezeformer, W2V-BERT) or a
fine-tuned HuBERT this way instead of the aligner (issue 16's "richer features").
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from asr_pipeline.models.registry import get_spec


@torch.no_grad()
def encoder_states(
    model: nn.Module, architecture: str, features: Tensor, lengths: Tensor
) -> tuple[Tensor, Tensor]:
    """(B, T, F) features -> the hidden states the CTC head reads (B, T', D) and their lengths (B,)."""
    name = get_spec(architecture).ctc_head
    if name is None:
        raise ValueError(f"{architecture} has no CTC head whose input to read (ArchitectureSpec.ctc_head)")
    caught: list[Tensor] = []
    handle = model.get_submodule(name).register_forward_hook(
        lambda module, args, output: caught.append(args[0])
    )
    try:
        _, out_lengths = model(features, lengths)
    finally:
        handle.remove()
    return caught[-1], out_lengths


__all__ = ["encoder_states"]
