"""The training step, ``TrainerStep``: forward and backward of each micro-batch, the optimizer update that
closes an accumulation window and the train log since the last one. ``training.trainer.Trainer`` mixes it in
(its ``__init__`` sets the attributes these methods use); the methods keep their Trainer names.

Loss: CTC summed over the batch and divided by the batch's number of target tokens. Adaptive batches
range from a few long utterances to many short ones; ``reduction="mean"`` divides every utterance by its
own length and then averages utterances, so a token of a short utterance would weigh more than one of a
long utterance, and the gradient scale would follow batch composition. Per-token normalisation weighs
every token alike. Each rank normalises by its own tokens and DDP averages the ranks.

Non-finite losses: ``zero_infinity=True`` zeroes impossible alignments (too few output frames for the
target; ``infeasible_targets`` counts the clear cases, fewer output frames than target tokens). A NaN/inf
that still gets through makes this rank's gradients non-finite, DDP's all-reduce spreads that to every
rank, and every rank then sees the same non-finite gradient norm and skips the same step (counted as
``skipped_steps``) -- no rank can disagree. ``training.health`` sums the counts over ranks and aborts past
``run.max_non_finite_losses``.

Gradient accumulation divides each micro-batch's per-token loss by the window size, so k micro-batches
with equal token counts give the gradient of one k-times larger batch; with unequal counts each
micro-batch weighs 1/k, as each rank weighs 1/world_size under DDP.

Precision (``run.precision``): bf16/f16 autocast the forward pass (``training.ctc``); weights, optimizer
state and CTC stay float32. f16 scales the loss with a ``GradScaler`` whose state is checkpointed; its
overflowing steps take the non-finite-gradient skip path, so the first few steps of an f16 run usually
count as ``skipped_steps`` while the scaler halves its initial 2^16 to a scale the gradients fit.
"""

from __future__ import annotations

import contextlib
import time

import torch

from asr_pipeline.data.collate import Batch
from asr_pipeline.training.ctc import check_input_lengths, check_targets, empty_batch_loss, model_losses
from asr_pipeline.training.distributed import all_reduce_sum
from asr_pipeline.training.loaders import SKIPPED_SHOWN

# Frames of silence a rank forwards for a batch whose every example was skipped (Trainer.backward's empty
# case): enough for any subsampling front end to leave at least one output frame.
EMPTY_BATCH_FRAMES = 64


