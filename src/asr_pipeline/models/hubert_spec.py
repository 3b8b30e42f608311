"""HuBERT's two registry entries (``models.spec.ArchitectureSpec``): ``hubert-pretrain``, the self-supervised
masked-prediction model trained on frame units (``data.alignment``), and ``hubert``, the same encoder with a
CTC head, fine-tuned on text (``run.init_from`` a pretraining run copies the encoder: the names agree).
Both eat the ``waveform`` frontend's 320-sample frames and mask their own input, so the pipeline's
SpecAugment is off for them. A Hugging Face HuBERT folder (``model.pretrained_dir``) gives either its
config and, with ``model.load_pretrained_weights``, its weights. The config and named sizes live here, torch-free;
the model's code (``models.hubert``, which imports its config from here) is imported when a model is built."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from asr_pipeline.models.spec import ArchitectureSpec, sized_config

if TYPE_CHECKING:
    from torch import nn

MODEL = "asr_pipeline.models.hubert"

BASE_CONV_LAYERS = ((512, 10, 5),) + ((512, 3, 2),) * 4 + ((512, 2, 2),) * 2  # 320 samples per frame
WAVEFORM_FRAME = 320  # samples per frame of the waveform frontend (20 ms at 16 kHz)


@dataclass(frozen=True)
class HubertConfig:
    """Defaults: HuBERT-base (fairseq ``hubert_base_librispeech``; torchaudio ``hubert_pretrain_base``)."""

    input_dim: int = WAVEFORM_FRAME  # samples per input frame (the waveform frontend's frame)
    vocab_size: int = 256  # CTC outputs of the fine-tuning head, blank included
    dropout: float = 0.1  # residual, feature-projection and head dropout
    d_model: int = 768
    num_layers: int = 12
    num_heads: int = 12
    ff_dim: int = 3072
    conv_layers: tuple[tuple[int, int, int], ...] = BASE_CONV_LAYERS  # (channels, kernel, stride) per block
    extractor_mode: str = "group_norm"  # group_norm: block 0 only (base); layer_norm: every block (large)
    conv_bias: bool = False
    pos_conv_kernel: int = 128
    pos_conv_groups: int = 16
    layer_norm_first: bool = False  # False: post-LN (base); True: pre-LN (large)
    attention_dropout: float = 0.1
    activation_dropout: float = 0.0
    layer_norm_eps: float = 1e-5
    feature_grad_mult: float = 0.1  # the conv encoder's gradient is scaled by this (fairseq), 1: not at all
    normalize_waveform: bool = False  # per-utterance zero mean, unit variance of the samples (large: True)
    # Masking: pretraining always, fine-tuning in training only (SpecAugment-like, as HF's mask_time_prob).
    mask_prob: float = 0.8
    mask_length: int = 10
    mask_min_masks: int = 2
    # Pretraining head and loss.
    num_classes: int = 100  # k-means units
    final_dim: int = 256
    logit_temperature: float = 0.1
    masked_weight: float = 1.0
    unmasked_weight: float = 0.0
    feature_penalty_weight: float = 10.0  # times the mean square of the conv features, per predicted frame

    def __post_init__(self) -> None:
        object.__setattr__(self, "conv_layers", tuple(tuple(block) for block in self.conv_layers))
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by num_heads={self.num_heads}")
        if self.d_model % self.pos_conv_groups:
            raise ValueError(
                f"d_model={self.d_model} must be divisible by pos_conv_groups={self.pos_conv_groups}"
            )
        if self.extractor_mode not in ("group_norm", "layer_norm"):
            raise ValueError(f"extractor_mode must be group_norm or layer_norm, got {self.extractor_mode!r}")
        if not 0.0 < self.feature_grad_mult <= 1.0:
            raise ValueError(f"feature_grad_mult must lie in (0, 1], got {self.feature_grad_mult}")
        if not 0.0 <= self.mask_prob < 1.0 or self.mask_length < 1:
            raise ValueError(f"mask_prob={self.mask_prob} must lie in [0, 1) and mask_length >= 1")

    @property
    def stride(self) -> int:
        return math.prod(stride for _, _, stride in self.conv_layers)


# base: HuBERT-base; demo: a CPU size for the demo corpus; tiny: tests (a 3-block conv stack, 320 stride).
# A size is the config fields it sets; the others keep HubertConfig's (HuBERT-base) defaults.
SIZES: dict[str, dict[str, object]] = {
    "base": dict(d_model=768, num_layers=12, num_heads=12, ff_dim=3072),
    "demo": dict(
        d_model=192,
        num_layers=4,
        num_heads=4,
        ff_dim=768,
        conv_layers=(
            (128, 10, 5),
            (128, 3, 2),
            (128, 3, 2),
            (128, 3, 2),
            (128, 2, 2),
            (128, 2, 2),
            (128, 2, 2),
        ),
        pos_conv_kernel=32,
        pos_conv_groups=4,
        final_dim=64,
    ),
    "tiny": dict(
        d_model=32,
        num_layers=2,
        num_heads=2,
        ff_dim=64,
        conv_layers=((16, 10, 5), (16, 4, 4), (16, 4, 4), (16, 2, 2), (16, 2, 2)),
        pos_conv_kernel=16,
        pos_conv_groups=2,
        final_dim=8,
    ),
}
VARIANTS = tuple(SIZES)  # HuBERT-base (no variant: base), then the CPU sizes (SIZES)

DEFAULT_VARIANT = "base"
PRETRAIN_PEAK_LR = 5e-4  # the recipe's (fairseq / minimal_hubert: AdamW 5e-4, warmup 32k of 400k steps)
FINETUNE_PEAK_LR = 5e-5  # fairseq's HuBERT-base fine-tuning peak (base_10h / 100h: 5e-5 to 3e-5)
FINETUNE_MASK_PROB = 0.05  # HF HubertConfig.mask_time_prob: SpecAugment-like masking while fine-tuning


def hubert_config(variant: str, **overrides: object) -> HubertConfig:
    """The named size ``variant`` with ``overrides`` (config fields) over it."""
    given = {key: value for key, value in overrides.items() if value is not None}
    return sized_config(HubertConfig, SIZES, variant, given, "HuBERT variant")


def pretrain_config(variant: str | None, values: Mapping[str, object]) -> HubertConfig:
    """``variant``'s config (no variant: base) with ``values`` (config fields) over it."""
    return hubert_config(DEFAULT_VARIANT if variant is None else variant, **values)


