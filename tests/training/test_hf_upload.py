"""run.hf_upload_checkpoints: every checkpoint goes to the Hub (a stand-in on 127.0.0.1) from rank 0's background
thread, the results land in an "hf_upload" event, and the token stays out of the run dir."""

from __future__ import annotations

import json

import pytest

from asr_pipeline.training.config import resolve_config
from tests.publish.hub_server import TOKEN

from .conftest import run_in_process, tiny_config

pytestmark = pytest.mark.usefixtures("single_process")


def test_uploading_checkpoints_needs_a_repo_id(corpus, tokenizer_path, tmp_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path / "run")
    config["run"]["hf_upload_checkpoints"] = True
    with pytest.raises(ValueError, match="hf_upload_checkpoints needs hf_upload_repo_id"):
        resolve_config(config)


def test_training_uploads_each_checkpoint_in_the_background_and_keeps_the_token_out_of_the_run(
    hub, corpus, tokenizer_path, tmp_path
):
    run_dir = tmp_path / "run"
    config = tiny_config(corpus, tokenizer_path, run_dir, dvclive=False)
    config["run"].update(
        {"hf_upload_checkpoints": True, "hf_upload_repo_id": "team/run", "hf_upload_revision": "exp"}
    )
    run_in_process(config)

    steps = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    checkpoints = [event["step"] for event in steps if event["type"] == "checkpoint"]
    [upload] = [event for event in steps if event["type"] == "hf_upload"]
    assert [(c["step"], c["ok"]) for c in upload["values"]["checkpoints"]] == [(s, True) for s in checkpoints]
    assert [revision for _, revision, _, _ in hub.commits] == ["exp"] * len(checkpoints)
    last_files = hub.commits[-1][3]
    folder = f"checkpoint-{checkpoints[-1]:08d}"
    assert sorted(last_files) == sorted(
        f"{folder}/{name}"
        for name in ("model.safetensors", "checkpoint_latest.json", "training_config.json", "tokenizer.model")
    )
    assert (
        last_files[f"{folder}/model.safetensors"]
        == (run_dir / "checkpoint_latest" / "model.safetensors").read_bytes()
    )
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
