"""Run health: what went wrong in training so far, summed over ranks, and when to give up.

Each rank counts its own non-finite (NaN/inf) losses and infeasible targets (fewer output frames than
target tokens) as it goes (``note_batch``); ``sync`` -- a collective, called at points every rank reaches
together (each "train" event, checkpoint, epoch end and skipped step) -- folds every rank's pending counts
into the run's counters, which are then the same on every rank. Skipped optimizer steps are the same on
every rank by construction (the gradient norm is all-reduced), so each rank adds them itself.

Once the run's total of non-finite losses passes ``run.max_non_finite_losses`` every rank raises
``NonFiniteLossError`` from the same ``sync``; rank 0 first writes an "abort" event naming the first
batches that failed (their ids, gathered from every rank).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

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
        self.pending = [0, 0]  # ... and this rank's non-finite losses and infeasible targets since
        self.non_finite_batches: list[list[str]] = []  # ids of this rank's first non-finite batches

    def note_batch(self, non_finite: bool, infeasible: int, ids: list[str]) -> None:
        """This rank's micro-batch ``ids`` had a non-finite loss and/or ``infeasible`` infeasible targets."""
        self.pending = [self.pending[0] + int(non_finite), self.pending[1] + int(infeasible)]
        if non_finite and len(self.non_finite_batches) < MAX_NON_FINITE_EXAMPLES:
            self.non_finite_batches.append(list(ids))

    def note_skipped_step(self) -> None:
        """An optimizer step skipped for a non-finite gradient norm (every rank skips it together)."""
        self.counters["skipped_steps"] += 1

    def sync(self, step: int, epoch: int) -> None:
        """Collective: fold every rank's pending counts into the counters; abort past the limit."""
        pending = torch.tensor(self.pending, dtype=torch.float64, device=self.ctx.device)
        non_finite, infeasible = (int(count) for count in all_reduce_sum(pending).tolist())
        self.pending = [0, 0]
        self.counters["non_finite_losses"] += non_finite
        self.counters["infeasible_targets"] += infeasible
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
