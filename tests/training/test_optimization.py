"""training.optimization: the rank's optimizer side (its options from the config, the learning rate scaled with
the batch, ScaledAdam's own clipping); the optimizer choice and the batch rule: test_optimizers.py."""

from __future__ import annotations

import math

import pytest
import torch

from asr_pipeline.training.config import resolve_config
from asr_pipeline.training.optimization import Optimization
from asr_pipeline.training.scaled_adam import ScaledAdam

from .conftest import events, run_in_process, tiny_config

CPU = torch.device("cpu")


def config(**optim):
    return resolve_config({"data": {"train_manifests": ["train.jsonl"]}, "optim": optim})


def tiny_model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def backward(model: torch.nn.Module, scale: float = 1.0) -> None:
    inputs = torch.randn(16, 4, generator=torch.Generator().manual_seed(1))
    (model(inputs).pow(2).mean() * scale).backward()


def test_sgd_takes_momentum_and_nesterov_from_the_config():
    optimization = Optimization(
        tiny_model(), config(optimizer="sgd", sgd_momentum=0.8, sgd_nesterov=True), CPU, 10
    )
    group = optimization.optimizer.param_groups[0]
    assert (group["momentum"], group["nesterov"]) == (0.8, True)


def test_scaled_adam_takes_its_options_from_the_config():
    chosen = config(optimizer="scaled_adam", scaled_adam_clipping_scale=3.0, scaled_adam_param_max_rms=2.0)
    group = Optimization(tiny_model(), chosen, CPU, 10).optimizer.param_groups[0]
    assert (group["clipping_scale"], group["param_max_rms"], group["scalar_lr_scale"]) == (3.0, 2.0, 0.1)


def snapshot(optimization: Optimization, model: torch.nn.Module) -> list[torch.Tensor]:
    """The weights and every optimizer state tensor (moments, step counts), copied."""
    state = [t for per_param in optimization.optimizer.state.values() for t in per_param.values()]
    return [t.detach().clone() for t in [*model.parameters(), *state] if isinstance(t, torch.Tensor)]


def same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    """Equal to the bit, NaN to NaN (ScaledAdam's clipping history is NaN where no norm is recorded yet)."""
    return all(
        torch.equal(x.isnan(), y.isnan()) and torch.equal(x.nan_to_num(), y.nan_to_num())
        for x, y in zip(a, b, strict=True)
    )


@pytest.mark.parametrize(
    ("optimizer", "device_skip"),
    [("adamw", None), ("sgd", None), ("scaled_adam", False), ("scaled_adam", True)],
)
def test_a_non_finite_gradient_skips_the_update_whole_and_the_next_one_applies(optimizer, device_skip):
    """The fused AdamW skips on the device (told the verdict as a tensor, no host read), and so does
    ScaledAdam on CUDA (forced here: ``device_skip``); SGD reads the verdict, and ScaledAdam on the CPU.
    Either way nothing moves: weights, moments, the step counts (torch's; ScaledAdam's counts calls)."""
    model = tiny_model()
    optimization = Optimization(model, config(optimizer=optimizer, lr_warmup_steps=0), CPU, 10)
    if device_skip is not None:
        optimization.optimizer.device_skip = device_skip
    assert optimization.skips_on_device == (optimizer == "adamw" or bool(device_skip))
    backward(model)
    assert bool(optimization.step(model, step=0, epoch=0))
    before = snapshot(optimization, model)

    backward(model, scale=math.nan)
    applied = optimization.step(model, step=1, epoch=0)

    assert applied.shape == () and not bool(applied)
    after = snapshot(optimization, model)
    assert len(after) == len(before) > 4
    assert same(after, before)
    assert not hasattr(optimization.optimizer, "found_inf"), "left as GradScaler leaves it"
    backward(model)
    assert bool(optimization.step(model, step=2, epoch=0))
    assert not same(snapshot(optimization, model), before)


def test_under_f16_a_norm_that_overflows_on_finite_gradients_skips_the_update_too():
    """The scaler's own check sees finite gradients; the norm's verdict (told to the fused AdamW) skips."""
    model = tiny_model()
    chosen = resolve_config(
        {
            "data": {"train_manifests": ["train.jsonl"]},
            "optim": {"lr_warmup_steps": 0},
            "run": {"precision": "f16"},
        }
    )
    optimization = Optimization(model, chosen, CPU, 10)
    assert optimization.scaler.is_enabled() and optimization.skips_on_device
    inputs = torch.randn(16, 4, generator=torch.Generator().manual_seed(1))
    optimization.scale(model(inputs).pow(2).mean()).backward()
    assert bool(optimization.step(model, step=0, epoch=0))
    before = snapshot(optimization, model)
    scale = optimization.scaler.get_scale()
    for p in model.parameters():  # finite once unscaled (3e38 / scale), their squares' sum not
        p.grad = torch.full_like(p, 3e38)

    assert not bool(optimization.step(model, step=1, epoch=0))

    assert same(snapshot(optimization, model), before)
    assert optimization.scaler.get_scale() == scale, "the scaler saw no inf: its scale stays"


