from __future__ import annotations

import json

import pytest
import torch

from asr_pipeline.models.averaging import average_kept_checkpoints
from asr_pipeline.models.loading import load_run_model
from asr_pipeline.options import ConfigError
from asr_pipeline.run_layout import AVERAGE_FILE, kept_checkpoints
from asr_pipeline.training.checkpoint import (
    CHECKPOINT_DIR,
    CHECKPOINT_POINTER,
    CONFIG_FILE,
    KEPT_DIR,
    build_model_from_config,
    load_model_from_run,
    load_training_state,
    read_checkpoint_pointer,
    read_kept_weights,
    save_checkpoint,
    save_kept_weights,
)
from asr_pipeline.training.config import resolve_config, save_json
from asr_pipeline.training.ema import RunningAverage


@pytest.fixture
def run_dir(tmp_path):
    config = resolve_config(
        {
            "data": {"train_manifests": ["unused.parquet"], "input_dim": 16},
            "model": {"variant": "tiny"},
            "optim": {"epochs": 1, "lr_warmup_steps": 1},
            "run": {"output_dir": str(tmp_path)},
        }
    )
    save_json(config, tmp_path / CONFIG_FILE)
    return tmp_path, config


def saved_model(run_dir_and_config, step: int = 7):
    run_dir, config = run_dir_and_config
    torch.manual_seed(step)
    model, model_config = build_model_from_config(config, vocab_size=11)
    save_checkpoint(
        run_dir,
        model=model,
        training_state={"optimizer": {}},
        step=step,
        epoch=0,
        model_config=model_config,
        metrics={"val_cer": 12.5},
    )
    return model


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    first, second = a.state_dict(), b.state_dict()
    return first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


def test_load_model_from_run_gives_back_the_saved_weights_in_eval_mode(run_dir):
    model = saved_model(run_dir)

    loaded, config = load_model_from_run(run_dir[0])

    assert config == run_dir[1]
    assert not loaded.training
    assert same_weights(loaded, model)
    features, lengths = torch.randn(2, 40, 16), torch.tensor([40, 25])
    model.eval()
    assert torch.equal(loaded(features, lengths)[0], model(features, lengths)[0])


def test_the_pointer_names_step_epoch_model_config_and_metrics(run_dir):
    saved_model(run_dir, step=7)

    pointer = json.loads((run_dir[0] / CHECKPOINT_POINTER).read_text())

    assert pointer["step"] == 7 and pointer["epoch"] == 0
    assert pointer["model_config"]["vocab_size"] == 11 and pointer["model_config"]["input_dim"] == 16
    assert pointer["metrics"] == {"val_cer": 12.5}


def test_a_new_checkpoint_replaces_the_old_one_even_after_a_crashed_write(run_dir):
    saved_model(run_dir, step=1)
    crashed = run_dir[0] / f"{CHECKPOINT_DIR}.tmp"
    crashed.mkdir()
    (crashed / "junk").write_text("half a checkpoint")

    newer = saved_model(run_dir, step=2)

    assert read_checkpoint_pointer(run_dir[0])["step"] == 2
    assert load_training_state(run_dir[0])["step"] == 2
    assert same_weights(load_model_from_run(run_dir[0])[0], newer)
    assert sorted(p.name for p in run_dir[0].iterdir()) == [CHECKPOINT_DIR, CHECKPOINT_POINTER, CONFIG_FILE]


def test_a_training_state_from_another_step_than_the_pointer_is_refused(run_dir):
    saved_model(run_dir, step=3)
    pointer_path = run_dir[0] / CHECKPOINT_POINTER
    pointer_path.write_text(json.dumps({**json.loads(pointer_path.read_text()), "step": 4}))

    with pytest.raises(RuntimeError, match=r"step 3 but checkpoint_latest\.json says step 4"):
        load_training_state(run_dir[0])


def test_a_run_without_a_checkpoint_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="never finished a checkpoint"):
        read_checkpoint_pointer(tmp_path)


def test_a_kill_between_the_directory_swap_and_the_pointer_resumes_from_the_committed_checkpoint(run_dir):
    committed = saved_model(run_dir, step=1)
    root = run_dir[0]
    # What a SIGKILL after "rename latest -> .old, .tmp -> latest" but before the pointer leaves behind:
    newer = saved_model(run_dir, step=2)
    (root / f"{CHECKPOINT_DIR}").rename(root / "newer")
    saved_model(run_dir, step=1)
    (root / CHECKPOINT_DIR).rename(root / f"{CHECKPOINT_DIR}.old")
    (root / "newer").rename(root / CHECKPOINT_DIR)

    assert read_checkpoint_pointer(root)["step"] == 1
    assert load_training_state(root)["step"] == 1
    assert same_weights(load_model_from_run(root)[0], committed) and not same_weights(committed, newer)
    (root / CHECKPOINT_DIR).rename(root / "gone")  # killed between the two renames: only .old is left
    assert load_training_state(root)["step"] == 1

    saved_model(run_dir, step=3)  # the next save repairs the layout
    assert load_training_state(root)["step"] == 3 and not (root / f"{CHECKPOINT_DIR}.old").exists()


