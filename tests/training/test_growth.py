"""``train.grow`` (training.growth): the active depth of each epoch, blocks that keep their trained weights and
optimizer state across a growth while the new ones start afresh, every architecture's stack, a 2-rank run,
and a resume on either side of a growth that ends like the uninterrupted run."""

from __future__ import annotations

import json

import pytest
import torch

from asr_pipeline.cli import build_parser
from asr_pipeline.cli.train import train_config_from_args
from asr_pipeline.models.loading import load_run_model
from asr_pipeline.models.registry import get_spec
from asr_pipeline.modules.widening import FUSED_ATTRIBUTE, copy_into_wider, widen_into
from asr_pipeline.training.checkpoint import build_model_from_config
from asr_pipeline.training.config import (
    DataConfig,
    GrowConfig,
    ModelConfig,
    TrainConfig,
    resolve_config,
    save_json,
)
from asr_pipeline.training.growth import Growth, depth_schedule, width_at, width_schedule
from asr_pipeline.training.launch import check_config, launch_training
from asr_pipeline.training.regularization import encoder_gate
from asr_pipeline.training.trainer import Trainer
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
        ({"start_layers": 2, "epochs": []}, "epochs must list the epochs that grow the model"),
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


@pytest.mark.slow  # a two-rank torchrun job (~25 s here): in `make test-all`; tests/training/test_ddp_training.py keeps DDP in `make test`
@pytest.mark.usefixtures("keep_torch_threads")
def test_a_two_rank_growing_and_widening_run_keeps_the_ranks_in_sync(corpus, tokenizer_path, tmp_path):
    config_path = tmp_path / "training_config.json"
    config = grow_config(corpus, tokenizer_path, tmp_path / "run", dvclive=False)
    config["grow"] |= {"start_width": 0.5, "width_epochs": [3]}  # deepened at 2 and 3, widened at 3
    save_json(resolve_config(config), config_path)

    launch_training(config_path, nproc_per_node=2)

    digests = events(tmp_path / "run", "summary")[0]["values"]["parameter_digests"]
    assert digests[0] == digests[1]
    grows = [e["values"] for e in events(tmp_path / "run", "grow")]
    assert [g.get("depth") for g in grows] == [2, 3, None, 4] and grows[2]["width"] == 1.0


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


# --- widening ---
def widen_config(corpus, tokenizer_path, run_dir, **run_options) -> dict:
    config = tiny_config(corpus, tokenizer_path, run_dir, **run_options)
    config["optim"] |= {"epochs": 3, "ema_decay": 0.9}
    config["grow"] = {"start_width": 0.5, "width_epochs": [2]}  # tiny squeezeformer: d_model 16 -> 32
    return config


def test_the_width_schedule_steps_evenly_to_the_full_width():
    assert width_schedule(GrowConfig()) == [(1, 1.0)]
    assert width_schedule(GrowConfig(start_width=0.5, width_epochs=[2, 4])) == [(1, 0.5), (2, 0.75), (4, 1.0)]
    config = GrowConfig(start_width=0.25, width_epochs=[3])
    assert [width_at(config, epoch) for epoch in range(4)] == [0.25, 0.25, 1.0, 1.0]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"width_epochs": [2]}, "needs start_width"),
        ({"start_width": 1.0, "width_epochs": [2]}, r"in \(0, 1\)"),
        ({"start_width": 0.5}, "width_epochs must list"),
    ],
)
def test_malformed_widening_is_refused(options, message):
    with pytest.raises(ValueError, match=message):
        GrowConfig(**options)


def test_widening_refuses_full_width_starting_weights(corpus, tokenizer_path, tmp_path):
    config = widen_config(corpus, tokenizer_path, tmp_path, init_from=str(tmp_path / "w.safetensors"))
    with pytest.raises(ValueError, match="cannot take the full-width weights"):
        resolve_config(config)
    config = widen_config(corpus, tokenizer_path, tmp_path)
    config["grow"]["width_epochs"] = [4]
    with pytest.raises(ValueError, match=r"grow\.width_epochs reaches epoch 4"):
        resolve_config(config)
    config = widen_config(corpus, tokenizer_path, tmp_path)
    config["model"] = {
        "architecture": "hubert",
        "variant": "tiny",
    }  # no narrower config: refused before torchrun
    with pytest.raises(ValueError, match="the hubert architecture cannot be built narrower"):
        check_config(resolve_config(config))


