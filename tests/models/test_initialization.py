"""models.initialization: ``model.init``'s schemes per module kind on every architecture's tiny model, drawn from
their own seeded generator, and the one-line refusals."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from asr_pipeline.models.initialization import initialize, parse_init
from asr_pipeline.models.registry import SPECS
from asr_pipeline.options import ConfigError
from tests.training.conftest import architecture_model


def weights_of(model: nn.Module, kind: type) -> list[torch.Tensor]:
    return [m.weight for m in model.modules() if isinstance(m, kind) and isinstance(m.weight, nn.Parameter)]


@pytest.mark.parametrize("architecture", sorted(SPECS))
def test_every_architectures_linears_are_xavier_uniform_within_glorots_bound_with_zero_biases(architecture):
    model = architecture_model(architecture)

    counts = initialize(model, {"linear": "xavier_uniform"}, seed=0)

    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert counts == {"linear": len(linears)} and linears
    for linear in linears:
        fan_out, fan_in = linear.weight.shape
        bound = math.sqrt(6 / (fan_in + fan_out))  # U(-a, a), a = sqrt(6 / (fan_in + fan_out))
        assert linear.weight.abs().max() <= bound
        assert linear.bias is None or not linear.bias.any()
    largest = max(linears, key=lambda m: m.weight.numel())
    fan_out, fan_in = largest.weight.shape
    expected_std = math.sqrt(6 / (fan_in + fan_out)) / math.sqrt(3)  # U(-a, a) has std a / sqrt(3)
    assert largest.weight.std().item() == pytest.approx(expected_std, rel=0.1)


def test_each_kind_gets_its_own_scheme_and_a_default_kind_is_left_alone():
    model = architecture_model("squeezeformer")  # linears, convs and layer norms
    convs_before = [w.detach().clone() for w in weights_of(model, nn.modules.conv._ConvNd)]

    counts = initialize(model, {"linear": "normal(0.02)", "conv": "default", "norm": "zeros"}, seed=0)

    linear = torch.cat([w.flatten() for w in weights_of(model, nn.Linear)])
    assert linear.std().item() == pytest.approx(0.02, rel=0.05) and abs(linear.mean().item()) < 0.002
    assert all(
        torch.equal(a, b)
        for a, b in zip(convs_before, weights_of(model, nn.modules.conv._ConvNd), strict=True)
    )
    assert set(counts) == {"linear", "norm"} and counts["norm"] > 0
    assert not any(w.any() for w in weights_of(model, nn.LayerNorm))


def test_kaiming_normal_convs_have_he_std_and_an_embedding_keeps_its_padding_row_zero():
    conv, embedding = nn.Conv1d(64, 96, 5), nn.Embedding(500, 64, padding_idx=0)
    model = nn.Sequential(conv, embedding)

    initialize(model, {"conv": "kaiming_normal", "embedding": "normal(1.0)"}, seed=1)

    assert conv.weight.std().item() == pytest.approx(math.sqrt(2 / (64 * 5)), rel=0.05)  # N(0, 2 / fan_in)
    assert not embedding.weight[0].any() and embedding.weight[1:].std().item() == pytest.approx(1.0, rel=0.05)


def test_the_draws_follow_the_seed_and_leave_the_global_generator_alone():
    def initialized(seed: int) -> dict[str, torch.Tensor]:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 16), nn.Conv1d(4, 4, 3))
        state = torch.get_rng_state()
        initialize(model, {"linear": "kaiming_uniform", "conv": "xavier_normal"}, seed=seed)
        assert torch.equal(torch.get_rng_state(), state), "nothing drawn from the global generator"
        return model.state_dict()

    first, again, other = initialized(3), initialized(3), initialized(4)

    assert all(torch.equal(first[k], again[k]) for k in first)
    assert all(not torch.equal(first[k], other[k]) for k in ("0.weight", "1.weight"))


def test_the_flag_takes_kind_scheme_pairs_with_a_std_in_parentheses():
    assert parse_init("linear=xavier_uniform, embedding=normal(0.02),norm=ones") == {
        "linear": "xavier_uniform",
        "embedding": "normal(0.02)",
        "norm": "ones",
    }


@pytest.mark.parametrize(
    ("init", "message"),
    [
        (
            {"attention": "zeros"},
            "model.init: unknown module kind 'attention'; choose from linear, conv, embedding, norm",
        ),
        (
            {"linear": "glorot"},
            "model.init.linear: unknown scheme 'glorot'; choose from default, xavier_uniform,",
        ),
        ({"conv": "normal(-1)"}, "model.init.conv: 'normal(-1)' is not normal(STD) with a positive STD"),
        ({"norm": "kaiming_normal"}, "model.init.norm: kaiming_normal needs a weight matrix"),
    ],
)
def test_an_unknown_kind_or_scheme_is_one_line_naming_the_key_and_the_choices(init, message):
    with pytest.raises(ConfigError) as error:
        initialize(nn.Linear(2, 2), init, seed=0)

    assert str(error.value).startswith(message) and "\n" not in str(error.value)
