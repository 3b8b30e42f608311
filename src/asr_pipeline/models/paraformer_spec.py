"""Paraformer's registry entry: how a variant name and overrides become a ``ParaformerConfig``, its recipe
learning rate, frontend and output kind (``models.registry.ArchitectureSpec``).

Its output kind is "paraformer", not "ctc": the model takes the targets itself and returns its per-utterance
losses, and decodes to (B, U, V) token log-probs (``models.paraformer.Paraformer.forward``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from asr_pipeline.models.spec import ArchitectureSpec, narrow_by_heads

if TYPE_CHECKING:
    from asr_pipeline.models.paraformer import ParaformerConfig

MODEL = "asr_pipeline.models.paraformer"  # imported when a config or model is made (the spec is torch-free)


@dataclass(frozen=True)
class NamedSize:
    d_model: int
    num_layers: int
    num_heads: int
    decoder_layers: int
    ff_expansion: int
    conv_kernel_size: int


SIZES: dict[str, NamedSize] = {
    # FunASR's AISHELL-1 conformer Paraformer recipe (paraformer_conformer_12e_6d_2048_256.yaml): 43.3 M
    # parameters with a 257-piece vocabulary, 46.3 M with AISHELL-1's 4234 characters.
    "base": NamedSize(256, 12, 4, 6, 8, 15),
    # CPU sizes, not from the paper. "tiny" exists for tests: every code path (the shallow CTC on block 1 of
    # 3, two decoder blocks) in ~10 ms a training step (0.13 M parameters).
    "tiny": NamedSize(32, 3, 2, 2, 2, 7),
    # "demo" is for `make demo` on a 2-core CPU: width 144 and 4 heads as Squeezeformer's demo, 4 full-rate
    # conformer blocks and 2 decoder blocks (3.3 M parameters with a 257-piece vocabulary; Squeezeformer's
    # demo 3.7 M). One forward + backward + AdamW step on 16 six-second utterances of 96 tokens, one thread,
    # CPU time, min of 4 (glancing on): 1.96 s against 1.84 s for Squeezeformer's demo; 6 blocks took 2.44 s.
    "demo": NamedSize(144, 4, 4, 2, 4, 15),
}
VARIANTS = tuple(SIZES)  # FunASR's AISHELL-1 conformer recipe, then the CPU sizes (SIZES)

DEFAULT_VARIANT = "base"  # FunASR's AISHELL-1 conformer recipe sizes
# The reference trainer's Paraformer recipe: AdamW at peak 1e-3, every size.
PEAK_LR = 1e-3


def config_for(variant: str | None, values: Mapping[str, object]) -> ParaformerConfig:
    """``variant``'s config with ``values`` (config fields) over it; no variant: base."""
    from asr_pipeline.models.paraformer import paraformer_config

    return paraformer_config(DEFAULT_VARIANT if variant is None else variant, **values)


def peak_learning_rate(variant: str | None) -> float:
    return PEAK_LR


PARAFORMER = ArchitectureSpec(
    name="paraformer",
    reference_options={
        "alignment_mode": (
            "viterbi",
            "the reference trainer builds the decoder queries from CTC forced alignment; ours from the CIF "
            "predictor as the Paraformer paper does, which needs no CTC head at decoding",
        )
    },
    config_class=f"{MODEL}:ParaformerConfig",
    variants=VARIANTS,
    config_for=config_for,
    builder=f"{MODEL}:build_paraformer",
    peak_learning_rate=peak_learning_rate,
    frontend="fbank",
    input_dim=80,
    output="paraformer",
    encoder_blocks=lambda model: list(model.blocks),
    frontend_modules=("subsampling",),
    # Encoder and decoder attention and feed-forward projections (not the predictor or the heads).
    lora_targets=r"(decoder\.)?blocks\.\d+\.(\w*attention\.(qkv|q|kv|out)_proj|(ff|ff_in|ff_out)\.linear_(in|out))",
    narrow=lambda config, fraction: narrow_by_heads(config, fraction, ("subsampling_channels",)),
    default_sizes="the base sizes",
)
