"""Fine-tuning loop of a pretrained Whisper or Voxtral model, on the engine's parts.

From ``training``: the optimizer (``optimizers.build_optimizer``: AdamW over the trainable weights, norms and
biases undecayed), the warmup + linear decay (``schedule.warmup_hold_decay``), crash-safe checkpoints
(``checkpoint.save_checkpoint``: ``checkpoint_latest`` with the training state, ``checkpoint_best`` with the
weights of the lowest validation loss; a LoRA run stores its adapters only), early stopping
(``early_stopping.EarlyStopping`` on ``val_loss``), RNG capture, ``events.jsonl`` and DVCLive curves. From
``models.lora``: the adapters (peft), their save, load and merge.

Resume is exact: a run dir with a checkpoint continues from it with the same weights, optimizer moments,
RNG states (dropout), place in the epoch's shuffled order and early-stopping state, so 3 + 3 steps end with
the weights of 6 straight steps, bit for bit (``tests/hf_finetune/test_trainer.py``). The options must be
the ones the run started with (``options.RESUMABLE`` may change). The stage and ``asr-pipeline hf-finetune``
resume through ``resume_from`` (``--resume-from``, as ``train`` names it): ``stage.run_entry``.

DDP: under torchrun (``hf_finetune.worker``, launched by ``worker.launch_finetune`` through the engine's
``training.launch``) each rank trains on its share of every batch, ``DistributedDataParallel`` averaging the
gradients, so W ranks take the steps one process takes on the same batches; rank 0 alone writes the run dir.

Precision: weights and optimizer in float32; the forward pass autocasts to bf16 (or f16 with a loss scaler)
on CUDA, nothing on the CPU.
"""

from __future__ import annotations

import json
import math
import os
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from asr_pipeline.hf_finetune.collate import SpeechCollator
from asr_pipeline.hf_finetune.evaluate import score, transcribe_shards
from asr_pipeline.hf_finetune.features import FeatureShards
from asr_pipeline.hf_finetune.loss import next_token_loss, perplexity
from asr_pipeline.hf_finetune.models import Pretrained, load_pretrained
from asr_pipeline.hf_finetune.options import RESUMABLE, HFFinetuneOptions
from asr_pipeline.io.atomic import write_json_atomic
from asr_pipeline.models.lora import LoraSettings, add_lora, load_saved_weights, parameter_counts
from asr_pipeline.options import to_dict
from asr_pipeline.run_layout import BEST_DIR, CHECKPOINT_POINTER, CONFIG_FILE
from asr_pipeline.training.checkpoint import (
    load_training_state,
    load_weights,
    restore_rng,
    rng_state,
    save_checkpoint,
)
from asr_pipeline.training.distributed import all_reduce_sum, maybe_inject_fault
from asr_pipeline.training.early_stopping import EarlyStopping
from asr_pipeline.training.events import EVENTS_FILE, EventLog
from asr_pipeline.training.optimizers import build_optimizer
from asr_pipeline.training.schedule import warmup_hold_decay

TRAIN_RESULTS = "train_results.json"
LOG_EVERY_STEPS = 10  # "train" events: the mean loss of the last 10 steps (and of the last step of a run)


