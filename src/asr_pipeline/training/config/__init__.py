"""Typed training configuration: nested dataclasses filled from a plain dict by one merge function.

Each section is a module of its own (``data``, ``model``, ``optim`` with ``regularization``, ``run`` with
``validation``, ``adapt`` with ``grow`` and ``finetune``); every field states its help, flag and reference
default there (``options.setting``). This module holds the whole (``TrainConfig``) and how it is built.

``resolve_config(base, overrides)`` deep-merges ``overrides`` into ``base`` (both nested dicts; dotted
keys such as ``{"optim.epochs": 3}`` are accepted in ``overrides`` for command lines), rejects unknown
keys naming every one of them, checks each value's type, and returns a ``TrainConfig``. The worker saves
the resolved config as ``training_config.json`` in the run dir, next to every checkpoint, and
``load_json`` reads it back, so a run can always be reproduced or its model rebuilt.

Dataclasses are frozen so nothing edits the config after resolution; lists stay lists so the JSON
round trip is exact.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asr_pipeline.io.atomic import write_json_atomic
from asr_pipeline.models.registry import (  # torch-free: the specs name their model code by import path
    DEFAULT_ARCHITECTURE,
    check_available,
    default_input_dim,
    get_spec,
)
from asr_pipeline.models.registry import peak_learning_rate as spec_peak_learning_rate
from asr_pipeline.options import (
    ConfigError,
    deep_merge,
    expand_dotted,
    from_dict,
    reference_values,
    setting,
    to_dict,
)
from asr_pipeline.training.config.adapt import FinetuneConfig, GrowConfig
from asr_pipeline.training.config.data import BatchUnit, DataConfig
from asr_pipeline.training.config.model import ModelConfig
from asr_pipeline.training.config.optim import WEIGHT_NOISE_FAMILY_NAMES, OptimConfig, RegularizationConfig
from asr_pipeline.training.config.run import RunConfig, ValidationConfig
from asr_pipeline.training.epoch_schedule import (
    CurriculumConfig,
    EpochSettings,
    ScheduleEntry,
    check_schedule,
    parse_schedule,
)


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    data: DataConfig
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    run: RunConfig = field(default_factory=RunConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    # Settings by epoch and short utterances first (training.epoch_schedule).
    schedule: list[ScheduleEntry] = setting(
        default_factory=list,
        help="config values for epoch ranges (counting from 1), ';'-separated, e.g. '1-5:optim.gradient_clip_norm=1.0;3-:model.dropout=0.1' (README, \"Training control\")",
        flag="--schedule",
        parse=parse_schedule,
        metavar="EPOCHS:KEY=VALUE;...",
        shown_default="none",
    )
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    regularization: RegularizationConfig = setting(
        default_factory=RegularizationConfig,
        help="Layer drop and weight noise in training forwards (training.regularization).",
    )
    grow: GrowConfig = setting(default_factory=GrowConfig, help="a shallow start, deepened (training.growth)")
    finetune: FinetuneConfig = setting(
        default_factory=FinetuneConfig, help="full or LoRA (training.finetune)"
    )

    def __post_init__(self) -> None:
        if self.optim.lr_control == "newbob" and not self.data.val_manifests:
            raise ValueError(
                "optim.lr_control=newbob (--lr-control newbob) follows the validation score, but there are "
                "no validation manifests: set data.val_manifests (--val-manifests) or use lr_control=schedule"
            )
        if self.data.input_dim is None:  # the architecture's frontend width, written into the saved config
            width = default_input_dim(self.model.architecture)
            object.__setattr__(self, "data", dataclasses.replace(self.data, input_dim=width))
        for name, what in (("epochs", "blocks"), ("width_epochs", "channels")):
            epochs = getattr(self.grow, name)
            if epochs and epochs[-1] > self.optim.epochs:
                raise ValueError(
                    f"grow.{name} reaches epoch {epochs[-1]} but the run has optim.epochs="
                    f"{self.optim.epochs}: the model would be saved with {what} it never trained"
                )
        if self.grow.start_width is not None and (self.model.load_pretrained_weights or self.run.init_from):
            raise ValueError(
                "grow.start_width starts from a narrower model, which cannot take the full-width weights of "
                "model.load_pretrained_weights or run.init_from; drop one of them"
            )
        if self.finetune.freezes and self.grow.enabled:
            raise ValueError(
                "finetune.freeze_frontend/freeze_layers hold trained modules still, and train.grow rebuilds the "
                "model; a fine-tuning run does not grow: drop one of them"
            )
        if self.finetune.method == "lora":
            if not (self.run.init_from or self.model.load_pretrained_weights):
                raise ValueError(
                    "finetune.method lora adapts trained weights: set run.init_from (--init-from, a run dir or "
                    ".safetensors file) or model.pretrained_dir with load_pretrained_weights"
                )
            if self.optim.ema_decay is not None or self.optim.use_averaged_model or self.grow.enabled:
                raise ValueError(
                    "finetune.method lora trains adapters on a fixed model: optim.ema_decay, "
                    "optim.use_averaged_model and train.grow do not apply; unset them"
                )
        flex = self.model.options.get("relative_key_attention") == "flex"
        if flex and self.run.compile != "off" and self.run.compile_backend != "inductor":
            raise ValueError(
                "model.options.relative_key_attention=flex (--w2v-relative-key-attention) is FlexAttention's "
                f"inductor kernel; run.compile_backend={self.run.compile_backend} runs torch's reference, whose "
                "backward drops the position scores' gradient: use --compile-backend inductor or dense attention"
            )
        if self.regularization.cr_ctc:
            spec = get_spec(self.model.architecture)
            if spec.output != "ctc" or not spec.feature_masking or self.data.alignment is not None:
                raise ValueError(
                    f"regularization.cr_ctc (--cr-ctc) regularises CTC on SpecAugmented features, but "
                    f"{self.model.architecture} is trained by {spec.output}"
                    + (" on an alignment (data.alignment)" if self.data.alignment is not None else "")
                    + ("" if spec.feature_masking else " and masks its own input")
                    + ": unset cr_ctc or train a CTC model"
                )
        if self.validation.score_averages and not (self.optim.use_averaged_model or self.optim.ema_decay):
            raise ValueError(
                "validation.score_averages (--val-score-averages) scores the weight averages training keeps, "
                "and this run keeps none: set optim.use_averaged_model (--use-averaged-model) or "
                "optim.ema_decay (--ema-decay), or unset score_averages"
            )
        if self.data.chunk_frames is not None and get_spec(self.model.architecture).output != "ctc":
            raise ValueError(
                f"data.chunk_frames trains frame-wise cross-entropy on chunks of an alignment, but "
                f"{self.model.architecture} is trained by {get_spec(self.model.architecture).output}: unset "
                "chunk_frames or train a CTC-output model"
            )
        if self.optim.use_averaged_model and self.grow.enabled:
            raise ValueError(
                "optim.use_averaged_model averages the weights of one model, and train.grow rebuilds it with "
                "other shapes: drop one of them"
            )
        if self.schedule:
            check_schedule(self.schedule, _section_keys(TrainConfig))
            EpochSettings(self)  # every epoch's settings must form a valid config, checked now


def _section_keys(cls: type) -> set[str]:
    """Every ``section.field`` of the config (what a dotted key may name)."""
    hints = typing.get_type_hints(cls)
    return {
        f"{name}.{inner.name}"
        for name, section in hints.items()
        if dataclasses.is_dataclass(section)
        for inner in dataclasses.fields(section)
    }


# --- the one merge function ----------------------------------------------------------------------------
def resolve_config(base: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> TrainConfig:
    """``base`` deep-merged with ``overrides`` and checked, as a ``TrainConfig``.

    Raises ConfigError (a ValueError, shown as one line) naming every unknown key (with the keys that
    section accepts), every missing required key, the first value of the wrong type, or the first value a
    section refuses.
    """
    merged = deep_merge(expand_dotted(base), expand_dotted(overrides or {}))
    return from_dict(TrainConfig, merged, what="training config")


CLIPS = ("optim.gradient_clip_norm", "optim.gradient_clip_value")


def one_clip(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted ``overrides`` in which a clip given alone turns the other one off.

    The config clips by one of norm or value, and gradient_clip_norm defaults to 5.0, so a user asking for
    a value clip (``--gradient-clip-value``) means "instead of the norm clip". Both given: left as they are,
    for the config's own error. ``resolve_config`` itself applies no such rule: a file must say what it means.
    """
    given = [key for key in CLIPS if overrides.get(key) is not None]
    if len(given) != 1 or any(key in overrides for key in CLIPS if key not in given):
        return dict(overrides)
    (other,) = (key for key in CLIPS if key not in given)
    return {**overrides, other: None}


