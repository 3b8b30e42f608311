"""``train.regularization`` (training.regularization): layer drop changes outputs in training and not in
eval, draws the same blocks on every rank and leaves DDP a gradient for every parameter; weight noise
perturbs the forward, not the stored weights; both work in a 2-rank run and follow a schedule."""

from __future__ import annotations

import json

import pytest
import torch

from asr_pipeline.cli import build_parser
from asr_pipeline.cli.train import train_config_from_args
from asr_pipeline.models.registry import get_spec
from asr_pipeline.training.config import (
    RegularizationConfig,
    resolve_config,
    save_json,
)
from asr_pipeline.training.launch import launch_training
from asr_pipeline.training.regularization import BlockGate, LayerDrop, WeightNoise, layer_probabilities

from .conftest import ENCODER_ARCHITECTURES, architecture_model, encoder_inputs, encoder_output, tiny_config


def test_the_linear_rule_drops_deeper_blocks_more():
    assert layer_probabilities(0.4, "linear", 4) == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert layer_probabilities(0.4, "uniform", 3) == [0.4] * 3


@pytest.mark.parametrize("architecture", ENCODER_ARCHITECTURES)
def test_layer_drop_changes_training_outputs_and_not_eval_outputs(architecture):
    model = architecture_model(architecture).train()
    features, lengths = encoder_inputs(architecture)
    blocks = get_spec(architecture).encoder_blocks(model)
    drop = LayerDrop(
        BlockGate(blocks), RegularizationConfig(layer_drop=0.9, layer_drop_rule="uniform"), seed=0
    )

    def outputs(skipped: set[int]) -> torch.Tensor:
        drop.gate.dropped = skipped
        with torch.no_grad():
            return encoder_output(model, architecture, features, lengths)

    everything = set(range(len(blocks)))
    # Training mode (batch-norm layers use the batch's statistics): skipping blocks changes the output.
    assert not torch.allclose(outputs(set()), outputs(everything))
    model.eval()  # every block runs at evaluation, whatever was drawn
    assert torch.equal(outputs(set()), outputs(everything))
    assert drop.draw(step=0, micro=0), "at 0.9 some block drops"
    assert set(model.state_dict()) == set(architecture_model(architecture).state_dict()), "names unchanged"


def test_ranks_draw_the_same_blocks_and_every_parameter_gets_a_gradient():
    ranks = [architecture_model("squeezeformer") for _ in range(2)]
    drops = [
        LayerDrop(
            BlockGate(list(model.blocks)),
            RegularizationConfig(layer_drop=0.5, layer_drop_rule="uniform"),
            seed=7,
        )
        for model in ranks
    ]
    draws = [[drop.draw(step, micro) for step in range(8) for micro in range(2)] for drop in drops]
    assert draws[0] == draws[1], "the draw is a function of (seed, step, micro), not of the rank"
    assert len({frozenset(d) for d in draws[0]}) > 2, "and changes from step to step"

    model, drop = ranks[0], drops[0]
    drop.gate.dropped = set(range(len(model.blocks)))  # every block skipped
    model.train()
    features, lengths = encoder_inputs("squeezeformer")
    model(features, lengths)[0].sum().backward()
    for name, parameter in model.blocks.named_parameters():
        assert parameter.grad is not None and torch.count_nonzero(parameter.grad) == 0, name


def test_weight_noise_perturbs_the_forward_and_restores_the_stored_weights_bit_for_bit():
    model = architecture_model("squeezeformer").train()
    features, lengths = encoder_inputs("squeezeformer")
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    noise = WeightNoise(model, RegularizationConfig(weight_noise_std=0.05), seed=0, rank=0)
    assert noise.weights and all(w.dim() >= 2 for w in noise.weights)

    with torch.no_grad():
        clean = model(features, lengths)[0]
    with noise.applied(step=3, micro=0):
        noisy = model(features, lengths)[0]
        noisy.sum().backward()
        inside = {name: p.detach().clone() for name, p in model.named_parameters()}
    noisy_grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    model(features, lengths)[0].sum().backward()

    assert not torch.allclose(noisy, clean)
    assert any(not torch.equal(inside[name], before[name]) for name in before)
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters()), "restored exactly"
    assert any(
        not torch.allclose(noisy_grads[n], p.grad) for n, p in model.named_parameters() if p.grad is not None
    )


@pytest.mark.slow  # a two-rank torchrun job (~25 s here): in `make test-all`; tests/training/test_ddp_training.py keeps DDP in `make test`
@pytest.mark.usefixtures("keep_torch_threads")
def test_a_two_rank_run_with_layer_drop_weight_noise_and_a_schedule(corpus, tokenizer_path, tmp_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path / "run", dvclive=False)
    config["optim"]["epochs"] = 2
    config["regularization"] = {"layer_drop": 0.5, "weight_noise_std": 0.01}
    config["schedule"] = [{"epochs": 2, "values": {"regularization.layer_drop": 0.0}}]
    config_path = tmp_path / "training_config.json"
    save_json(resolve_config(config), config_path)

    launch_training(config_path, nproc_per_node=2)  # DDP fails on a parameter without a gradient

    lines = (tmp_path / "run" / "events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    digests = next(e for e in events if e["type"] == "summary")["values"]["parameter_digests"]
    assert digests[0] == digests[1], "the ranks stayed in sync"
    assert [e["values"]["regularization.layer_drop"] for e in events if e["type"] == "schedule"] == [0.5, 0.0]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"layer_drop": 1.0}, r"layer_drop must be in \[0, 1\)"),
        ({"weight_noise_std": -0.1}, "weight_noise_std must be >= 0"),
        (
            {"weight_noise_families": ["lstm"]},
            "weight_noise_families must name some of linear, conv, embedding",
        ),
    ],
)
def test_bad_regularization_settings_are_refused(values, message):
    with pytest.raises(ValueError, match=message):
        RegularizationConfig(**values)


def test_the_regularization_flags_set_their_section(corpus, tmp_path):
    args = build_parser().parse_args(
        ["train", "--train-manifest", corpus["train"][0], "--output-dir", str(tmp_path), "--layer-drop", "0.2",
         "--layer-drop-rule", "uniform", "--weight-noise-std", "0.03", "--weight-noise-families", "linear, embedding"]
    )  # fmt: skip
    config, _ = train_config_from_args(args)
    assert config.regularization == RegularizationConfig(
        layer_drop=0.2,
        layer_drop_rule="uniform",
        weight_noise_std=0.03,
        weight_noise_families=["linear", "embedding"],
    )
