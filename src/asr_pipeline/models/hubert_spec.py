"""HuBERT's two registry entries (``models.spec.ArchitectureSpec``): ``hubert-pretrain``, the self-supervised
masked-prediction model trained on frame units (``data.alignment``), and ``hubert``, the same encoder with a
CTC head, fine-tuned on text (``run.init_from`` a pretraining run copies the encoder: the names agree).
Both eat the ``waveform`` frontend's 320-sample frames and mask their own input, so the pipeline's
SpecAugment is off for them. A Hugging Face HuBERT folder (``model.pretrained_dir``) gives either its
config and, with ``model.load_pretrained_weights``, its weights. Torch-free: the model's code is imported when a
config or model is made."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from asr_pipeline.models.spec import ArchitectureSpec

if TYPE_CHECKING:
    from torch import nn

    from asr_pipeline.models.hubert import HubertConfig

MODEL = "asr_pipeline.models.hubert"


@dataclass(frozen=True)
class NamedSize:
    d_model: int
    num_layers: int
    num_heads: int
    ff_dim: int
    extra: dict = field(default_factory=dict)


# base: HuBERT-base; demo: a CPU size for the demo corpus; tiny: tests (a 3-block conv stack, 320 stride).
SIZES = {
    "base": NamedSize(768, 12, 12, 3072),
    "demo": NamedSize(
        192,
        4,
        4,
        768,
        {
            "conv_layers": (
                (128, 10, 5),
                (128, 3, 2),
                (128, 3, 2),
                (128, 3, 2),
                (128, 2, 2),
                (128, 2, 2),
                (128, 2, 2),
            ),
            "pos_conv_kernel": 32,
            "pos_conv_groups": 4,
            "final_dim": 64,
        },
    ),
    "tiny": NamedSize(
        32,
        2,
        2,
        64,
        {
            "conv_layers": ((16, 10, 5), (16, 4, 4), (16, 4, 4), (16, 2, 2), (16, 2, 2)),
            "pos_conv_kernel": 16,
            "pos_conv_groups": 2,
            "final_dim": 8,
        },
    ),
}
VARIANTS = tuple(SIZES)  # HuBERT-base (no variant: base), then the CPU sizes (SIZES)

DEFAULT_VARIANT = "base"
PRETRAIN_PEAK_LR = 5e-4  # the recipe's (fairseq / minimal_hubert: AdamW 5e-4, warmup 32k of 400k steps)
FINETUNE_PEAK_LR = 5e-5  # fairseq's HuBERT-base fine-tuning peak (base_10h / 100h: 5e-5 to 3e-5)
FINETUNE_MASK_PROB = 0.05  # HF HubertConfig.mask_time_prob: SpecAugment-like masking while fine-tuning


def pretrain_config(variant: str | None, values: Mapping[str, object]) -> HubertConfig:
    """``variant``'s config (no variant: base) with ``values`` (config fields) over it."""
    from asr_pipeline.models.hubert import hubert_config

    return hubert_config(DEFAULT_VARIANT if variant is None else variant, **values)


def ctc_config(variant: str | None, values: Mapping[str, object]) -> HubertConfig:
    """As ``pretrain_config``, with the fine-tuning mask probability unless ``values`` sets one."""
    return pretrain_config(variant, {"mask_prob": FINETUNE_MASK_PROB, **values})


def load_pretrained(model: nn.Module, path: Path, verbose: bool) -> dict[str, Any]:
    """A Hugging Face HuBERT folder's weights; the ``pretrained`` event's report."""
    from asr_pipeline.models.hubert_import import load_hf_weights

    return load_hf_weights(model, path, verbose=verbose).to_event(path)


def _encoder_layers(model: nn.Module) -> list[nn.Module]:
    return list(model.hubert.encoder.transformer.layers)


HUBERT = ArchitectureSpec(
    name="hubert",
    config_class=f"{MODEL}:HubertConfig",
    variants=VARIANTS,
    config_for=ctc_config,
    builder=f"{MODEL}:build_hubert_ctc",
    peak_learning_rate=lambda variant: FINETUNE_PEAK_LR,
    frontend="waveform",
    input_dim=320,
    output="ctc",
    pretrained_config="asr_pipeline.models.hubert_import:hf_config_values",
    load_pretrained=load_pretrained,
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
