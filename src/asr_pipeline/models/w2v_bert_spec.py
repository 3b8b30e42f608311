"""W2V-BERT's registry entry: how a variant name and overrides become a ``W2VBertConfig``, its recipe
learning rate, frontend and output kind (``models.spec.ArchitectureSpec``). Pretrained import lives in
``models.w2v_bert_hf`` (``config_from_hf``, ``load_hf_weights``). Torch-free: the model's code is imported when
a config or model is made."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from asr_pipeline.models.spec import ArchitectureSpec, narrow_by_heads

if TYPE_CHECKING:
    from asr_pipeline.models.w2v_bert import W2VBertConfig, W2VBertCTC

MODEL = "asr_pipeline.models.w2v_bert"
# Named sizes: (d_model, num_layers, num_heads, intermediate_size, conv_depthwise_kernel_size).
SIZES: dict[str, dict[str, int]] = {
    # facebook/w2v-bert-2.0 (HF Wav2Vec2BertConfig's defaults): 580.5 M encoder parameters, the "600M"
    # of the model card (arithmetic in tests/models/test_w2v_bert.py).
    "600m": dict(
        d_model=1024, num_layers=24, num_heads=16, intermediate_size=4096, conv_depthwise_kernel_size=31
    ),
    # Tests: every code path in milliseconds; distances clipped to [-8, 2] so short inputs reach both clips.
    "tiny": dict(
        d_model=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        conv_depthwise_kernel_size=5,
        left_max_position_embeddings=8,
        right_max_position_embeddings=2,
    ),
    # `make demo` from scratch on a 2-core CPU: 3.66 M parameters (vocabulary 256) against the Squeezeformer
    # demo's 3.69 M; 4 heads of 40, 6 layers, kernel 15 (300 ms at 20 ms frames). Measured on the shared
    # 2-core dev box with 2 threads, one forward + backward of 16 six-second utterances (16 x 300 x 160)
    # takes 1.1 s (best of 5; medians up to 4.8 s while other jobs load the box), the Squeezeformer demo
    # beside it 0.7-1.1 s: twice its frames (20 ms against its 40/80 ms U-Net) for as many parameters.
    "demo": dict(
        d_model=160, num_layers=6, num_heads=4, intermediate_size=640, conv_depthwise_kernel_size=15
    ),
}
VARIANTS = tuple(SIZES)  # facebook/w2v-bert-2.0's encoder, then the CPU sizes (SIZES)

DEFAULT_VARIANT = "600m"  # no variant: facebook/w2v-bert-2.0's sizes, so its checkpoint loads
# The reference trainer's peak for W2V-BERT (fine-tuning the 600M checkpoint, as in HF's w2v-BERT 2.0
# CTC recipe, which uses 5e-5 to 1e-4); a from-scratch run that wants more sets optim.learning_rate.
PEAK_LEARNING_RATE = 1e-4


def config_for(variant: str | None, values: Mapping[str, object]) -> W2VBertConfig:
    """``variant``'s config (no variant: 600m) with ``values`` (config fields) over it."""
    from asr_pipeline.models.w2v_bert import w2v_bert_config

    return w2v_bert_config(DEFAULT_VARIANT if variant is None else variant, **values)


def load_pretrained(model: W2VBertCTC, path: Path, verbose: bool) -> dict[str, Any]:
    """``load_hf_weights``'s report as the ``pretrained`` training event writes it (counts and reasons)."""
    from asr_pipeline.models.w2v_bert_hf import load_hf_weights

    return load_hf_weights(model, path, verbose=verbose).to_event(path)


W2V_BERT = ArchitectureSpec(
    name="w2v-bert",
    config_class=f"{MODEL}:W2VBertConfig",
    variants=VARIANTS,
    config_for=config_for,
    builder=f"{MODEL}:build_w2v_bert",
    peak_learning_rate=lambda variant: PEAK_LEARNING_RATE,
    frontend="w2v-bert",
    input_dim=160,
    output="ctc",
    pretrained_config="asr_pipeline.models.w2v_bert_hf:config_from_hf",
    load_pretrained=load_pretrained,
    encoder_blocks=lambda model: list(model.wav2vec2_bert.encoder.layers),
    frontend_modules=("wav2vec2_bert.feature_projection",),
    ctc_head="lm_head",
    lora_targets=r".*\.encoder\.layers\.\d+\.(self_attn\.linear_(q|k|v|out)|ffn[12]\.(intermediate|output)_dense)",
    narrow=lambda config, fraction: narrow_by_heads(
        config, fraction, ("intermediate_size", "output_hidden_size")
    ),
    default_sizes="the 600m sizes",
)
