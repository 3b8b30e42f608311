"""LoRA adapters (models.lora): every architecture's attention and feed-forward projections get adapters that
start as the identity update, carry gradient, save alone and merge back into plain linears exactly."""

from __future__ import annotations

import pytest
import torch

from asr_pipeline.models.lora import (
    LoraSettings,
    adapter_state,
    add_lora,
    has_adapters,
    load_saved_weights,
    merge_adapters,
    parameter_counts,
    saved_weights,
)
from asr_pipeline.models.registry import get_spec
from tests.training.conftest import architecture_model, encoder_inputs

ARCHITECTURES = ["squeezeformer", "zipformer", "paraformer", "w2v-bert"]


def output(model, architecture, features, lengths) -> torch.Tensor:
    if architecture == "paraformer":
        return model.encode(features, lengths)[0]
    return model(features, lengths)[0]


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_adapters_start_as_the_base_model_and_only_they_train(architecture):
    model = architecture_model(architecture).eval()
    features, lengths = encoder_inputs(architecture)
    before = output(model, architecture, features, lengths)
    base_total = parameter_counts(model)["total_params"]

    adapted = add_lora(model, architecture, LoraSettings(rank=4, alpha=8.0))

    assert len(adapted) >= len(get_spec(architecture).encoder_blocks(model))
    torch.testing.assert_close(output(model, architecture, features, lengths), before)  # B = 0
    counts = parameter_counts(model)
    assert counts["total_params"] > base_total
    # rank 4: each adapted in x out linear adds 4 * (in + out) parameters, and nothing else trains.
    expected = sum(
        4 * (m.in_features + m.out_features) for m in (model.get_submodule(n).base_layer for n in adapted)
    )
    assert counts["trainable_params"] == expected
    assert all(("lora_" in name) == p.requires_grad for name, p in model.named_parameters())


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_every_adapter_reaches_the_output(architecture):
    model = architecture_model(architecture).train()
    add_lora(model, architecture, LoraSettings(rank=2))
    with torch.no_grad():  # B = 0 would stop A's gradient: give every B a value
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.1)
    features, lengths = encoder_inputs(architecture)
    output(model, architecture, features, lengths).float().pow(2).mean().backward()

    # Paraformer: the encoder's adapters (its decoder's run under the decoder loss, not this encoder output).
    skip = "decoder." if architecture == "paraformer" else "-"
    silent = [
        n
        for n, p in model.named_parameters()
        if "lora_" in n and not n.startswith(skip) and (p.grad is None or not p.grad.abs().sum())
    ]
    assert silent == [], "adapters the forward pass never uses (a module reading .weight directly?)"


def test_saved_weights_are_the_adapters_and_merging_gives_the_same_outputs_as_plain_linears():
    architecture = "squeezeformer"
    model = architecture_model(architecture).eval()
    plain_keys = set(model.state_dict())
    add_lora(model, architecture, LoraSettings(rank=4, alpha=8.0))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.05)
    features, lengths = encoder_inputs(architecture)
    adapted_out = model(features, lengths)[0]

    saved = saved_weights(model)
    assert set(saved) == set(adapter_state(model)) and all("lora_" in key for key in saved)
    twin = architecture_model(architecture).eval()
    add_lora(twin, architecture, LoraSettings(rank=4, alpha=8.0))
    load_saved_weights(twin, saved, "test")
    torch.testing.assert_close(twin(features, lengths)[0], adapted_out)

    merge_adapters(model)
    assert not has_adapters(model) and set(model.state_dict()) == plain_keys
    torch.testing.assert_close(model(features, lengths)[0], adapted_out, rtol=1e-4, atol=1e-5)


def test_adapters_from_other_settings_are_refused_and_a_pattern_matching_nothing_is_an_error():
    architecture = "squeezeformer"
    model = architecture_model(architecture)
    add_lora(model, architecture, LoraSettings(rank=4))
    narrower = architecture_model(architecture)
    add_lora(
        narrower, architecture, LoraSettings(rank=4, target_modules=r"blocks\.0\.attention\.module\.qkv_proj")
    )
    with pytest.raises(ValueError, match=r"does not hold this model's LoRA adapters.*LoRA settings changed"):
        load_saved_weights(narrower, saved_weights(model), "run/checkpoint_latest")

    with pytest.raises(ValueError, match=r"match no linear layer.*--lora-target-modules"):
        add_lora(
            architecture_model(architecture), architecture, LoraSettings(target_modules=r"nothing\.here")
        )
