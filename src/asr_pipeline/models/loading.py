"""A model from the model section of a training config, and the trained model of a run dir.

Both go through the architecture's registry spec, so decoding, evaluation, ``--resume-from`` and
``--init-from`` rebuild any registered architecture the same way. This module reads the run dir's JSON
files itself (``asr_pipeline.run_layout`` names them) and never imports ``training/``: the layers below
``training/`` (``decoding/``) load a run's model through here.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from safetensors.torch import load_file
from torch import Tensor, nn

from asr_pipeline.models.averaging import average_kept_checkpoints
from asr_pipeline.models.lora import LoraSettings, add_lora, load_saved_weights, merge_adapters
from asr_pipeline.models.registry import (
    DEFAULT_ARCHITECTURE,
    SPECS,
    build_from_config,
    check_options,
    get_spec,
    model_config,
)
from asr_pipeline.models.spec import OutputKind
from asr_pipeline.options import ConfigError
from asr_pipeline.run_layout import (
    BEST_DIR,
    BEST_POINTER,
    CARD_FILE,
    CONFIG_FILE,
    DEFAULT_WEIGHTS,
    EXPORT_CONFIG,
    EXPORT_FORMAT,
    WEIGHTS_FILE,
    checkpoint_weights,
    committed_dir,
    init_weights_path,
    parse_weights,
    read_checkpoint_pointer,
    resolve_run_dir,
)


class ModelSettings(Protocol):
    """The model section of a training config (``training.config.ModelConfig`` is one)."""

    architecture: str
    variant: str | None
    d_model: int | None
    num_layers: int | None
    num_heads: int | None
    dropout: float | None
    options: Mapping[str, Any]
    pretrained_dir: str | None
    blank_id: int


def resolve_model_config(
    settings: ModelSettings, *, input_dim: int, vocab_size: int, width: float = 1.0
) -> dict[str, Any]:
    """The full model config ``settings`` resolve to, as a dict (as saved in checkpoint_latest.json);
    ``width`` < 1: the architecture's narrower config at that fraction of the width (``ArchitectureSpec.narrow``)."""
    return _as_saved(_config_at_width(settings, input_dim, vocab_size, width))


def build_model_for(
    settings: ModelSettings, *, input_dim: int, vocab_size: int, width: float = 1.0
) -> tuple[nn.Module, dict[str, Any]]:
    """The model ``settings`` describe (at ``width``, as in ``resolve_model_config``) and its full config
    as a dict (for checkpoint_latest.json)."""
    config = _config_at_width(settings, input_dim, vocab_size, width)
    return get_spec(settings.architecture).builder(config), _as_saved(config)


def _config_at_width(settings: ModelSettings, input_dim: int, vocab_size: int, width: float) -> Any:
    config = _config(settings, input_dim, vocab_size)
    if width >= 1.0:
        return config
    spec = get_spec(settings.architecture)
    if spec.narrow is None:
        widenable = ", ".join(name for name, other in SPECS.items() if other.narrow) or "none"
        raise ValueError(
            f"grow.start_width: the {spec.name} architecture cannot be built narrower and widened; "
            f"architectures that can: {widenable}"
        )
    try:
        return spec.narrow(config, width)
    except ValueError as error:
        raise ValueError(
            f"grow.start_width: the {spec.name} model at {width:.3g} of its width: {error}"
        ) from error


def _as_saved(config: Any) -> dict[str, Any]:
    """The config as JSON gives it back (tuples as lists), so a resumed run's config compares equal to
    the one saved in checkpoint_latest.json."""
    return json.loads(json.dumps(dataclasses.asdict(config)))


def pretrained_values(architecture: str, source: str | Path) -> dict[str, Any]:
    """The config fields of the pretrained model in ``source`` (a folder or its config file), through the
    architecture's spec (which raises FileNotFoundError for a missing one); ValueError when the
    architecture imports none."""
    spec = get_spec(architecture)
    if spec.pretrained_config is None:
        importers = ", ".join(name for name, other in SPECS.items() if other.pretrained_config) or "none"
        raise ValueError(
            f"{spec.name} cannot be built from a pretrained model folder (model.pretrained_dir={str(source)!r}); "
            f"architectures that can: {importers}"
        )
    return spec.pretrained_config(Path(source))


def load_pretrained_weights(
    model: nn.Module, architecture: str, source: str | Path, verbose: bool = True
) -> dict[str, Any]:
    """Import the weights of the pretrained folder ``source`` into ``model`` (a freshly built model of
    ``architecture``); the spec's report: loaded, skipped with reasons, left at initialisation (printed
    when ``verbose``)."""
    spec = get_spec(architecture)
    if spec.load_pretrained is None:
        raise ValueError(f"{spec.name} cannot import pretrained weights (model.load_pretrained_weights)")
    return spec.load_pretrained(model, Path(source), verbose)


