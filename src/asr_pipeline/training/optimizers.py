"""The optimizers a run can pick (``optim.optimizer``) and the rate's batch-size rule, from plain values.

- ``adamw`` (default): Adam with decoupled weight decay (Loshchilov & Hutter 2019), fused where torch can;
- ``adam``: Adam with the decay as an L2 term in the gradient (what torch's Adam does with weight_decay);
- ``sgd``: SGD with momentum (``momentum``; ``nesterov`` for Nesterov's form);
- ``scaled_adam``: Zipformer's (``training.scaled_adam``): its rate is the relative change per step, it
  clips by the median recent norm itself, and it has no weight decay.

All take ``decay_groups``' two groups (matrices and kernels decayed, norms and biases not), so a
schedule's weight decay (``Optimization.configure``) finds the decayed group at index 0 whichever is chosen.

``batch_scaled_lr``: the linear scaling rule (Goyal et al. 2017, "Accurate, large minibatch SGD"): a rate
tuned at ``reference_batch_size`` examples is multiplied by ``batch_size / reference_batch_size``. With
adaptive batches the batch size changes every step, and so does the rate (the reference pronunciation
trainer's rule); the scoring head (``pron.scoring``) and the Trainer (``optim.lr_scale_with_batch``) use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from asr_pipeline.training.scaled_adam import ScaledAdam

OPTIMIZERS = ("adamw", "adam", "sgd", "scaled_adam")


def batch_scaled_lr(lr: float, batch_size: float, reference_batch_size: float) -> float:
    """``lr`` for a batch of ``batch_size`` examples when it was tuned at ``reference_batch_size``."""
    if reference_batch_size <= 0:
        raise ValueError(f"reference_batch_size must be > 0, got {reference_batch_size}")
    if batch_size < 0:
        raise ValueError(f"batch_size must be >= 0, got {batch_size}")
    return lr * batch_size / reference_batch_size


def decay_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Decay matrices and conv kernels only: decaying norm scales and biases pulls them towards 0, which
    regularises nothing useful (the nanoGPT / GPT-2 convention)."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]


def build_optimizer(
    name: str,
    model: nn.Module,
    *,
    lr: float,
    weight_decay: float,
    options: Mapping[str, Any] | None = None,
) -> torch.optim.Optimizer:
    """The optimizer ``name`` over ``model``'s trainable parameters. ``options``: sgd's ``momentum`` and
    ``nesterov``; scaled_adam's keyword arguments (``clipping_scale``, ``scalar_lr_scale``,
    ``param_min_rms``, ``param_max_rms``, ...)."""
    options = dict(options or {})
    groups = decay_groups(model, weight_decay)
    if name == "adamw":
        # Fused: one kernel over all tensors. On the CPU the per-tensor loop cost the demo Zipformer's 416
        # tensors ~30 ms a step, the fused step ~8 ms (docs/results/accuracy-per-minute.md).
        return torch.optim.AdamW(groups, lr=lr, fused=_fusable(model))
    if name == "adam":
        return torch.optim.Adam(groups, lr=lr, fused=_fusable(model))
    if name == "sgd":
        momentum = float(options.get("momentum", 0.9))
        nesterov = bool(options.get("nesterov", False))
        return torch.optim.SGD(groups, lr=lr, momentum=momentum, nesterov=nesterov)
    if name == "scaled_adam":
        return ScaledAdam(groups, lr=lr, **options)
    raise ValueError(f"unknown optimizer {name!r}: pick one of {', '.join(OPTIMIZERS)}")


def _fusable(model: nn.Module) -> bool:
    return all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in model.parameters())


__all__ = ["OPTIMIZERS", "batch_scaled_lr", "build_optimizer", "decay_groups"]
