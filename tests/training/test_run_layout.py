"""The one way a run dir is named: the run dir itself, its ``checkpoint_latest/`` folder or its
``checkpoint_latest.json`` pointer, alike for --resume-from, --init-from and ``decode --run-dir``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asr_pipeline.run_layout import (
    CONFIG_FILE,
    TOKENIZER_FILE,
    require_checkpoint,
    resolve_run_dir,
    run_tokenizer,
)
from asr_pipeline.training.resume import init_weights_path

from .conftest import run_in_process as run
from .conftest import tiny_config


@pytest.mark.parametrize("given", ["runs/x", "runs/x/checkpoint_latest", "runs/x/checkpoint_latest.json"])
def test_the_run_dir_its_checkpoint_folder_and_its_pointer_all_name_the_run_dir(given):
    assert resolve_run_dir(given) == Path("runs/x")
    assert resolve_run_dir(given + "/") == Path("runs/x"), "a trailing slash changes nothing"


def test_other_paths_are_left_alone():
    assert resolve_run_dir("runs/x/checkpoint_best") == Path("runs/x/checkpoint_best")
    assert resolve_run_dir("w/model.safetensors") == Path("w/model.safetensors")


def test_a_runs_tokenizer_is_its_own_copy_else_the_file_its_config_names_else_an_error(tmp_path):
    run_dir, elsewhere = tmp_path / "run", tmp_path / "sp.model"
    run_dir.mkdir()
    elsewhere.write_bytes(b"sp")
    (run_dir / CONFIG_FILE).write_text(json.dumps({"run": {"tokenizer": str(elsewhere)}}))
    assert run_tokenizer(run_dir) == elsewhere

    (run_dir / TOKENIZER_FILE).write_bytes(b"copy")
    assert run_tokenizer(run_dir) == run_dir / TOKENIZER_FILE, "the run's own copy wins"

    (run_dir / TOKENIZER_FILE).unlink()
    elsewhere.unlink()
    with pytest.raises(FileNotFoundError, match="the run's tokenizer must travel with its model"):
        run_tokenizer(run_dir)


def test_a_folder_without_a_finished_checkpoint_is_refused_naming_the_option_and_the_accepted_forms(tmp_path):
    with pytest.raises(FileNotFoundError) as error:
        require_checkpoint(tmp_path / "checkpoint_latest", "run.resume_from (--resume-from)")

    assert str(error.value) == (
        f"run.resume_from (--resume-from) '{tmp_path / 'checkpoint_latest'}': {tmp_path} holds no finished "
        "checkpoint (checkpoint_latest.json); pass a run dir that does, its checkpoint_latest/ folder or its "
        "checkpoint_latest.json"
    )


@pytest.fixture
def one_epoch_run(corpus, tokenizer_path, tmp_path) -> dict:
    config = tiny_config(corpus, tokenizer_path, tmp_path / "run")
    config["optim"]["epochs"] = 1
    run(config)
    return config


@pytest.mark.usefixtures("single_process")
def test_a_run_resumes_in_place_from_its_checkpoint_latest_folder(one_epoch_run, tmp_path):
    run_dir = tmp_path / "run"
    steps_after_one_epoch = json.loads((run_dir / "checkpoint_latest.json").read_text())["step"]
    one_epoch_run["optim"]["epochs"] = 2
    one_epoch_run["run"]["resume_from"] = str(run_dir / "checkpoint_latest")  # the reference trainer's form

    metrics = run(one_epoch_run)

    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["epoch"] for e in events if e["type"] == "epoch"] == [0, 1], "epoch 0, then the resumed epoch 1"
    assert [e["type"] for e in events].count("summary") == 2, "appended to the first run's log: resumed"
    assert metrics["steps"] > steps_after_one_epoch


@pytest.mark.usefixtures("single_process")
@pytest.mark.parametrize("form", ["", "checkpoint_latest", "checkpoint_latest.json"])
def test_init_from_takes_the_same_forms_as_resume(one_epoch_run, tmp_path, form):
    run_dir = tmp_path / "run"

    path = init_weights_path(run_dir / form if form else run_dir)

    assert path == run_dir / "checkpoint_latest" / "model.safetensors" and path.is_file()
