"""Parameter initialisation per module kind (``train.model.init``, RETURNN's per-layer ``forward_weights_init``):
a mapping kind -> scheme applied to a freshly built model of any architecture, before pretrained weights or
``run.init_from`` load over it, with a generator of its own (seeded by ``run.seed``) so the rest of the run draws
the same random numbers with or without it.

Kinds (torch's module classes, whatever the architecture calls them):

    linear      nn.Linear
    conv        nn.Conv1d/2d/3d and their transposes
    embedding   nn.Embedding (its padding row stays zero)
    norm        nn.LayerNorm, nn.GroupNorm, nn.RMSNorm, batch and instance norms: their scale vector
                (Zipformer's BiasNorm has no scale vector and keeps its own initialisation)

Schemes, for the weight; a kind given any scheme but ``default`` also gets zero biases:

    default                 leave torch's (or the model's own) initialisation
    xavier_uniform          U(-a, a), a = sqrt(6 / (fan_in + fan_out))       (Glorot & Bengio 2010)
    xavier_normal           N(0, 2 / (fan_in + fan_out))
    kaiming_uniform         U(-a, a), a = sqrt(6 / fan_in)   (He et al. 2015, gain sqrt(2): ReLU-like layers)
    kaiming_normal          N(0, 2 / fan_in)
    normal(STD)             N(0, STD^2), e.g. normal(0.02) (GPT-2's embeddings)
    zeros, ones             constants (a norm's scale: ones is torch's own)

The fan-based schemes need a weight matrix, so a norm takes ``default``, ``ones``, ``zeros`` or ``normal(STD)``.
Parsing and checking are torch-free (the config checks them before torchrun); ``initialize`` imports torch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from asr_pipeline.options import ConfigError

KINDS = ("linear", "conv", "embedding", "norm")
FAN_SCHEMES = ("xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal")
SCHEMES = ("default", *FAN_SCHEMES, "normal(STD)", "zeros", "ones")
_NORMAL = re.compile(r"^normal\(\s*([0-9.eE+-]+)\s*\)$")


def normal_std(scheme: str) -> float | None:
    """STD of a ``normal(STD)`` scheme; None for any other scheme."""
    match = _NORMAL.match(scheme.strip())
    try:
        return None if match is None else float(match.group(1))
    except ValueError:  # "normal(0.0.2)": the pattern's characters, not a number
        return None


def check_init(init: Mapping[str, Any], key: str = "model.init") -> None:
    """A ``ConfigError`` (one line, naming ``key``.kind and the allowed values) for an unknown kind, an unknown
    scheme, a ``normal`` without a positive std, or a fan-based scheme for a norm's scale vector."""
    for kind, scheme in init.items():
        if kind not in KINDS:
            raise ConfigError(f"{key}: unknown module kind {kind!r}; choose from {', '.join(KINDS)}")
        if not isinstance(scheme, str):
            raise ConfigError(
                f"{key}.{kind}: expected a scheme name, got {scheme!r}; choose from {', '.join(SCHEMES)}"
            )
        if scheme.strip().startswith("normal"):
            std = normal_std(scheme)
            if std is None or not std > 0:
                raise ConfigError(
                    f"{key}.{kind}: {scheme!r} is not normal(STD) with a positive STD, e.g. normal(0.02)"
                )
        elif scheme not in SCHEMES:
            raise ConfigError(f"{key}.{kind}: unknown scheme {scheme!r}; choose from {', '.join(SCHEMES)}")
        if kind == "norm" and scheme in FAN_SCHEMES:
            raise ConfigError(
                f"{key}.norm: {scheme} needs a weight matrix, and a norm's scale is a vector; choose default, ones, "
                "zeros or normal(STD)"
            )


def parse_init(text: str) -> dict[str, str]:
    """``--init``'s value, ``KIND=SCHEME`` pairs separated by commas outside parentheses
    ("linear=xavier_uniform,embedding=normal(0.02)"), as the ``model.init`` mapping (checked)."""
    init: dict[str, str] = {}
    for pair in re.split(r",(?![^(]*\))", text):
        if not pair.strip():
            continue
        kind, sep, scheme = pair.partition("=")
        if not sep:
            raise ValueError(f"--init: expected KIND=SCHEME pairs separated by commas, got {pair.strip()!r}")
        init[kind.strip()] = scheme.strip()
    check_init(init)  # named by its config key: --init sets model.init
    return init


def initialize(model: Any, init: Mapping[str, str], seed: int) -> dict[str, int]:
    """Apply ``init`` (checked: ``check_init``) to every module of each kind in ``model``, in module order,
    drawing from a generator seeded with ``seed``; returns the number of modules initialised per kind."""
    import torch
    from torch import nn

    check_init(init)
    classes: dict[str, tuple[type, ...]] = {
        "linear": (nn.Linear,),
        "conv": (nn.modules.conv._ConvNd,),
        "embedding": (nn.Embedding,),
        "norm": (nn.LayerNorm, nn.GroupNorm, nn.RMSNorm, nn.modules.batchnorm._NormBase),
    }
    chosen = {kind: scheme for kind, scheme in init.items() if scheme != "default"}
    generator = torch.Generator().manual_seed(seed)
    counts = dict.fromkeys(chosen, 0)
    with torch.no_grad():
        for module in model.modules():
            kind = next((k for k in chosen if isinstance(module, classes[k])), None)
            weight = getattr(module, "weight", None)
            if kind is None or not isinstance(weight, nn.Parameter):  # a norm without affine parameters
                continue
            _fill(weight, chosen[kind], generator)
            bias = getattr(module, "bias", None)
            if isinstance(bias, nn.Parameter):
                bias.zero_()
            if isinstance(module, nn.Embedding) and module.padding_idx is not None:
                weight[module.padding_idx].zero_()
            counts[kind] += 1
    return counts


def _fill(weight: Any, scheme: str, generator: Any) -> None:
    from torch import nn

    std = normal_std(scheme)
    if std is not None:
        nn.init.normal_(weight, 0.0, std, generator=generator)
    elif scheme in ("zeros", "ones"):
        weight.fill_(0.0 if scheme == "zeros" else 1.0)
    elif scheme.startswith("xavier"):
        getattr(nn.init, f"{scheme}_")(weight, generator=generator)
    else:  # kaiming: fan_in, gain sqrt(2)
        getattr(nn.init, f"{scheme}_")(weight, nonlinearity="relu", generator=generator)


__all__ = ["FAN_SCHEMES", "KINDS", "SCHEMES", "check_init", "initialize", "normal_std", "parse_init"]
