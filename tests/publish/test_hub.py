"""publish.hub against a stand-in Hub on 127.0.0.1 (HF_ENDPOINT): `asr-pipeline publish` sends the exported
folder's files to the repo and revision asked for; training with --hf-upload-checkpoints commits each
checkpoint from a background thread, retries a failed commit and never fails the run; the token goes only into
the Authorization header, never into output, events or the run dir."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asr_pipeline.cli import main
from asr_pipeline.publish.export import export_run
from asr_pipeline.publish.hub import CheckpointUploader, HubTarget
from tests.factories import untrained_run
from tests.publish.hub_server import TOKEN


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("publish")
    export_run(untrained_run(root), root / "tiny-model")
    return root / "tiny-model"


def test_publish_creates_the_repo_and_branch_and_commits_every_file_of_the_folder(hub, export_dir, capsys):
    status = main(
        [
            "publish",
            "--export-dir",
            str(export_dir),
            "--repo-id",
            "team/tiny",
            "--revision",
            "v1",
            "--private",
        ]
    )
    out, err = capsys.readouterr()

    assert status == 0, err
    assert [
        (c["organization"], c["name"], c.get("private", c.get("visibility") == "private"))
        for c in hub.created
    ] == [("team", "tiny", True)]
    assert hub.branches == [("team/tiny", "v1")]
    [(repo, revision, message, files)] = hub.commits
    assert (repo, revision, message) == ("team/tiny", "v1", "Upload tiny-model")
    assert files == {path.name: path.read_bytes() for path in export_dir.iterdir()}
    assert json.loads(out)["commit"].startswith(f"{hub.url}/team/tiny/commit/")
    assert all(
        request.authorization == f"Bearer {TOKEN}" for request in hub.requests if request.method == "POST"
    )
    assert TOKEN not in out + err


def test_publish_refuses_a_folder_that_is_not_an_export_and_names_a_bad_repo_id(hub, tmp_path, capsys):
    assert main(["publish", "--export-dir", str(tmp_path), "--repo-id", "team/tiny"]) == 1
    assert "is not an exported model folder" in capsys.readouterr().err
    assert main(["publish", "--export-dir", str(tmp_path), "--repo-id", "tiny"]) == 2
    assert "repo id must be <namespace>/<name>" in capsys.readouterr().err
    assert hub.commits == []


def test_publish_without_a_token_says_where_it_looks_and_sends_no_request(
    hub, export_dir, tmp_path, monkeypatch, capsys
):
    from huggingface_hub import constants

    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token-here"))

    status = main(["publish", "--export-dir", str(export_dir), "--repo-id", "team/tiny"])

    [line] = capsys.readouterr().err.strip().splitlines()
    assert status == 1
    assert line.startswith("asr-pipeline publish: error: no Hugging Face token found: set HF_TOKEN, or run")
    assert str(tmp_path / "no-token-here") in line
    assert hub.requests == []


def test_a_failed_checkpoint_commit_is_retried_and_one_that_keeps_failing_is_recorded_not_raised(hub):
    hub.fail_commits = 1
    uploader = CheckpointUploader(HubTarget("team/run"), retries=3, first_pause_sec=0.01)
    uploader.submit(10, {"model.safetensors": b"weights-10"})
    uploader.submit(20, {"model.safetensors": b"weights-20"})
    results = uploader.close(timeout_sec=60)

    assert [(r.step, r.ok, r.attempts) for r in results] == [(10, True, 2), (20, True, 1)]
    assert [files for *_, files in hub.commits] == [
        {"checkpoint-00000010/model.safetensors": b"weights-10"},
        {"checkpoint-00000020/model.safetensors": b"weights-20"},
    ]
    hub.fail_commits = 5
    failing = CheckpointUploader(HubTarget("team/run"), retries=2, first_pause_sec=0.01)
    failing.submit(30, {"model.safetensors": b"weights-30"})
    [result] = failing.close(timeout_sec=60)
    assert (result.ok, result.attempts) == (False, 2) and "500" in result.error


@pytest.mark.slow  # a tiny Whisper fine-tuned for one step and exported: ~15 s
def test_publish_commits_an_hf_finetune_export_as_it_is(hub, tmp_path, capsys):
    from asr_pipeline.hf_finetune.export import export_finetuned
    from asr_pipeline.hf_finetune.features import featurize
    from asr_pipeline.hf_finetune.models import load_pretrained
    from asr_pipeline.hf_finetune.options import hf_finetune_options
    from asr_pipeline.hf_finetune.trainer import FinetuneRun
    from tests.hf_finetune.conftest import save_tiny_whisper, short_sentences, write_demo_utterances

    texts = short_sentences(3)
    model = save_tiny_whisper(tmp_path / "whisper", texts)
    train = write_demo_utterances(tmp_path, texts, "train", seed=1)
    data = featurize(train, load_pretrained(str(model)).feature_extractor, tmp_path / "cache", max_windows=1,
                     max_audio_sec=30).directory  # fmt: skip
    options = hf_finetune_options({"model": str(model), "max_steps": 1, "batch_size": 3})
    FinetuneRun(options, data, None, tmp_path / "run").run()
    export = export_finetuned(
        tmp_path / "run", tmp_path / "whisper-tiny-ft", evaluation={"dev": {"after": {"wer": 9}}}
    )

    assert main(["publish", "--export-dir", str(export), "--repo-id", "team/whisper-tiny-ft"]) == 0, (
        capsys.readouterr()
    )
    [(repo, revision, message, files)] = hub.commits
    assert (repo, revision, message) == ("team/whisper-tiny-ft", "main", "Upload whisper-tiny-ft")
    assert files == {path.name: path.read_bytes() for path in export.iterdir()}
    assert {"model.safetensors", "README.md", "eval_results.json", "training_config.json"} <= set(files)