def ctc_config(variant: str | None, values: Mapping[str, object]) -> HubertConfig:
    """As ``pretrain_config``, with the fine-tuning mask probability unless ``values`` sets one."""
    return pretrain_config(variant, {"mask_prob": FINETUNE_MASK_PROB, **values})


def _encoder_layers(model: nn.Module) -> list[nn.Module]:
    return list(model.hubert.encoder.transformer.layers)


HUBERT = ArchitectureSpec(
    name="hubert",
    config_class=HubertConfig,
    variants=VARIANTS,
    config_for=ctc_config,
    builder=f"{MODEL}:build_hubert_ctc",
    peak_learning_rate=lambda variant: FINETUNE_PEAK_LR,
    frontend="waveform",
    input_dim=320,
    output="ctc",
    pretrained_config="asr_pipeline.models.hubert_import:hf_config_values",
    load_pretrained="asr_pipeline.models.hubert_import:load_pretrained",
    encoder_blocks=_encoder_layers,
    frontend_modules=("hubert.feature_extractor", "hubert.encoder.feature_projection"),
    ctc_head="ctc_head",
    lora_targets=r".*\.transformer\.layers\.\d+\.(attention\.(q|k|v|out)_proj|feed_forward\.(intermediate|output)_dense)",
    feature_masking=False,
    default_sizes="the base sizes",
)

# The same encoder, its own head and loss: only these differ from HUBERT.
HUBERT_PRETRAIN = dataclasses.replace(
    HUBERT,
    name="hubert-pretrain",
    config_for=pretrain_config,
    builder=f"{MODEL}:build_hubert_pretrain",
    peak_learning_rate=lambda variant: PRETRAIN_PEAK_LR,
    output="hubert",
    ctc_head=None,
)