class TrainerStep:
    """The Trainer's step methods (module docstring), split from the class to keep each file readable."""

    def backward(self, batch: Batch, window_size: int, last_micro: bool) -> None:
        """Forward and backward of one micro-batch of an accumulation window of ``window_size``; only the
        last micro-batch (``last_micro``) all-reduces gradients under DDP."""
        self.epoch_skipped_examples += len(batch.skipped)  # undecodable audio etc. (data.collate)
        self.epoch_skipped_first += batch.skipped[: SKIPPED_SHOWN - len(self.epoch_skipped_first)]
        micro, self.micro = self.micro, self.micro + 1  # counted on every rank, empty batches included
        self.step_utterances += len(batch)
        if len(batch) == 0:
            self._backward_empty(last_micro)
            return
        check_targets(batch, self.vocab_size, self.config.model.blank_id)
        check_input_lengths(batch, self.model)
        frames = batch.feature_lengths.tolist()  # on the host before the copy: CR-CTC's masks, no wait
        batch = batch.to(self.ctx.device, non_blocking=True)
        for hook in self.hooks:  # a compiled model's shape marks
            hook.on_batch(self, batch)
        sync = (
            self.ddp_model.no_sync() if self.ctx.distributed and not last_micro else contextlib.nullcontext()
        )
        if self.layer_drop is not None:  # the same blocks on every rank
            self.layer_drop.draw(self.step, micro)
        noise = self.weight_noise.applied(self.step, micro) if self.weight_noise else contextlib.nullcontext()
        with sync, noise:
            if self.cr_ctc is not None:
                step = self.cr_ctc.losses(self.ddp_model, batch, self.config, self.step, frames)
            else:
                step = model_losses(self.ddp_model, batch, self.config, training=True)
            losses, out_lengths = step.losses, step.out_lengths  # (B,), (B,)
            # per target token, or per predicted frame (HuBERT)
            loss_sum = losses.sum()
            tokens = (batch.target_lengths if step.tokens is None else step.tokens).sum()
            self.optimization.scale(loss_sum / tokens.clamp(min=1) / window_size).backward()
        # Counted on the device, read at the next log (training.health): no host read in the step.
        finite = torch.isfinite(loss_sum)
        stats = torch.stack(
            [
                torch.where(finite, loss_sum.detach(), 0.0).double(),
                torch.where(finite, tokens, 0).double(),
                batch.duration_ms.sum().double(),
                torch.full((), len(batch), dtype=torch.float64, device=self.ctx.device),  # a fill, no copy
            ]
        )
        self.window += stats
        self.epoch_totals += stats[:3]
        self.health.note_batch(~finite, (out_lengths < batch.target_lengths).sum(), batch.ids)
        if step.components:  # this rank's loss terms of its finite batches, per target token at the next log
            sums = torch.stack([value.detach().sum() for value in step.components.values()]).double()
            terms = torch.cat([torch.where(finite, sums, 0.0), stats[1:2]])  # (terms + 1,): + the tokens
            self.component_sums = terms if self.component_sums is None else self.component_sums + terms
            self.component_names = list(step.components)

    def _backward_empty(self, last_micro: bool) -> None:
        """A batch whose every example was skipped. A single rank has nothing to add; under DDP this rank
        must still join the step's gradient all-reduce, or the other ranks wait for it forever. A
        zero-weighted forward of silence gives every parameter a zero gradient (DDP then averages this
        rank in as zero, like a rank whose batch has no tokens). In eval mode, so that the zeros do not
        move batch-norm statistics."""
        if not self.ctx.distributed:
            return
        frames, dim = EMPTY_BATCH_FRAMES, self.config.data.input_dim
        features = torch.zeros(1, frames, dim, device=self.ctx.device)  # (1, T, F)
        lengths = torch.full((1,), frames, dtype=torch.int64, device=self.ctx.device)  # (1,)
        sync = self.ddp_model.no_sync() if not last_micro else contextlib.nullcontext()
        self.ddp_model.eval()
        try:
            with sync:
                empty_batch_loss(self.ddp_model, features, lengths, self.config.model.architecture).backward()
        finally:
            self._train_mode()

    def optimizer_step(self) -> None:
        """The update closing an accumulation window (``training.optimization``); the clock moves on
        whether it is taken or skipped for a non-finite gradient norm (counted at the next log)."""
        batch_size = None
        if self.optimization.config.lr_scale_with_batch is not None:  # the same rate on every rank
            local = torch.tensor([float(self.step_utterances)], dtype=torch.float64, device=self.ctx.device)
            batch_size = float(all_reduce_sum(local).item())
        applied = self.optimization.step(self.model, self.step, self.epoch, batch_size)
        self.micro = 0
        self.step_utterances = 0
        self.health.note_step(applied)
        self.step += 1
        for hook in self.hooks:
            hook.on_step(self)

    def _log_train(self, epoch: int) -> float:
        """Collective: the loss and throughput since the last log, summed over ranks."""
        self.health.sync(self.step, epoch)
        loss_sum, tokens, audio_ms, utterances = all_reduce_sum(self.window.clone()).tolist()
        terms = {}
        if self.component_sums is not None:  # rank 0's own (not summed over ranks): what each weight buys
            *sums, component_tokens = self.component_sums.tolist()
            terms = {
                f"loss_{name}": value / max(component_tokens, 1.0)
                for name, value in zip(self.component_names, sums, strict=True)
            }
        elapsed = time.perf_counter() - self.window_started
        loss = loss_sum / max(tokens, 1)
        self.events.write(
            "train",
            self.step,
            epoch,
            {
                "loss": loss,
                "lr": self.optimization.logged_rate(self.step, epoch),
                "grad_norm": float(self.optimization.grad_norm),
                "audio_seconds_per_sec": audio_ms / 1000 / elapsed,
                # rank 0's own: the share of the window spent waiting for the loader's next batch
                "loader_wait_fraction": self.window_loader_wait / elapsed,
                "utterances": int(utterances),
                **self.counters,
                **terms,  # per target token
            },
        )
        self.component_sums = None
        self.window.zero_()
        self.window_started = time.perf_counter()
        self.window_loader_wait = 0.0
        return loss