@pytest.mark.usefixtures("single_process")
def test_a_widened_model_keeps_its_weights_optimizer_state_and_average_in_the_wider_tensors(
    corpus, tokenizer_path, tmp_path, monkeypatch
):
    widenings = []
    original = Trainer.widen

    def recording_widen(self, epoch, width, copy=True):
        names = dict(self.model.named_parameters())
        before = {name: p.detach().clone() for name, p in names.items()}
        state = self.optimization.optimizer.state
        moments = {name: {k: v.clone() for k, v in state[p].items()} for name, p in names.items()}
        average = {name: t.clone() for name, t in self.optimization.ema.shadow.items()}
        changed = original(self, epoch, width, copy)
        fresh = dict(self.fresh_model(epoch, width)[0].named_parameters())
        after = dict(self.model.named_parameters())
        new_state = self.optimization.optimizer.state
        new_moments = {name: {k: v.clone() for k, v in new_state[p].items()} for name, p in after.items()}
        new_average = {name: t.clone() for name, t in self.optimization.ema.shadow.items()}
        after = {name: p.detach().clone() for name, p in after.items()}
        widenings.append((epoch, changed, before, moments, average, fresh, after, new_moments, new_average))
        return changed

    monkeypatch.setattr(Trainer, "widen", recording_widen)
    run(widen_config(corpus, tokenizer_path, tmp_path))

    assert len(widenings) == 1
    epoch, changed, before, moments, average, fresh, after, new_moments, new_average = widenings[0]
    assert epoch == 1 and changed == {"d_model": [16, 32], "num_heads": [1, 2]}
    widened = [name for name in before if before[name].shape != after[name].shape]
    assert len(widened) > 100 and after["blocks.0.attention.module.qkv_proj.weight"].shape == (96, 32)
    for name, old in before.items():
        parts = getattr(fresh[name], FUSED_ATTRIBUTE, None)
        # weights: the trained ones in the leading slices, the fresh model's initialisation elsewhere
        expected = copy_into_wider(name, old, fresh[name].detach().clone(), parts)
        assert torch.equal(after[name], expected), name
        # AdamW: moments in the leading slices and zeros elsewhere, the step count kept
        assert new_moments[name]["step"] == moments[name]["step"] > 0
        for key in ("exp_avg", "exp_avg_sq"):
            zeros = torch.zeros_like(after[name])
            assert torch.equal(
                new_moments[name][key], copy_into_wider(name, moments[name][key], zeros, parts)
            )
        # the weight average: the old average in the leading slices, the new values elsewhere
        expected = copy_into_wider(name, average[name], fresh[name].detach().clone(), parts)
        assert torch.equal(new_average[name], expected), name
    assert [e["values"]["width"] for e in events(tmp_path, "grow")] == [1.0]
    assert json.loads((tmp_path / "checkpoint_latest.json").read_text())["model_config"]["d_model"] == 32


@pytest.mark.usefixtures("single_process")
@pytest.mark.parametrize(
    "steps_into_epoch_2", [0, 1]
)  # epoch 2 grows: killed before its first step, and after
@pytest.mark.parametrize(
    ("make_config", "widths"),
    [(grow_config, (32, 32)), (widen_config, (16, 32))],  # d_model of the checkpoint the kill leaves
    ids=["deepening", "widening"],
)
def test_a_resumed_growing_run_grows_when_the_uninterrupted_run_did(
    corpus, tokenizer_path, tmp_path, monkeypatch, steps_into_epoch_2, make_config, widths
):
    straight = tmp_path / "straight"
    run(make_config(corpus, tokenizer_path, straight))
    steps = [0] + [e["values"]["steps"] for e in events(straight, "epoch")]

    killed = tmp_path / "killed"
    config = make_config(corpus, tokenizer_path, killed, checkpoint_every_steps=1)
    monkeypatch.setenv(FAIL_RANK_ENV, "0")
    monkeypatch.setenv(FAIL_STEP_ENV, str(steps[1] + steps_into_epoch_2))
    with pytest.raises(RuntimeError, match="fault injected"):
        run(config)
    monkeypatch.delenv(FAIL_RANK_ENV)
    # The checkpoint loads at its own width, like any run's.
    assert load_run_model(killed).model_config["d_model"] == widths[steps_into_epoch_2]
    config["run"]["resume_from"] = str(killed)
    run(config)

    digests = [
        events(run_dir, "summary")[-1]["values"]["parameter_digests"] for run_dir in (straight, killed)
    ]
    assert digests[0] == digests[1]


@pytest.mark.parametrize("architecture", ENCODER_ARCHITECTURES)
def test_every_architecture_widens(architecture):
    config = TrainConfig(
        data=DataConfig(train_manifests=[]),
        model=ModelConfig(architecture=architecture, variant="tiny", dropout=0.0),
    )
    narrow, narrow_config = build_model_from_config(config, 11, width=0.5)
    wide, wide_config = build_model_from_config(config, 11)
    counts = widen_into(narrow, wide)

    assert narrow_config != wide_config and counts["widened"] > counts["copied"]
    narrow_state = narrow.state_dict()
    for name, tensor in wide.state_dict().items():
        corner = tuple(slice(0, size) for size in narrow_state[name].shape)
        if not getattr(dict(wide.named_parameters()).get(name), FUSED_ATTRIBUTE, None):
            assert torch.equal(tensor[corner], narrow_state[name]), name
    features, lengths = encoder_inputs(architecture)
    with torch.no_grad():
        assert torch.isfinite(encoder_output(wide.eval(), architecture, features, lengths)).all()


def test_the_width_flags_set_their_section(corpus, tmp_path):
    args = build_parser().parse_args(
        ["train", "--train-manifest", corpus["train"][0], "--output-dir", str(tmp_path), "--epochs", "6",
         "--grow-start-width", "0.5", "--grow-width-epochs", "2,4"]
    )  # fmt: skip
    config, _ = train_config_from_args(args)
    assert config.grow == GrowConfig(start_width=0.5, width_epochs=[2, 4])
