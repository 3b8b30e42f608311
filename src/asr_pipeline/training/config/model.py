"""``train.model``: the architecture, its named size and size overrides, its options, pretrained weights."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from asr_pipeline.models.initialization import check_init, parse_init  # torch-free until applied
from asr_pipeline.models.registry import (  # torch-free: the specs name their model code by import path
    DEFAULT_ARCHITECTURE,
    REGISTERED_ARCHITECTURES,
    architecture_names,
    check_available,
    check_variant,
    get_spec,
)
from asr_pipeline.options import setting
from asr_pipeline.training.config.checks import non_negative, positive


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    # One of models.registry's architectures; another is refused here, before torchrun.
    architecture: str = setting(
        DEFAULT_ARCHITECTURE,
        help=f"model architecture (models.registry); buildable: {', '.join(architecture_names())}",
        flag="--architecture",
        choices=REGISTERED_ARCHITECTURES,
    )
    # A named size ("xs", "demo"; "tiny" in tests), checked here too; None: the default sizes.
    variant: str | None = setting(
        None,
        help="named size of the architecture: "
        + "; ".join(f"{name} {', '.join(get_spec(name).variants)}" for name in architecture_names())
        + "; unset: squeezeformer takes --d-model, --num-layers, --num-heads, zipformer is M, w2v-bert 600m",
        flag="--variant",
        shown_default="unset",
    )
    vocab_size: int | None = setting(
        None,
        help="output classes incl. blank",
        flag="--vocab-size",
        shown_default="inferred from --tokenizer (pieces + blank)",
    )
    blank_id: int = setting(0, help="CTC blank id (as given to the tokenizer)", flag="--blank-id")
    # Size overrides. None: the variant's value, or with no variant the reference trainer's defaults
    # (d_model 256, 16 layers, 4 heads: models.squeezeformer_spec.DEFAULT_*).
    d_model: int | None = setting(
        None,
        help="model width (squeezeformer, w2v-bert; zipformer's are per stack: --model-option encoder_dim=[...])",
        flag="--d-model",
        shown_default="256 (squeezeformer), w2v-bert 1024; a --variant's own size when given",
    )
    num_layers: int | None = setting(
        None,
        help="encoder blocks",
        flag="--num-layers",
        shown_default="16 (squeezeformer), w2v-bert 24; a --variant's own size when given",
    )
    num_heads: int | None = setting(
        None,
        help="attention heads",
        flag="--num-heads",
        shown_default="4 (squeezeformer), w2v-bert 16; a --variant's own size when given",
    )
    dropout: float | None = setting(
        None, help="dropout probability", flag="--dropout", shown_default="the variant's, or 0.1"
    )
    options: dict[str, Any] = setting(
        default_factory=dict,
        help="Architecture-specific config fields (e.g. Squeezeformer's conv_kernel_size, a Zipformer's per-stack tuples), over the variant's values; checked against the architecture's config dataclass (models.registry.check_options). Configs saved before this key load with none.",
    )
    # RETURNN's per-layer forward_weights_init, by module kind (models.initialization): applied to the built
    # model before pretrained weights or run.init_from load over it, never on resume.
    init: dict[str, str] = setting(
        default_factory=dict,
        help="initialisation per module kind, KIND=SCHEME pairs: kinds linear, conv, embedding, norm; schemes "
        "default (torch's), xavier_uniform, xavier_normal, kaiming_uniform, kaiming_normal, normal(STD), zeros, "
        "ones (a norm: default, ones, zeros, normal(STD)); any scheme but default also zeroes the kind's biases; "
        "drawn from run.seed, never applied on resume",
        flag="--init",
        metavar="KIND=SCHEME,...",
        parse=parse_init,
        shown_default="none (every module keeps its own)",
    )
    # A pretrained model folder (or its config.json) whose config the model is built from, under options
    # and the size fields (W2V-BERT: a Hugging Face Wav2Vec2BertModel/ForCTC dir, --w2v-hf-model-dir);
    # load_pretrained_weights also imports its weights at the start of a run (not on resume).
    pretrained_dir: str | None = setting(
        None,
        help="w2v-bert: build the encoder from this Hugging Face Wav2Vec2BertModel (or ForCTC) folder's config.json, or from a config.json path; nothing is downloaded",
        flag="--w2v-hf-model-dir",
        metavar="DIR|config.json",
    )
    load_pretrained_weights: bool = setting(
        False,
        help="w2v-bert: also import the .safetensors weights of --w2v-hf-model-dir at the start (not on resume); prints what was loaded, skipped (with the reason) and left at initialisation",
        flag="--w2v-hf-load-weights",
    )

    def __post_init__(self) -> None:
        positive(self, "vocab_size", "d_model", "num_layers", "num_heads")
        non_negative(self, "blank_id", "dropout")
        check_available(self.architecture)
        check_variant(self.architecture, self.variant)
        if self.options:  # only then import the registry (torch): --help and plain configs stay fast
            from asr_pipeline.models.registry import check_options

            check_options(self.architecture, self.options)
        check_init(self.init)
        if self.load_pretrained_weights and self.pretrained_dir is None:
            raise ValueError(
                "load_pretrained_weights (--w2v-hf-load-weights) needs pretrained_dir (--w2v-hf-model-dir): "
                "the folder whose weights to import"
            )


def parse_model_option(text: str) -> tuple[str, Any]:
    """``"conv_kernel_size=15"`` -> ("conv_kernel_size", 15): one ``model.options`` field as a command line
    gives it (``--model-option``), the value as JSON or else a plain string (``input_normalization=utterance``)."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise ValueError(f"--model-option {text!r}: expected NAME=VALUE, e.g. conv_kernel_size=15")
    try:
        return name.strip(), json.loads(value)
    except json.JSONDecodeError:
        return name.strip(), value
