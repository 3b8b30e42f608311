"""``ArchitectureSpec``: what one architecture tells the rest of the pipeline (``models.registry`` maps
names to specs; each model file's spec lives next to it, e.g. ``models.squeezeformer_spec``).

A spec is torch-free: it names its builder, config class and every other callable that needs the model's
code by import path (``"asr_pipeline.models.squeezeformer:build_squeezeformer"``), imported on first use,
so ``--help`` and config checks read names, variants, frontend, input width and output kind from the one
spec without importing torch."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from asr_pipeline.options import UNSET, walk

if TYPE_CHECKING:
    from torch import nn

C = TypeVar("C")

# "ctc": (B, T', V) log-probs; "paraformer": a decoder returning its loss terms; "hubert": masked prediction of
# frame units (self-supervised, no text output).
OutputKind = Literal["ctc", "paraformer", "hubert"]


@dataclass(frozen=True)
class Output:
    """What the rest of the pipeline may know about an output kind (training's side is
    ``training.ctc.OBJECTIVES``)."""

    # (B, T', V) frame log-probs: CTC's collapse, beam search over frames and forced alignment (word times,
    # training.alignment) apply; otherwise the outputs are per token (one parallel decoder pass) or per unit.
    frame_posteriors: bool
    card_tag: str  # the model card's tag (publish.export)
    described_as: str  # how the model card names what it outputs


OUTPUTS: dict[str, Output] = {
    "ctc": Output(frame_posteriors=True, card_tag="ctc", described_as="CTC"),
    "paraformer": Output(
        frame_posteriors=False, card_tag="paraformer", described_as="a CIF predictor and parallel decoder"
    ),
    "hubert": Output(
        frame_posteriors=False, card_tag="hubert", described_as="masked prediction of discrete units (HuBERT)"
    ),
}
FRAME_POSTERIOR_OUTPUTS: tuple[str, ...] = tuple(
    kind for kind, output in OUTPUTS.items() if output.frame_posteriors
)


def has_frame_posteriors(output: str) -> bool:
    """Whether a model of output kind ``output`` gives frame log-probs (``OUTPUTS``)."""
    return OUTPUTS[output].frame_posteriors


# Config fields the training config sets outside model.options (model.d_model, data.input_dim, ...). Every
# architecture has input_dim, vocab_size and dropout; d_model, num_layers and num_heads only one with a
# single width, depth and head count (Zipformer's are per stack, so they are options there).
COMMON_FIELDS = ("input_dim", "vocab_size", "d_model", "num_layers", "num_heads", "dropout")
REQUIRED_FIELDS = ("input_dim", "vocab_size", "dropout")


@dataclass(frozen=True)
class Lazy:
    """A callable (or class) named by its import path, ``"package.module:attribute"``, imported when first
    used: calling a ``Lazy`` calls what it names."""

    path: str

    def resolve(self) -> Any:
        module, _, attribute = self.path.partition(":")
        if not attribute:
            raise ValueError(f"{self.path!r} is not an import path of the form 'package.module:attribute'")
        return getattr(importlib.import_module(module), attribute)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)


# The spec's fields that name model code: each may be given as an import path (str), kept as a ``Lazy``.
LAZY_FIELDS = (
    "config_class",
    "config_for",
    "builder",
    "peak_learning_rate",
    "variant_peak_lr",
    "pretrained_config",
    "load_pretrained",
    "encoder_blocks",
    "narrow",
)


@dataclass(frozen=True)
class ArchitectureSpec:
    """Everything the rest of the pipeline may know about one architecture. Fields holding model code may
    be import paths (``"package.module:attribute"``), imported on first use (``Lazy``)."""

    name: str  # as in --architecture and training_config.json's model.architecture
    # a frozen dataclass of plain values; must have the REQUIRED_FIELDS (``config_type`` resolves a path)
    config_class: type | str
    variants: tuple[str, ...]  # named sizes, in the order --help lists them
    # (variant or None, given config fields) -> the resolved config; None: the architecture's default sizes
    config_for: Callable[[str | None, Mapping[str, object]], Any] | str
    builder: Callable[[Any], nn.Module] | str  # resolved config -> model
    peak_learning_rate: (
        Callable[[str | None], float] | str
    )  # the recipe's peak when optim.learning_rate is unset
    frontend: str  # features.frontends name of the features it eats ("fbank", "w2v-bert")
    input_dim: int  # the frontend's feature width F it expects by default
    output: OutputKind  # "ctc": (B, T', V) log-probs for CTC; "paraformer": a Paraformer-style decoder
    # The published peak of a variant, if the paper gives one; None: no variant or none published.
    variant_peak_lr: Callable[[str | None], float | None] | str = lambda variant: None
    # Import from a pretrained model folder (model.pretrained_dir; W2V-BERT: a Hugging Face dir): its config
    # as config fields, and its weights loaded into a built model (printing what it did when verbose),
    # returning a report (loaded, skipped with reasons, left at initialisation). None: imports nothing.
    pretrained_config: Callable[[Path], dict[str, Any]] | str | None = None
    load_pretrained: Callable[[nn.Module, Path, bool], dict[str, Any]] | str | None = None
    # The encoder's blocks in depth order (training.regularization's layer drop). Each is called with the
    # hidden sequence (B, T, D) first and returns one of the same shape. None: the model has no such stack.
    encoder_blocks: Callable[[nn.Module], list[nn.Module]] | str | None = None
    # (resolved config, fraction in (0, 1)) -> the same architecture at about that fraction of its width,
    # with the head width kept and the head count scaled (training.growth's widening copies a narrow
    # model into the full one: modules.widening). None: the architecture cannot be widened.
    narrow: Callable[[Any, float], Any] | str | None = None
    # Whether the pipeline's SpecAugment (data.spec_*) applies to its features; False: the model masks its
    # own input (HuBERT's span masking), and masking its waveform frames as a spectrogram would corrupt them.
    feature_masking: bool = True
    # Fine-tuning (training.finetune): the names of the modules that turn features into the encoder's input
    # sequence (frozen by finetune.freeze_frontend), and a regular expression over module names matching the
    # attention and feed-forward projections that LoRA adapts (models.lora; None: name them yourself).
    frontend_modules: tuple[str, ...] = ()
    # The reference trainer's defaults of architecture options where ours differ (``--defaults reference``
    # puts them in model.options): option -> (its value, why ours differs). Filled from the config fields'
    # ``setting(reference=...)`` when config_class is a class; entries given here win.
    reference_options: Mapping[str, tuple[object, str]] = dataclasses.field(default_factory=dict)
    lora_targets: str | None = None
    # The module that turns the encoder's last hidden states into CTC logits: its input is the representation
    # other models read (models.representations; the pronunciation scoring head's "richer features"). None:
    # the architecture has no such head (Paraformer's decoder, HuBERT pretraining).
    ctc_head: str | None = None
    # What no variant means, for messages and --help ("the M sizes", "d_model 256, 16 layers, 4 heads").
    default_sizes: str = "the default sizes"

    def __post_init__(self) -> None:
        for name in LAZY_FIELDS:
            if isinstance(getattr(self, name), str):
                object.__setattr__(self, name, Lazy(getattr(self, name)))
        # The config's fields state their reference defaults (``setting(reference=...)``); a config named by
        # import path is not imported here, so such a spec lists its reference_options itself.
        if isinstance(self.config_class, type):
            stated = field_reference_options(self.config_class)
            object.__setattr__(self, "reference_options", {**stated, **self.reference_options})

    @property
    def config_type(self) -> type:
        """The config class itself (imported if the spec names it by path)."""
        config_class = self.config_class
        return config_class.resolve() if isinstance(config_class, Lazy) else config_class  # type: ignore[return-value]

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(field.name for field in dataclasses.fields(self.config_type))

    @property
    def option_fields(self) -> tuple[str, ...]:
        """The config fields ``model.options`` may set: all but the COMMON_FIELDS."""
        return tuple(name for name in self.fields if name not in COMMON_FIELDS)


# A model config's ``input_normalization``: per-utterance CMVN of its input features
# (``modules.masks.normalize_input``), or none.
INPUT_NORMALIZATIONS = ("utterance", None)


def check_input_normalization(value: str | None) -> None:
    """A model config's ``input_normalization`` check (its ``__post_init__``)."""
    if value not in INPUT_NORMALIZATIONS:
        raise ValueError(f"input_normalization must be 'utterance' or None, got {value!r}")