# --- whose defaults -----------------------------------------------------------------------------------
PROFILES = ("ours", "reference")
DEFAULT_PROFILE = "ours"


def profile_values(profile: str, architecture: str = DEFAULT_ARCHITECTURE) -> dict[str, Any]:
    """Dotted key -> default for every field whose default ``profile`` changes: none for "ours"; for
    "reference", the reference trainer's default of each field that states one (``setting(reference=...)``)
    and of ``architecture``'s options (its spec's ``reference_options``), so a config built on them trains as
    the reference trainer would with the same flags."""
    if profile not in PROFILES:
        raise ConfigError(f"unknown defaults {profile!r}; expected one of {', '.join(PROFILES)}")
    if profile == "ours":
        return {}
    values = reference_values(TrainConfig)
    options = get_spec(check_available(architecture)).reference_options
    values |= {f"model.options.{name}": value for name, (value, _) in options.items()}
    return values


def save_json(config: TrainConfig, path: str | Path) -> None:
    """Write atomically (tmp + rename): a reader never sees half a config."""
    write_json_atomic(path, to_dict(config))


def load_json(path: str | Path) -> TrainConfig:
    return resolve_config(upgrade_saved(json.loads(Path(path).read_text())))


# Keys renamed since a config may have been saved: old dotted name -> new. Only saved configs are
# upgraded (load_json, training.resume); params and flags must use the current names.
RENAMED_KEYS = {
    "optim.lr_decay_power": "optim.lr_decay_exponent",
    # the validation decoder's options moved into validation.decoding (decoding.options.DecodingOptions)
    "validation.beam_width": "validation.decoding.beam_width",
    "validation.n_best": "validation.decoding.n_best",
    "validation.lm_weight": "validation.decoding.lm_weight",
    "validation.lm_word_bonus": "validation.decoding.word_score",
    "validation.lm_no_bos": "validation.decoding.lm_no_bos",
    "validation.lm_no_eos": "validation.decoding.lm_no_eos",
}


