"""The training loop: ``train`` builds one rank's ``Trainer`` (``training.trainer``), runs the epochs,
validates, checkpoints and writes the run dir (the config, ``events.jsonl``, the metrics, the summary).

Validation (``training.validation``) follows every epoch and, with ``validation.every_steps``, every that
many optimizer steps; the lowest val CER so far is kept in ``checkpoint_best`` either way. Under
``optim.lr_control: newbob`` each epoch's closing validation (rank 0's scores, sent to every rank) decides
the next epoch's rate (an "lr_control" event). Growth, fine-tuning (LoRA, freezing, the merge) and Newbob are
hooks (``training.hooks``) the Trainer calls at fixed points; it does not branch on them. Observability:
every event goes to ``events.jsonl`` and, on rank 0, to the progress display (``training.live``: tqdm, or
``run.tui``'s live table) and to DVCLive (``training.dvclive_logger``: curves for ``dvc plots show``).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from asr_kernels import kernel_ops, kernels_choice
from asr_pipeline.run_layout import METRICS_FILE, WEIGHTS, read_checkpoint_pointer, resolve_run_dir
from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training import determinism
from asr_pipeline.training.checkpoint import CONFIG_FILE, resolved_model_config, write_json_atomic
from asr_pipeline.training.config import TrainConfig, check_vocab_source, save_json
from asr_pipeline.training.distributed import DistributedContext, gather, parameter_digest
from asr_pipeline.training.dry_run import dry_run
from asr_pipeline.training.dvclive_logger import DVCLiveLogger
from asr_pipeline.training.events import EVENTS_FILE, EventListener, EventLog
from asr_pipeline.training.growth import width_at
from asr_pipeline.training.health import NonFiniteLossError
from asr_pipeline.training.live import TrainingProgress
from asr_pipeline.training.loaders import build_data
from asr_pipeline.training.resume import check_resume_compatible
from asr_pipeline.training.trainer import Trainer
from asr_pipeline.training.validation import validation_metrics


def train(config: TrainConfig, ctx: DistributedContext) -> dict[str, Any]:
    """Collective. Train as ``config`` says and write the run dir; returns the final metrics."""
    started = time.perf_counter()
    output_dir = Path(config.run.output_dir)
    tokenizer = (
        CTCTokenizer.from_file(config.run.tokenizer, blank_id=config.model.blank_id)
        if config.run.tokenizer
        else None
    )
    vocab_size = vocab_size_of(config, tokenizer)
    # The run dir, whichever form was given (the dir, its checkpoint_latest/ or checkpoint_latest.json).
    resume_dir = resolve_run_dir(config.run.resume_from) if config.run.resume_from else None
    if resume_dir is not None:  # before save_json: resuming in place would overwrite the saved config
        saved_width = width_at(config.grow, read_checkpoint_pointer(resume_dir)["epoch"])  # training.growth
        check_resume_compatible(config, resolved_model_config(config, vocab_size, saved_width), resume_dir)
    if ctx.is_main:
        output_dir.mkdir(parents=True, exist_ok=True)
        save_json(config, output_dir / CONFIG_FILE)
    # Rank 0 only: the terminal display and the DVCLive curves, both fed by the event log.
    observe = ctx.is_main and not config.run.dry_run
    progress = TrainingProgress(epochs=config.optim.epochs, enabled=observe, tui=config.run.tui)
    resumed_in_place = resume_dir is not None and resume_dir.resolve() == output_dir.resolve()
    dvclive = DVCLiveLogger(output_dir, resume=resumed_in_place) if observe and config.run.dvclive else None
    listeners: list[EventListener] = [progress] if dvclive is None else [progress, dvclive]
    events = EventLog(
        output_dir / EVENTS_FILE,
        enabled=ctx.is_main,
        append=resume_dir is not None,
        listeners=listeners,
    )
    trainer = None
    try:
        data = build_data(config, ctx)
        trainer = Trainer(config, ctx, data, vocab_size, events, tokenizer=tokenizer, progress=progress)
        start_epoch = trainer.resume(resume_dir) if resume_dir is not None else 0
        if config.run.dry_run:
            values = dry_run(trainer.model, data.train_loader, config, ctx, vocab_size)
            events.write("dry_run", trainer.step, start_epoch, values)
            if ctx.is_main:
                write_json_atomic(output_dir / METRICS_FILE, {"dry_run": True, "steps": 0, **values})
            return values
        if config.run.deterministic:
            events.write("deterministic", trainer.step, start_epoch, determinism.settings())
        events.write("kernels", trainer.step, start_epoch, kernels_in_force(ctx.device))
        events.write("data", trainer.step, start_epoch, data.report)
        final = _train_epochs(trainer, start_epoch)
        uploads = trainer.checkpoints.finish_uploads()  # rank 0's: None elsewhere
        if uploads is not None:
            events.write("hf_upload", trainer.step, config.optim.epochs - 1, {"checkpoints": uploads})
        digests = gather(parameter_digest(trainer.model))
        peaks = gather(peak_memory_mb(ctx.device))
        if ctx.is_main:
            write_json_atomic(output_dir / METRICS_FILE, final)
            for hook in trainer.hooks:  # the LoRA merge
                hook.on_run_end(trainer)
            events.write(
                "summary",
                trainer.step,
                config.optim.epochs - 1,
                {
                    **final,
                    **trainer.counters,
                    "world_size": ctx.world_size,
                    "parameter_digests": digests,
                    "peak_rss_mb": [peak["rss"] for peak in peaks],  # per rank, the process's high-water mark
                    **(
                        {"peak_cuda_mb": [peak["cuda"] for peak in peaks]}
                        if ctx.device.type == "cuda"
                        else {}
                    ),
                    "train_selection": asdict(data.train_selection),
                    "wall_sec": time.perf_counter() - started,
                },
            )
        return final
    finally:  # a failed run keeps its log, its curves so far and a usable terminal
        if trainer is not None:
            trainer.close()
        events.close()
        progress.close()
        if dvclive is not None:
            dvclive.close()


def _train_epochs(trainer: Trainer, start_epoch: int) -> dict[str, Any]:
    """Collective. The epochs from ``start_epoch`` on, each validated and checkpointed; the final metrics."""
    config, ctx = trainer.config, trainer.ctx
    score_keys = validation_metrics(config.model.architecture)  # val_cer, val_wer (HuBERT: val_loss, ...)
    metrics: dict[str, Any] = {"train_loss": None, **dict.fromkeys(score_keys)}
    stopped_early = False
    for epoch in range(start_epoch, config.optim.epochs):
        epoch_values = trainer.train_epoch(epoch)
        metrics["train_loss"] = epoch_values["train_loss"]
        best = False  # meaningful on rank 0 only, the one rank that writes checkpoints
        # A step validation at the epoch's last step already scored these weights (and kept a best).
        if trainer.data.val_loader is not None and trainer.validated_step != trainer.step:
            scores = trainer.validate(epoch, "epoch")
            best = scores is not None and scores["best"]
        trainer.end_epoch(epoch)
        if trainer.latest_scores is not None:  # with validation.score_averages, val_cer_averaged etc. too
            metrics.update(
                {
                    key: value
                    for key, value in trainer.latest_scores.items()
                    if key in score_keys or key.startswith(tuple(f"{score}_" for score in score_keys))
                }
            )
        trainer.events.write("epoch", trainer.step, epoch, epoch_values)
        if ctx.is_main:
            _print_epoch(epoch, config.optim.epochs, trainer.step, metrics, epoch_values["duration_sec"])
        stop = trainer.consider_stopping(epoch)  # before the checkpoint, which carries its state
        trainer.checkpoint(
            epoch, {**trainer.sampler.state_dict(batches_done=0), "epoch": epoch + 1}, dict(metrics), best
        )
        if stop:
            stopped_early = True
            break
    epochs_run = epoch + 1 - start_epoch if config.optim.epochs > start_epoch else 0
    final = {
        **metrics,
        "steps": trainer.step,
        "epochs": config.optim.epochs,
        "train_audio_hours": trainer.data.train_audio_hours,
    }
    if trainer.early_stopping is not None:
        final.update(
            stopped_early=stopped_early, best_epoch=trainer.early_stopping.best_epoch, epochs_run=epochs_run
        )
    return final


def kernels_in_force(device: torch.device) -> dict[str, Any]:
    """The "kernels" event: the choice in force (``run.kernels``, set by the Trainer) and the ops whose Triton
    kernel it runs on this device, eager and inside a torch.compile graph (``auto``'s table,
    asr_kernels.AUTO_KERNELS, changes as kernels are measured)."""
    return {
        "choice": kernels_choice(),
        "eager": list(kernel_ops(device.type)),
        "compiled": list(kernel_ops(device.type, compiling=True)),
    }


def peak_memory_mb(device: torch.device) -> dict[str, float]:
    """This process's peak resident memory (Linux ru_maxrss, KiB) and, on CUDA, peak allocated GPU memory, in MiB."""
    import resource

    peaks = {"rss": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    if device.type == "cuda":
        peaks["cuda"] = round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
    return peaks


def _print_epoch(epoch: int, epochs: int, step: int, metrics: dict[str, Any], seconds: float) -> None:
    # One plain line per epoch even when the progress bar is off (logs, CI, Kedro).
    scores = ""
    if metrics.get("val_accuracy") is not None:  # a self-supervised run (HuBERT): no text to score
        scores = f", val loss {metrics['val_loss']:.4f}, unit accuracy {metrics['val_accuracy']:.2f}%"
    elif metrics.get("val_cer") is not None:
        scores = f", val CER {metrics['val_cer']:.2f}%, WER {metrics['val_wer']:.2f}%"
        for name in WEIGHTS:  # validation.score_averages: val_cer_averaged, val_cer_ema
            if metrics.get(f"val_cer_{name}") is not None:
                scores += f" ({name}: CER {metrics[f'val_cer_{name}']:.2f}%)"
    print(
        f"[train] epoch {epoch + 1}/{epochs}: step {step}, train loss {metrics['train_loss']:.4f}{scores} "
        f"({seconds:.1f}s)",
        flush=True,
    )


def vocab_size_of(config: TrainConfig, tokenizer: CTCTokenizer | None) -> int:
    """The model's number of outputs: the tokenizer's (pieces + blank) or, without one, ``model.vocab_size``;
    both given and different is refused."""
    if tokenizer is None:
        check_vocab_source(config)
        assert config.model.vocab_size is not None
        return config.model.vocab_size
    if config.model.vocab_size not in (None, tokenizer.vocab_size):
        raise ValueError(
            f"model.vocab_size={config.model.vocab_size} but the tokenizer {config.run.tokenizer} "
            f"has {tokenizer.vocab_size} outputs (pieces + blank); unset model.vocab_size"
        )
    return tokenizer.vocab_size


__all__ = ["METRICS_FILE", "NonFiniteLossError", "Trainer", "train", "vocab_size_of"]