def field_reference_options(config_class: type) -> dict[str, tuple[object, str]]:
    """Option -> (the reference trainer's default, why ours differs) of every field of ``config_class``
    whose ``setting`` states a reference default."""
    return {
        field.key: (field.setting.reference, field.setting.reference_note or "")
        for field in walk(config_class)
        if field.setting is not None and field.setting.reference is not UNSET
    }


def size_fields(config_class: type, sizes: Mapping[str, object], size: str, what: str) -> dict[str, object]:
    """The config fields of the named size ``size`` of ``sizes``; a ValueError naming the sizes when it is
    none of them (``what`` names them in it: "Zipformer size"). A size is a mapping of config fields or a
    dataclass whose fields that ``config_class`` also has are taken; its others describe the size (a
    recipe's peak rate, a paper's parameter count) and stay out of the config."""
    if size not in sizes:
        raise ValueError(f"unknown {what} {size!r}; choose one of: {', '.join(sizes)}")
    named = sizes[size]
    if isinstance(named, Mapping):
        return dict(named)
    config_fields = {field.name for field in dataclasses.fields(config_class)}
    return {
        field.name: getattr(named, field.name)
        for field in dataclasses.fields(named)  # type: ignore[arg-type]
        if field.name in config_fields
    }


def sized_config(
    config_class: type[C], sizes: Mapping[str, object], size: str, overrides: Mapping[str, object], what: str
) -> C:
    """``config_class`` at the named size ``size`` (``size_fields``) with ``overrides`` (config fields) over
    it: every spec's ``<architecture>_config``."""
    return config_class(**{**size_fields(config_class, sizes, size, what), **overrides})


def narrowed_heads(num_heads: int, fraction: float) -> int:
    """The head count at ``fraction`` of the width: rounded, at least one."""
    return max(1, round(num_heads * fraction))


def narrow_by_heads(config: Any, fraction: float, scaled: tuple[str, ...] = ()) -> Any:
    """``config`` (with ``d_model`` and ``num_heads``) with ``narrowed_heads`` heads of the same width,
    and each of the ``scaled`` int fields that is set (not None) scaled by the same ratio."""
    heads = narrowed_heads(config.num_heads, fraction)
    ratio = heads / config.num_heads
    values = {
        name: round(getattr(config, name) * ratio) for name in scaled if getattr(config, name) is not None
    }
    return dataclasses.replace(
        config, d_model=config.d_model // config.num_heads * heads, num_heads=heads, **values
    )


__all__ = [
    "COMMON_FIELDS",
    "FRAME_POSTERIOR_OUTPUTS",
    "INPUT_NORMALIZATIONS",
    "LAZY_FIELDS",
    "OUTPUTS",
    "REQUIRED_FIELDS",
    "ArchitectureSpec",
    "Lazy",
    "Output",
    "OutputKind",
    "check_input_normalization",
    "field_reference_options",
    "has_frame_posteriors",
    "narrow_by_heads",
    "narrowed_heads",
    "size_fields",
    "sized_config",
]
