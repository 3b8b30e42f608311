"""Fine-tuning a trained model on new data (``train.finetune``, training.config.FinetuneConfig).

The starting weights are the run's ``run.init_from`` (a run dir or ``.safetensors`` file) or an imported
Hugging Face folder (``model.pretrained_dir`` + ``load_pretrained_weights``); this module decides which of
them train:

- ``full``: every weight, except that ``freeze_frontend`` (the spec's ``frontend_modules``) and
  ``freeze_layers`` (the first N of the spec's ``encoder_blocks``) hold their modules still for the first
  ``freeze_epochs`` epochs, or the whole run, in eval mode (batch-norm statistics held too). Frozen weights keep ``requires_grad`` off, so they get no
  gradient and AdamW leaves them (and their moment estimates) alone; the optimizer holds them all along, so
  unfreezing needs no new optimizer and a resumed run rebuilds the same state. DDP only reduces gradients
  of parameters that require them when it wraps the model, so the Trainer wraps it again when the set changes.
- ``lora``: models.lora's adapters on the architecture's attention and feed-forward projections, nothing else
  trains; the base must supply every weight (a LoRA run cannot learn a new output layer). Checkpoints hold
  the adapters; ``merge_run`` writes the plain run dir that ``merge_lora`` asks for.

``describe`` is the "finetune" event (and the DVCLive params): method, base model, trainable and total
parameters, LoRA settings and the frozen modules.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

from torch import nn

from asr_pipeline.models.lora import LoraSettings, add_lora, parameter_counts
from asr_pipeline.models.registry import get_spec
from asr_pipeline.run_layout import (
    CHECKPOINT_DIR,
    CHECKPOINT_POINTER,
    CONFIG_FILE,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    best_or_latest,
    read_checkpoint_pointer,
    require_checkpoint,
    run_tokenizer,
)
from asr_pipeline.training.config import FinetuneConfig, TrainConfig

MERGED_DIR = "merged"  # <output_dir>/merged: the plain run dir finetune.merge_lora writes


def lora_settings(finetune: FinetuneConfig) -> LoraSettings:
    return LoraSettings(
        rank=finetune.lora_rank,
        alpha=finetune.lora_alpha,
        dropout=finetune.lora_dropout,
        target_modules=finetune.lora_target_modules,
    )


def base_model_name(config: TrainConfig) -> str | None:
    """Where the run's starting weights come from (None: a run from scratch)."""
    if config.run.init_from:
        return str(config.run.init_from)
    if config.model.load_pretrained_weights:
        return str(config.model.pretrained_dir)
    return None


def check_lora_base(report: dict[str, Any] | None, source: str) -> None:
    """A LoRA run trains no base weight, so its base must have supplied every one (the report of
    ``init_from_weights`` or of a pretrained import): a skipped or missing tensor would stay at its random
    initial value for good."""
    if report is None:
        return
    left = sorted(report["skipped"]) + list(report.get("not_in_source", report.get("left_at_init", [])))
    if left:
        raise ValueError(
            f"finetune.method lora trains adapters only, but {source} does not fit this model: "
            f"{', '.join(left[:5])}{' ...' if len(left) > 5 else ''} would stay untrained (a changed "
            "vocabulary or size?); fine-tune with method full, or use the base run's tokenizer and model"
        )


class Freezing:
    """The modules ``finetune`` holds still, by epoch (``full`` only; LoRA freezes in ``add_lora``)."""

    def __init__(self, model: nn.Module, architecture: str, finetune: FinetuneConfig) -> None:
        self.finetune = finetune
        spec = get_spec(architecture)
        self.modules: dict[str, nn.Module] = {}
        if finetune.freeze_frontend:
            if not spec.frontend_modules:
                raise ValueError(
                    f"{architecture} names no front-end modules; finetune.freeze_frontend cannot apply"
                )
            self.modules |= {name: model.get_submodule(name) for name in spec.frontend_modules}
        if finetune.freeze_layers:
            blocks = spec.encoder_blocks(model) if spec.encoder_blocks else []
            if finetune.freeze_layers > len(blocks):
                raise ValueError(
                    f"finetune.freeze_layers={finetune.freeze_layers} but this {architecture} model has "
                    f"{len(blocks)} encoder blocks"
                )
            self.modules |= {
                f"encoder block {i}": block for i, block in enumerate(blocks[: finetune.freeze_layers])
            }
        self.frozen: bool | None = None  # the state set last (None: never set)

    def frozen_at(self, epoch: int) -> bool:
        until = self.finetune.freeze_epochs
        return bool(self.modules) and (until is None or epoch < until)

    def hold(self) -> None:
        """Frozen modules in eval mode, so that their batch-norm running statistics stay as trained too."""
        if self.frozen:
            for module in self.modules.values():
                module.eval()

    def apply(self, epoch: int) -> bool:
        """Freeze or unfreeze for ``epoch``; True when the trainable set changed (the Trainer rewraps DDP)."""
        frozen = self.frozen_at(epoch)
        if frozen == self.frozen:
            return False
        for module in self.modules.values():
            for parameter in module.parameters():
                parameter.requires_grad_(not frozen)
        changed = self.frozen is not None or frozen
        self.frozen = frozen
        return changed


