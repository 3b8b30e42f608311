"""The run dir's checkpoint files, and rebuilding a trained model from a run dir.

Layout (ARCHITECTURE.md, "Data contracts")::

    run_dir/
      training_config.json             the resolved TrainConfig (config.save_json)
      checkpoint_latest/
        model.safetensors              weights of the unwrapped model (no "module." prefix)
        training_state.pt              optimizer, schedule step, sampler state, RNG states, epoch
      checkpoint_latest.json           {"step", "epoch", "model_config", "metrics"}, written last

``checkpoint_latest.json`` is the commit point: it is written after the directory is complete, through
tmp + ``os.replace``, so a reader that finds it also finds the weights it describes. The directory itself
is written as ``checkpoint_latest.tmp`` and swapped in, so a crash mid-write never damages the previous
checkpoint. ``training_state.pt`` holds only tensors and plain containers, so it loads with
``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from asr_pipeline.training.config import TrainConfig, load_json

CONFIG_FILE = "training_config.json"
CHECKPOINT_DIR = "checkpoint_latest"
CHECKPOINT_POINTER = "checkpoint_latest.json"
WEIGHTS_FILE = "model.safetensors"
STATE_FILE = "training_state.pt"


def build_model_from_config(config: TrainConfig, vocab_size: int) -> tuple[nn.Module, dict[str, Any]]:
    """The model ``config.model`` describes and its full model config as a dict (for checkpoint_latest.json)."""
    from asr_pipeline.models.registry import build_model, model_config

    kwargs = {
        "input_dim": config.data.input_dim,
        "vocab_size": vocab_size,
        "d_model": config.model.d_model,
        "num_layers": config.model.num_layers,
        "num_heads": config.model.num_heads,
        "dropout": config.model.dropout,
    }
    model = build_model(config.model.architecture, config.model.variant, **kwargs)
    resolved = model_config(config.model.architecture, config.model.variant, **kwargs)
    return model, dataclasses.asdict(resolved)


def save_checkpoint(
    run_dir: str | Path,
    *,
    model: nn.Module,
    training_state: dict[str, Any],
    step: int,
    epoch: int,
    model_config: dict[str, Any],
    metrics: dict[str, Any] | None = None,
) -> None:
    """Write ``checkpoint_latest/`` then ``checkpoint_latest.json``; ``model`` must be unwrapped (no DDP)."""
    run_dir = Path(run_dir)
    final, tmp, old = (
        run_dir / CHECKPOINT_DIR,
        run_dir / f"{CHECKPOINT_DIR}.tmp",
        run_dir / f"{CHECKPOINT_DIR}.old",
    )
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    # safetensors refuses views of shared storage; a CTC model ties no weights, so contiguous copies are exact.
    weights = {name: tensor.detach().cpu().contiguous() for name, tensor in model.state_dict().items()}
    save_file(weights, tmp / WEIGHTS_FILE, metadata={"step": str(step), "epoch": str(epoch)})
    torch.save({**training_state, "step": step, "epoch": epoch}, tmp / STATE_FILE)
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    pointer = {"step": step, "epoch": epoch, "model_config": model_config, "metrics": metrics or {}}
    write_json_atomic(run_dir / CHECKPOINT_POINTER, pointer)


def write_json_atomic(path: str | Path, payload: Any) -> None:
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def read_checkpoint_pointer(run_dir: str | Path) -> dict[str, Any]:
    path = Path(run_dir) / CHECKPOINT_POINTER
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: the run in {run_dir} never finished a checkpoint")
    return json.loads(path.read_text())


def load_training_state(run_dir: str | Path) -> dict[str, Any]:
    """``training_state.pt`` of the latest checkpoint, checked against ``checkpoint_latest.json``."""
    pointer = read_checkpoint_pointer(run_dir)
    path = Path(run_dir) / CHECKPOINT_DIR / STATE_FILE
    state = torch.load(path, map_location="cpu", weights_only=True)
    if state["step"] != pointer["step"]:
        raise RuntimeError(
            f"{path} is from step {state['step']} but {CHECKPOINT_POINTER} says step "
            f"{pointer['step']}: the checkpoint was not written completely; delete it or rerun"
        )
    return state


def load_weights(run_dir: str | Path) -> dict[str, torch.Tensor]:
    return load_file(Path(run_dir) / CHECKPOINT_DIR / WEIGHTS_FILE)


def load_model_from_run(run_dir: str | Path) -> tuple[nn.Module, TrainConfig]:
    """The trained model of ``run_dir`` (CPU, eval mode) and the config it was trained with.

    The architecture and variant come from ``training_config.json``; every model field comes from the
    ``model_config`` saved in ``checkpoint_latest.json`` exactly as saved (no variant lookup), so the
    rebuilt model is the trained one even if the registry's variant numbers changed since, and even when
    the vocabulary size was inferred from a tokenizer that is not at hand now.
    """
    from asr_pipeline.models.registry import build_from_config

    run_dir = Path(run_dir)
    config = load_json(run_dir / CONFIG_FILE)
    saved_model_config = read_checkpoint_pointer(run_dir)["model_config"]
    model = build_from_config(config.model.architecture, saved_model_config)
    model.load_state_dict(load_weights(run_dir), strict=True)
    model.eval()
    return model, config


__all__ = [
    "CHECKPOINT_DIR",
    "CHECKPOINT_POINTER",
    "CONFIG_FILE",
    "STATE_FILE",
    "WEIGHTS_FILE",
    "build_model_from_config",
    "load_model_from_run",
    "load_training_state",
    "load_weights",
    "read_checkpoint_pointer",
    "save_checkpoint",
    "write_json_atomic",
]