def _config(settings: ModelSettings, input_dim: int, vocab_size: int) -> Any:
    check_options(settings.architecture, settings.options)  # a common field in options: refused, not merged
    base: dict[str, Any] = {}
    pretrained_dir = settings.pretrained_dir
    if pretrained_dir is not None:
        base = pretrained_values(settings.architecture, pretrained_dir)
        base.pop("vocab_size", None)  # the tokenizer decides the output layer; a different one is skipped
        expected = base.pop("input_dim", input_dim)
        if expected != input_dim:
            raise ValueError(
                f"the pretrained model in {pretrained_dir} takes {expected}-dim features, but data.input_dim "
                f"is {input_dim}: extract the features with the {settings.architecture} frontend "
                f"(features.architecture) and leave data.input_dim unset"
            )
    if "blank_id" in get_spec(settings.architecture).fields:  # a model that masks the blank out itself
        given = settings.options.get("blank_id", settings.blank_id)
        if given != settings.blank_id:
            raise ValueError(
                f"model.options.blank_id={given} differs from model.blank_id={settings.blank_id}: set "
                "model.blank_id (--blank-id) only"
            )
        base["blank_id"] = settings.blank_id
    return model_config(
        settings.architecture,
        settings.variant,
        input_dim=input_dim,
        vocab_size=vocab_size,
        base=base,
        **dict(settings.options),
        d_model=settings.d_model,
        num_layers=settings.num_layers,
        num_heads=settings.num_heads,
        dropout=settings.dropout,
    )


@dataclass(frozen=True)
class RunModel:
    """The trained model of a run dir (CPU, eval mode) and what decoding needs to know about it."""

    model: nn.Module
    architecture: str
    blank_id: int
    output: OutputKind  # the spec's output kind: "ctc" log-probs or a Paraformer-style decoder
    model_config: dict[str, Any]  # exactly as saved in checkpoint_latest.json
    training_config: dict[str, Any]  # training_config.json as saved (raw JSON)


def is_export(path: str | Path) -> bool:
    """Whether ``path`` is a folder written by ``publish.export`` (its config.json names the format)."""
    config = Path(path) / EXPORT_CONFIG
    if not config.is_file():
        return False
    try:
        return json.loads(config.read_text()).get("format") == EXPORT_FORMAT
    except (json.JSONDecodeError, AttributeError):
        return False


def is_finetuned_run(run_dir: str | Path) -> bool:
    """Whether ``run_dir`` is an hf_finetune run (its options name a model by folder or id: a string)."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.is_file():
        return False
    config = json.loads(path.read_text())
    return isinstance(config.get("model"), str) and "method" in config


def is_finetuned_export(folder: str | Path) -> bool:
    """Whether ``folder`` is an ``export_finetuned`` folder: a run's options beside a transformers model and
    its card (what ``publish.hub.publish_folder`` uploads)."""
    folder = Path(folder)
    return is_finetuned_run(folder) and (folder / "config.json").is_file() and (folder / CARD_FILE).is_file()


def best_weights(run_dir: Path) -> Path:
    """``checkpoint_best``'s weights, or a FileNotFoundError saying why a run has none."""
    if not (run_dir / BEST_POINTER).is_file():
        raise FileNotFoundError(
            f"{run_dir} has no {BEST_DIR} ({BEST_POINTER}): a run writes one only when it validates "
            "(data.val_manifests); use the latest checkpoint"
        )
    return run_dir / BEST_DIR / WEIGHTS_FILE


def checkpoint_file(
    run_dir: Path,
    checkpoint: Literal["latest", "best"] = "latest",
    weights: str = DEFAULT_WEIGHTS,
    option: str = "--weights",
) -> tuple[Path, dict[str, Any]]:
    """The weights file of ``run_dir`` that ``checkpoint`` (latest or best) and ``weights`` (raw, averaged,
    ema: ``run_layout.WEIGHTS``) choose, and that checkpoint's pointer (step, epoch, model_config, metrics).
    A missing file or an unknown choice is a one-line error naming ``option``
    (``run_layout.checkpoint_weights``)."""
    if checkpoint == "best":
        best_weights(run_dir)  # says why a run has no best checkpoint
        folder, pointer = run_dir / BEST_DIR, json.loads((run_dir / BEST_POINTER).read_text())
    else:
        folder, pointer = committed_dir(run_dir), read_checkpoint_pointer(run_dir)
    return checkpoint_weights(folder, weights, option), pointer


def checkpoint_state(
    run_dir: Path,
    checkpoint: Literal["latest", "best"] = "latest",
    weights: str = DEFAULT_WEIGHTS,
    option: str = "--weights",
) -> tuple[dict[str, Tensor], str, dict[str, Any]]:
    """The state dict that ``checkpoint`` and ``weights`` choose in ``run_dir``, where it came from (for
    messages) and the checkpoint's pointer. ``weights`` is a file's name (``checkpoint_file``) or
    ``averaged:STEP``: the mean of the weights over the steps after the kept checkpoint ``STEP`` up to the
    checkpoint's own (``models.averaging.average_kept_checkpoints``). Every refusal is one line naming ``option``."""
    name, start_step = parse_weights(weights, option)
    if start_step is None:
        path, pointer = checkpoint_file(run_dir, checkpoint, name, option)
        return load_file(path), str(path), pointer
    _, pointer = checkpoint_file(run_dir, checkpoint, DEFAULT_WEIGHTS, option)
    try:
        state = average_kept_checkpoints(run_dir, start_step, pointer["step"])
    except (OSError, ValueError, KeyError) as error:
        raise ConfigError(f"{option} {weights}: {error}") from None
    return state, f"{run_dir}'s kept averages from step {start_step} to {pointer['step']}", pointer