def upgrade_saved(values: Mapping[str, Any]) -> dict[str, Any]:
    """A saved config dict with renamed keys moved to their current names (a copy)."""
    upgraded = {key: dict(value) if isinstance(value, Mapping) else value for key, value in values.items()}
    for old, new in RENAMED_KEYS.items():
        old_section, old_name = old.split(".")
        section = upgraded.get(old_section)
        if not (isinstance(section, dict) and old_name in section):
            continue
        value = section.pop(old_name)
        *new_sections, new_name = new.split(".")
        target = upgraded
        for name in new_sections:
            target[name] = dict(target.get(name) or {})
            target = target[name]
        target[new_name] = value
    if isinstance(
        upgraded.get("validation"), dict
    ):  # before validation.decoding, beam width > 1 meant prefix beam
        decoding = upgraded["validation"].get("decoding")
        if isinstance(decoding, dict) and "decoder" not in decoding:
            beam = (decoding.get("beam_width") or 1) > 1 or upgraded["validation"].get("lm_path")
            decoding["decoder"] = "prefix_beam" if beam else "greedy"
            if decoding.get("beam_width") is None:
                decoding.pop("beam_width", None)
    return upgraded


def check_vocab_source(config: TrainConfig) -> None:
    """The output layer's size must come from somewhere: ``run.tokenizer`` or ``model.vocab_size``."""
    if config.run.tokenizer is None and config.model.vocab_size is None:
        raise ValueError(
            "the model's output size is unknown: pass --tokenizer MODEL (its pieces + 1 blank; "
            "run.tokenizer) or --vocab-size N (model.vocab_size)"
        )


def peak_learning_rate(config: TrainConfig) -> float:
    """``optim.learning_rate`` when set; else ``default_peak_learning_rate`` of the model."""
    if config.optim.learning_rate is not None:
        return config.optim.learning_rate
    return default_peak_learning_rate(config.model.architecture, config.model.variant)


def default_peak_learning_rate(architecture: str, variant: str | None) -> float:
    """The reference trainer's recipe peak, as the architecture's spec says it
    (``models.registry.peak_learning_rate``; Squeezeformer min(variant peak, 3e-4), 3e-4 with no variant;
    Zipformer and Paraformer 1e-3, W2V-BERT 1e-4)."""
    return spec_peak_learning_rate(check_available(architecture), variant)


__all__ = [
    "DEFAULT_PROFILE",
    "PROFILES",
    "WEIGHT_NOISE_FAMILY_NAMES",
    "BatchUnit",
    "DataConfig",
    "FinetuneConfig",
    "GrowConfig",
    "ModelConfig",
    "OptimConfig",
    "RegularizationConfig",
    "RunConfig",
    "TrainConfig",
    "ValidationConfig",
    "check_vocab_source",
    "deep_merge",
    "default_peak_learning_rate",
    "load_json",
    "one_clip",
    "peak_learning_rate",
    "profile_values",
    "resolve_config",
    "save_json",
    "to_dict",
]
