"""The run dir's checkpoint files (the model itself is built and rebuilt by ``models.loading``).

Layout (ARCHITECTURE.md, "Data contracts")::

    run_dir/
      training_config.json             the resolved TrainConfig (config.save_json)
      checkpoint_latest/
        model.safetensors              weights of the unwrapped model (no "module." prefix); a LoRA run's
                                       adapters only (models.lora: the base weights are its run.init_from)
        ema.safetensors                the weights' moving average (training.ema), when optim.ema_decay is set
        averaged.safetensors           the running average (training.ema, float64), with optim.use_averaged_model
        training_state.pt              optimizer, schedule step, sampler state, RNG states, epoch
        training_config.json           the config this checkpoint was trained under (training.resume checks it)
      checkpoint_latest.json           {"step", "epoch", "model_config", "metrics"}, written last
      checkpoint_best/                 model.safetensors (+ the averages) of the lowest val CER so far
      checkpoint_best.json             {"step", "epoch", "model_config", "metrics"}, written last
      checkpoints/step-<step>.safetensors  with run.keep_checkpoints: every checkpoint's weights, kept (the
                                       metadata holds step, epoch and the model config at that width)
      checkpoints/averaged/step-<step>.safetensors  the running average at that step, kept with it (its
                                       metadata: step, epoch, average_period); models.averaging

``checkpoint_latest.json`` is the commit point: it is written after the directory is complete, through
tmp + ``os.replace``, so a reader that finds it also finds the weights it describes. The directory itself
is written as ``checkpoint_latest.tmp`` and swapped in, so a crash mid-write never damages the previous
checkpoint, and the previous directory is kept as ``checkpoint_latest.old`` until the pointer names the
new one (``run_layout.committed_dir`` reads through a kill at any point). ``training_state.pt`` holds only tensors
and plain containers, so it loads with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from asr_pipeline.io.atomic import write_json_atomic
from asr_pipeline.models.loading import build_model_for, load_run_model, resolve_model_config
from asr_pipeline.models.lora import saved_weights
from asr_pipeline.run_layout import (
    AVERAGED_KEPT_DIR,
    BEST_DIR,
    BEST_POINTER,
    CHECKPOINT_DIR,
    CHECKPOINT_POINTER,
    CONFIG_FILE,
    KEPT_DIR,
    WEIGHTS_FILE,
    committed_dir,
    read_checkpoint_pointer,
    resolve_run_dir,
)
from asr_pipeline.training.config import TrainConfig, load_json, save_json
from asr_pipeline.training.ema import RunningAverage

STATE_FILE = "training_state.pt"


def build_model_from_config(
    config: TrainConfig, vocab_size: int, width: float = 1.0
) -> tuple[nn.Module, dict[str, Any]]:
    """The model ``config.model`` describes and its full model config as a dict (for checkpoint_latest.json);
    built through the architecture's spec by ``models.loading.build_model_for`` (CTC or Paraformer-style:
    ``training.ctc.model_losses`` asks the spec which loss applies). ``width`` < 1: a narrower model
    (``train.grow.start_width``)."""
    return build_model_for(config.model, input_dim=config.data.input_dim, vocab_size=vocab_size, width=width)


def resolved_model_config(config: TrainConfig, vocab_size: int, width: float = 1.0) -> dict[str, Any]:
    """The full model config ``config.model`` resolves to (at ``width``), without building the model."""
    return resolve_model_config(
        config.model, input_dim=config.data.input_dim, vocab_size=vocab_size, width=width
    )


def save_checkpoint(
    run_dir: str | Path,
    *,
    model: nn.Module,
    training_state: dict[str, Any] | None,
    step: int,
    epoch: int,
    model_config: dict[str, Any],
    metrics: dict[str, Any] | None = None,
    averages: dict[str, dict[str, torch.Tensor]] | None = None,
    train_config: TrainConfig | None = None,
    name: str = CHECKPOINT_DIR,
) -> None:
    """Write ``<name>/`` then ``<name>.json``; ``model`` must be unwrapped (no DDP).

    ``name`` is ``checkpoint_latest`` (the default) or ``checkpoint_best``; the best checkpoint passes no
    ``training_state``, as nothing resumes from it. ``averages``: file name -> the state dict of a weight
    average (``EMA_FILE``, ``AVERAGE_FILE``), each written beside the weights.
    """
    run_dir = Path(run_dir)
    final, tmp, old = run_dir / name, run_dir / f"{name}.tmp", run_dir / f"{name}.old"
    shutil.rmtree(tmp, ignore_errors=True)
    if name == CHECKPOINT_DIR and committed_dir(run_dir) == old:  # a swap was killed before its commit
        shutil.rmtree(final, ignore_errors=True)
        old.rename(final)
    tmp.mkdir(parents=True)
    metadata = {"step": str(step), "epoch": str(epoch)}
    save_file(_contiguous(saved_weights(model)), tmp / WEIGHTS_FILE, metadata=metadata)
    for file, weights in (averages or {}).items():
        save_file(_contiguous(weights), tmp / file, metadata=metadata)
    if training_state is not None:
        torch.save({**training_state, "step": step, "epoch": epoch}, tmp / STATE_FILE)
    if train_config is not None:
        save_json(train_config, tmp / CONFIG_FILE)
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    tmp.rename(final)
    pointer = {"step": step, "epoch": epoch, "model_config": model_config, "metrics": metrics or {}}
    write_json_atomic(run_dir / f"{name}.json", pointer)
    # Only now: until the pointer names the new step, the old directory is the committed checkpoint.
    shutil.rmtree(old, ignore_errors=True)


def save_kept_weights(
    run_dir: str | Path,
    *,
    model: nn.Module,
    step: int,
    epoch: int,
    model_config: dict[str, Any],
    average: RunningAverage | None = None,
) -> Path:
    """The weights of the checkpoint at ``step`` as ``checkpoints/step-<step>.safetensors``, kept for good
    (HuBERT's recipe validates every one); written to a temporary name and renamed, so a listed file is whole.
    With ``average``, the running average too, as ``checkpoints/averaged/step-<step>.safetensors`` (a folder
    of its own: ``run_layout.kept_checkpoints`` lists the weights only)."""
    folder = Path(run_dir) / KEPT_DIR
    folder.mkdir(exist_ok=True)
    metadata = {"step": str(step), "epoch": str(epoch), "model_config": json.dumps(model_config)}
    if average is not None:
        averaged = folder / AVERAGED_KEPT_DIR
        averaged.mkdir(exist_ok=True)
        state = _contiguous(average.state_dict(model, keep_dtype=True))
        _save_whole(state, averaged, step, {**metadata, "average_period": str(average.period)})
    return _save_whole(_contiguous(saved_weights(model)), folder, step, metadata)


def _save_whole(state: dict[str, Tensor], folder: Path, step: int, metadata: dict[str, str]) -> Path:
    path, tmp = folder / f"step-{step:08d}.safetensors", folder / f".step-{step:08d}.tmp"
    save_file(state, tmp, metadata=metadata)
    tmp.replace(path)
    return path


def read_kept_weights(path: str | Path) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """A kept checkpoint's state dict and its {"step", "epoch", "model_config"}."""
    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata() or {}
    if "model_config" not in metadata:
        raise ValueError(f"{path} is not a kept checkpoint (its metadata has no model_config)")
    info = {"step": int(metadata["step"]), "epoch": int(metadata["epoch"]),
            "model_config": json.loads(metadata["model_config"])}  # fmt: skip
    return load_file(str(path)), info


def _contiguous(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    # safetensors refuses tensors sharing storage. A transformers model ties its output layer to its
    # embedding (Whisper's proj_out): the second name of a storage gets its own copy, so both load back.
    seen: set[int] = set()
    result = {}
    for key, tensor in state.items():
        tensor = tensor.detach().cpu().contiguous()
        storage = tensor.untyped_storage().data_ptr()
        result[key] = tensor.clone() if storage in seen else tensor
        seen.add(storage)
    return result


def load_training_state(run_dir: str | Path) -> dict[str, Any]:
    """``training_state.pt`` of the latest checkpoint, checked against ``checkpoint_latest.json``."""
    pointer = read_checkpoint_pointer(run_dir)
    path = committed_dir(run_dir) / STATE_FILE
    state = torch.load(path, map_location="cpu", weights_only=True)
    if state["step"] != pointer["step"]:
        raise RuntimeError(
            f"{path} is from step {state['step']} but {CHECKPOINT_POINTER} says step "
            f"{pointer['step']}: the checkpoint was not written completely; delete it or rerun"
        )
    return state


def load_weights(run_dir: str | Path, file: str = WEIGHTS_FILE) -> dict[str, torch.Tensor]:
    return load_file(committed_dir(run_dir) / file)


def load_model_from_run(run_dir: str | Path) -> tuple[nn.Module, TrainConfig]:
    """The trained model of ``run_dir`` (``models.loading.load_run_model``: CPU, eval mode, rebuilt through
    its architecture's spec) and the typed config it was trained with."""
    loaded = load_run_model(run_dir)
    return loaded.model, load_json(resolve_run_dir(run_dir) / CONFIG_FILE)


def rng_state(device: torch.device) -> dict[str, Tensor]:
    """This process's RNG states (CPU, and the device's on CUDA), as saved per rank in training_state.pt."""
    state = {"torch": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def restore_rng(state: dict[str, Tensor], device: torch.device) -> None:
    torch.set_rng_state(state["torch"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


__all__ = [
    "BEST_DIR",
    "BEST_POINTER",
    "CHECKPOINT_DIR",
    "CHECKPOINT_POINTER",
    "CONFIG_FILE",
    "KEPT_DIR",
    "STATE_FILE",
    "WEIGHTS_FILE",
    "build_model_from_config",
    "committed_dir",
    "load_model_from_run",
    "load_training_state",
    "load_weights",
    "read_checkpoint_pointer",
    "read_kept_weights",
    "resolved_model_config",
    "restore_rng",
    "rng_state",
    "save_checkpoint",
    "save_kept_weights",
    "write_json_atomic",
]
