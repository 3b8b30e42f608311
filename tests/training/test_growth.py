"""``train.grow`` (training.growth): the active depth of each epoch, blocks that keep their trained weights and
optimizer state across a growth while the new ones start afresh, every architecture's stack, a 2-rank run,
and a resume on either side of a growth that ends like the uninterrupted run."""

from __future__ import annotations

import pytest
import torch

from asr_pipeline.cli import build_parser
from asr_pipeline.cli.train import train_config_from_args
from asr_pipeline.models.registry import get_spec
from asr_pipeline.training.config import GrowConfig, resolve_config, save_json
from asr_pipeline.training.growth import Growth, depth_schedule
from asr_pipeline.training.launch import launch_training
from asr_pipeline.training.regularization import encoder_gate
from asr_pipeline.training.worker import FAIL_RANK_ENV, FAIL_STEP_ENV

from .conftest import (
    ENCODER_ARCHITECTURES,
    architecture_model,
    encoder_inputs,
    encoder_output,
    events,
    tiny_config,
)
from .conftest import run_in_process as run


def grow_config(corpus, tokenizer_path, run_dir, **run_options) -> dict:
    config = tiny_config(corpus, tokenizer_path, run_dir, **run_options)
    config["optim"] |= {"epochs": 3, "ema_decay": 0.9}
    config["grow"] = {"start_layers": 2, "epochs": [2, 3]}  # tiny squeezeformer: 4 blocks -> 2, 3, 4
    return config


def test_the_depth_schedule_reaches_the_full_depth_or_is_refused():
    assert depth_schedule(GrowConfig(start_layers=2, epochs=[3, 5]), 6) == [(1, 2), (3, 4), (5, 6)]
    assert depth_schedule(GrowConfig(start_layers=1, epochs=[2], layers_per_growth=8), 4) == [(1, 1), (2, 4)]
    with pytest.raises(ValueError, match="reach 3 of the model's 6 encoder blocks"):
        depth_schedule(GrowConfig(start_layers=1, epochs=[2, 3], layers_per_growth=1), 6)
    with pytest.raises(ValueError, match="between 1 and the model's 3"):
        depth_schedule(GrowConfig(start_layers=4, epochs=[2]), 4)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"epochs": [2]}, "need start_layers"),
        ({"start_layers": 2, "epochs": []}, "epochs must list the epochs that add blocks"),
        ({"start_layers": 2, "epochs": [3, 2]}, "increasing"),
        ({"start_layers": 2, "epochs": [1]}, "from 2 on"),
    ],
)
def test_malformed_growth_is_refused(options, message):
    with pytest.raises(ValueError, match=message):
        GrowConfig(**options)


def test_a_growth_past_the_last_epoch_is_refused(corpus, tokenizer_path, tmp_path):
    config = grow_config(corpus, tokenizer_path, tmp_path)
    config["grow"]["epochs"] = [2, 4]
    with pytest.raises(ValueError, match=r"grow\.epochs reaches epoch 4 but the run has optim\.epochs=3"):
        resolve_config(config)


@pytest.mark.usefixtures("single_process")
def test_grown_models_keep_the_trained_blocks_and_start_the_new_ones_afresh(
    corpus, tokenizer_path, tmp_path, monkeypatch
):
    growths = []
    original = Growth.begin_epoch

    def recording_begin(self, epoch0, optimizer, on_new_parameter):
        blocks = self.gate.blocks
        before = [[p.detach().clone() for p in block.parameters()] for block in blocks]
        had_state = [[p in optimizer.state for p in block.parameters()] for block in blocks]
        joined = original(self, epoch0, optimizer, on_new_parameter)
        fresh = self.fresh_blocks(epoch0)
        after = [[p.detach().clone() for p in block.parameters()] for block in blocks]
        has_state = [[p in optimizer.state for p in block.parameters()] for block in blocks]
        growths.append((epoch0, joined, before, after, had_state, has_state, fresh, set(self.gate.inactive)))
        return joined

    monkeypatch.setattr(Growth, "begin_epoch", recording_begin)
    run(grow_config(corpus, tokenizer_path, tmp_path))

    assert [(epoch, joined) for epoch, joined, *_ in growths] == [(0, []), (1, [2]), (2, [3])]
    assert [growth[-1] for growth in growths] == [{2, 3}, {3}, set()]
    for epoch, joined, before, after, had_state, has_state, fresh, _ in growths[1:]:
        for i in range(joined[0]):  # trained blocks: the weights and the AdamW moments they had
            assert all(torch.equal(a, b) for a, b in zip(before[i], after[i], strict=True)), (epoch, i)
            assert all(had_state[i]) and all(has_state[i]), "their optimizer state is kept"
        for i in joined:  # new blocks: a fresh model's weights, no optimizer state
            assert all(
                torch.equal(a, f.detach()) for a, f in zip(after[i], fresh[i].parameters(), strict=True)
            )
            matrices = [(a, b) for a, b in zip(after[i], before[i], strict=True) if a.dim() >= 2]
            assert any(not torch.equal(a, b) for a, b in matrices), "initialised afresh, not as built"
            assert not any(has_state[i]), "their optimizer state starts empty"
    assert [e["values"]["depth"] for e in events(tmp_path, "grow")] == [2, 3, 4]


