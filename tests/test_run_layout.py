"""run_layout: which checkpoint folder a pointer commits to after a crash between the renames, which checkpoint
stands for a run's result, and where --init-from finds weights (the run-dir forms and the tokenizer lookup
are in tests/training/test_run_layout.py, beside the runs that use them)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from asr_pipeline.options import ConfigError
from asr_pipeline.run_layout import (
    AVERAGE_FILE,
    BEST_POINTER,
    CHECKPOINT_DIR,
    CHECKPOINT_POINTER,
    EMA_FILE,
    WEIGHTS,
    WEIGHTS_FILE,
    best_or_latest,
    checkpoint_weights,
    committed_dir,
    init_weights_path,
    parse_weights,
    read_checkpoint_pointer,
)


def checkpoint_folder(run_dir, name: str, step: int | None) -> None:
    """A checkpoint folder whose weights say ``step``; None: half-written (no readable weights)."""
    folder = run_dir / name
    folder.mkdir(parents=True)
    if step is None:
        (folder / WEIGHTS_FILE).write_bytes(b"\x00" * 5)
    else:
        save_file({"w": torch.zeros(1)}, folder / WEIGHTS_FILE, metadata={"step": str(step)})


def pointer(run_dir, step: int, name: str = CHECKPOINT_POINTER) -> None:
    (run_dir / name).write_text(json.dumps({"step": step, "epoch": 0, "model_config": {}, "metrics": {}}))


def test_the_latest_folder_is_committed_when_nothing_crashed(tmp_path):
    checkpoint_folder(tmp_path, CHECKPOINT_DIR, 4)
    pointer(tmp_path, 4)

    assert committed_dir(tmp_path) == tmp_path / CHECKPOINT_DIR


@pytest.mark.parametrize(
    ("latest_step", "committed"),
    [
        (None, f"{CHECKPOINT_DIR}.old"),  # killed while the new folder was half-written
        (5, f"{CHECKPOINT_DIR}.old"),  # killed after the swap, before the pointer named step 5
        (4, CHECKPOINT_DIR),  # killed after the pointer, before .old was removed
    ],
)
def test_after_a_crash_the_folder_holding_the_pointers_step_is_read(tmp_path, latest_step, committed):
    checkpoint_folder(tmp_path, f"{CHECKPOINT_DIR}.old", 4)
    checkpoint_folder(tmp_path, CHECKPOINT_DIR, latest_step)
    pointer(tmp_path, 4)

    assert committed_dir(tmp_path) == tmp_path / committed


def test_only_an_old_folder_left_is_read(tmp_path):
    checkpoint_folder(tmp_path, f"{CHECKPOINT_DIR}.old", 2)
    pointer(tmp_path, 2)

    assert committed_dir(tmp_path) == tmp_path / f"{CHECKPOINT_DIR}.old"
    assert init_weights_path(tmp_path) == tmp_path / f"{CHECKPOINT_DIR}.old" / WEIGHTS_FILE


def test_the_best_checkpoint_stands_for_a_run_that_validated_else_the_latest(tmp_path):
    pointer(tmp_path, 9)
    assert best_or_latest(tmp_path) == ("latest", read_checkpoint_pointer(tmp_path))

    pointer(tmp_path, 6, name=BEST_POINTER)
    kind, best = best_or_latest(tmp_path)
    assert (kind, best["step"]) == ("best", 6)


def test_init_from_takes_a_weights_file_or_a_run_and_refuses_anything_else_naming_the_forms(tmp_path):
    checkpoint_folder(tmp_path / "run", CHECKPOINT_DIR, 1)
    weights = tmp_path / "run" / CHECKPOINT_DIR / WEIGHTS_FILE

    assert init_weights_path(weights) == weights
    assert init_weights_path(tmp_path / "run" / CHECKPOINT_POINTER) == weights
    (tmp_path / "model.pt").write_bytes(b"")
    for wrong in (tmp_path / "model.pt", tmp_path / "empty-run"):
        with pytest.raises(
            FileNotFoundError, match=r"run.init_from=.*expected a .safetensors file or a run dir"
        ):
            init_weights_path(wrong)


def test_each_weights_choice_names_its_file_in_the_checkpoint_folder(tmp_path):
    for file in (WEIGHTS_FILE, AVERAGE_FILE, EMA_FILE):
        (tmp_path / file).write_bytes(b"")

    chosen = {name: checkpoint_weights(tmp_path, name, "--weights") for name in WEIGHTS}

    assert chosen == {
        "raw": tmp_path / WEIGHTS_FILE,
        "averaged": tmp_path / AVERAGE_FILE,
        "ema": tmp_path / EMA_FILE,
    }


def test_an_unknown_weights_choice_is_one_line_naming_the_option_and_the_choices(tmp_path):
    with pytest.raises(ConfigError) as error:
        checkpoint_weights(tmp_path, "swa", "params.yaml decoding.weights")

    assert str(error.value) == (
        "params.yaml decoding.weights: unknown weights 'swa'; choose one of raw, averaged, ema or averaged:STEP"
    )


def test_a_missing_average_is_one_line_naming_the_file_the_option_and_the_training_setting(tmp_path):
    (tmp_path / WEIGHTS_FILE).write_bytes(b"")

    with pytest.raises(ConfigError) as error:
        checkpoint_weights(tmp_path, "ema", "--weights")

    message = str(error.value)
    assert "\n" not in message and message.startswith(f"--weights ema: {tmp_path / EMA_FILE} does not exist")
    assert "optim.ema_decay" in message and "set --weights raw" in message


def test_averaged_since_a_step_parses_and_anything_else_is_refused_naming_the_option():
    assert parse_weights("averaged:400", "--weights") == ("averaged", 400)
    assert parse_weights("ema", "--weights") == ("ema", None)
    for bad in ("ema:400", "averaged:", "averaged:-1"):
        with pytest.raises(ConfigError, match=rf"^--weights: unknown weights '{bad}'"):
            parse_weights(bad, "--weights")
