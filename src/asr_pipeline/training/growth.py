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

Widening (``grow.start_width``, ``grow.width_epochs``) is the other way round: the run starts with a model
built narrower -- the architecture's ``ArchitectureSpec.narrow`` config at ``start_width`` of the width,
heads of the same width but fewer of them, proportionally fewer feed-forward and convolution channels --
and at the start of each epoch in ``width_epochs`` it is rebuilt wider, by equal steps to the full width at
the last one. Each rebuild (``widen``):

- copies every trained tensor into the leading slice of its wider counterpart, the parts of a fused
  projection each into its own part (``modules.widening``); the new entries keep the wider model's fresh
  initialisation, seeded by (``run.seed``, epoch) and the same on every rank;
- keeps the optimizer's state the same way: the AdamW moments of the old entries are copied, the new
  entries' start at zero, the step counts are kept; the weight average (EMA) likewise, its new entries
  starting from the new values;
- and makes the trainer rewire what holds the model (DDP, the block gate, weight noise; ``Trainer``).

A checkpoint holds the model at the width of its epoch (``checkpoint_latest.json``'s ``model_config`` is
that width's), so it loads and evaluates like any other; a resumed run rebuilds that width before loading
it and widens at the same epochs as the uninterrupted run. Width and depth growth combine.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from asr_pipeline.modules.widening import FUSED_ATTRIBUTE, copy_into_wider
from asr_pipeline.training.config import GrowConfig
from asr_pipeline.training.ema import WeightEMA
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


def width_schedule(config: GrowConfig) -> list[tuple[int, float]]:
    """[(epoch counting from 1, width fraction from it on), ...]: the start, then each widening (the last
    one at exactly 1). [(1, 1.0)] without widening."""
    if config.start_width is None:
        return [(1, 1.0)]
    start, count = config.start_width, len(config.width_epochs)
    steps = [
        (epoch, 1.0 if k == count else start + (1.0 - start) * k / count)
        for k, epoch in enumerate(config.width_epochs, 1)
    ]
    return [(1, start), *steps]


def width_at(config: GrowConfig, epoch0: int) -> float:
    """The width fraction of 0-based epoch ``epoch0``."""
    return max(width for first, width in width_schedule(config) if first <= epoch0 + 1)


def widen_optimizer(
    old: torch.optim.Optimizer, new: torch.optim.Optimizer, old_model: nn.Module, new_model: nn.Module
) -> None:
    """Carry ``old``'s state over to ``new`` (built over ``new_model``, the wider copy of ``old_model``):
    each group's settings, and per parameter its moments copied into the leading slices (zeros
    elsewhere) and its other entries (the step count) as they were."""
    for old_group, new_group in zip(old.param_groups, new.param_groups, strict=True):
        new_group.update({key: value for key, value in old_group.items() if key != "params"})
    old_parameters = dict(old_model.named_parameters())
    for name, parameter in new_model.named_parameters():
        previous = old_parameters[name]
        state = old.state.get(previous)
        if not state:
            continue
        new.state[parameter] = {
            key: _widened(name, value, previous, parameter) if isinstance(value, Tensor) else value
            for key, value in state.items()
        }


def _widened(name: str, value: Tensor, previous: Tensor, parameter: Tensor) -> Tensor:
    """An optimizer state tensor of ``previous``'s shape widened to ``parameter``'s (zeros in the new
    entries); any other tensor (a step count) copied."""
    if value.shape != previous.shape or value.dim() == 0:
        return value.clone()
    wider = torch.zeros(parameter.shape, dtype=value.dtype, device=value.device)
    return copy_into_wider(name, value, wider, getattr(parameter, FUSED_ATTRIBUTE, None))


def widen_ema(old: WeightEMA, new_model: nn.Module) -> WeightEMA:
    """The weight average over ``new_model``: ``old``'s averages in the leading slices, the new entries
    starting from ``new_model``'s values."""
    ema = WeightEMA(new_model, old.decay, old.start_step)
    parameters = dict(new_model.named_parameters())
    for name, average in ema.shadow.items():
        if name in old.shadow:
            copy_into_wider(name, old.shadow[name], average, getattr(parameters[name], FUSED_ATTRIBUTE, None))
    return ema


def widening_report(old_config: dict[str, Any], new_config: dict[str, Any]) -> dict[str, Any]:
    """The model-config fields a widening changed, as {field: [old, new]} (the "grow" event's)."""
    return {
        key: [old_config[key], value] for key, value in new_config.items() if old_config.get(key) != value
    }


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

    def attach(self, gate: BlockGate) -> None:
        """Gate the blocks of a rebuilt (widened) model as the old ones were."""
        self.gate = gate
        self.gate.inactive = set(range(self.grown_depth, len(gate.blocks)))

    def state_dict(self) -> dict[str, int]:
        return {"grown_depth": self.grown_depth}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.grown_depth = int(state["grown_depth"])
        self.gate.inactive = set(range(self.grown_depth, len(self.gate.blocks)))


__all__ = [
    "Growth",
    "depth_schedule",
    "widen_ema",
    "widen_optimizer",
    "widening_report",
    "width_at",
    "width_schedule",
]
