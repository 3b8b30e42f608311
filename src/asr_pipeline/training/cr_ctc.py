"""Consistency-regularised CTC (CR-CTC; Yao et al. 2024, "CR-CTC: Consistency regularization on CTC for
improved speech recognition", arXiv:2410.05101), as icefall's Zipformer recipe trains it (``--use-cr-ctc``,
``zipformer/model.py: forward_cr_ctc``).

Each batch is forwarded as two views, each utterance SpecAugmented twice with independent masks (the
loader's SpecAugment is off under ``regularization.cr_ctc``: the step masks, ``SpecAugment.batch``), with
more time masking than usual (``cr_time_mask_ratio``: that many times the masks, covering together at most
0.15 x ratio of an utterance). Per utterance b, with log-posteriors ``p1``, ``p2`` of the two views::

    ctc_b = (CTC(p1_b) + CTC(p2_b)) / 2
    cr_b  = (KL(sg(p2_b) || p1_b) + KL(sg(p1_b) || p2_b)) / 2      (summed over b's frames and the vocabulary)
    loss_b = ctc_b + scale * cr_b,   scale = cr_loss_scale * min(1, step / cr_loss_warmup_steps)

``sg`` stops the gradient: each view is pulled towards the other's (fixed) posteriors, so both views get
the consistency gradient, each from its own KL term. The halves are icefall's (``ctc_loss * 0.5``,
``cr_loss * 0.5``) and keep the CTC term at the scale of one view's, so the loop's per-token
normalisation (``training.loop``) means the same as without CR-CTC.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from asr_pipeline.data.collate import Batch
from asr_pipeline.features.augment import SpecAugment
from asr_pipeline.modules.masks import padding_mask
from asr_pipeline.training.config import DataConfig, RegularizationConfig, TrainConfig
from asr_pipeline.training.config.optim import CR_TIME_FRACTION
from asr_pipeline.training.ctc import StepLosses, ctc_losses


def views_augment(data: DataConfig, regularization: RegularizationConfig) -> SpecAugment:
    """The views' SpecAugment: the data section's masks, the time masks ``cr_time_mask_ratio`` times as many,
    together covering at most ``0.15 * cr_time_mask_ratio`` of an utterance (icefall's ``get_spec_augment``)."""
    ratio = regularization.cr_time_mask_ratio
    return SpecAugment(
        time_masks=round(data.spec_time_masks * ratio),
        time_mask_max_frames=data.spec_time_mask_max_frames,
        freq_masks=data.spec_freq_masks,
        freq_mask_max_bins=data.spec_freq_mask_max_bins,
        max_time_fraction=CR_TIME_FRACTION * ratio,
    )


def two_views(batch: Batch, augment: SpecAugment, frames: list[int] | None = None) -> Batch:
    """``batch`` twice over, (2B, ...): rows b and B + b are utterance b, each masked with its own draw.
    ``frames``: the utterances' lengths read on the host before the batch went to the device (else read
    from it: on a GPU, a wait)."""
    features = batch.features.repeat(2, 1, 1)  # (2B, T, F)
    lengths = batch.feature_lengths.repeat(2)  # (2B,)
    return dataclasses.replace(
        batch,
        features=augment.batch(features, lengths if frames is None else frames * 2),
        feature_lengths=lengths,
        targets=batch.targets.repeat(2, 1),
        target_lengths=batch.target_lengths.repeat(2),
        ids=batch.ids * 2,
        texts=batch.texts * 2,
        duration_ms=batch.duration_ms.repeat(2),
    )


def consistency_losses(log_probs: Tensor, lengths: Tensor) -> Tensor:
    """Per row of the (2B, T', V) log-posteriors of two views (rows b and B + b the same utterance), the KL
    divergence of its posteriors from the other view's detached ones, summed over the row's ``lengths``
    (2B,) frames and the vocabulary: (2B,)."""
    others = torch.roll(log_probs.detach(), log_probs.size(0) // 2, dims=0)  # [p1, p2] -> [p2, p1]
    kl = F.kl_div(log_probs, others, reduction="none", log_target=True)  # (2B, T', V)
    padding = padding_mask(lengths, log_probs.size(1))  # (2B, T'), True past each length
    return kl.masked_fill(padding.unsqueeze(-1), 0.0).sum(dim=(1, 2))


class CRCTC:
    """The CR-CTC losses of a training step (module docstring); ``configure`` follows an epoch's
    SpecAugment settings (``train.schedule``)."""

    def __init__(self, config: TrainConfig) -> None:
        self.regularization = config.regularization
        self.augment = views_augment(config.data, config.regularization)

    def configure(self, data: DataConfig) -> None:
        self.augment = views_augment(data, self.regularization)

    def scale(self, step: int) -> float:
        """The consistency loss's weight at optimizer step ``step`` (0-based): linear warmup to the scale."""
        warmup = self.regularization.cr_loss_warmup_steps
        ramp = min(1.0, step / warmup) if warmup else 1.0
        return self.regularization.cr_loss_scale * ramp

    def losses(
        self, model: nn.Module, batch: Batch, config: TrainConfig, step: int, frames: list[int] | None = None
    ) -> StepLosses:
        """Per-utterance losses (B,) of ``batch`` with components ``ctc`` and ``cr`` (each (B,), unweighted);
        the first view's log-probs and output lengths. ``frames``: as ``two_views`` takes them."""
        size = len(batch)
        losses, log_probs, out_lengths = ctc_losses(model, two_views(batch, self.augment, frames), config)
        ctc = (losses[:size] + losses[size:]) / 2  # (B,)
        consistency = consistency_losses(log_probs.float(), out_lengths)
        cr = (consistency[:size] + consistency[size:]) / 2  # (B,)
        return StepLosses(
            ctc + self.scale(step) * cr,
            log_probs[:size],
            out_lengths[:size],
            components={"ctc": ctc, "cr": cr},
        )


__all__ = ["CRCTC", "consistency_losses", "two_views", "views_augment"]