def test_under_f16_scaled_adam_is_never_told_the_verdict_on_the_device():
    """ScaledAdam counts the calls it skips on the device, and the f16 scaler skips routinely: the host
    reads the verdict there, on CUDA too (where ScaledAdam would take it), and after a rebuild."""
    for precision, told in (("f16", False), ("bf16", None)):
        chosen = resolve_config(
            {
                "data": {"train_manifests": ["train.jsonl"]},
                "optim": {"optimizer": "scaled_adam"},
                "run": {"precision": precision},
            }
        )
        optimization = Optimization(tiny_model(), chosen, CPU, 10)
        assert optimization.optimizer.device_skip is told
        optimization.rebuild(tiny_model(), tiny_model(), carry=False)
        assert optimization.optimizer.device_skip is told


def test_under_lr_scale_with_batch_each_step_applies_and_logs_the_rate_times_batch_over_n():
    # Step schedule, no warmup, a long decay: the schedule's rate stays ~1e-3 (read from it, exactly).
    chosen = config(learning_rate=1e-3, lr_warmup_steps=0, lr_decay_steps=10**6, lr_scale_with_batch=8)
    model = tiny_model()
    optimization = Optimization(model, chosen, CPU, steps_per_epoch=10)
    for step, utterances in enumerate([8, 20, 3]):
        backward(model)
        assert optimization.step(model, step, 0, batch_size=utterances)
        expected = optimization.learning_rate(step, 0) * utterances / 8
        assert expected == pytest.approx(1e-3 * utterances / 8, rel=1e-5)
        assert [g["lr"] for g in optimization.optimizer.param_groups] == pytest.approx([expected] * 2)
        assert optimization.logged_rate(step + 1, 0) == pytest.approx(expected)


def test_without_lr_scale_with_batch_the_batch_size_changes_nothing():
    chosen = config(learning_rate=1e-3, lr_warmup_steps=0, lr_decay_steps=10**6)
    model = tiny_model()
    optimization = Optimization(model, chosen, CPU, steps_per_epoch=10)
    backward(model)
    optimization.step(model, 0, 0, batch_size=40)
    assert optimization.applied_lr == optimization.learning_rate(0, 0) == optimization.logged_rate(1, 0)


def test_lr_scale_with_batch_without_a_batch_size_is_a_one_line_error():
    model = tiny_model()
    optimization = Optimization(model, config(lr_scale_with_batch=8), CPU, steps_per_epoch=10)
    backward(model)
    with pytest.raises(ValueError, match="pass batch_size"):
        optimization.step(model, 0, 0)


def test_scaled_adam_clips_by_its_own_rule_so_the_norm_clip_only_measures():
    # Gradients of norms far above gradient_clip_norm 0.001, 100x apart: AdamW's path would clip both to
    # 0.001 (Adam's normalisation hides one clip, not two unequal ones); scaled_adam's must not (no median
    # yet in 2 steps), so the updates equal a bare ScaledAdam's.
    chosen = config(
        optimizer="scaled_adam",
        learning_rate=0.05,
        lr_warmup_steps=0,
        lr_decay_steps=10**6,
        gradient_clip_norm=0.001,
    )
    model, reference_model = tiny_model(), tiny_model()
    optimization = Optimization(model, chosen, CPU, steps_per_epoch=10)
    reference = ScaledAdam(reference_model.parameters(), lr=0.05)
    for step, scale in enumerate([100.0, 1.0]):
        backward(model, scale=scale)
        backward(reference_model, scale=scale)
        optimization.step(model, step, 0)
        reference.step()
        reference.zero_grad()
        assert float(optimization.grad_norm) > 0.01
    for ours, theirs in zip(model.parameters(), reference_model.parameters(), strict=True):
        torch.testing.assert_close(ours, theirs)


# --- in a training run ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_run_with_lr_scale_with_batch_applies_and_logs_each_steps_rate_times_its_utterances_over_n(
    corpus, tokenizer_path, tmp_path, single_process, monkeypatch
):
    applied: list[tuple[float, float]] = []  # (utterances, rate) of each update, as the optimizer saw them
    original = Optimization.step

    def recording_step(self, model, step, epoch, batch_size=None):
        taken = original(self, model, step, epoch, batch_size)
        applied.append((batch_size, self.optimizer.param_groups[0]["lr"]))
        assert self.optimizer.param_groups[0]["lr"] == pytest.approx(
            self.learning_rate(step, epoch) * batch_size / 4
        )
        return taken

    monkeypatch.setattr(Optimization, "step", recording_step)
    config = tiny_config(corpus, tokenizer_path, tmp_path / "run", log_every=1)
    config["optim"] |= {"lr_scale_with_batch": 4}
    run_in_process(config)

    sizes = {size for size, _ in applied}
    assert len(sizes) > 1, f"adaptive batches should differ in size, got {sizes}"
    logged = [event["values"]["lr"] for event in events(tmp_path / "run", "train")]
    assert logged == pytest.approx([rate for _, rate in applied])


@pytest.mark.slow
def test_scaled_adam_with_eden_trains_the_tiny_model(corpus, tokenizer_path, tmp_path, single_process):
    config = tiny_config(corpus, tokenizer_path, tmp_path / "run")
    config["optim"] |= {
        "epochs": 3,
        "optimizer": "scaled_adam",
        "learning_rate": 0.045,
        "lr_decay_kind": "eden",
        "lr_eden_batches": 20,
    }
    run_in_process(config)

    losses = [event["values"]["loss"] for event in events(tmp_path / "run", "train")]
    assert all(math.isfinite(loss) for loss in losses)
    assert losses[-1] < losses[0]
