"""SwooshL and SwooshR, Zipformer's activations (Yao et al., 2023, "Zipformer: A faster and better encoder
for automatic speech recognition", §3.4; icefall ``zipformer/scaling.py``).

    SwooshL(x) = log(1 + e^(x-4)) - 0.08 x - 0.035
    SwooshR(x) = log(1 + e^(x-1)) - 0.08 x - 0.313261687

Swish has a vanishing slope for negative inputs, so with Adam a neuron pushed far below zero stops
learning; Swoosh keeps a slope of -0.08 there. The offsets make SwooshR(0) = 0 (it follows convolutions)
and put SwooshL's zero near the origin (it follows the feed-forward in-projections, where the paper found a
right-shifted curve better). ``log(1 + e^z)`` is ``softplus``, which PyTorch evaluates stably for any z.

``form="sigmoid"`` gives the reference trainer's variant instead, x * sigmoid(x - 4) and x * sigmoid(x - 1):
shifted Swish, a *different* function (it goes to 0, not to +0.08|x|, as x -> -inf; at x = -10 SwooshL is
0.765 and its sigmoid form -8e-6). It exists so checkpoints from that trainer can be reproduced.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

SWOOSH_FORMS = ("paper", "sigmoid")


def swoosh_l(x: Tensor) -> Tensor:
    return F.softplus(x - 4.0) - 0.08 * x - 0.035


def swoosh_r(x: Tensor) -> Tensor:
    return F.softplus(x - 1.0) - 0.08 * x - 0.313261687


class Swoosh(nn.Module):
    """``side`` "l" or "r"; ``form`` "paper" (the formulas above) or "sigmoid" (x * sigmoid(x - shift))."""

    def __init__(self, side: str, form: str = "paper") -> None:
        super().__init__()
        if side not in ("l", "r"):
            raise ValueError(f"Swoosh side must be 'l' or 'r', got {side!r}")
        if form not in SWOOSH_FORMS:
            raise ValueError(f"Swoosh form must be one of {SWOOSH_FORMS}, got {form!r}")
        self.side, self.form = side, form
        self.shift = 4.0 if side == "l" else 1.0

    def forward(self, x: Tensor) -> Tensor:
        if self.form == "sigmoid":
            return x * (x - self.shift).sigmoid()
        return swoosh_l(x) if self.side == "l" else swoosh_r(x)

    def extra_repr(self) -> str:
        return f"side={self.side!r}, form={self.form!r}"