def test_kept_weights_are_listed_by_step_and_carry_their_model_config(run_dir):
    root, config = run_dir
    kept = {}
    for step in (120, 7, 45):  # written out of order: listed by step
        torch.manual_seed(step)
        model, model_config = build_model_from_config(config, vocab_size=11)
        save_kept_weights(root, model=model, step=step, epoch=step // 10, model_config=model_config)
        kept[step] = model

    paths = kept_checkpoints(root)

    assert [p.name for p in paths] == [f"step-{s:08d}.safetensors" for s in (7, 45, 120)]
    assert not list((root / KEPT_DIR).glob(".*")), "no temporary file is left behind"
    state, info = read_kept_weights(paths[1])
    assert info["step"] == 45 and info["epoch"] == 4 and info["model_config"]["vocab_size"] == 11
    assert state.keys() == kept[45].state_dict().keys()
    assert all(torch.equal(state[k], v) for k, v in kept[45].state_dict().items())


def test_a_file_that_is_not_a_kept_checkpoint_is_refused(tmp_path):
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(2)}, tmp_path / "plain.safetensors")
    with pytest.raises(ValueError, match=r"plain\.safetensors is not a kept checkpoint"):
        read_kept_weights(tmp_path / "plain.safetensors")


def eight_steps_kept_at_4_and_8(root, config):
    """A tiny model whose floating-point state grows by 1.0 a step for 8 steps, averaged every 2 steps and kept
    (with its running average) after steps 4 and 8; returns the model, its config, the average and each step's
    state (steps taken -> float64 copies)."""
    model, model_config = build_model_from_config(config, vocab_size=11)
    average = RunningAverage(model, period=2)
    weights = {}
    for step in range(8):
        with torch.no_grad():
            for value in model.state_dict().values():
                if value.is_floating_point():
                    value.add_(1.0)
        average.update(model, step)
        weights[step + 1] = {k: v.double().clone() for k, v in model.state_dict().items()}
        if (step + 1) % 4 == 0:
            save_kept_weights(root, model=model, step=step + 1, epoch=0, model_config=model_config,
                              average=average)  # fmt: skip
    return model, model_config, average, weights


def test_kept_running_averages_give_the_model_averaged_between_two_checkpoints(run_dir):
    root, config = run_dir
    model, _, _, weights = eight_steps_kept_at_4_and_8(root, config)

    between = average_kept_checkpoints(root, start_step=4, end_step=8)  # the points 6 and 8
    from_start = average_kept_checkpoints(root, start_step=None, end_step=8)  # 2, 4, 6 and 8

    assert [p.name for p in kept_checkpoints(root)] == [
        "step-00000004.safetensors",
        "step-00000008.safetensors",
    ]
    for name, value in model.state_dict().items():
        if not value.is_floating_point():
            continue
        expected = (weights[6][name] + weights[8][name]) / 2
        torch.testing.assert_close(between[name], expected.float(), rtol=0, atol=1e-5)
        expected = sum(weights[s][name] for s in (2, 4, 6, 8)) / 4
        torch.testing.assert_close(from_start[name], expected.float(), rtol=0, atol=1e-5)
        assert between[name].dtype == value.dtype  # the model's dtype: loads into it
    model.load_state_dict(between)
    with pytest.raises(FileNotFoundError, match=r"kept running averages at steps \[4, 8\]"):
        average_kept_checkpoints(root, start_step=5, end_step=8)


def test_weights_averaged_since_a_kept_step_loads_the_mean_since_it_or_names_the_kept_steps(run_dir):
    root, config = run_dir
    model, model_config, average, _ = eight_steps_kept_at_4_and_8(root, config)
    save_checkpoint(root, model=model, training_state=None, step=8, epoch=0, model_config=model_config,
                    averages={AVERAGE_FILE: average.state_dict(model, keep_dtype=True)})  # fmt: skip

    loaded = load_run_model(root, weights="averaged:4").model.state_dict()

    between = average_kept_checkpoints(root, start_step=4, end_step=8)
    assert all(torch.equal(loaded[name], between[name]) for name in between)
    raw = load_run_model(root).model.state_dict()
    assert not torch.equal(loaded["output.weight"], raw["output.weight"])
    with pytest.raises(ConfigError) as error:
        load_run_model(root, weights="averaged:5")
    message = str(error.value)
    assert message.startswith("--weights averaged:5: ") and "kept running averages at steps [4, 8]" in message
    assert "\n" not in message
