"""What a Paraformer computes only when the reference is known: its per-utterance losses, the targets of its
boundary head, and the glancing sampler's choice of decoder inputs (``models.paraformer`` puts them together).

Every loss is per utterance, (B,), summed over its tokens or frames, so the training loop can normalise by the
batch's target tokens as it does for CTC.

Token ids are the pipeline's CTC vocabulary. The decoder's blank column is -inf (``Paraformer`` masks it
before the log-softmax), so log-probabilities, label smoothing and the argmax all range over the V - 1 real
tokens; a reference never holds the blank (``training.ctc.check_targets`` refuses such a batch).

Dimension legend: B batch, U tokens (longest reference), T' encoder frames, V vocabulary (blank included).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from asr_pipeline.modules.forced_alignment import forced_paths
from asr_pipeline.modules.masks import padding_mask


def glancing_mask(
    predictions: Tensor,
    targets: Tensor,
    target_lengths: Tensor,
    ratio: float,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Which decoder inputs the glancing LM sampler (Gao et al., 2022; after Qian et al., 2021, GLAT)
    replaces by the reference token's embedding: (B, U) bool, True at a replaced position.

    Per utterance, ``floor(ratio * wrong)`` of its real positions, ``wrong`` being how many of the first
    pass's ``predictions`` (B, U) differ from ``targets`` (B, U). As in FunASR's sampler, the positions are
    drawn uniformly among all real positions, not only the wrong ones: the decoder learns to use context
    it is given, wherever it is. A perfect first pass glances at nothing; padding is never chosen.
    """
    real = ~padding_mask(target_lengths, targets.size(1))  # (B, U)
    wrong = ((predictions != targets) & real).sum(dim=1)  # (B,)
    count = torch.floor(wrong.double() * ratio).long()  # (B,)
    scores = torch.rand(targets.shape, generator=generator, device=targets.device)  # (B, U) in [0, 1)
    ranks = scores.masked_fill(~real, 2.0).argsort(dim=1).argsort(dim=1)  # (B, U): padding ranks last
    return ranks < count[:, None]


def token_cross_entropy(
    log_probs: Tensor, targets: Tensor, target_lengths: Tensor, label_smoothing: float, blank_id: int
) -> Tensor:
    """Label-smoothed cross-entropy of (B, U, V) decoder log-probs, summed over each utterance's real
    tokens: (B,). The smoothing mass is spread over the V - 1 non-blank tokens (the blank's -inf would
    make a uniform-over-V target infinite)."""
    real = ~padding_mask(target_lengths, targets.size(1))  # (B, U)
    # Padding holds the blank (id 0 by default): gather a real id there, its value is masked out below.
    safe_targets = targets.masked_fill(~real, 1 if blank_id == 0 else 0)
    nll = -log_probs.gather(-1, safe_targets[..., None]).squeeze(-1)  # (B, U)
    per_token = nll
    if label_smoothing > 0:
        finite = log_probs.index_fill(-1, torch.tensor([blank_id], device=log_probs.device), 0.0)
        smooth = -finite.sum(dim=-1) / (log_probs.size(-1) - 1)  # (B, U)
        per_token = (1.0 - label_smoothing) * nll + label_smoothing * smooth
    return per_token.masked_fill(~real, 0.0).sum(dim=1)  # (B,)


def ctc_per_utterance(
    log_probs: Tensor, lengths: Tensor, targets: Tensor, target_lengths: Tensor, blank_id: int
) -> Tensor:
    """CTC of (B, T', V) frame log-probs, (B,); an impossible alignment (too few frames) counts 0, as
    ``training.ctc`` does for the CTC models."""
    return F.ctc_loss(
        log_probs.float().transpose(0, 1),
        targets,
        lengths,
        target_lengths,
        blank=blank_id,
        reduction="none",
        zero_infinity=True,
    )


def ctc_token_starts(
    log_probs: Tensor, lengths: Tensor, targets: Tensor, target_lengths: Tensor, blank_id: int
) -> tuple[Tensor, Tensor]:
    """The frames where each reference token starts in its CTC forced alignment (torchaudio's Viterbi):
    (B, T') bool, and (B,) bool saying which utterances could be aligned at all. An utterance with fewer
    frames than its tokens need (one per token, plus one blank between repeats) has no alignment; its
    boundary loss is left out rather than trained towards a made-up one."""
    paths, aligned, _ = forced_paths(
        log_probs.detach(), lengths, targets, target_lengths, blank_id
    )  # (B, T')
    previous = torch.cat((torch.full_like(paths[:, :1], blank_id), paths[:, :-1]), dim=1)
    starts = (paths != blank_id) & (paths != previous) & aligned[:, None]
    return starts, aligned


def boundary_loss(logits: Tensor, targets: Tensor, lengths: Tensor) -> Tensor:
    """Binary cross-entropy of (B, T') per-frame boundary logits against (B, T') bool targets, summed over
    each utterance's real frames: (B,)."""
    losses = F.binary_cross_entropy_with_logits(logits.float(), targets.float(), reduction="none")
    return losses.masked_fill(padding_mask(lengths, logits.size(1)), 0.0).sum(dim=1)


__all__ = [
    "boundary_loss",
    "ctc_per_utterance",
    "ctc_token_starts",
    "glancing_mask",
    "token_cross_entropy",
]