@pytest.mark.usefixtures("single_process")
def test_blocks_not_yet_grown_leave_the_output_alone(corpus, tokenizer_path, tmp_path, monkeypatch):
    calls: list[tuple[int, int]] = []
    from asr_pipeline.models.squeezeformer import SqueezeformerBlock

    original = SqueezeformerBlock.forward

    def counting(self, *args, **kwargs):
        calls.append(id(self))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SqueezeformerBlock, "forward", counting)
    config = grow_config(corpus, tokenizer_path, tmp_path)
    config["optim"]["epochs"] = 2
    config["grow"] = {"start_layers": 1, "epochs": [2]}
    run(config)

    # Epoch 1 runs one block per forward, epoch 2 all four: four distinct blocks in all, the first most.
    assert len(set(calls)) == 4
    counts = sorted((calls.count(block) for block in set(calls)), reverse=True)
    assert counts[0] > counts[1] == counts[2] == counts[3]


@pytest.mark.usefixtures("single_process")
@pytest.mark.parametrize(
    "steps_into_epoch_2", [0, 1]
)  # epoch 2 grows: killed before its first step, and after
def test_a_resumed_growing_run_grows_when_the_uninterrupted_run_did(
    corpus, tokenizer_path, tmp_path, monkeypatch, steps_into_epoch_2
):
    straight = tmp_path / "straight"
    run(grow_config(corpus, tokenizer_path, straight))
    steps = [0] + [e["values"]["steps"] for e in events(straight, "epoch")]

    killed = tmp_path / "killed"
    config = grow_config(corpus, tokenizer_path, killed, checkpoint_every_steps=1)
    monkeypatch.setenv(FAIL_RANK_ENV, "0")
    monkeypatch.setenv(FAIL_STEP_ENV, str(steps[1] + steps_into_epoch_2))
    with pytest.raises(RuntimeError, match="fault injected"):
        run(config)
    monkeypatch.delenv(FAIL_RANK_ENV)
    config["run"]["resume_from"] = str(killed)
    run(config)

    digests = [
        events(run_dir, "summary")[-1]["values"]["parameter_digests"] for run_dir in (straight, killed)
    ]
    assert digests[0] == digests[1]


@pytest.mark.usefixtures("keep_torch_threads")
def test_a_two_rank_growing_run_keeps_the_ranks_in_sync(corpus, tokenizer_path, tmp_path):
    config_path = tmp_path / "training_config.json"
    save_json(
        resolve_config(grow_config(corpus, tokenizer_path, tmp_path / "run", dvclive=False)), config_path
    )

    launch_training(config_path, nproc_per_node=2)

    digests = events(tmp_path / "run", "summary")[0]["values"]["parameter_digests"]
    assert digests[0] == digests[1]


def test_the_grow_flags_set_their_section(corpus, tmp_path):
    args = build_parser().parse_args(
        ["train", "--train-manifest", corpus["train"][0], "--output-dir", str(tmp_path), "--epochs", "6",
         "--grow-start-layers", "2", "--grow-epochs", "3,5", "--grow-layers-per-growth", "2"]
    )  # fmt: skip
    config, _ = train_config_from_args(args)
    assert config.grow == GrowConfig(start_layers=2, epochs=[3, 5], layers_per_growth=2)


@pytest.mark.parametrize("architecture", ENCODER_ARCHITECTURES)
def test_every_architecture_grows_its_encoder_stack(architecture):
    model = architecture_model(architecture).eval()
    features, lengths = encoder_inputs(architecture)
    blocks = get_spec(architecture).encoder_blocks
    growth = Growth(
        encoder_gate(model, architecture, "grow"),
        GrowConfig(start_layers=1, epochs=[2]),
        fresh_blocks=lambda epoch: blocks(architecture_model(architecture)),
    )
    optimizer = torch.optim.AdamW(model.parameters())

    growth.begin_epoch(0, optimizer, lambda parameter: None)
    with torch.no_grad():
        shallow = encoder_output(model, architecture, features, lengths)
    assert growth.begin_epoch(1, optimizer, lambda parameter: None) == list(range(1, len(blocks(model))))
    with torch.no_grad():
        deep = encoder_output(model, architecture, features, lengths)

    assert shallow.shape == deep.shape and not torch.allclose(shallow, deep)
    assert growth.gate.inactive == set()
