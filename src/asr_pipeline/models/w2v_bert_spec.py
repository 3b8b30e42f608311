"""W2V-BERT's config, named sizes and registry entry (``models.spec.ArchitectureSpec``): how a variant name
and overrides become a ``W2VBertConfig``, its recipe learning rate, frontend and output kind. Pretrained
import lives in ``models.w2v_bert_hf`` (``config_from_hf``, ``load_pretrained``). Torch-free: the model's
code (``models.w2v_bert``, which imports its config from here) is imported when a model is built."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from asr_pipeline.models.spec import ArchitectureSpec, narrow_by_heads, sized_config
from asr_pipeline.options import setting

MODEL = "asr_pipeline.models.w2v_bert"
# HF's activation names the model implements (models.w2v_bert.ACTIVATIONS maps each to its module).
ACTIVATION_NAMES = (
    "relu",
    "gelu",
    "gelu_new",
    "gelu_pytorch_tanh",
    "swish",
    "silu",
    "mish",
    "tanh",
    "sigmoid",
)
POSITION_EMBEDDINGS_TYPES = ("relative_key", "relative", "rotary", None)
# How a compiled relative_key attention adds its position scores (models.w2v_bert_blocks.SelfAttention).
RELATIVE_KEY_ATTENTIONS = ("dense", "flex")


@dataclass(frozen=True)
class W2VBertConfig:
    """Defaults are facebook/w2v-bert-2.0's sizes (HF ``Wav2Vec2BertConfig``'s defaults); HF's names except
    d_model (hidden_size), num_layers (num_hidden_layers), num_heads (num_attention_heads), input_dim
    (feature_projection_input_dim)."""

    input_dim: int = 160
    vocab_size: int = 256  # CTC outputs, blank included
    d_model: int = 1024
    num_layers: int = 24
    num_heads: int = 16
    intermediate_size: int = 4096
    hidden_act: str = "swish"
    conv_depthwise_kernel_size: int = 31
    position_embeddings_type: str | None = "relative_key"
    left_max_position_embeddings: int = 64  # relative_key: distances clipped to [-left, right]
    right_max_position_embeddings: int = 8
    relative_key_attention: str = setting(
        "dense",
        help="relative_key positions under torch.compile: 'dense' adds a (B, H, T, T) bias built per layer; "
        "'flex' adds each score's per-distance term inside FlexAttention's kernel, no T x T tensor (on CUDA "
        "with the inductor backend; needs attention_dropout 0 and heads >= 16 wide; eager and the CPU stay "
        "dense)",
        flag="--w2v-relative-key-attention",
        choices=RELATIVE_KEY_ATTENTIONS,
    )
    rotary_embedding_base: int = 10000
    layer_norm_eps: float = 1e-5
    # Dropout: the rates left at None are ``dropout`` (the trainer sets that one). Attention and activation
    # dropout keep HF's default 0: the attention one draws a (B, H, T, T) mask per layer, 20 % of a demo
    # step on the CPU (profiled: 3.1 s -> 2.35 s single-threaded for 16 x 300 frames with both at 0).
    dropout: float = 0.1
    hidden_dropout: float | None = None  # FFN outputs, encoder input
    activation_dropout: float = 0.0  # inside the FFNs
    attention_dropout: float = 0.0  # attention weights and the attention module's output
    feat_proj_dropout: float | None = None
    conformer_conv_dropout: float | None = None  # conv module output, adapter attention output
    final_dropout: float | None = None  # before lm_head
    # HF defaults to 0.1; 0 here because a skipped layer gets no gradient, which DistributedDataParallel
    # (training/trainer.py, find_unused_parameters=False) rejects.
    layerdrop: float = 0.0
    # Hidden-state SpecAugment with a learned mask vector, as HF (and wav2vec 2.0) do. Off by default: the
    # pipeline masks the features already (features/augment.py). HF defaults: mask_time_prob 0.05.
    apply_spec_augment: bool = True
    mask_time_prob: float = 0.0
    mask_time_length: int = 10
    mask_time_min_masks: int = 2
    mask_feature_prob: float = 0.0
    mask_feature_length: int = 10
    mask_feature_min_masks: int = 0
    add_adapter: bool = False
    adapter_kernel_size: int = 3
    adapter_stride: int = 2
    num_adapter_layers: int = 1
    adapter_act: str = "relu"
    use_intermediate_ffn_before_adapter: bool = False
    output_hidden_size: int | None = None  # adapter width; None: d_model
    activation_checkpointing: bool = setting(
        False,
        help="recompute each conformer layer in backward (same gradients, less activation memory; training "
        "only)",
        flag="--w2v-activation-checkpointing",
    )

    def __post_init__(self) -> None:
        if self.d_model % self.num_heads or self.adapter_width % self.num_heads:
            raise ValueError(
                f"d_model={self.d_model} and output_hidden_size={self.adapter_width} must be divisible "
                f"by num_heads={self.num_heads}"
            )
        if self.position_embeddings_type not in POSITION_EMBEDDINGS_TYPES:
            raise ValueError(
                f"position_embeddings_type must be one of {POSITION_EMBEDDINGS_TYPES}, "
                f"got {self.position_embeddings_type!r}"
            )
        if self.relative_key_attention not in RELATIVE_KEY_ATTENTIONS:
            raise ValueError(
                f"relative_key_attention must be one of {RELATIVE_KEY_ATTENTIONS}, got {self.relative_key_attention!r}"
            )
        if self.relative_key_attention == "flex" and self.position_embeddings_type != "relative_key":
            raise ValueError(
                f"relative_key_attention='flex' fuses relative_key positions, but position_embeddings_type="
                f"{self.position_embeddings_type!r}: set relative_key_attention='dense'"
            )
        if self.relative_key_attention == "flex" and self.head_size < 16:
            raise ValueError(
                f"relative_key_attention='flex' needs heads at least 16 wide (FlexAttention's CUDA kernel), got "
                f"d_model={self.d_model} / num_heads={self.num_heads} = {self.head_size}"
            )
        if self.relative_key_attention == "flex" and self.rate("attention_dropout"):
            raise ValueError(
                f"relative_key_attention='flex' has no attention dropout (FlexAttention draws none); set "
                f"attention_dropout=0 (got {self.rate('attention_dropout')}) or relative_key_attention='dense'"
            )
        if self.position_embeddings_type in ("relative", "rotary") and self.head_size % 2:
            raise ValueError(
                f"{self.position_embeddings_type} positions need an even head width, got {self.head_size}"
            )
        for name in ("hidden_act", "adapter_act"):
            if getattr(self, name) not in ACTIVATION_NAMES:
                raise ValueError(
                    f"{name}={getattr(self, name)!r} is not implemented; choose one of: {', '.join(ACTIVATION_NAMES)}"
                )
        if self.conv_depthwise_kernel_size % 2 != 1:
            raise ValueError(f"conv_depthwise_kernel_size must be odd, got {self.conv_depthwise_kernel_size}")
        if self.use_intermediate_ffn_before_adapter and not self.add_adapter:
            raise ValueError("use_intermediate_ffn_before_adapter=True needs add_adapter=True")

    @property
    def head_size(self) -> int:
        return self.d_model // self.num_heads

    @property
    def adapter_width(self) -> int:
        return self.output_hidden_size or self.d_model

    def rate(self, name: str) -> float:
        """The dropout rate ``name`` (e.g. "hidden_dropout"): its own value, or ``dropout`` when None."""
        value = getattr(self, name)
        return self.dropout if value is None else value

    @property
    def has_masked_spec_embed(self) -> bool:
        return self.mask_time_prob > 0 or self.mask_feature_prob > 0  # HF's rule for registering it


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


def w2v_bert_config(size: str, **overrides: object) -> W2VBertConfig:
    """The config of a named size; ``overrides`` (any W2VBertConfig field) win."""
    return sized_config(W2VBertConfig, SIZES, size, overrides, "W2V-BERT size")


def config_for(variant: str | None, values: Mapping[str, object]) -> W2VBertConfig:
    """``variant``'s config (no variant: 600m) with ``values`` (config fields) over it."""
    return w2v_bert_config(DEFAULT_VARIANT if variant is None else variant, **values)


W2V_BERT = ArchitectureSpec(
    name="w2v-bert",
    config_class=W2VBertConfig,
    variants=VARIANTS,
    config_for=config_for,
    builder=f"{MODEL}:build_w2v_bert",
    peak_learning_rate=lambda variant: PEAK_LEARNING_RATE,
    frontend="w2v-bert",
    input_dim=160,
    output="ctc",
    pretrained_config="asr_pipeline.models.w2v_bert_hf:config_from_hf",
    load_pretrained="asr_pipeline.models.w2v_bert_hf:load_pretrained",
    encoder_blocks=lambda model: list(model.wav2vec2_bert.encoder.layers),
    frontend_modules=("wav2vec2_bert.feature_projection",),
    ctc_head="lm_head",
    lora_targets=r".*\.encoder\.layers\.\d+\.(self_attn\.linear_(q|k|v|out)|ffn[12]\.(intermediate|output)_dense)",
    narrow=lambda config, fraction: narrow_by_heads(
        config, fraction, ("intermediate_size", "output_hidden_size")
    ),
    default_sizes="the 600m sizes",
)
