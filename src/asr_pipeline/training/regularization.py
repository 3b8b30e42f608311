"""Model variations during training only: layer drop (stochastic depth) and variational weight noise.

Layer drop (``regularization.layer_drop``, Huang et al. 2016; Fan et al. 2019's LayerDrop): in each training
forward, each encoder block (``ArchitectureSpec.encoder_blocks``) is skipped -- its input passed on as its
output -- with its own probability: ``layer_drop * (l + 1) / L`` for block ``l`` of ``L`` under the ``linear``
rule (deeper blocks drop more, the stochastic-depth paper's rule), ``layer_drop`` for every block under
``uniform``. At evaluation every block runs (no rescaling: a block is a residual refinement, not a branch).

DDP: every rank skips the same blocks in a micro-batch, because the draw comes from a generator seeded by
(``run.seed``, optimizer step, micro-batch), not from the rank's RNG; and a skipped block still touches one
element of each of its parameters with weight zero, so DDP's reducer receives a (zero) gradient for every
parameter and needs no ``find_unused_parameters``. A resumed run draws the same blocks (the draw is a function
of the step).

Weight noise (``regularization.weight_noise_std``, RETURNN's variational parameter noise): before each training
micro-batch's forward, Gaussian noise of that std is added to the ``weight`` of the chosen module families
(``linear``, ``conv``, ``embedding``); after its backward the stored weights are put back exactly (a saved copy,
not a subtraction), so the gradient is taken at the noisy point and the optimizer updates the clean weights.
The noise differs per rank (its generator is seeded by seed, rank, step and micro-batch), like dropout.

Both probabilities can follow ``train.schedule`` (``regularization.layer_drop``,
``regularization.weight_noise_std``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from asr_pipeline.training.config import RegularizationConfig, TrainConfig

# The module types of each name in RegularizationConfig.weight_noise_families (config.WEIGHT_NOISE_FAMILY_NAMES).
WEIGHT_NOISE_FAMILIES: dict[str, tuple[type[nn.Module], ...]] = {
    "linear": (nn.Linear,),
    "conv": (nn.Conv1d, nn.Conv2d),
    "embedding": (nn.Embedding,),
}


def layer_probabilities(layer_drop: float, rule: str, count: int) -> list[float]:
    """Each block's skip probability under ``rule`` (module docstring)."""
    if rule == "uniform":
        return [layer_drop] * count
    return [layer_drop * (index + 1) / count for index in range(count)]


class BlockGate:
    """Skips chosen encoder blocks: ``dropped`` ones in training forwards (layer drop), ``inactive`` ones in
    every forward (a growing network's blocks not yet added, ``training.growth``). The blocks keep their
    parameters and state-dict names: each one's ``forward`` is wrapped on the instance, once.

    A skipped block passes its input (the first argument) on, and in training touches one element of each
    of its parameters with weight zero: a zero gradient for each, so DDP's reducer sees every parameter.
    """

    def __init__(self, blocks: list[nn.Module]) -> None:
        if not blocks:
            raise ValueError(
                "skipping encoder blocks needs the encoder's blocks; this architecture names none"
            )
        self.blocks = blocks
        self.dropped: set[int] = set()
        self.inactive: set[int] = set()
        for index, block in enumerate(blocks):
            block.forward = functools.partial(self._forward, index, block, block.forward)

    def _forward(
        self, index: int, block: nn.Module, forward: Callable[..., Tensor], *args: Any, **kwargs: Any
    ) -> Tensor:
        if index not in self.inactive and not (block.training and index in self.dropped):
            return forward(*args, **kwargs)
        x = args[0] if args else next(iter(kwargs.values()))
        if not (block.training and torch.is_grad_enabled()):
            return x
        touch = sum((p.reshape(-1)[0] * 0.0 for p in block.parameters() if p.requires_grad), x.new_zeros(()))
        return x + touch.to(x.dtype)


