"""Reduced precision: bf16/f16 autocast steps on the tiny model, the f16 gradient scaler (overflow skips
a step and halves the scale; its state survives a checkpoint), and CUDA smoke runs where a GPU exists."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch import nn

from asr_pipeline.data.collate import collate_batch
from asr_pipeline.training.trainer import Trainer

from .conftest import run_in_process, tiny_config
from .test_trainer_step import utterances

REDUCED = {"bf16": torch.bfloat16, "f16": torch.float16}


def weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in trainer.model.named_parameters()}


@pytest.mark.parametrize("precision", ["bf16", "f16"])
def test_steps_in_reduced_precision_on_cpu_autocast_have_a_finite_loss_and_update(make_trainer, precision):
    trainer = make_trainer(precision)
    linear_dtypes: list[torch.dtype] = []
    for module in trainer.model.modules():
        if isinstance(module, nn.Linear):
            module.register_forward_hook(lambda _m, _i, out: linear_dtypes.append(out.dtype))
    before = weights(trainer)

    for seed in range(4):
        trainer.backward(collate_batch(utterances(4, seed=seed)), window_size=1, last_micro=True)
        trainer.optimizer_step()

    assert set(linear_dtypes) == {REDUCED[precision]}, "the forward pass ran under autocast"
    loss_sum, tokens = trainer.window[0].item(), trainer.window[1].item()
    assert tokens > 0 and math.isfinite(loss_sum / tokens) and loss_sum > 0
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters()), "weights stay float32"
    assert any(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters())
    trainer.health.sync(trainer.step, 0)  # the counts wait on the device for the next log
    skipped = trainer.counters["skipped_steps"]
    if precision == "bf16":  # float32's exponent range: no scaler, nothing overflows
        assert not trainer.optimization.scaler.is_enabled() and skipped == 0
    else:
        # GradScaler calibration: the default scale 2^16 overflows the tiny model's f16 gradients (measured:
        # the first 2 steps); each overflow skips its step and halves the scale, then steps go through.
        assert trainer.optimization.scaler.is_enabled() and 0 < skipped < 4
        assert trainer.optimization.scaler.get_scale() == 2.0 ** (16 - skipped)


def test_an_f16_overflow_skips_the_step_and_halves_the_loss_scale(make_trainer):
    trainer = make_trainer("f16")
    # A scale of 2^100 turns the f16 activations' gradients into inf (f16 tops out at 65504).
    trainer.optimization.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**100)
    before = weights(trainer)

    trainer.backward(collate_batch(utterances(4)), window_size=1, last_micro=True)
    trainer.optimizer_step()

    assert not torch.isfinite(trainer.optimization.grad_norm)
    trainer.health.sync(trainer.step, 0)
    assert trainer.counters["skipped_steps"] == 1 and trainer.step == 1, "skipped, but the clock moves on"
    assert trainer.optimization.scaler.get_scale() == 2.0**99
    assert all(torch.equal(before[n], p) for n, p in trainer.model.named_parameters())

    trainer.backward(collate_batch(utterances(4)), window_size=1, last_micro=True)
    trainer.optimizer_step()  # 2^99 still overflows: halved again
    assert trainer.optimization.scaler.get_scale() == 2.0**98


def test_the_f16_scaler_state_is_checkpointed_and_resumed(make_trainer):
    trainer = make_trainer("f16")
    trainer.optimization.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**100)
    trainer.backward(collate_batch(utterances(4)), window_size=1, last_micro=True)
    trainer.optimizer_step()  # the scale is now 2^99, not the default 2^16
    trainer.checkpoint(0, trainer.sampler.state_dict(batches_done=0), {})

    resumed = make_trainer("f16")
    resumed.resume(str(trainer.output_dir))

    assert resumed.optimization.scaler.get_scale() == 2.0**99
    assert resumed.step == 1


def test_an_f32_run_resumed_in_f16_starts_a_fresh_scaler(make_trainer):
    trainer = make_trainer("f32")
    trainer.backward(collate_batch(utterances(4)), window_size=1, last_micro=True)
    trainer.optimizer_step()
    trainer.checkpoint(0, trainer.sampler.state_dict(batches_done=0), {})

    resumed = make_trainer("f16")
    resumed.resume(str(trainer.output_dir))  # the f32 run saved a disabled scaler's empty state

    assert resumed.optimization.scaler.is_enabled() and resumed.optimization.scaler.get_scale() == 2.0**16


# The CUDA runs leave DVCLive off: the GPU machines may lack dvc(live), and the curves are tested on the CPU.
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("precision", ["bf16", "f16"])
def test_a_tiny_run_trains_on_cuda_in_reduced_precision(
    corpus, tokenizer_path, tmp_path: Path, single_process, precision
):
    config = tiny_config(
        corpus, tokenizer_path, tmp_path / "run", backend="cuda", precision=precision, dvclive=False
    )
    config["optim"]["epochs"] = 1

    metrics = run_in_process(config)

    assert math.isfinite(metrics["train_loss"]) and metrics["steps"] > 0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("precision", ["f32", "bf16", "f16"])
def test_a_cuda_run_resumes_from_its_checkpoint_in_each_precision(
    corpus, tokenizer_path, tmp_path: Path, single_process, precision
):
    run_dir = tmp_path / "run"
    config = tiny_config(corpus, tokenizer_path, run_dir, backend="cuda", precision=precision, dvclive=False)
    config["optim"]["epochs"] = 1
    first = run_in_process(config)

    config["optim"]["epochs"] = 2
    config["run"]["resume_from"] = str(run_dir)
    resumed = run_in_process(config)

    assert 2 * first["steps"] - 1 <= resumed["steps"] <= 2 * first["steps"] + 1, "one more epoch of steps"
    assert math.isfinite(resumed["train_loss"])
    data_events = [e for e in _events(run_dir) if e["type"] == "data"]
    assert [e["step"] for e in data_events] == [0, first["steps"]], "the second phase starts where it ended"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_torchrun_with_device_indices_trains_one_rank_on_the_listed_gpu(corpus, tokenizer_path, tmp_path):
    from asr_pipeline.training.config import resolve_config, save_json
    from asr_pipeline.training.launch import launch_training

    run_dir = tmp_path / "run"
    config = tiny_config(
        corpus, tokenizer_path, run_dir, backend="cuda", precision="bf16", device_indices=[0], dvclive=False
    )
    config_path = tmp_path / "training_config.json"
    save_json(resolve_config(config), config_path)

    launch_training(config_path, nproc_per_node=1)

    summary = next(e for e in _events(run_dir) if e["type"] == "summary")
    assert summary["values"]["world_size"] == 1 and math.isfinite(summary["values"]["train_loss"])
    assert (run_dir / "checkpoint_latest" / "model.safetensors").is_file()


def _events(run_dir: Path) -> list[dict]:
    import json

    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
