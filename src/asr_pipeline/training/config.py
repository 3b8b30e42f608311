"""Typed training configuration: nested dataclasses filled from a plain dict by one merge function.

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
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from asr_pipeline.io.atomic import write_json_atomic


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    train_manifests: list[str]  # feature shard files (io.shards), read in this order
    val_manifests: list[str] = field(default_factory=list)  # empty: no validation
    length_index: str | None = None  # Parquet from the index stage; rebuilt in memory when stale or absent
    input_dim: int = 80  # feature bins F; every shard row must have cols == input_dim
    max_train_samples: int | None = None  # keep the first N training examples (after the duration filter)
    max_val_samples: int | None = None
    batch_size: int | None = None  # fixed batches; None: adaptive batches under the padded-frames budget
    adaptive_batch_budget: int = 20000  # padded frames per batch: batch size * longest utterance
    adaptive_batch_max_samples: int = 64
    max_audio_duration_sec: float | None = None  # longer training examples are dropped and counted
    sort_buffer_size: int = 4096  # examples sorted by length together (see data.sampler)
    num_workers: int = 0  # DataLoader worker processes per rank
    spec_time_masks: int = 2
    spec_time_mask_max_frames: int = 40
    spec_freq_masks: int = 2
    spec_freq_mask_max_bins: int = 15

    def __post_init__(self) -> None:
        _positive(
            self,
            "input_dim",
            "adaptive_batch_budget",
            "adaptive_batch_max_samples",
            "sort_buffer_size",
            "batch_size",
            "max_train_samples",
            "max_val_samples",
            "max_audio_duration_sec",
        )
        _non_negative(
            self,
            "num_workers",
            "spec_time_masks",
            "spec_time_mask_max_frames",
            "spec_freq_masks",
            "spec_freq_mask_max_bins",
        )


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    architecture: str = "squeezeformer"  # a name known to models.registry
    variant: str | None = "demo"  # a named size of that architecture ("tiny" in tests)
    vocab_size: int | None = None  # None: the tokenizer's vocab_size (pieces + blank)
    blank_id: int = 0
    d_model: int | None = None  # None: the variant's value
    num_layers: int | None = None
    num_heads: int | None = None
    dropout: float | None = None

    def __post_init__(self) -> None:
        _positive(self, "vocab_size", "d_model", "num_layers", "num_heads")
        _non_negative(self, "blank_id", "dropout")


@dataclass(frozen=True, kw_only=True)
class OptimConfig:
    epochs: int
    learning_rate: float | None = None  # peak; None: see peak_learning_rate
    weight_decay: float = 5e-4
    lr_warmup_steps: int
    lr_hold_steps: int = 0
    lr_decay_steps: int | None = None  # None: decay over all steps left after warmup and hold
    lr_decay_power: float = 1.0  # 1: linear decay; 2: quadratic (polynomial) decay
    lr_min: float = 0.0
    gradient_clip_norm: float | None = 5.0  # None: no clipping (the norm is still logged)
    gradient_clip_value: float | None = None  # clip each gradient element to [-v, v]; excludes the norm clip
    gradient_accumulation_steps: int = 1
    ema_decay: float | None = None  # keep an exponential moving average of the weights (training.ema)
    ema_start_step: int = 0  # before this optimizer step the average just copies the weights

    def __post_init__(self) -> None:
        _positive(
            self,
            "epochs",
            "learning_rate",
            "lr_decay_steps",
            "lr_decay_power",
            "gradient_clip_norm",
            "gradient_clip_value",
            "gradient_accumulation_steps",
        )
        _non_negative(self, "weight_decay", "lr_warmup_steps", "lr_hold_steps", "lr_min", "ema_start_step")
        if self.ema_decay is not None and not 0.0 < self.ema_decay < 1.0:
            raise ValueError(f"ema_decay must be in (0, 1), e.g. 0.999, got {self.ema_decay}")
        # Both at once would make the logged grad_norm and the applied update hard to reason about, and
        # gradient_clip_norm has a non-None default, so a silent precedence rule would surprise someone.
        if self.gradient_clip_value is not None and self.gradient_clip_norm is not None:
            raise ValueError(
                f"gradient_clip_value={self.gradient_clip_value} and gradient_clip_norm="
                f"{self.gradient_clip_norm} are both set; clip by one of them: set gradient_clip_norm "
                "to null (None) to clip by value"
            )


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    output_dir: str  # the run dir: config, events, checkpoints, metrics
    tokenizer: str | None = None  # SentencePiece .model; needed for vocab inference and text CER/WER
    seed: int = 0
    log_every: int = 10  # optimizer steps between "train" events
    backend: Literal["cpu", "cuda"] = "cpu"
    precision: Literal["f32", "bf16", "f16"] = "f32"
    threads_per_rank: int | None = None  # CPU: torch threads per rank; None: max(1, cores // world size)
    checkpoint_every_steps: int | None = None  # extra mid-epoch checkpoints; one is always written per epoch
    resume_from: str | None = None  # a run dir whose checkpoint_latest to continue from (training.resume)
    # Start from these weights (a run dir's checkpoint_latest, or a .safetensors file); tensors whose name
    # or shape differ are skipped and reported. Ignored when resume_from is set: the checkpoint wins.
    init_from: str | None = None
    dry_run: bool = False  # forward + loss on the first batch only; no optimizer step, no checkpoint

    def __post_init__(self) -> None:
        _positive(self, "log_every", "threads_per_rank", "checkpoint_every_steps")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    data: DataConfig
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig
    run: RunConfig


# --- the one merge function ----------------------------------------------------------------------------
def resolve_config(base: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> TrainConfig:
    """``base`` deep-merged with ``overrides`` and checked, as a ``TrainConfig``.

    Raises ValueError naming every unknown key (with the keys that section accepts), every missing
    required key, and the first value of the wrong type.
    """
    merged = _deep_merge(_expand_dotted(base), _expand_dotted(overrides or {}))
    unknown = _unknown_keys(TrainConfig, merged, "")
    if unknown:
        raise ValueError(f"unknown training config keys: {', '.join(unknown)}")
    return _build(TrainConfig, merged, "")


def to_dict(config: TrainConfig) -> dict[str, Any]:
    return dataclasses.asdict(config)


def save_json(config: TrainConfig, path: str | Path) -> None:
    """Write atomically (tmp + rename): a reader never sees half a config."""
    write_json_atomic(path, to_dict(config))


def load_json(path: str | Path) -> TrainConfig:
    return resolve_config(json.loads(Path(path).read_text()))


def peak_learning_rate(config: TrainConfig) -> float:
    """``optim.learning_rate`` when set; else the variant's published peak, capped at 3e-4 for Squeezeformer.

    The cap: the Squeezeformer paper's peaks belong to its large-batch LibriSpeech recipe, while this
    pipeline trains on small adaptive batches, so it starts from a more conservative peak. A run that
    wants another peak (the demo params may) sets ``optim.learning_rate``.
    """
    if config.optim.learning_rate is not None:
        return config.optim.learning_rate
    from asr_pipeline.models.registry import variant_peak_lr  # the registry imports torch models

    peak = variant_peak_lr(config.model.architecture, config.model.variant)
    if peak is None:
        raise ValueError(
            f"optim.learning_rate is unset and {config.model.architecture} variant "
            f"{config.model.variant!r} has no published peak; set optim.learning_rate"
        )
    return min(peak, 3e-4) if config.model.architecture == "squeezeformer" else peak


# --- helpers -------------------------------------------------------------------------------------------
def _expand_dotted(values: Mapping[str, Any]) -> dict[str, Any]:
    expanded: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            value = _expand_dotted(value)
        head, _, rest = str(key).partition(".")
        if rest:
            value = _expand_dotted({rest: value})
        expanded = _deep_merge(expanded, {head: value})
    return expanded


def _deep_merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _unknown_keys(cls: type, values: Any, prefix: str) -> list[str]:
    if not isinstance(values, Mapping):
        return []
    hints = typing.get_type_hints(cls)
    unknown = []
    for key, value in values.items():
        if key not in hints:
            accepted = ", ".join(f.name for f in dataclasses.fields(cls))
            unknown.append(f"{prefix}{key} (the {prefix.rstrip('.') or 'top'} section accepts: {accepted})")
        elif dataclasses.is_dataclass(hints[key]):
            unknown.extend(_unknown_keys(hints[key], value, f"{prefix}{key}."))
    return unknown


def _build(cls: type, values: Any, prefix: str) -> Any:
    where = prefix.rstrip(".") or "the training config"
    if not isinstance(values, Mapping):
        raise ValueError(f"{where} must be a mapping of keys to values, got {type(values).__name__}")
    hints = typing.get_type_hints(cls)
    required = [
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [f"{prefix}{name}" for name in required if name not in values]
    if missing:
        raise ValueError(f"missing required training config keys: {', '.join(missing)}")
    kwargs = {name: _coerce(hints[name], value, f"{prefix}{name}") for name, value in values.items()}
    try:
        return cls(**kwargs)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None


def _coerce(annotation: Any, value: Any, path: str) -> Any:
    if dataclasses.is_dataclass(annotation):
        return _build(annotation, value, f"{path}.")
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for option in (a for a in args if a is not type(None)):
            try:
                return _coerce(option, value, path)
            except ValueError:
                continue
        raise ValueError(f"{path}: expected {_type_name(annotation)}, got {value!r}")
    if origin is Literal:
        if value not in args:
            raise ValueError(f"{path}: expected one of {list(args)}, got {value!r}")
        return value
    if origin is list:
        if not isinstance(value, list | tuple):
            raise ValueError(f"{path}: expected a list, got {value!r}")
        return [_coerce(args[0], item, f"{path}[{i}]") for i, item in enumerate(value)]
    if annotation is bool and isinstance(value, bool):
        return value
    if annotation is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if annotation is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if annotation is str and isinstance(value, str):
        return value
    raise ValueError(f"{path}: expected {_type_name(annotation)}, got {value!r}")


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


def _positive(config: Any, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        if value is not None and value <= 0:
            raise ValueError(f"{name} must be > 0, got {value}")


def _non_negative(config: Any, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        if value is not None and value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")


__all__ = [
    "DataConfig",
    "ModelConfig",
    "OptimConfig",
    "RunConfig",
    "TrainConfig",
    "load_json",
    "peak_learning_rate",
    "resolve_config",
    "save_json",
    "to_dict",
]
