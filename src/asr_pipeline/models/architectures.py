"""Architecture names, which of them can be built yet, and their recipe defaults, without importing torch.

The training config and the command line check ``--architecture`` and fill in learning-rate and size
defaults from here, so a typo or an architecture that has not landed yet is refused before torchrun
starts (and ``asr-pipeline train --help`` stays fast); ``models.registry`` builds the models.

This is the torch-free mirror of the registry's specs (``models.registry.SPECS``): a new architecture adds
its name to ``AVAILABLE_ARCHITECTURES``, its sizes to ``VARIANTS`` and its frontend to ``FRONTENDS``, and
``tests/models/test_architectures.py`` keeps these equal to its spec.
"""

from __future__ import annotations

# The reference trainer's four architectures, then HuBERT (a CTC fine-tuning model and the self-supervised
# pretraining one); the registry can build those in AVAILABLE_ARCHITECTURES.
ARCHITECTURES = (
    "squeezeformer",
    "zipformer",
    "paraformer",
    "w2v-bert",
    "hubert",
    "hubert-pretrain",
    "speech-aligner",  # the pronunciation scorer's phone aligner (models.speech_aligner)
)
AVAILABLE_ARCHITECTURES = ARCHITECTURES  # all of them, now
DEFAULT_ARCHITECTURE = ARCHITECTURES[0]  # what model.architecture is when not given

# Squeezeformer's named sizes (models.squeezeformer.SIZES, which a test keeps this equal to): the paper's,
# smallest first, then the CPU sizes. Listed here so --help can name them without importing torch.
SQUEEZEFORMER_VARIANTS = ("xs", "s", "sm", "m", "ml", "l", "tiny", "demo")
ZIPFORMER_VARIANTS = ("s", "m", "l", "tiny", "demo")  # icefall's sizes (no variant: M), then the CPU sizes
PARAFORMER_VARIANTS = ("base", "tiny", "demo")  # FunASR's AISHELL-1 conformer recipe (no variant), CPU sizes
W2V_BERT_VARIANTS = ("600m", "tiny", "demo")  # facebook/w2v-bert-2.0's encoder (no variant: 600m), CPU sizes
HUBERT_VARIANTS = ("base", "demo", "tiny")  # HuBERT-base (no variant: base), CPU sizes
SPEECH_ALIGNER_VARIANTS = ("tiny", "default", "large")  # no variant: default (1.88M parameters)
VARIANTS = {  # named sizes of each AVAILABLE_ARCHITECTURES entry
    "squeezeformer": SQUEEZEFORMER_VARIANTS,
    "zipformer": ZIPFORMER_VARIANTS,
    "paraformer": PARAFORMER_VARIANTS,
    "w2v-bert": W2V_BERT_VARIANTS,
    "hubert": HUBERT_VARIANTS,
    "hubert-pretrain": HUBERT_VARIANTS,
    "speech-aligner": SPEECH_ALIGNER_VARIANTS,
}

# A Squeezeformer built with no variant gets the reference trainer's "custom" sizes (its --d-model,
# --num-layers, --num-heads defaults); with a variant, the variant's own sizes apply. The other
# architectures' defaults are their specs' (Zipformer: M; W2V-BERT: 600m).
DEFAULT_D_MODEL = 256
DEFAULT_NUM_LAYERS = 16
DEFAULT_NUM_HEADS = 4
# What no variant means, per architecture (for messages and --help).
DEFAULT_SIZES = {
    "squeezeformer": f"d_model {DEFAULT_D_MODEL}, {DEFAULT_NUM_LAYERS} layers, {DEFAULT_NUM_HEADS} heads",
    "zipformer": "the M sizes",
    "paraformer": "the base sizes",
    "w2v-bert": "the 600m sizes",
    "hubert": "the base sizes",
    "hubert-pretrain": "the base sizes",
    "speech-aligner": "the default sizes",
}

# The features each architecture eats (features.frontends): the frontend's name, one per known architecture.
FRONTENDS = {
    "squeezeformer": "fbank",
    "zipformer": "fbank",
    "paraformer": "fbank",
    "w2v-bert": "w2v-bert",
    "hubert": "waveform",
    "hubert-pretrain": "waveform",
    "speech-aligner": "mfcc",
}
# Feature width F of each frontend with its default settings (features.frontends.Frontend.feature_dim):
# data.input_dim when not given. A test keeps these equal to the frontends and to each spec's input_dim.
FRONTEND_WIDTHS = {"fbank": 80, "w2v-bert": 160, "waveform": 320, "mfcc": 39}

# Peak AdamW learning rates of the reference trainer's recipes when --learning-rate is not given, for the
# architectures not built yet (none today); a built one's recipe lives in its spec
# (ArchitectureSpec.peak_learning_rate).
RECIPE_PEAK_LR: dict[str, float] = {}


def check_known(architecture: str) -> str:
    """``architecture`` lower-cased; ValueError listing the known names when it is none of them."""
    name = architecture.lower()
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {architecture!r}; choose one of: {', '.join(ARCHITECTURES)}")
    return name


def frontend_of(architecture: str) -> str:
    """The frontend name (``features.frontends``) of a known architecture."""
    return FRONTENDS[check_known(architecture)]


def default_input_dim(architecture: str) -> int:
    """The feature width F ``architecture``'s frontend gives with its default settings (80 or 160)."""
    return FRONTEND_WIDTHS[frontend_of(architecture)]


def check_available(architecture: str) -> str:
    """``check_known``, and a ValueError saying what can be built instead of an architecture not built yet."""
    name = check_known(architecture)
    if name not in AVAILABLE_ARCHITECTURES:
        available = ", ".join(AVAILABLE_ARCHITECTURES)
        raise ValueError(
            f"{name} cannot be built by this version of asr_pipeline, which trains {available} only; "
            f"train with --architecture {DEFAULT_ARCHITECTURE} (params.yaml train.model.architecture: "
            f"{DEFAULT_ARCHITECTURE})"
        )
    return name


def check_variant(architecture: str, variant: str | None) -> str | None:
    """``variant`` lower-cased (None: the default sizes); a ValueError naming the sizes it can be."""
    if variant is None:
        return None
    name, valid = variant.lower(), VARIANTS[check_available(architecture)]
    if name not in valid:
        raise ValueError(
            f"unknown {architecture} variant {variant!r}; choose one of: {', '.join(valid)} (or none for "
            f"{DEFAULT_SIZES[architecture.lower()]})"
        )
    return name


__all__ = [
    "ARCHITECTURES",
    "AVAILABLE_ARCHITECTURES",
    "DEFAULT_ARCHITECTURE",
    "DEFAULT_D_MODEL",
    "DEFAULT_NUM_HEADS",
    "DEFAULT_NUM_LAYERS",
    "DEFAULT_SIZES",
    "FRONTENDS",
    "FRONTEND_WIDTHS",
    "HUBERT_VARIANTS",
    "PARAFORMER_VARIANTS",
    "RECIPE_PEAK_LR",
    "SQUEEZEFORMER_VARIANTS",
    "VARIANTS",
    "W2V_BERT_VARIANTS",
    "ZIPFORMER_VARIANTS",
    "check_available",
    "check_known",
    "check_variant",
    "default_input_dim",
    "frontend_of",
]
