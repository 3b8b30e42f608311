"""The forward pass and per-utterance losses that training and validation share, and the check that a
batch's targets fit the model's vocabulary.

What a model's loss is depends on its spec's output kind (``models.spec.OutputKind``): a CTC model returns
(B, T', V) frame log-probs and the loss is CTC here, ``zero_infinity=True`` zeroing an impossible alignment
(too few output frames for the target) instead of returning inf; a Paraformer-style model takes the targets
itself and returns its per-utterance losses (``model_losses``); a HuBERT pretraining model takes the frame
units (``batch.frame_labels``) and returns its loss summed over the frames it predicts, which are then what
the loss is counted per (``StepLosses.tokens``). How the loop weighs and counts losses is in
``training.loop``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from asr_pipeline.data.chunking import chunk_batch
from asr_pipeline.data.collate import FRAME_LABEL_PAD, Batch, check_frame_labels
from asr_pipeline.models.registry import get_spec
from asr_pipeline.models.spec import has_frame_posteriors
from asr_pipeline.training.config import TrainConfig


def _autocast(config: TrainConfig, device: torch.device) -> contextlib.AbstractContextManager:
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}.get(config.run.precision)
    return torch.autocast(device.type, dtype=dtype) if dtype else contextlib.nullcontext()


def ctc_losses(model: nn.Module, batch: Batch, config: TrainConfig) -> tuple[Tensor, Tensor, Tensor]:
    """Per-utterance CTC losses (B,), the (B, T', V) log-probs and (B,) output lengths."""
    with _autocast(config, batch.features.device):
        log_probs, out_lengths = model(batch.features, batch.feature_lengths)  # (B, T', V), (B,)
    # CTC's forward-backward sums many small probabilities: always in float32, whatever the autocast.
    losses = F.ctc_loss(
        log_probs.float().transpose(0, 1),
        batch.targets,
        out_lengths,
        batch.target_lengths,
        blank=config.model.blank_id,
        reduction="none",
        zero_infinity=True,
    )  # (B,)
    return losses, log_probs, out_lengths


@dataclass
class StepLosses:
    """One batch's losses: ``losses`` (B,) per utterance (summed over its tokens), the outputs they came
    from, and for models with several loss terms each term (B,) by name, unweighted (``losses`` is their
    weighted sum: ``ParaformerConfig.head_weight``)."""

    losses: Tensor  # (B,)
    # CTC: (B, T', V) frame log-probs; Paraformer: (B, U, V) teacher-forced token log-probs; HuBERT: None
    log_probs: Tensor | None
    out_lengths: Tensor  # (B,) frames (CTC, HuBERT) or tokens (Paraformer)
    components: dict[str, Tensor] = field(default_factory=dict)
    # (B,) what each utterance's loss is a sum over, when not its target tokens (HuBERT: predicted frames)
    tokens: Tensor | None = None
    # (B,) counts a validation reports (HuBERT: masked_frames, correct_masked)
    counts: dict[str, Tensor] = field(default_factory=dict)


@cache
def output_kind(architecture: str) -> str:
    """The spec's output kind of ``architecture``: "ctc", "paraformer" or "hubert"."""
    return get_spec(architecture).output


def framewise_losses(model: nn.Module, batch: Batch, config: TrainConfig) -> tuple[Tensor, Tensor, Tensor]:
    """Per-utterance frame-wise cross-entropy (B,) against ``batch.frame_labels`` (an alignment,
    ``training.alignment``), summed over each utterance's frames; with the (B, T', V) log-probs and (B,)
    output lengths. Raises ValueError when an utterance's frames and labels differ in number."""
    assert batch.frame_labels is not None
    with _autocast(config, batch.features.device):
        log_probs, out_lengths = model(batch.features, batch.feature_lengths)  # (B, T', V), (B,)
    check_frame_labels(batch, out_lengths)
    labels = batch.frame_labels  # (B, T'_aligned)
    frames = min(log_probs.size(1), labels.size(1))
    losses = F.nll_loss(
        log_probs[:, :frames].float().transpose(1, 2),  # (B, V, T')
        labels[:, :frames],
        ignore_index=FRAME_LABEL_PAD,
        reduction="none",
    ).sum(1)  # (B,)
    return losses, log_probs, out_lengths


def output_lengths_of(model: nn.Module) -> Callable[[Tensor], Tensor]:
    """``model``'s output-length arithmetic, (B,) input frames -> (B,) output frames, through DDP's and
    ``torch.compile``'s wrappers; a ValueError naming the model when it states none."""
    inner = model
    while not hasattr(inner, "output_lengths"):
        wrapped = getattr(inner, "module", None) or getattr(inner, "_orig_mod", None)
        if wrapped is None:
            raise ValueError(
                f"{type(model).__name__} has no output_lengths(feature_lengths): its output frame count for a "
                "given input cannot be known without a forward pass, which chunking (data.chunk_frames) and "
                "the linear alignment need; train or align with a model that states it"
            )
        inner = wrapped
    return inner.output_lengths


def chunked_framewise_losses(model: nn.Module, batch: Batch, config: TrainConfig) -> StepLosses:
    """``framewise_losses`` on ``batch`` cut into chunks (``data.chunking``, ``data.chunk_frames`` every
    ``data.chunk_step``): one forward of all chunks, the loss taken on each, each utterance's (B,) loss the
    sum over its chunks. ``log_probs`` are the chunks' (C, N', V); ``out_lengths`` (B,) each utterance's
    output frames over its chunks; ``tokens`` (B,) its target tokens scaled by those frames over its own
    labels, so overlapping chunks (step < size) keep the loss per token and the gradient's scale of an
    unchunked run."""
    assert batch.frame_labels is not None and config.data.chunk_frames is not None
    chunked = chunk_batch(batch, config.data.chunk_frames, config.data.chunk_step, output_lengths_of(model))
    losses, log_probs, out_lengths = framewise_losses(model, chunked.chunks, config)  # (C,), (C, N', V), (C,)
    rows = chunked.utterance
    utterance_losses = losses.new_zeros(len(batch)).index_add(0, rows, losses)  # (B,)
    frames = out_lengths.new_zeros(len(batch)).index_add(0, rows, out_lengths)  # (B,)
    labels = (batch.frame_labels != FRAME_LABEL_PAD).sum(1)  # (B,)
    tokens = batch.target_lengths * frames.double() / labels.clamp(min=1).double()  # (B,)
    return StepLosses(utterance_losses, log_probs, frames, tokens=tokens)


def unit_losses(model: nn.Module, batch: Batch, config: TrainConfig) -> StepLosses:
    """HuBERT's masked prediction of ``batch.frame_labels`` (units per output frame; the model masks)."""
    if batch.frame_labels is None:
        raise ValueError(
            f"{config.model.architecture} predicts frame units, but the batch has none: set data.alignment "
            "(--alignment) to the units file (Parquet: id, frames, labels) of the training utterances, and "
            "data.val_alignment (--val-alignment) to the validation utterances' one"
        )
    with _autocast(config, batch.features.device):
        out = model(batch.features, batch.feature_lengths, batch.frame_labels)
    components = {name: out[name].float() for name in ("masked", "unmasked", "feature_penalty")}
    counts = {name: out[name] for name in ("masked_frames", "correct_masked")}
    return StepLosses(
        out["loss"].float(), None, out["lengths"], components, tokens=out["predicted_frames"], counts=counts
    )


def _ctc_step(model: nn.Module, batch: Batch, config: TrainConfig) -> StepLosses:
    return StepLosses(*ctc_losses(model, batch, config))


def _decoder_step(model: nn.Module, batch: Batch, config: TrainConfig) -> StepLosses:
    """A Paraformer-style model's own losses: it takes the targets and returns its loss terms."""
    with _autocast(config, batch.features.device):
        outputs = model(batch.features, batch.feature_lengths, batch.targets, batch.target_lengths)
    components = {
        name: value.float()
        for name, value in outputs.items()
        if name not in ("loss", "token_log_probs", "token_lengths")
    }
    return StepLosses(
        outputs["loss"].float(), outputs["token_log_probs"], outputs["token_lengths"], components
    )


def _ctc_empty_loss(model: nn.Module, features: Tensor, lengths: Tensor) -> Tensor:
    log_probs, _ = model(features, lengths)  # (1, T', V)
    return log_probs.float().sum() * 0.0


def _units_empty_loss(model: nn.Module, features: Tensor, lengths: Tensor) -> Tensor:
    units = torch.zeros(1, features.size(1), dtype=torch.int64, device=features.device)  # all-zero units
    return model(features, lengths, units)["loss"].float().sum() * 0.0


def _decoder_empty_loss(model: nn.Module, features: Tensor, lengths: Tensor) -> Tensor:
    target = torch.ones(1, 1, dtype=torch.int64, device=features.device)  # one token
    return model(features, lengths, target, torch.ones_like(lengths))["loss"].float().sum() * 0.0


def _loss_pass_outputs(
    model: nn.Module, batch: Batch, config: TrainConfig, step: StepLosses
) -> tuple[Tensor, Tensor]:
    assert step.log_probs is not None
    return step.log_probs, step.out_lengths


def _inference_outputs(
    model: nn.Module, batch: Batch, config: TrainConfig, step: StepLosses
) -> tuple[Tensor, Tensor]:
    with _autocast(config, batch.features.device):
        return model(batch.features, batch.feature_lengths)


@dataclass(frozen=True)
class Objective:
    """What training and validation do with a model of one output kind (``ArchitectureSpec.output``): its
    per-utterance losses, the zero loss of an empty batch, what validation decodes and which scores pick
    the best checkpoint. The loop and validation ask a model's objective; they never test its kind."""

    name: str  # the output kind: "ctc", "paraformer", "hubert"
    losses: Callable[[nn.Module, Batch, TrainConfig], StepLosses]
    # A zero loss (0-dim) of a forward through every head a training step uses: for a rank whose batch came
    # out empty under DDP.
    empty_batch_loss: Callable[[nn.Module, Tensor, Tensor], Tensor]
    # (model, batch, config, the step's losses) -> what validation decodes, (B, T' or U, V) and (B,)
    decoding_outputs: Callable[[nn.Module, Batch, TrainConfig, StepLosses], tuple[Tensor, Tensor]]
    # The two scores a run's metrics and best checkpoints carry, the one that picks the best (lower is
    # better) first.
    metrics: tuple[str, str] = ("val_cer", "val_wer")
    text_output: bool = True  # hypotheses are text (CER/WER); False: frame units (loss, accuracy)
    # Whether a batch's frame labels are this objective's own targets (HuBERT's units); otherwise they are
    # an alignment that trains the model frame-wise (``framewise_losses``).
    frame_labels_are_targets: bool = False

    @property
    def frame_posteriors(self) -> bool:
        """Outputs per frame: CTC's collapse and beam search apply (``models.spec.has_frame_posteriors``)."""
        return has_frame_posteriors(self.name)


OBJECTIVES: dict[str, Objective] = {
    objective.name: objective
    for objective in (
        # CTC: the loss pass's own (B, T', V) frame log-probs are decoded.
        Objective("ctc", _ctc_step, _ctc_empty_loss, _loss_pass_outputs),
        # Paraformer: validation decodes its inference pass (token count and queries predicted).
        Objective("paraformer", _decoder_step, _decoder_empty_loss, _inference_outputs),
        # HuBERT pretraining: masked prediction of frame units, scored by loss and accuracy.
        Objective(
            "hubert",
            lambda model, batch, config: unit_losses(model, batch, config),
            _units_empty_loss,
            _loss_pass_outputs,
            metrics=("val_loss", "val_accuracy"),
            text_output=False,
            frame_labels_are_targets=True,
        ),
    )
}


def objective_of(architecture: str) -> Objective:
    """The objective of ``architecture``'s output kind (its spec's ``output``)."""
    return OBJECTIVES[output_kind(architecture)]


def empty_batch_loss(model: nn.Module, features: Tensor, lengths: Tensor, architecture: str) -> Tensor:
    """A zero loss (0-dim) of a forward of ``features`` through every head a training step uses (one
    token, or all-zero units, as the targets): for a rank whose batch came out empty under DDP."""
    return objective_of(architecture).empty_batch_loss(model, features, lengths)


def model_losses(
    model: nn.Module, batch: Batch, config: TrainConfig, *, training: bool = False
) -> StepLosses:
    """The batch's per-utterance losses for the model ``config.model.architecture`` names: frame-wise
    cross-entropy when the batch carries alignment labels (not its own targets), on chunks of each
    utterance in ``training`` with ``data.chunk_frames`` set (validation scores whole utterances); else its
    objective's."""
    objective = objective_of(config.model.architecture)
    if batch.frame_labels is not None and not objective.frame_labels_are_targets:
        if training and config.data.chunk_frames is not None:
            return chunked_framewise_losses(model, batch, config)
        return StepLosses(*framewise_losses(model, batch, config))
    return objective.losses(model, batch, config)


def decoding_outputs(
    model: nn.Module, batch: Batch, config: TrainConfig, step: StepLosses
) -> tuple[Tensor, Tensor]:
    """What validation decodes: CTC's frame log-probs of the loss pass itself; for a Paraformer, its own
    inference pass (no targets: token count and queries predicted, as at test time), (B, U, V) and (B,)."""
    return objective_of(config.model.architecture).decoding_outputs(model, batch, config, step)


def check_input_lengths(batch: Batch, model: nn.Module) -> None:
    """Refuse ``batch`` if an utterance is shorter than ``model`` takes (its ``min_input_frames``: the
    Zipformer's front end needs 9 frames), naming the first few. Read on the host, before the batch goes to
    the device: the model itself can check only where its lengths are on the CPU."""
    minimum = getattr(model, "min_input_frames", 0)
    if not minimum:
        return
    short = (batch.feature_lengths < minimum).nonzero().flatten().tolist()
    if short:
        named = ", ".join(f"{batch.ids[row]} ({int(batch.feature_lengths[row])} frames)" for row in short[:3])
        raise ValueError(
            f"{type(model).__name__} needs at least {minimum} input frames per utterance, and {len(short)} in "
            f"batch {batch.ids} have fewer: {named}. Drop shorter utterances (a minimum duration in the data "
            "config) or pad them"
        )


def check_targets(batch: Batch, vocab_size: int, blank_id: int) -> None:
    mask = (
        torch.arange(batch.targets.shape[1], device=batch.targets.device) < batch.target_lengths[:, None]
    )  # (B, U)
    used = batch.targets[mask]
    bad = (used >= vocab_size) | (used < 0) | (used == blank_id)
    if bool(bad.any()):
        raise ValueError(
            f"batch {batch.ids} holds target ids {sorted(set(used[bad].tolist()))} outside the "
            f"{vocab_size}-entry vocabulary or equal to blank_id={blank_id}; were the shards "
            "extracted with another tokenizer?"
        )


__all__ = [
    "OBJECTIVES",
    "Objective",
    "StepLosses",
    "check_input_lengths",
    "check_targets",
    "chunked_framewise_losses",
    "ctc_losses",
    "decoding_outputs",
    "empty_batch_loss",
    "framewise_losses",
    "model_losses",
    "objective_of",
    "output_kind",
    "output_lengths_of",
    "unit_losses",
]