def _load_export(folder: Path) -> RunModel:
    config = json.loads((folder / EXPORT_CONFIG).read_text())
    spec = get_spec(config["architecture"])
    model = build_from_config(spec.name, config["model_config"])
    model.load_state_dict(load_file(folder / WEIGHTS_FILE), strict=True)
    model.eval()
    training_config = json.loads((folder / CONFIG_FILE).read_text())
    return RunModel(
        model=model,
        architecture=spec.name,
        blank_id=int(config["blank_id"]),
        output=spec.output,
        model_config=config["model_config"],
        training_config=training_config,
    )


def _load_lora_run(
    model: nn.Module,
    architecture: str,
    training_config: dict[str, Any],
    adapters: dict[str, Tensor],
    source: str,
) -> None:
    """A LoRA run's model (models.lora): its base weights (``run.init_from`` or the imported
    ``model.pretrained_dir``, as when it trained), its ``adapters`` (read from ``source``), merged into plain
    linears."""
    run, finetune = training_config["run"], training_config["finetune"]
    if run.get("init_from"):
        base = init_weights_path(run["init_from"])
        model.load_state_dict(load_file(base), strict=True)
    else:
        load_pretrained_weights(model, architecture, training_config["model"]["pretrained_dir"], False)
    settings = LoraSettings(
        rank=finetune["lora_rank"],
        alpha=finetune["lora_alpha"],
        dropout=finetune["lora_dropout"],
        target_modules=finetune.get("lora_target_modules"),
    )
    add_lora(model, architecture, settings)
    load_saved_weights(model, adapters, source)
    merge_adapters(model)


def load_run_model(
    run_dir: str | Path,
    checkpoint: Literal["latest", "best"] = "latest",
    weights: str = DEFAULT_WEIGHTS,
    weights_option: str = "--weights",
) -> RunModel:
    """The trained model of ``run_dir`` (or its ``checkpoint_latest/`` folder or ``.json`` pointer), or of
    a folder ``publish.export`` wrote. ``checkpoint="best"``: the weights of the run's best validation score
    (``checkpoint_best``, often not the last: the one early stopping points at) instead of the latest.
    ``weights``: that checkpoint's raw weights, an average kept beside them, or the average since a kept
    checkpoint (``checkpoint_state``); ``weights_option`` is the flag or params key that chose it, named in
    the error when it cannot be loaded.

    The architecture comes from ``training_config.json``; every model field comes from the
    ``model_config`` saved in ``checkpoint_latest.json`` exactly as saved (no variant lookup), so the
    rebuilt model is the trained one even if the registry's variant numbers changed since, and even when
    the vocabulary size was inferred from a tokenizer that is not at hand now.
    """
    run_dir = resolve_run_dir(run_dir)
    if is_export(run_dir):
        if weights != DEFAULT_WEIGHTS:
            raise ConfigError(
                f"{weights_option} {weights}: {run_dir} is an exported model, which holds one set of weights "
                f"({WEIGHTS_FILE}; its config.json says which); set {weights_option} {DEFAULT_WEIGHTS}"
            )
        return _load_export(run_dir)
    config_path = run_dir / CONFIG_FILE
    if not config_path.is_file():
        raise FileNotFoundError(f"{config_path} does not exist: {run_dir} is not a training run dir")
    training_config = json.loads(config_path.read_text())
    model_section = training_config.get("model", {})
    # A config saved before model.architecture existed was the default (then the only) architecture.
    spec = get_spec(model_section.get("architecture", DEFAULT_ARCHITECTURE))
    state, source, pointer = checkpoint_state(run_dir, checkpoint, weights, weights_option)
    saved_model_config = pointer["model_config"]
    model = build_from_config(spec.name, saved_model_config)
    finetune = training_config.get("finetune") or {}
    if finetune.get("method") == "lora":  # adapters only: the base first, then them, folded in
        _load_lora_run(model, spec.name, training_config, state, source)
    else:
        # load_state_dict copies into the model's dtypes: the float64 running average becomes float32
        model.load_state_dict(state, strict=True)
    model.eval()
    return RunModel(
        model=model,
        architecture=spec.name,
        blank_id=int(model_section.get("blank_id", 0)),
        output=spec.output,
        model_config=saved_model_config,
        training_config=training_config,
    )


__all__ = [
    "ModelSettings",
    "RunModel",
    "best_weights",
    "build_model_for",
    "checkpoint_file",
    "checkpoint_state",
    "is_export",
    "is_finetuned_export",
    "is_finetuned_run",
    "load_pretrained_weights",
    "load_run_model",
    "pretrained_values",
    "resolve_model_config",
]
