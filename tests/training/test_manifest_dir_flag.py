"""``asr-pipeline train --manifest-dir DIR``: DIR's train/validation manifests, or a ~10% split of train."""

from __future__ import annotations

import json

import pytest

from asr_pipeline.cli import build_parser
from asr_pipeline.cli.common import UsageError
from asr_pipeline.cli.train import train_config_from_args

from .test_on_the_fly import write_audio_manifest


def config_for(*argv: str):
    return train_config_from_args(build_parser().parse_args(["train", *argv]))[0]


def test_without_validation_data_a_split_is_written_under_the_output_dir_and_reused(tmp_path):
    data = tmp_path / "data"
    write_audio_manifest(data, "train", 20, seed=3, broken=False)
    run_dir = tmp_path / "run"

    config = config_for("--manifest-dir", str(data), "--output-dir", str(run_dir))
    split = run_dir / "manifest_split"
    first = {name: (split / name).read_bytes() for name in ("train.jsonl", "val.jsonl")}
    again = config_for("--manifest-dir", str(data), "--output-dir", str(run_dir))

    assert config.data.train_manifests == [str(split / "train.jsonl")]
    assert config.data.val_manifests == [str(split / "val.jsonl")]
    assert again == config
    assert {name: (split / name).read_bytes() for name in first} == first
    ids = {name: [json.loads(line)["id"] for line in data.splitlines()] for name, data in first.items()}
    assert sorted(ids["train.jsonl"] + ids["val.jsonl"]) == sorted(f"train-{i:02d}" for i in range(20))
    assert 1 <= len(ids["val.jsonl"]) <= 6  # ~10% of 20, by id hash


def test_a_validation_manifest_in_the_folder_is_used_as_it_is(tmp_path):
    data = tmp_path / "data"
    write_audio_manifest(data, "train", 4, seed=3, broken=False)
    write_audio_manifest(data, "dev", 2, seed=4, broken=False)

    config = config_for("--manifest-dir", str(data), "--output-dir", str(tmp_path / "run"))

    assert config.data.train_manifests == [str(data / "train.jsonl")]
    assert config.data.val_manifests == [str(data / "dev.jsonl")]
    assert not (tmp_path / "run" / "manifest_split").exists()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--train-manifest", "x.jsonl"], "excludes --train-manifest"),
        ([], "train.jsonl"),  # the folder has no train.jsonl
    ],
)
def test_manifest_dir_misuse_is_a_usage_error_saying_what_to_do(tmp_path, extra, message):
    (tmp_path / "data").mkdir()
    if extra:
        (tmp_path / "x.jsonl").write_text("")
        extra = ["--train-manifest", str(tmp_path / "x.jsonl")]
    with pytest.raises(UsageError, match=message):
        config_for("--manifest-dir", str(tmp_path / "data"), "--output-dir", str(tmp_path / "run"), *extra)
