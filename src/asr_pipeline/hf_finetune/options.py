"""``hf_finetune.runs.<name>``: what one fine-tuning of a pretrained transformers model does (params.yaml).

Kept torch-free, so that configuration checks and the docs import nothing heavy. Fields are declared with
``asr_pipeline.options.setting`` and read with ``options_from_dict``, the engine every options section uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from asr_pipeline.options import ConfigError, options_from_dict, setting, shared_setting
from asr_pipeline.training.config.adapt import FinetuneConfig
from asr_pipeline.training.config.optim import OptimConfig
from asr_pipeline.training.config.run import RunConfig


@dataclass(frozen=True)
class HFFinetuneOptions:
    """One ``hf_finetune@<name>`` run: the model, full or LoRA, and the training settings.

    Steps are optimizer updates (``grad_accumulation`` batches each). ``max_steps`` ends the run early;
    otherwise it runs ``epochs`` epochs. Validation loss is measured every ``eval_every_steps`` and after
    every epoch; the best weights by it are kept, and ``early_stopping_patience`` evaluations in a row
    without an improvement end the run.
    """

    model: str = setting(
        help="a transformers model folder (or a hub id, where the Hub is reachable): Whisper or Voxtral",
        flag="--model",
    )
    method: Literal["full", "lora"] = setting(
        "lora", help="train every weight (full) or LoRA adapters only (lora)", flag="--method"
    )
    # LoRA's and the epochs' help and flags are train's (training.config); the defaults are this stage's own,
    # for a pretrained transformers model (train.finetune: r 8, alpha 16, no dropout).
    lora_rank: int = shared_setting(FinetuneConfig, "lora_rank", 16)
    lora_alpha: float = shared_setting(FinetuneConfig, "lora_alpha", 32.0)
    lora_dropout: float = shared_setting(FinetuneConfig, "lora_dropout", 0.05)
    lora_target_modules: str | None = shared_setting(
        FinetuneConfig,
        "lora_target_modules",
        shown_default="the attention projections of the model family (hf_finetune.models)",
    )
    language: str | None = setting(
        "en",
        help="the audio's language code, put in the prompt (None: the model detects it)",
        flag="--language",
    )
    task: Literal["transcribe", "translate"] = setting(
        "transcribe", help="Whisper's task token (Voxtral only transcribes)", flag="--task"
    )
    learning_rate: float = setting(1e-4, help="peak learning rate (AdamW)", flag="--learning-rate")
    weight_decay: float = setting(0.0, help="AdamW's decoupled weight decay", flag="--weight-decay")
    warmup_steps: int = setting(50, help="linear warmup, then linear decay to 0", flag="--warmup-steps")
    epochs: int = shared_setting(OptimConfig, "epochs", 3)
    max_steps: int | None = setting(
        None, help="stop after this many optimizer steps", flag="--max-steps", shown_default="epochs decide"
    )
    batch_size: int = setting(8, help="utterances per batch", flag="--batch-size")
    grad_accumulation: int = setting(1, help="batches per optimizer step", flag="--grad-accumulation")
    gradient_clip_norm: float | None = setting(
        1.0, help="clip the gradient's norm to this", flag="--clip-norm"
    )
    gradient_checkpointing: bool = setting(
        False,
        help="recompute activations in the backward pass (less memory, ~30 % slower)",
        flag="--grad-ckpt",
    )
    eval_every_steps: int | None = setting(
        None, help="validation loss every N steps (and after every epoch)", flag="--eval-every-steps"
    )
    eval_wer: bool = setting(
        False,
        help="each evaluation also transcribes the validation set (greedy generate): val_wer and val_cer curves",
        flag="--eval-wer",
    )
    save_every_steps: int | None = setting(
        None, help="write checkpoint_latest every N steps (and after every epoch)", flag="--save-every-steps"
    )
    early_stopping_patience: int | None = setting(
        None, help="end the run after N evaluations without a lower validation loss", flag="--patience"
    )
    early_stopping_min_delta: float = setting(0.0, help="an improvement must exceed this", flag="--min-delta")
    precision: Literal["auto", "f32", "bf16", "f16"] = setting(
        "auto",
        help="autocast dtype; auto: bf16 on a CUDA GPU that has it (else f16), f32 on the CPU",
        flag="--precision",
    )
    device: Literal["auto", "cpu", "cuda"] = setting(
        "auto", help="where to train; auto: CUDA when available, else the CPU", flag="--device"
    )
    seed: int = setting(0, help="seed of the initialization, shuffling and dropout", flag="--seed")
    max_audio_sec: float = setting(
        30.0,
        help="longer utterances are skipped and counted (Whisper: at most its 30 s window)",
        flag="--max-audio-sec",
    )
    max_new_tokens: int = setting(128, help="longest transcript generate() writes", flag="--max-new-tokens")
    rows_per_shard: int = setting(256, help="utterances per cached feature shard", flag="--rows-per-shard")
    streaming: bool = setting(
        False,
        help="read the cached feature shards one at a time, not all into memory (a corpus larger than memory): "
        "the same examples in the same order",
        flag="--streaming",
    )
    nproc_per_node: int = setting(
        1,
        help="training processes on this machine (torchrun, DDP): CPU ranks, or one per GPU; each takes its "
        "share of every batch, so the run takes the steps one process would",
        flag="--nproc-per-node",
    )
    # train's run.resume_from: its help and flag. The stage continues the run dir given (a copy of it, when it
    # is not the stage's own <name>/run); options other than RESUMABLE must be the ones the run started with.
    resume_from: str | None = shared_setting(RunConfig, "resume_from")

    def __post_init__(self) -> None:
        positive = (
            "lora_rank",
            "epochs",
            "batch_size",
            "grad_accumulation",
            "max_new_tokens",
            "rows_per_shard",
            "nproc_per_node",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"hf_finetune.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("max_steps", "eval_every_steps", "save_every_steps", "early_stopping_patience"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"hf_finetune.{name} must be >= 1 or null, got {value}")
        if self.learning_rate <= 0 or self.warmup_steps < 0 or self.max_audio_sec <= 0:
            raise ConfigError("hf_finetune: learning_rate and max_audio_sec must be > 0, warmup_steps >= 0")


# The options a resumed run may change: how the run is executed, not what it trains.
RESUMABLE = ("resume_from", "streaming", "nproc_per_node")


def hf_finetune_options(values: dict[str, Any] | None, section: str = "hf_finetune") -> HFFinetuneOptions:
    """The options of one run entry (its ``train`` mapping), checked; a typo names the known options."""
    return options_from_dict(HFFinetuneOptions, values, section)


__all__ = ["RESUMABLE", "HFFinetuneOptions", "hf_finetune_options"]
