"""Growing the network ("pretraining" in the RETURNN sense): ``train.grow``.

The run builds the full-depth model once; epochs before the first growth use only the first
``start_layers`` encoder blocks (``ArchitectureSpec.encoder_blocks``, in depth order: for Zipformer the
blocks of every stack, shallow stacks first), the others are skipped as identity in every forward
(``regularization.BlockGate.inactive``). At the start of each epoch in ``grow.epochs`` the next
``layers_per_growth`` blocks join:

- the blocks already in use keep their parameters and their optimizer state (AdamW moments);
- the new blocks are initialised afresh -- copied from a newly built model, so each architecture's own
  initialisation applies, seeded by (``run.seed``, epoch) and the same on every rank -- with their optimizer
  state cleared and their weight average (EMA) restarted from the new values.

While inactive, a block's parameters get zero gradients (DDP needs one for every parameter), so nothing of
them survives into its growth but its shape. The active depth is a function of the epoch and the saved
``grown_depth`` records how far a checkpoint had grown, so a run resumed before or after a growth epoch
grows exactly when the uninterrupted run did. ``optim.epochs`` must reach the last growth: the saved model is
used at full depth.

Widening (copying old weights into larger tensors) is not offered: every growth keeps the model's width.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from asr_pipeline.training.config import GrowConfig
from asr_pipeline.training.regularization import BlockGate


def depth_schedule(config: GrowConfig, total: int) -> list[tuple[int, int]]:
    """[(epoch counting from 1, active depth from it on), ...]: the start, then each growth."""
    assert config.start_layers is not None
    if not 1 <= config.start_layers < total:
        raise ValueError(
            f"grow.start_layers={config.start_layers} must be between 1 and the model's {total - 1} "
            f"(it has {total} encoder blocks)"
        )
    per = config.layers_per_growth or math.ceil((total - config.start_layers) / len(config.epochs))
    depths = [(1, config.start_layers)]
    for epoch in config.epochs:
        depths.append((epoch, min(total, depths[-1][1] + per)))
    if depths[-1][1] < total:
        raise ValueError(
            f"grow: {len(config.epochs)} growths of {per} blocks from {config.start_layers} reach "
            f"{depths[-1][1]} of the model's {total} encoder blocks; add growth epochs or raise layers_per_growth"
        )
    return depths


class Growth:
    """The active depth of each epoch and the growth step (module docstring)."""

    def __init__(
        self,
        gate: BlockGate,
        config: GrowConfig,
        fresh_blocks: Callable[[int], list[nn.Module]],
    ) -> None:
        """``fresh_blocks(epoch)``: the encoder blocks of a newly built model for a growth at ``epoch``
        (0-based), the same on every rank."""
        self.gate, self.fresh_blocks = gate, fresh_blocks
        self.schedule = depth_schedule(config, len(gate.blocks))
        self.grown_depth = 0  # how many blocks are in use now (0: not started)

    def depth(self, epoch0: int) -> int:
        """The active depth of 0-based epoch ``epoch0``."""
        return max(depth for first, depth in self.schedule if first <= epoch0 + 1)

    def begin_epoch(
        self, epoch0: int, optimizer: torch.optim.Optimizer, on_new_parameter: Callable[[nn.Parameter], None]
    ) -> list[int]:
        """Activate ``epoch0``'s depth; blocks joining after the start are initialised afresh, their
        optimizer state cleared, and each new parameter handed to ``on_new_parameter`` (the EMA). Returns the
        indices of the blocks that joined (none at the start of the run)."""
        target = self.depth(epoch0)
        joined = list(range(self.grown_depth, target)) if self.grown_depth else []
        if joined:
            fresh = self.fresh_blocks(epoch0)
            with torch.no_grad():
                for index in joined:
                    for parameter, new in zip(
                        self.gate.blocks[index].parameters(), fresh[index].parameters(), strict=True
                    ):
                        parameter.copy_(new)
                        optimizer.state.pop(parameter, None)
                        on_new_parameter(parameter)
                    for buffer, new in zip(
                        self.gate.blocks[index].buffers(), fresh[index].buffers(), strict=True
                    ):
                        buffer.copy_(new)
        self.grown_depth = max(self.grown_depth, target)
        self.gate.inactive = set(range(self.grown_depth, len(self.gate.blocks)))
        return joined

    def state_dict(self) -> dict[str, int]:
        return {"grown_depth": self.grown_depth}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.grown_depth = int(state["grown_depth"])
        self.gate.inactive = set(range(self.grown_depth, len(self.gate.blocks)))


__all__ = ["Growth", "depth_schedule"]
