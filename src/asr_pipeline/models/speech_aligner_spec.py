"""SpeechAligner's registry entry (``models.spec.ArchitectureSpec``): the pronunciation aligner, a CTC model over
phones (``text.phones``: 41 classes) at the feature frame rate, eating MFCC-39 by default (``data.input_dim: 80``
with the fbank frontend for log-mel-80)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from asr_pipeline.models.spec import ArchitectureSpec

if TYPE_CHECKING:
    from asr_pipeline.models.speech_aligner import SpeechAlignerConfig

MODEL = "asr_pipeline.models.speech_aligner"  # imported when a config or model is made (torch-free spec)


# Named sizes; the model (models.speech_aligner) reads them here. Each is 4 conv widths (39 -> channels[0] -> ... ->
# channels[-1], the attention width) and the attention's heads; every other field keeps SpeechAlignerConfig's value.
@dataclass(frozen=True)
class NamedSize:
    channels: tuple[int, int, int, int]
    num_heads: int


SIZES: dict[str, NamedSize] = {
    "tiny": NamedSize(
        (16, 24, 32, 32), 2
    ),  # ours, for tests: 19,659 parameters, every code path in milliseconds
    "default": NamedSize((64, 128, 256, 512), 4),  # the reference's default: 1,885,323 (its "about 1.7M")
    "large": NamedSize((128, 256, 512, 768), 8),  # ours: 4,919,459 parameters
    # The reference trainer's own presets under its names, beside ours (whose "tiny" and "large" differ):
    # its tiny is 16/32/64/128 channels with 2 heads (129,507 parameters here); its large goes up to 1024
    # channels with 16 heads, the lower widths doubling as in its other presets (7,418,051 parameters here).
    "reference-tiny": NamedSize((16, 32, 64, 128), 2),
    "reference-large": NamedSize((128, 256, 512, 1024), 16),
}
VARIANTS = tuple(SIZES)  # no variant: default
DEFAULT_VARIANT = "default"

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
