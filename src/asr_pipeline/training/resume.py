"""Starting from saved weights: resuming a run (``run.resume_from``) and initialising a new one from
another run's weights (``run.init_from``).

Resume safety. A resumed run must be the run that was interrupted, or "exactly equal to an uninterrupted
run" means nothing and a silently changed vocabulary or batch plan trains garbage from a good checkpoint.
So before training starts, the new config is compared with the config the checkpoint was trained under
(``checkpoint_latest/training_config.json``; older checkpoints: the run dir's ``training_config.json``)
and the saved model config (``checkpoint_latest.json``), and any change to a training-critical key is
refused with an old -> new diff. Critical: every model field, the schedule, curriculum, regularization and growth, (the resolved model config included, which
catches a vocabulary change through the tokenizer), the data manifests and everything that shapes the
batch plan, the seed, and every optimizer/schedule field except ``optim.epochs``. Everything else may
change: epochs (to extend a run; the decay horizon follows it unless ``lr_decay_steps`` is set),
``log_every``, ``output_dir``, ``checkpoint_every_steps``, and the operational keys (threads, workers,
tokenizer path, length index, ...). A config saved by an older version is read through
``config.upgrade_saved`` (renamed keys), and a key it lacks counts as that key's default: keys are added
with defaults that behave as the code did before them.

Init-from. Tensors whose name and shape match are copied; every other one is skipped and reported, so
fine-tuning after a vocabulary change keeps the encoder and re-initialises the output head.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from torch import nn

from asr_pipeline.models.lora import ADAPTER_MARK
from asr_pipeline.run_layout import (
    CONFIG_FILE,
    committed_dir,
    init_weights_path,
    read_checkpoint_pointer,
    resolve_run_dir,
)
from asr_pipeline.training.config import (
    DataConfig,
    FinetuneConfig,
    GrowConfig,
    ModelConfig,
    OptimConfig,
    RegularizationConfig,
    TrainConfig,
    to_dict,
    upgrade_saved,
)
from asr_pipeline.training.epoch_schedule import CurriculumConfig

CRITICAL_DATA_KEYS = (
    "train_manifests",
    "val_manifests",
    "input_dim",
    "max_train_samples",
    "max_val_samples",
    "batch_size",
    "adaptive_batch_unit",
    "adaptive_batch_budget",
    "adaptive_batch_max_samples",
    "max_audio_duration_sec",
    "sort_buffer_size",
    "sort_by_length_desc",
    "shuffle_window_shards",
    "spec_time_masks",
    "spec_time_mask_max_frames",
    "spec_freq_masks",
    "spec_freq_mask_max_bins",
    "waveform_gain_min_db",
    "waveform_gain_max_db",
    "waveform_noise_std",
    "waveform_noise_kind",
    "alignment",
    "chunk_frames",
    "chunk_step_frames",
)
# Early stopping may be switched on, off or retuned when resuming: it decides when to stop, not the trajectory.
CHANGEABLE_OPTIM_KEYS = ("epochs", "early_stopping_patience", "early_stopping_min_delta")


def critical_keys(config: dict[str, Any]) -> dict[str, Any]:
    """The training-critical values of a config dict (``to_dict``), flattened to dotted keys."""
    config = upgrade_saved(config)  # keys renamed since an older version saved it
    # As for data below: a model or optim key the saved config predates counts as its default.
    model = {**_field_defaults(ModelConfig), **config["model"]}
    optim = {**_field_defaults(OptimConfig), **config["optim"]}
    newbob = optim.pop("newbob", None) or {}
    # Architecture-specific options count one by one, so the diff names the option that changed.
    options = model.pop("options", None) or {}
    keys = {f"model.{name}": value for name, value in model.items()}
    keys |= {f"model.options.{name}": value for name, value in options.items()}
    # A key the saved config predates counts as its default, so adding a data option with a default that
    # keeps the old behaviour does not block resuming older runs.
    defaults = {f.name: f.default for f in dataclasses.fields(DataConfig)}
    keys |= {f"data.{name}": config["data"].get(name, defaults.get(name)) for name in CRITICAL_DATA_KEYS}
    keys |= {f"optim.{name}": value for name, value in optim.items() if name not in CHANGEABLE_OPTIM_KEYS}
    keys |= {f"optim.newbob.{name}": value for name, value in newbob.items()}
    keys["run.seed"] = config["run"]["seed"]
    # Settings by epoch (training.epoch_schedule): a resumed run continues the same schedule.
    keys["schedule"] = config.get("schedule") or []
    curriculum = {**_field_defaults(CurriculumConfig), **(config.get("curriculum") or {})}
    keys |= {f"curriculum.{name}": value for name, value in curriculum.items()}
    regularization = {**_field_defaults(RegularizationConfig), **(config.get("regularization") or {})}
    keys |= {f"regularization.{name}": value for name, value in regularization.items()}
    grow = {**_field_defaults(GrowConfig), **(config.get("grow") or {})}
    keys |= {f"grow.{name}": value for name, value in grow.items()}
    # How the run adapts its starting weights (merge_lora only decides what is written at the end).
    finetune = {**_field_defaults(FinetuneConfig), **(config.get("finetune") or {})}
    keys |= {f"finetune.{name}": value for name, value in finetune.items() if name != "merge_lora"}
    return keys


def _field_defaults(section: type) -> dict[str, Any]:
    """The defaults of ``section``'s fields, a nested section's as its dict (JSON-shaped, like a saved one)."""
    defaults = {}
    for f in dataclasses.fields(section):
        if f.default is not dataclasses.MISSING:
            defaults[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
            defaults[f.name] = _json_shaped(
                dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
            )
    return defaults


def _json_shaped(value: Any) -> Any:
    # A saved config comes back from JSON (string keys, lists); compare the new one in the same shape.
    return json.loads(json.dumps(value))


def check_resume_compatible(config: TrainConfig, model_config: dict[str, Any], run_dir: str | Path) -> None:
    """Raise ValueError listing every training-critical key that differs from the checkpoint in ``run_dir``
    (or the run dir its ``checkpoint_latest/`` or ``checkpoint_latest.json`` stands for)."""
    run_dir = resolve_run_dir(run_dir)
    pointer = read_checkpoint_pointer(run_dir)
    saved_path = committed_dir(run_dir) / CONFIG_FILE
    if not saved_path.is_file():  # checkpoints written before the config was kept beside them
        saved_path = run_dir / CONFIG_FILE
    # The raw JSON, not load_json: a key this version no longer knows must be reported, not crash.
    saved = critical_keys(json.loads(saved_path.read_text()))
    new = critical_keys(_json_shaped(to_dict(config)))
    changes = [
        f"  {key}: {saved.get(key, '<absent>')!r} -> {new.get(key, '<absent>')!r}"
        for key in sorted(saved.keys() | new.keys())
        if saved.get(key) != new.get(key)
    ]
    saved_model = pointer["model_config"]
    changes += [
        f"  resolved model config {key}: {saved_model.get(key, '<absent>')!r} -> "
        f"{model_config.get(key, '<absent>')!r}"
        for key in sorted(saved_model.keys() | model_config.keys())
        if saved_model.get(key) != model_config.get(key)
    ]
    if changes:
        raise ValueError(
            f"cannot resume from {run_dir}: the config changes training-critical keys "
            f"(saved {saved_path} -> new):\n" + "\n".join(changes) + "\n"
            "Resume with the saved values, or start a new run (run.init_from to start from its weights). "
            "Only epochs, log_every, output_dir, checkpoint_every_steps and operational keys may change."
        )


def init_from_weights(model: nn.Module, source: str | Path, verbose: bool = True) -> dict[str, Any]:
    """Copy the tensors of ``source`` whose name and shape match into ``model``; returns a report:
    ``path``, ``loaded`` (count), ``skipped`` ({name: "saved shape -> model shape"}, or "not in the
    model"), and ``not_in_source`` (model tensors left as initialised)."""
    path = init_weights_path(source)
    saved = load_file(path)
    if any(ADAPTER_MARK in name for name in saved):
        raise ValueError(
            f"run.init_from={str(source)!r} holds LoRA adapters only ({path}), not a model: start from its merged "
            "run dir (train --merge-lora writes <run>/merged) or from the run it adapted"
        )
    target = model.state_dict()
    matching, skipped = {}, {}
    for name, tensor in saved.items():
        if name not in target:
            skipped[name] = "not in the model"
        elif tensor.shape != target[name].shape:
            skipped[name] = f"{list(tensor.shape)} -> {list(target[name].shape)}"
        else:
            matching[name] = tensor
    with torch.no_grad():
        model.load_state_dict(matching, strict=False)
    report = {
        "path": str(path),
        "loaded": len(matching),
        "skipped": skipped,
        "not_in_source": sorted(set(target) - set(saved)),
    }
    if verbose:
        shown = ", ".join(f"{name} ({why})" for name, why in skipped.items()) or "none"
        print(f"[train] init from {path}: {len(matching)} tensors loaded; skipped: {shown}", flush=True)
    return report


__all__ = [
    "check_resume_compatible",
    "critical_keys",
    "init_from_weights",
    "init_weights_path",
]