def pick_device(choice: str, local_rank: int = 0) -> torch.device:
    """The device of ``choice`` (auto: CUDA when torch sees it); under torchrun, local rank N's GPU is N."""
    if choice == "cuda" or (choice == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise RuntimeError("hf_finetune device cuda, but torch sees no CUDA GPU; set device auto or cpu")
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def process_rank() -> tuple[int, int, int]:
    """(rank, local rank, world size) in torchrun's process group (``hf_finetune.worker`` joins it); (0, 0, 1)
    for a process on its own."""
    if not dist.is_initialized():
        return 0, 0, 1
    return dist.get_rank(), int(os.environ.get("LOCAL_RANK", "0")), dist.get_world_size()


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The forward pass's autocast dtype (None: float32)."""
    if device.type != "cuda" or precision == "f32":
        return None
    if precision == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if precision == "bf16" else torch.float16


def prepare_model(pretrained: Pretrained, options: HFFinetuneOptions) -> dict[str, Any]:
    """LoRA adapters (or every weight trainable) and gradient checkpointing; the "finetune" event."""
    model, values = pretrained.model, {"method": options.method, "base_model": options.model}
    if options.method == "lora":
        target = options.lora_target_modules or pretrained.family.lora_targets
        settings = LoraSettings(options.lora_rank, options.lora_alpha, options.lora_dropout, target)
        adapted = add_lora(model, type(pretrained.family).__name__, settings)
        values["lora"] = {"rank": options.lora_rank, "alpha": options.lora_alpha, "target_modules": target,
                          "dropout": options.lora_dropout, "adapted_modules": len(adapted)}  # fmt: skip
    if options.gradient_checkpointing:
        # Non-reentrant: with frozen base weights the reentrant form would see no input needing a gradient.
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    return {**values, **parameter_counts(model)}


class FinetuneRun:
    """One run dir's training: ``run()`` trains (or resumes) to the end and returns its results."""

    def __init__(self, options: HFFinetuneOptions, train_dir: Path, val_dir: Path | None, run_dir: Path,
                 pretrained: Pretrained | None = None, live: bool = False) -> None:  # fmt: skip
        self.options, self.run_dir = options, Path(run_dir)
        self.rank, local_rank, self.world = process_rank()
        self.is_main = self.rank == 0  # the run dir's one writer
        self.device = pick_device(options.device, local_rank)
        self.dtype = autocast_dtype(options.precision, self.device)
        torch.manual_seed(options.seed)
        self.pretrained = pretrained or load_pretrained(options.model)
        self.finetune_event = prepare_model(self.pretrained, options)
        self.model = self.pretrained.model.to(self.device)
        # The module the training steps run: DDP's wrapper under torchrun (it averages the gradients over the
        # ranks), else the model itself. Validation, generation and checkpoints use the model.
        self.trained = self.model if self.world == 1 else DistributedDataParallel(self.model)
        self.collator = SpeechCollator(self.pretrained.tokenizer, self.pretrained.family,
                                       self.pretrained.feature_extractor.nb_max_frames, options.language, options.task)  # fmt: skip
        self.train_set = FeatureShards(train_dir, options.streaming)
        self.val_set = FeatureShards(val_dir, options.streaming) if val_dir is not None else None
        self.batches_per_epoch = math.ceil(len(self.train_set) / options.batch_size)
        self.steps_per_epoch = math.ceil(self.batches_per_epoch / options.grad_accumulation)
        self.total_steps = options.max_steps or options.epochs * self.steps_per_epoch
        self.optimizer = build_optimizer(
            "adamw", self.model, lr=options.learning_rate, weight_decay=options.weight_decay
        )
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.dtype == torch.float16)
        self.stopping = EarlyStopping(
            options.early_stopping_patience or 0, options.early_stopping_min_delta, "val_loss"
        )
        self.step = self.epoch = self.group = 0  # group: optimizer steps taken in this epoch
        self.best_val_loss, self.last_eval_step = math.inf, -1
        if self.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        resumed = self._resume()
        listeners = []
        if live and self.is_main:
            from asr_pipeline.training.dvclive_logger import DVCLiveLogger

            listeners.append(DVCLiveLogger(self.run_dir, resume=resumed))
        self.events = EventLog(self.run_dir / EVENTS_FILE, self.is_main, resumed, listeners)
        if not resumed:
            self.events.write("finetune", 0, 0, self.finetune_event)

    def learning_rate(self, step: int) -> float:
        warmup = min(self.options.warmup_steps, self.total_steps)
        return warmup_hold_decay(step, peak_lr=self.options.learning_rate, warmup_steps=warmup,
                                 decay_steps=max(1, self.total_steps - warmup))  # fmt: skip

    # --- checkpoints -----------------------------------------------------------------------------------
    def _resume(self) -> bool:
        config_path = self.run_dir / CONFIG_FILE
        if not (self.run_dir / CHECKPOINT_POINTER).is_file():
            if self.is_main:
                config_path.write_text(json.dumps(to_dict(self.options), indent=2) + "\n")
            return False
        saved, now = json.loads(config_path.read_text()), to_dict(self.options)
        changed = sorted(
            k for k in saved.keys() | now.keys() if k not in RESUMABLE and saved.get(k) != now.get(k)
        )
        if changed:
            raise ValueError(
                f"{self.run_dir} holds a checkpoint trained with other options ({', '.join(changed)} differ); "
                "resume with the same options, or delete the run dir to start afresh"
            )
        load_saved_weights(self.model, load_weights(self.run_dir), str(self.run_dir))
        state = load_training_state(self.run_dir)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])
        self.stopping.load_state_dict(state["early_stopping"])
        self.step, self.epoch, self.group = state["step"], state["epoch"], int(state["group"])
        self.best_val_loss, self.last_eval_step = float(state["best_val_loss"]), int(state["last_eval_step"])
        restore_rng(state["rng"], self.device)
        return True

    def save(self, metrics: dict[str, Any], name: str | None = None) -> None:
        if not self.is_main:
            return
        state = None if name == BEST_DIR else {
            "optimizer": self.optimizer.state_dict(), "scaler": self.scaler.state_dict(),
            "early_stopping": self.stopping.state_dict(), "group": self.group,
            "best_val_loss": self.best_val_loss, "last_eval_step": self.last_eval_step,
            "rng": rng_state(self.device),
        }  # fmt: skip
        extra = {"name": name} if name else {}
        save_checkpoint(self.run_dir, model=self.model, training_state=state, step=self.step, epoch=self.epoch,
                        model_config=self.model.config.to_dict(), metrics=metrics, **extra)  # fmt: skip
        if name is None:
            self.events.write("checkpoint", self.step, self.epoch, {"path": str(self.run_dir)})

    # --- steps -----------------------------------------------------------------------------------------
    def _to_device(self, batch: dict[str, Any]) -> dict[str, Any]:
        return {k: v.to(self.device) if torch.is_tensor(v) else v for k, v in batch.items()}

    def batch_loss(self, batch: dict[str, Any], training: bool = False) -> tuple[torch.Tensor, int]:
        batch = self._to_device(batch)
        context = torch.autocast(self.device.type, self.dtype) if self.dtype else nullcontext()
        model = self.trained if training else self.model
        with context:
            logits = model(**self.pretrained.family.model_inputs(batch)).logits  # (B, L, V)
        return next_token_loss(logits, batch["labels"])

    def epoch_groups(self, epoch: int) -> list[list[list[int]]]:
        """The epoch's optimizer steps, each a list of batches of dataset indices (a seeded shuffle, shard by
        shard: ``FeatureShards.epoch_order``, the same streamed or in memory)."""
        order = self.train_set.epoch_order(self.options.seed + epoch)
        size, accumulation = self.options.batch_size, self.options.grad_accumulation
        batches = [order[i : i + size] for i in range(0, len(order), size)]
        return [batches[i : i + accumulation] for i in range(0, len(batches), accumulation)]

    def _sum_over_ranks(self, value: float) -> float:
        return float(all_reduce_sum(torch.tensor(value, dtype=torch.float64, device=self.device)))

    def train_step(self, group: list[list[int]]) -> tuple[float, int, float]:
        """One optimizer step over ``group``'s batches; the loss per token, tokens and gradient norm.

        Under torchrun rank r takes items r, r + W, ... of every batch, so W ranks step on the batches one
        process would: the loss is summed over every rank's tokens and divided by their total (times W, which
        DDP's gradient average divides out). A rank left without an item of a batch (fewer items than ranks)
        runs its batch's first item with weight 0, as DDP needs every rank's backward."""
        self.model.train()
        parts = [indices[self.rank :: self.world] for indices in group]
        batches = [self.collator([self.train_set[i] for i in part or indices[:1]])
                   for part, indices in zip(parts, group, strict=True)]  # fmt: skip
        weights = [1.0 if part else 0.0 for part in parts]
        local_tokens = sum(
            int((b["labels"][:, 1:] != -100).sum()) for b, w in zip(batches, weights, strict=True) if w
        )
        tokens = round(self._sum_over_ranks(local_tokens))
        total = 0.0
        for param_group in self.optimizer.param_groups:
            param_group["lr"] = self.learning_rate(self.step)
        for n, (batch, weight) in enumerate(zip(batches, weights, strict=True)):
            last = n == len(batches) - 1  # DDP all-reduces the accumulated gradients in the last backward
            with nullcontext() if last or self.world == 1 else self.trained.no_sync():
                loss_sum, _ = self.batch_loss(batch, training=True)
                self.scaler.scale(
                    loss_sum * (weight * self.world) / tokens
                ).backward()  # per token of the step
            total += weight * loss_sum.item()
        total = self._sum_over_ranks(total)
        self.scaler.unscale_(self.optimizer)
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        clip = self.options.gradient_clip_norm or math.inf
        grad_norm = float(torch.nn.utils.clip_grad_norm_(trainable, clip))
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        return total / tokens, tokens, grad_norm

    @torch.no_grad()
    def validation_loss(self) -> dict[str, float]:
        self.model.eval()
        total, tokens = 0.0, 0
        size = self.options.batch_size
        for start in range(self.rank * size, len(self.val_set), self.world * size):  # every W-th batch
            batch = self.collator(
                [self.val_set[i] for i in range(start, min(start + size, len(self.val_set)))]
            )
            loss_sum, count = self.batch_loss(batch)
            total, tokens = total + float(loss_sum), tokens + count
        total, tokens = self._sum_over_ranks(total), round(self._sum_over_ranks(tokens))
        loss = total / tokens
        return {"val_loss": loss, "val_perplexity": perplexity(loss), "tokens": tokens}

    def evaluate(self) -> bool:
        """Validation loss now; the best weights kept; True when early stopping ends the run."""
        self.last_eval_step = self.step
        if self.val_set is None:
            return False
        values = self.validation_loss()
        if self.options.eval_wer and self.is_main:  # reported only: every rank decides on val_loss
            rows = transcribe_shards(self.pretrained, self.val_set, language=self.options.language,
                                     task=self.options.task, batch_size=self.options.batch_size,
                                     max_new_tokens=self.options.max_new_tokens)  # fmt: skip
            rates = score(rows)
            values |= {"val_wer": rates["wer"], "val_cer": rates["cer"], "samples": rows[:3]}
        values["best"] = values["val_loss"] < self.best_val_loss
        if values["best"]:
            self.best_val_loss = values["val_loss"]
            self.save(values, BEST_DIR)
        self.events.write("validation", self.step, self.epoch, values)
        patience = self.options.early_stopping_patience
        stop = patience is not None and self.stopping.update(self.step, values["val_loss"])
        if stop:
            # EarlyStopping counts evaluations by the step they ran at here (its "epoch"s are steps).
            event = self.stopping.to_event(self.epoch)
            event["reason"] = (f"val_loss did not improve by more than {self.stopping.min_delta:g} for {patience} "
                               f"evaluations (best {self.stopping.best_score:.4g} at step {self.stopping.best_epoch})")  # fmt: skip
            self.events.write(
                "early_stop", self.step, self.epoch, {**event, "best_step": self.stopping.best_epoch}
            )
        return stop

    def run(self) -> dict[str, Any]:
        """Train until ``epochs``, ``max_steps`` or early stopping; write ``train_results.json``."""
        started, window, utterances, stop = time.perf_counter(), [], 0, False
        options = self.options
        while self.epoch < options.epochs and self.step < self.total_steps and not stop:
            groups = self.epoch_groups(self.epoch)
            while self.group < len(groups) and self.step < self.total_steps and not stop:
                maybe_inject_fault(self.rank, self.step)  # tests: a run killed after its last checkpoint
                loss, _, grad_norm = self.train_step(groups[self.group])
                utterances += sum(map(len, groups[self.group]))
                self.group += 1
                window.append(loss)
                last = self.step == self.total_steps
                if self.step % LOG_EVERY_STEPS == 0 or last:
                    mean = sum(window) / len(window)
                    self.events.write("train", self.step, self.epoch, {"loss": mean, "perplexity": perplexity(mean),
                                      "lr": self.learning_rate(self.step - 1), "grad_norm": grad_norm})  # fmt: skip
                    window = []
                if options.eval_every_steps and self.step % options.eval_every_steps == 0:
                    stop = self.evaluate()
                end_of_epoch = self.group == len(groups)
                if end_of_epoch:
                    self.epoch, self.group = self.epoch + 1, 0
                if (end_of_epoch or last) and self.last_eval_step != self.step:
                    stop = self.evaluate() or stop
                saves = options.save_every_steps and self.step % options.save_every_steps == 0
                if saves or end_of_epoch or last or stop:
                    self.save({"best_val_loss": self.best_val_loss})
        seconds = time.perf_counter() - started
        results = {"steps": self.step, "epochs": self.epoch, "best_val_loss": self.best_val_loss,
                   "best_val_perplexity": perplexity(self.best_val_loss), "train_seconds": seconds,
                   "train_samples_per_second": utterances / seconds if seconds else 0.0,
                   "early_stopped": stop, **parameter_counts(self.model)}  # fmt: skip
        if self.is_main:
            write_json_atomic(self.run_dir / TRAIN_RESULTS, results)
        self.events.write("summary", self.step, self.epoch, results)
        self.events.close()
        return results


__all__ = ["TRAIN_RESULTS", "FinetuneRun", "autocast_dtype", "pick_device", "prepare_model", "process_rank"]