class LayerDrop:
    """Draws the blocks each training micro-batch skips (module docstring) into ``gate.dropped``."""

    def __init__(self, gate: BlockGate, config: RegularizationConfig, seed: int) -> None:
        self.gate, self.rule, self.seed = gate, config.layer_drop_rule, seed
        self.probabilities = layer_probabilities(config.layer_drop, self.rule, len(gate.blocks))

    def set_layer_drop(self, layer_drop: float) -> None:
        """A new top probability (``train.schedule``), with the same rule."""
        self.probabilities = layer_probabilities(layer_drop, self.rule, len(self.gate.blocks))

    def draw(self, step: int, micro: int) -> set[int]:
        """Choose the blocks micro-batch ``micro`` of optimizer step ``step`` skips (the same on every rank)."""
        generator = torch.Generator().manual_seed(_seed(self.seed, step, micro))
        draws = torch.rand(len(self.probabilities), generator=generator).tolist()
        self.gate.dropped = {
            i for i, (u, p) in enumerate(zip(draws, self.probabilities, strict=True)) if u < p
        }
        return self.gate.dropped


def encoder_gate(model: nn.Module, architecture: str, why: str) -> BlockGate:
    """A ``BlockGate`` over ``model``'s encoder blocks (``ArchitectureSpec.encoder_blocks``); ``why`` names
    the option that needs it in the error for an architecture without such a stack."""
    from asr_pipeline.models.registry import get_spec

    blocks_of = get_spec(architecture).encoder_blocks
    if blocks_of is None:
        raise ValueError(f"{why}: the {architecture} architecture names no encoder blocks to skip")
    return BlockGate(blocks_of(model))


def build_regularization(
    model: nn.Module, config: TrainConfig, rank: int, gate: BlockGate | None
) -> tuple[LayerDrop | None, WeightNoise | None]:
    """The run's layer drop (on ``gate``, built here when None) and weight noise; None where neither the
    config nor its schedule asks."""
    from asr_pipeline.training.epoch_schedule import scheduled_keys

    regularization, scheduled = config.regularization, scheduled_keys(config)
    layer_drop = weight_noise = None
    if regularization.layer_drop > 0 or "regularization.layer_drop" in scheduled:
        gate = gate or encoder_gate(model, config.model.architecture, "regularization.layer_drop")
        layer_drop = LayerDrop(gate, regularization, config.run.seed)
    if regularization.weight_noise_std > 0 or "regularization.weight_noise_std" in scheduled:
        weight_noise = WeightNoise(model, regularization, config.run.seed, rank)
    return layer_drop, weight_noise


class WeightNoise:
    """Adds Gaussian noise to the chosen weights for one micro-batch and restores them after (docstring)."""

    def __init__(self, model: nn.Module, config: RegularizationConfig, seed: int, rank: int) -> None:
        families = tuple(
            kind for name in config.weight_noise_families for kind in WEIGHT_NOISE_FAMILIES[name]
        )
        self.weights = [
            module.weight
            for module in model.modules()
            if isinstance(module, families) and isinstance(getattr(module, "weight", None), nn.Parameter)
        ]
        self.std, self.seed, self.rank = config.weight_noise_std, seed, rank

    @contextmanager
    def applied(self, step: int, micro: int) -> Iterator[None]:
        """Noisy weights inside the block (forward and backward), the stored ones after it."""
        if self.std == 0.0 or not self.weights:
            yield
            return
        generator = torch.Generator(device=self.weights[0].device)
        generator.manual_seed(_seed(self.seed, self.rank, step, micro))
        saved = [weight.detach().clone() for weight in self.weights]
        with torch.no_grad():
            for weight in self.weights:
                noise = torch.randn(
                    weight.shape, generator=generator, device=weight.device, dtype=weight.dtype
                )
                weight.add_(noise, alpha=self.std)
        try:
            yield
        finally:
            with torch.no_grad():
                for weight, clean in zip(self.weights, saved, strict=True):
                    weight.copy_(clean)


def _seed(*parts: int) -> int:
    """A 63-bit generator seed mixed from ``parts`` (NumPy's SeedSequence: well spread, no hash salt)."""
    return int(np.random.SeedSequence([int(part) for part in parts]).generate_state(1, np.uint64)[0] >> 1)


__all__ = [
    "WEIGHT_NOISE_FAMILIES",
    "BlockGate",
    "LayerDrop",
    "WeightNoise",
    "build_regularization",
    "encoder_gate",
    "layer_probabilities",
]
