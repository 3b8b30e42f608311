"""Run health: what went wrong in training so far, summed over ranks, and when to give up.

Each rank counts its own non-finite (NaN/inf) losses and infeasible targets (fewer output frames than
target tokens) as it goes (``note_batch``), and the optimizer steps skipped for a non-finite gradient norm
(``note_step``). The counts stay on the device until ``sync``: the training step reads nothing back to the
host, so the CPU can queue the next step while the GPU still runs this one. ``sync`` -- a collective,
called at points every rank reaches together (each "train" event, checkpoint and epoch end) -- reads them
in one copy and folds every rank's pending counts into the run's counters, which are then the same on
every rank. Skipped optimizer steps are the same on every rank by construction (the gradient norm is
all-reduced), so each rank adds them itself.

Once the run's total of non-finite losses passes ``run.max_non_finite_losses`` every rank raises
``NonFiniteLossError`` from the same ``sync``, so at the first sync after the batch that passed it (a
"train" event at most ``run.log_every`` steps later, or a checkpoint or the epoch's end before it); rank 0
first writes an "abort" event naming the first batches that
failed (their ids, gathered from every rank).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from asr_pipeline.training.distributed import DistributedContext, all_reduce_sum, gather
from asr_pipeline.training.events import EventLog

MAX_NON_FINITE_EXAMPLES = 3  # batches per rank whose ids an abort message names


class NonFiniteLossError(RuntimeError):
    """More micro-batches had a NaN/inf loss than ``run.max_non_finite_losses`` allows."""


class RunHealth:
    """The run's counters (``skipped_steps``, ``non_finite_losses``, ``infeasible_targets``)."""

    def __init__(self, ctx: DistributedContext, events: EventLog, max_non_finite_losses: int | None) -> None:
        self.ctx, self.events, self.limit = ctx, events, max_non_finite_losses
        # The run's totals over every rank (the same on every rank after each sync) ...
        self.counters = {"skipped_steps": 0, "non_finite_losses": 0, "infeasible_targets": 0}
        # ... and this rank's since: non-finite losses and infeasible targets (summed over ranks at the
        # sync), skipped steps (not: every rank skips the same), on the device.
        self.pending = torch.zeros(3, dtype=torch.float64, device=ctx.device)
        # Each micro-batch since the sync, while the ids of fewer than MAX_NON_FINITE_EXAMPLES non-finite
        # ones are known: (its non-finite flag on the device, its ids).
        self.unread: list[tuple[Tensor, list[str]]] = []
        self.non_finite_batches: list[list[str]] = []  # ids of this rank's first non-finite batches

    def note_batch(self, non_finite: Tensor, infeasible: Tensor, ids: list[str]) -> None:
        """This rank's micro-batch ``ids`` had a non-finite loss (a 0-d bool) and ``infeasible`` infeasible
        targets (a 0-d count), both on the device: counted there, read at the next ``sync``."""
        self.pending[:2] += torch.stack([non_finite, infeasible]).to(self.pending.dtype)
        if len(self.non_finite_batches) < MAX_NON_FINITE_EXAMPLES:
            self.unread.append((non_finite, list(ids)))

    def note_step(self, applied: Tensor) -> None:
        """An optimizer step, ``applied`` (a 0-d bool on the device) unless skipped for a non-finite gradient
        norm (every rank skips it together)."""
        self.pending[2] += (~applied).to(self.pending.dtype)

    def sync(self, step: int, epoch: int) -> None:
        """Collective: fold every rank's pending counts into the counters; abort past the limit."""
        flags = [flag.reshape(1).to(self.pending.dtype) for flag, _ in self.unread]
        summed = all_reduce_sum(self.pending[:2].clone())
        non_finite, infeasible, skipped, *batch_flags = torch.cat([summed, self.pending[2:], *flags]).tolist()
        self.pending.zero_()
        for flag, (_, ids) in zip(batch_flags, self.unread, strict=True):
            if flag and len(self.non_finite_batches) < MAX_NON_FINITE_EXAMPLES:
                self.non_finite_batches.append(ids)
        self.unread = []
        self.counters["non_finite_losses"] += int(non_finite)
        self.counters["infeasible_targets"] += int(infeasible)
        self.counters["skipped_steps"] += int(skipped)
        if self.limit is None or self.counters["non_finite_losses"] <= self.limit:
            return
        # Every rank holds the same counters here, so every rank reaches this gather and raises.
        examples = [ids for rank_batches in gather(self.non_finite_batches) for ids in rank_batches]
        reason = (
            f"{self.counters['non_finite_losses']} batches had a non-finite (NaN/inf) loss in the first "
            f"{step} optimizer steps, more than run.max_non_finite_losses={self.limit}: training diverged "
            f"or the data holds broken examples (first failing batches: {examples}). Lower "
            "optim.learning_rate or lengthen optim.lr_warmup_steps, check those utterances' features, "
            "or raise --max-non-finite-losses (run.max_non_finite_losses: null never aborts)"
        )
        self.events.write("abort", step, epoch, {"reason": reason, "batches": examples, **self.counters})
        raise NonFiniteLossError(reason)

    def state_dict(self) -> dict[str, int]:
        """The counters (call after ``sync``, so they hold every rank's counts)."""
        return dict(self.counters)

    def load_state_dict(self, counters: Mapping[str, Any]) -> None:
        self.counters = {name: int(counters.get(name, 0)) for name in self.counters}


__all__ = ["MAX_NON_FINITE_EXAMPLES", "NonFiniteLossError", "RunHealth"]
