"""SpeechAligner's registry entry (``models.spec.ArchitectureSpec``): the pronunciation aligner, a CTC model over
phones (``text.phones``: 41 classes) at the feature frame rate, eating MFCC-39 by default (``data.input_dim: 80``
with the fbank frontend for log-mel-80)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from asr_pipeline.models.spec import ArchitectureSpec

if TYPE_CHECKING:
    from asr_pipeline.models.speech_aligner import SpeechAlignerConfig

MODEL = "asr_pipeline.models.speech_aligner"  # imported when a config or model is made (torch-free spec)
VARIANTS = ("tiny", "default", "large")  # models.speech_aligner.SIZES; no variant: default (1.88M parameters)

PEAK_LR = 1e-3  # the reference trainer's Adam rate for its aligner


def config_for(variant: str | None, values: Mapping[str, object]) -> SpeechAlignerConfig:
    from asr_pipeline.models.speech_aligner import speech_aligner_config

    return speech_aligner_config(variant, **dict(values))


SPEECH_ALIGNER = ArchitectureSpec(
    name="speech-aligner",
    config_class=f"{MODEL}:SpeechAlignerConfig",
    variants=VARIANTS,
    config_for=config_for,
    builder=f"{MODEL}:build_speech_aligner",
    peak_learning_rate=lambda variant: PEAK_LR,
    frontend="mfcc",
    input_dim=39,
    output="ctc",
    # The conv stack is the front-end; the attention block is the one encoder block.
    encoder_blocks=lambda model: [model.attention],
    frontend_modules=("blocks",),
    ctc_head="ctc_head",
    default_sizes="the default sizes",
    # No LoRA targets: nn.MultiheadAttention reads its projections' weights directly, past any adapter.
)
