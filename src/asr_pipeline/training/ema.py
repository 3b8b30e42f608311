"""An exponential moving average (EMA) of the model's weights, kept beside the raw weights.

After every optimizer step ``s`` (counted from 0, the schedule's clock before the step):

    s <  ema_start_step:  ema = param                                  (follow the weights while they move fast)
    s >= ema_start_step:  ema = decay * ema + (1 - decay) * param

The average is kept in float32 on the parameters' device whatever the training precision, so tiny
``(1 - decay)`` increments are not rounded away. Only parameters are averaged; buffers are copied from the
model when the average is saved, so ``state_dict`` loads straight into the same architecture. Steps skipped
for a non-finite gradient still update the average (towards unchanged weights), which keeps the rule a
pure function of the recorded weight trajectory.

Validation scores the raw weights, not the average: one forward pass per epoch, and the best checkpoint's
CER describes ``model.safetensors``. Score ``ema.safetensors`` separately (it loads like the model's).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

EMA_FILE = "ema.safetensors"


class WeightEMA:
    def __init__(self, model: nn.Module, decay: float, start_step: int = 0) -> None:
        self.decay, self.start_step = decay, start_step
        self.shadow: dict[str, Tensor] = {
            name: p.detach().float().clone() for name, p in model.named_parameters() if p.requires_grad
        }

    @torch.no_grad()
    def update(self, model: nn.Module, step: int) -> None:
        """After optimizer step ``step`` (0-based); ``model`` is unwrapped (no DDP)."""
        for name, param in model.named_parameters():
            if name not in self.shadow:
                continue
            if step < self.start_step:
                self.shadow[name].copy_(param.detach())
            else:
                self.shadow[name].lerp_(param.detach().float(), 1.0 - self.decay)

    def state_dict(self, model: nn.Module) -> dict[str, Tensor]:
        """The model's state dict with averaged parameters, in the parameters' dtypes (for safetensors)."""
        state = {name: t.detach() for name, t in model.state_dict().items()}
        for name, average in self.shadow.items():
            state[name] = average.to(state[name].dtype)
        return state

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        missing = sorted(set(self.shadow) - set(state))
        if missing:
            raise KeyError(f"the saved EMA lacks parameters {missing[:5]} ({len(missing)} in all)")
        for name, average in self.shadow.items():
            average.copy_(state[name])


__all__ = ["EMA_FILE", "WeightEMA"]
