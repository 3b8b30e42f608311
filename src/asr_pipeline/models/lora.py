"""LoRA adapters on our models, through ``peft`` (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large
Language Models"): each targeted ``nn.Linear`` ``W`` gets a trainable low-rank update ``(alpha / r) B A``
(A: r x in, B: out x r, B starts at zero so the adapted model starts as the base one) while ``W`` stays frozen.

Which linears: the architecture's attention and feed-forward projections (``ArchitectureSpec.lora_targets``, a
regular expression peft matches against whole module names), or a user's own expression. The base model is
a plain module of ours, so adapters are injected in place (``peft.inject_adapter_in_model``) rather than
wrapping it in a ``PeftModel``: the training engine, DDP and the loss see the same module as ever.

A LoRA run saves only the adapters (``saved_weights``): its checkpoints are a few hundred kilobytes and
name the base weights they adapt (``run.init_from`` / ``model.pretrained_dir`` in its config);
``merge_adapters`` folds them into the base weights for a plain model (``--merge-lora``, decoding, export).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from asr_pipeline.models.registry import get_spec

ADAPTER_MARK = "lora_"  # peft names adapter tensors <module>.lora_A.default.weight, <module>.lora_B...


@dataclass(frozen=True)
class LoraSettings:
    rank: int = 8
    alpha: float = 16.0
    dropout: float = 0.0
    target_modules: str | None = (
        None  # a regex over module names; None: the architecture's own (lora_targets)
    )


def lora_target_pattern(architecture: str, target_modules: str | None = None) -> str:
    """The regular expression of the linears to adapt: ``target_modules``, else the architecture's."""
    if target_modules:
        return target_modules
    pattern = get_spec(architecture).lora_targets
    if pattern is None:
        raise ValueError(
            f"{architecture} names no LoRA target modules; set finetune.lora_target_modules (--lora-target-modules) "
            "to a regular expression over its module names"
        )
    return pattern


def add_lora(model: nn.Module, architecture: str, settings: LoraSettings) -> list[str]:
    """Inject LoRA adapters into ``model`` in place and freeze every other weight; returns the adapted
    module names. Deterministic given torch's RNG state (A is drawn as peft draws it; B is zero)."""
    from peft import LoraConfig, inject_adapter_in_model

    pattern = lora_target_pattern(architecture, settings.target_modules)
    config = LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=pattern,
        bias="none",
    )
    try:
        inject_adapter_in_model(config, model)
    except ValueError as error:  # peft: "Target modules ... not found in the base model"
        raise ValueError(
            f"LoRA target modules {pattern!r} match no linear layer of this {architecture} model ({error}); "
            "finetune.lora_target_modules (--lora-target-modules) is a regular expression over module names"
        ) from None
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(ADAPTER_MARK in name)
    return adapted_modules(model)


def adapted_modules(model: nn.Module) -> list[str]:
    """The names of ``model``'s modules that carry LoRA adapters."""
    from peft.tuners.lora import LoraLayer

    return [name for name, module in model.named_modules() if isinstance(module, LoraLayer)]


def has_adapters(model: nn.Module) -> bool:
    return any(ADAPTER_MARK in name for name, _ in model.named_parameters())


def adapter_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """Only the adapter tensors of ``model``'s state dict."""
    return {name: tensor for name, tensor in model.state_dict().items() if ADAPTER_MARK in name}


def saved_weights(model: nn.Module) -> dict[str, torch.Tensor]:
    """What a checkpoint stores of ``model``: its adapters when it has any (the base weights are the
    run's ``init_from``), else its whole state dict."""
    return adapter_state(model) if has_adapters(model) else model.state_dict()


def load_saved_weights(model: nn.Module, state: Mapping[str, torch.Tensor], source: str) -> None:
    """Load what ``saved_weights`` wrote: all of a plain model's tensors, or exactly a LoRA model's adapters
    (its base weights already in place); anything else is an error naming ``source``."""
    if not has_adapters(model):
        model.load_state_dict(state, strict=True)
        return
    expected = set(adapter_state(model))
    missing, unexpected = sorted(expected - set(state)), sorted(set(state) - expected)
    if missing or unexpected:
        raise ValueError(
            f"{source} does not hold this model's LoRA adapters: missing {missing[:3]}{'...' if len(missing) > 3 else ''}, "
            f"unexpected {unexpected[:3]}{'...' if len(unexpected) > 3 else ''}; were the LoRA settings changed?"
        )
    model.load_state_dict(state, strict=False)


def merge_adapters(model: nn.Module) -> nn.Module:
    """Fold every adapter into its base linear (W + (alpha / r) B A) and put the plain linear back, in place:
    the result has the base model's module names and state dict keys."""
    from peft.tuners.lora import LoraLayer

    adapted = [(name, module) for name, module in model.named_modules() if isinstance(module, LoraLayer)]
    for name, module in adapted:
        module.merge()
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        base = module.get_base_layer()
        for parameter in base.parameters():
            parameter.requires_grad_(True)
        setattr(parent, child, base)
    return model


def parameter_counts(model: nn.Module) -> dict[str, int]:
    """Trainable and total parameters (adapters included)."""
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {"trainable_params": trainable, "total_params": total}


__all__ = [
    "ADAPTER_MARK",
    "LoraSettings",
    "adapted_modules",
    "adapter_state",
    "add_lora",
    "has_adapters",
    "load_saved_weights",
    "lora_target_pattern",
    "merge_adapters",
    "parameter_counts",
    "saved_weights",
]
