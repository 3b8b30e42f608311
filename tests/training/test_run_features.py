"""Whole in-process runs (WORLD_SIZE unset) of the engine features: EMA, the running average, the best checkpoint,
init-from, resume safety and dry runs."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from asr_pipeline.training.checkpoint import CONFIG_FILE
from asr_pipeline.training.trainer import Trainer
from asr_pipeline.training.worker import FAIL_RANK_ENV, FAIL_STEP_ENV

from .conftest import events, tiny_config
from .conftest import run_in_process as run

pytestmark = pytest.mark.usefixtures("single_process")


def test_the_saved_ema_and_running_average_are_their_formulas_applied_to_the_weight_trajectory(
    corpus, tokenizer_path, tmp_path, monkeypatch
):
    decay, start = 0.8, 2
    trajectory: list[dict[str, torch.Tensor]] = []
    original_step = Trainer.optimizer_step

    def recording_step(self):
        if not trajectory:  # the weights the EMA starts from
            trajectory.append({n: p.detach().clone() for n, p in self.model.named_parameters()})
        applied = original_step(self)
        trajectory.append({n: p.detach().clone() for n, p in self.model.named_parameters()})
        return applied

    monkeypatch.setattr(Trainer, "optimizer_step", recording_step)
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["optim"] |= {
        "ema_decay": decay,
        "ema_start_step": start,
        "use_averaged_model": True,
        "average_period": 2,
    }
    run(config)

    expected = dict(trajectory[0])
    for step, weights in enumerate(trajectory[1:]):
        for name, value in weights.items():
            expected[name] = value if step < start else decay * expected[name] + (1 - decay) * value
    saved = load_file(tmp_path / "checkpoint_latest" / "ema.safetensors")
    assert len(trajectory) - 1 > start + 2, "enough steps past the start to average"
    for name, value in expected.items():
        torch.testing.assert_close(saved[name], value, rtol=1e-5, atol=1e-6, msg=name)  # lerp vs formula
    raw = load_file(tmp_path / "checkpoint_latest" / "model.safetensors")
    assert any(not torch.allclose(raw[n], saved[n]) for n in expected), "the EMA is not the raw weights"
    # icefall's running average: the mean of the weights after 2, 4, ... steps (trajectory[k]: after k)
    points = trajectory[2 : (len(trajectory) - 1) // 2 * 2 + 1 : 2]
    averaged = load_file(tmp_path / "checkpoint_latest" / "averaged.safetensors")
    for name in expected:
        mean = sum(weights[name].double() for weights in points) / len(points)
        torch.testing.assert_close(averaged[name], mean, rtol=0, atol=1e-12, msg=name)


def test_a_resumed_run_restores_the_averages_and_ends_with_the_same_ones(
    corpus, tokenizer_path, tmp_path, monkeypatch
):
    fixed = {
        "epochs": 2,
        "lr_decay_steps": 8,
        "ema_decay": 0.9,
        "use_averaged_model": True,
        "average_period": 2,
    }
    straight = tiny_config(corpus, tokenizer_path, tmp_path / "straight")
    straight["optim"] |= fixed
    run(straight)
    interrupted = tiny_config(corpus, tokenizer_path, tmp_path / "cut", checkpoint_every_steps=1)
    interrupted["optim"] |= fixed
    monkeypatch.setenv(FAIL_RANK_ENV, "0")
    monkeypatch.setenv(FAIL_STEP_ENV, "3")
    with pytest.raises(RuntimeError, match="fault injected"):
        run(interrupted)
    monkeypatch.delenv(FAIL_RANK_ENV)
    interrupted["run"]["resume_from"] = str(tmp_path / "cut")
    run(interrupted)

    for file in ("ema.safetensors", "averaged.safetensors"):
        saved = [load_file(tmp_path / d / "checkpoint_latest" / file) for d in ("straight", "cut")]
        assert all(torch.equal(saved[0][name], saved[1][name]) for name in saved[0]), file


def test_the_best_checkpoint_holds_the_lowest_validation_cer_and_its_epoch(corpus, tokenizer_path, tmp_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["optim"] |= {"epochs": 3, "ema_decay": 0.9}
    run(config)

    cers = [(e["values"]["val_cer"], e["epoch"]) for e in events(tmp_path, "validation")]
    best_cer, best_epoch = min(cers, key=lambda pair: pair[0])  # the first epoch reaching the minimum
    pointer = json.loads((tmp_path / "checkpoint_best.json").read_text())
    assert (pointer["metrics"]["val_cer"], pointer["epoch"]) == (best_cer, best_epoch)
    assert (tmp_path / "checkpoint_best" / "model.safetensors").is_file()
    assert (tmp_path / "checkpoint_best" / "ema.safetensors").is_file()
    flagged = [e["epoch"] for e in events(tmp_path, "checkpoint") if "best_path" in e["values"]]
    assert flagged[0] == 0 and flagged[-1] == best_epoch


def test_init_from_a_run_with_another_vocabulary_loads_all_but_the_output_head(
    corpus, tokenizer_path, tmp_path, capsys
):
    source = tiny_config(corpus, tokenizer_path, tmp_path / "source")
    source["optim"]["epochs"] = 1
    run(source)
    target = tiny_config(corpus, tokenizer_path, tmp_path / "target", init_from=str(tmp_path / "source"))
    target["run"]["tokenizer"] = None  # targets fit any vocabulary of >= 10 ids
    target["data"]["val_manifests"] = []
    target["model"]["vocab_size"] = 14
    target["optim"]["epochs"] = 1
    run(target)

    [event] = events(tmp_path / "target", "init_from")
    source_weights = load_file(tmp_path / "source" / "checkpoint_latest" / "model.safetensors")
    head = {"output.weight": "[10, 32] -> [14, 32]", "output.bias": "[10] -> [14]"}  # (V, D), (V,)
    assert event["values"]["skipped"] == head
    assert event["values"]["loaded"] == len(source_weights) - 2
    printed = capsys.readouterr().out
    assert all(f"{name} ({shapes})" in printed for name, shapes in head.items()), "skipped ones are printed"


def test_resume_refuses_a_changed_training_critical_key_before_writing_anything(
    corpus, tokenizer_path, tmp_path
):
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["optim"]["epochs"] = 1
    run(config)
    saved_config = (tmp_path / CONFIG_FILE).read_text()
    config["run"]["resume_from"] = str(tmp_path)
    config["data"]["adaptive_batch_budget"] = 500
    config["optim"]["learning_rate"] = 2e-3

    with pytest.raises(ValueError) as error:
        run(config)

    changes = [line.strip() for line in str(error.value).splitlines() if line.startswith("  ")]
    assert changes == ["data.adaptive_batch_budget: 480 -> 500", "optim.learning_rate: 0.001 -> 0.002"]
    assert (tmp_path / CONFIG_FILE).read_text() == saved_config, "refused before the config was replaced"


def test_resume_refuses_a_vocabulary_change_through_the_resolved_model_config(
    corpus, tokenizer_path, tmp_path
):
    config = tiny_config(corpus, tokenizer_path, tmp_path / "a")
    config["optim"]["epochs"] = 1
    run(config)
    config["run"] |= {
        "resume_from": str(tmp_path / "a"),
        "output_dir": str(tmp_path / "b"),
        "tokenizer": None,
    }
    config["model"]["vocab_size"] = 12

    with pytest.raises(ValueError, match=r"model\.vocab_size: None -> 12[\s\S]*vocab_size: 10 -> 12"):
        run(config)


def test_resume_allows_more_epochs_and_other_logging(corpus, tokenizer_path, tmp_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["optim"]["epochs"] = 1
    first = run(config)
    config["run"] |= {"resume_from": str(tmp_path), "log_every": 1, "checkpoint_every_steps": 3}
    config["optim"]["epochs"] = 2

    metrics = run(config)

    assert metrics["steps"] > first["steps"]
    assert [e["epoch"] for e in events(tmp_path, "epoch")] == [0, 1]


def test_a_dry_run_computes_one_loss_and_changes_no_weights(corpus, tokenizer_path, tmp_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path / "a")
    config["optim"]["epochs"] = 1
    run(config)
    before = load_file(tmp_path / "a" / "checkpoint_latest" / "model.safetensors")
    config["run"] |= {"resume_from": str(tmp_path / "a"), "output_dir": str(tmp_path / "b"), "dry_run": True}
    seen = []
    original = Trainer.optimizer_step
    Trainer.optimizer_step = lambda self: seen.append(self.step)  # type: ignore[method-assign]
    try:
        values = run(config)
    finally:
        Trainer.optimizer_step = original  # type: ignore[method-assign]

    assert seen == [] and values["loss"] > 0 and values["utterances"] > 0
    assert [
        e["type"] for e in map(json.loads, (tmp_path / "b" / "events.jsonl").read_text().splitlines())
    ] == ["dry_run"]
    assert not (tmp_path / "b" / "checkpoint_latest").exists()
    after = load_file(tmp_path / "a" / "checkpoint_latest" / "model.safetensors")
    assert all(torch.equal(before[name], after[name]) for name in before)
