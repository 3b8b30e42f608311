"""SpeechAligner: the pronunciation scorer's phoneme aligner (issue 16; the reference Burn trainer's model).

    features (B, T, F)                      MFCC-39 (13 + deltas + delta-deltas) or log-mel-80, 100 Hz
      -> utterance CMVN                     mean/variance over each utterance's real frames (``input_normalization``)
      -> 4 conv blocks                      Conv1d k=3 -> BatchNorm -> GELU -> squeeze-excitation, plus a 1x1
                                            residual projection; 39 -> 64 -> 128 -> 256 -> 512 channels by default
      -> self-attention block               pre-norm multi-head attention with a residual, key padding masked
      -> hidden (B, T, D)                   the representation the scoring head reads (``encode``)
      -> three heads
           phone_logits (B, T, V)           frame-wise phone classes (blank 0, SIL 1, 39 ARPABET: text.phones)
           boundary (B, T)                  probability that a word starts at the frame (sigmoid of a k=3
                                            convolution: a start is a change, seen from the frames beside it)
           ctc_log_probs (B, T, V)          log-softmax over the same classes, trained with CTC

The frame rate is kept (no subsampling): a phone lasts 3-20 frames at 100 Hz and GOP scores phone segments from
frame posteriors. ``forward`` returns ``(ctc_log_probs, lengths)``, the output every CTC model of ours gives, so
the training engine trains its CTC head like any CTC model's; ``heads`` gives all three heads and the hidden
states. The frame and boundary heads train from the aligner's own forced alignments (``pron.aligner_heads``)
after CTC training, which leaves them as initialised and frozen (``requires_grad`` off: DDP reduces only
parameters that take part in the loss).

Squeeze-excitation: Hu et al. 2018 ("Squeeze-and-Excitation Networks"): channel gates from the time-averaged
block output (padding excluded).

Why the input is normalized: each block adds a 1x1 projection of its input to the conv branch, so the first block
passes the raw features on. MFCC-39 sits near zero, but every log-mel-80 channel sits at +10..16 (log energies),
strongly correlated, and without CMVN the log-mel aligner did not leave the blank plateau in 8 epochs (test PER
94.5 % against MFCC's 22.8 %; benchmarks/NOTES.md, issue 16, session 15).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from asr_pipeline.models.speech_aligner_spec import (  # the config and sizes live in the torch-free spec
    SIZES,
    SpeechAlignerConfig,
    speech_aligner_config,
)
from asr_pipeline.modules.masks import normalize_input


class SqueezeExcitation(nn.Module):
    def __init__(self, channels: int, reduction: int) -> None:
        super().__init__()
        hidden = max(4, channels // reduction)
        self.down, self.up = nn.Linear(channels, hidden), nn.Linear(hidden, channels)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        # x (B, C, T), mask (B, 1, T): the mean over real frames only
        mean = (x * mask).sum(-1) / mask.sum(-1).clamp(min=1)  # (B, C)
        gate = torch.sigmoid(self.up(F.gelu(self.down(mean))))  # (B, C)
        return x * gate.unsqueeze(-1)


class ConvBlock(nn.Module):
    """Conv1d -> BatchNorm -> GELU -> squeeze-excitation, added to a 1x1 projection of the input."""

    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, se_reduction: int, dropout: float
    ):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.norm = nn.BatchNorm1d(out_channels)
        self.se = SqueezeExcitation(out_channels, se_reduction)
        self.residual = nn.Conv1d(in_channels, out_channels, 1)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        # x (B, C_in, T) -> (B, C_out, T); padded frames zeroed so they never leak into the next conv
        y = self.se(F.gelu(self.norm(self.conv(x))), mask)
        return (self.residual(x) + self.dropout(y)) * mask


class AttentionBlock(nn.Module):
    """Pre-norm self-attention with a residual: the context a phone's frames need (its neighbours' identity)."""

    def __init__(self, d_model: int, num_heads: int, dropout: float) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.attention = nn.MultiheadAttention(d_model, num_heads, dropout=dropout, batch_first=True)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, padding: Tensor) -> Tensor:
        # x (B, T, D); padding (B, T) True where a frame is padding
        h = self.norm(x)
        attended, _ = self.attention(h, h, h, key_padding_mask=padding, need_weights=False)
        return x + self.dropout(attended)


@dataclass
class AlignerOutputs:
    hidden: Tensor  # (B, T, D)
    phone_logits: Tensor  # (B, T, V)
    boundary: Tensor  # (B, T) probabilities
    ctc_log_probs: Tensor  # (B, T, V)
    lengths: Tensor  # (B,)


class SpeechAligner(nn.Module):
    def __init__(self, config: SpeechAlignerConfig) -> None:
        super().__init__()
        self.config = config
        widths = (config.input_dim, *config.channels)
        self.blocks = nn.ModuleList(
            ConvBlock(a, b, config.kernel_size, config.se_reduction, config.dropout)
            for a, b in itertools.pairwise(widths)
        )
        self.attention = AttentionBlock(config.d_model, config.num_heads, config.dropout)
        self.phone_head = nn.Linear(config.d_model, config.vocab_size)
        self.boundary_head = nn.Conv1d(config.d_model, 1, kernel_size=3, padding=1)
        self.ctc_head = nn.Linear(config.d_model, config.vocab_size)
        # CTC training (``forward``) never reaches the frame and boundary heads: frozen until a stage that trains them
        # turns them on, or DDP would wait for their gradients forever ("parameters that were not used").
        for head in (self.phone_head, self.boundary_head):
            head.requires_grad_(False)

    def encode(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """(B, T, F), (B,) -> hidden (B, T, D), lengths (B,) (the frame rate is kept)."""
        if features.shape[-1] != self.config.input_dim:
            raise ValueError(
                f"expected features of shape (B, T, {self.config.input_dim}), got {tuple(features.shape)}; check "
                "that the feature extractor and the model config agree on input_dim"
            )
        frames = torch.arange(features.shape[1], device=features.device)
        padding = frames[None, :] >= lengths[:, None]  # (B, T)
        mask = (~padding).unsqueeze(1).to(features.dtype)  # (B, 1, T)
        # (B, T, F); with utterance CMVN the padded frames come out as zeros
        features = normalize_input(features, lengths, self.config.input_normalization)
        x = features.transpose(1, 2) * mask  # (B, F, T)
        for block in self.blocks:
            x = block(x, mask)
        return self.attention(x.transpose(1, 2), padding), lengths  # (B, T, D)

    def boundary_logits(self, hidden: Tensor, lengths: Tensor) -> Tensor:
        """(B, T, D) hidden states -> (B, T) word-start logits; padded frames are zeroed first, so a frame's
        score does not depend on the batch's padding."""
        real = torch.arange(hidden.shape[1], device=hidden.device)[None, :] < lengths[:, None]  # (B, T)
        return self.boundary_head((hidden * real.unsqueeze(-1)).transpose(1, 2)).squeeze(1)

    def heads(self, features: Tensor, lengths: Tensor) -> AlignerOutputs:
        hidden, lengths = self.encode(features, lengths)
        return AlignerOutputs(
            hidden=hidden,
            phone_logits=self.phone_head(hidden),
            boundary=torch.sigmoid(self.boundary_logits(hidden, lengths)),
            ctc_log_probs=self.ctc_head(hidden).float().log_softmax(-1),
            lengths=lengths,
        )

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """(B, T, F), (B,) -> CTC log-probs (B, T, V), lengths (B,)."""
        hidden, lengths = self.encode(features, lengths)
        return self.ctc_head(hidden).float().log_softmax(-1), lengths


def build_speech_aligner(config: SpeechAlignerConfig) -> SpeechAligner:
    return SpeechAligner(config)


__all__ = [
    "SIZES",
    "AlignerOutputs",
    "SpeechAligner",
    "SpeechAlignerConfig",
    "build_speech_aligner",
    "speech_aligner_config",
]