def prepare_model(
    model: nn.Module, config: TrainConfig, base_report: dict[str, Any] | None
) -> tuple[Freezing | None, dict[str, Any]]:
    """Set ``model`` up for ``config.finetune`` after its starting weights are in (``base_report``: what loading
    them reported): LoRA adapters injected, or the freezing plan made (applied per epoch by the Trainer).
    Returns the plan and the "finetune" event."""
    finetune, architecture = config.finetune, config.model.architecture
    values: dict[str, Any] = {"method": finetune.method, "base_model": base_model_name(config)}
    freezing = None
    if finetune.method == "lora":
        check_lora_base(base_report, str(base_model_name(config)))
        adapted = add_lora(model, architecture, lora_settings(finetune))
        values["lora"] = {**asdict(lora_settings(finetune)), "adapted_modules": len(adapted)}
    elif finetune.freezes:
        freezing = Freezing(model, architecture, finetune)
        values["frozen_modules"] = sorted(freezing.modules)
        values["freeze_epochs"] = finetune.freeze_epochs
    return freezing, values


def describe(model: nn.Module, values: dict[str, Any], freezing: Freezing | None) -> dict[str, Any]:
    """The "finetune" event: ``prepare_model``'s values with the parameter counts of the first epoch."""
    counts = parameter_counts(model)
    if freezing is not None and freezing.frozen_at(0):
        frozen = {id(p): p.numel() for module in freezing.modules.values() for p in module.parameters()}
        counts["trainable_params"] -= sum(frozen.values())
    return {**values, **counts}


def is_finetuning(config: TrainConfig) -> bool:
    """Whether a run is fine-tuning: it starts from trained weights or adapts its model."""
    return base_model_name(config) is not None or config.finetune.method != "full" or config.finetune.freezes


def loads_starting_weights(config: TrainConfig) -> bool:
    """Whether the run loads its starting weights (``model.load_pretrained_weights``, ``run.init_from``): a
    new run does; a resumed one takes its checkpoint's instead, except a LoRA run, whose checkpoint holds only
    the adapters and so needs its base again."""
    return not config.run.resume_from or config.finetune.method == "lora"


def merge_run(
    run_dir: str | Path, output: str | Path, checkpoint: Literal["latest", "best"] = "best"
) -> Path:
    """Write ``output``: a plain run dir with the LoRA run ``run_dir``'s adapters folded into its base
    (its ``checkpoint`` weights: the best validation's by default, the latest when it has no best). The
    result loads, decodes, exports and serves as any run, and other runs may start from it (``init_from``)."""
    from safetensors.torch import save_file

    from asr_pipeline.models.loading import load_run_model

    run_dir = require_checkpoint(run_dir, "--run-dir")
    saved = json.loads((run_dir / CONFIG_FILE).read_text())
    if saved.get("finetune", {}).get("method") != "lora":
        raise ValueError(
            f"{run_dir} is not a LoRA run (finetune.method is not lora): there is nothing to merge"
        )
    if checkpoint == "best":
        checkpoint, pointer = best_or_latest(run_dir)
    else:
        pointer = read_checkpoint_pointer(run_dir)
    loaded = load_run_model(run_dir, checkpoint)  # base + adapters, merged
    output = Path(output)
    staging = output.with_name(f".{output.name}.merge-tmp")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / CHECKPOINT_DIR).mkdir(parents=True)
    config = {**saved, "finetune": {**saved["finetune"], "method": "full", "merge_lora": False}}
    config["run"] = {**saved["run"], "output_dir": str(output), "init_from": None}
    config["model"] = {**saved["model"], "load_pretrained_weights": False}
    metadata = {"step": str(pointer["step"]), "epoch": str(pointer["epoch"]), "merged_from": str(run_dir)}
    save_file(
        {k: v.contiguous() for k, v in loaded.model.state_dict().items()},
        staging / CHECKPOINT_DIR / WEIGHTS_FILE,
        metadata=metadata,
    )
    for target in (staging / CONFIG_FILE, staging / CHECKPOINT_DIR / CONFIG_FILE):
        target.write_text(json.dumps(config, indent=2) + "\n")
    shutil.copyfile(run_tokenizer(run_dir), staging / TOKENIZER_FILE)
    (staging / CHECKPOINT_POINTER).write_text(
        json.dumps({**pointer, "merged_from": {"run_dir": str(run_dir), "checkpoint": checkpoint}}) + "\n"
    )
    if output.exists():
        shutil.rmtree(output)
    staging.rename(output)
    return output


__all__ = [
    "MERGED_DIR",
    "Freezing",
    "base_model_name",
    "check_lora_base",
    "describe",
    "is_finetuning",
    "loads_starting_weights",
    "lora_settings",
    "merge_run",
    "prepare_model",
]
