"""SpeechAligner's registry entry (``models.spec.ArchitectureSpec``): the pronunciation aligner, a CTC model over
phones (``text.phones``: 41 classes) at the feature frame rate, eating MFCC-39 by default (``data.input_dim: 80``
with the fbank frontend for log-mel-80). Its config and named sizes live here, torch-free; the model's code
(``models.speech_aligner``, which imports its config from here) is imported when a model is built."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from asr_pipeline.models.spec import ArchitectureSpec, check_input_normalization, sized_config
from asr_pipeline.text.phones import NUM_CLASSES

MODEL = "asr_pipeline.models.speech_aligner"  # imported when a model is built (the spec is torch-free)


@dataclass(frozen=True)
class SpeechAlignerConfig:
    input_dim: int = 39  # MFCC-39; 80 for log-mel-80
    vocab_size: int = NUM_CLASSES  # blank + SIL + 39 phones
    channels: tuple[int, ...] = field(default=(64, 128, 256, 512))  # the conv blocks' widths, in order
    kernel_size: int = 3
    num_heads: int = 4
    se_reduction: int = 8  # squeeze-excitation bottleneck: channels // se_reduction
    dropout: float = 0.1
    input_normalization: str | None = "utterance"  # per-utterance CMVN of the input features, or None

    def __post_init__(self) -> None:
        check_input_normalization(self.input_normalization)

    @property
    def d_model(self) -> int:
        return self.channels[-1]


# Named sizes. Each is 4 conv widths (39 -> channels[0] -> ... -> channels[-1], the attention width) and the
# attention's heads; every other field keeps SpeechAlignerConfig's value.
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


def speech_aligner_config(variant: str | None = None, **values: object) -> SpeechAlignerConfig:
    """``variant``'s sizes (None: default) with ``values`` over them."""
    name = DEFAULT_VARIANT if variant is None else variant
    if "channels" in values:
        values["channels"] = tuple(values["channels"])  # type: ignore[arg-type]
    return sized_config(SpeechAlignerConfig, SIZES, name, values, "speech-aligner variant")


def config_for(variant: str | None, values: Mapping[str, object]) -> SpeechAlignerConfig:
    return speech_aligner_config(variant, **dict(values))


SPEECH_ALIGNER = ArchitectureSpec(
    name="speech-aligner",
    config_class=SpeechAlignerConfig,
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
