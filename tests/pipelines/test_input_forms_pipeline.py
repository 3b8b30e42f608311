"""Every manifest form through the `transcripts` and `features` stages: audio files, embedded audio bytes,
inline features (2-D and flat), feature files (.txt and .npy), from JSONL, Parquet and TSV."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from asr_pipeline.io.datasets import Manifest
from asr_pipeline.pipelines.features import create_pipeline as features_pipeline
from asr_pipeline.pipelines.splits import SPLITS
from asr_pipeline.pipelines.transcripts import create_pipeline as transcripts_pipeline
from asr_pipeline.text.tokenizer import CTCTokenizer
from tests.conftest import make_wav
from tests.pipelines.conftest import feature_shard_datasets, run_stage

F = 80  # the default input_dim: fbank's num_mel_bins


def feats(frames: int, seed: int) -> np.ndarray:
    """(frames, F) values that survive a float32 round trip exactly (multiples of 1/8)."""
    return np.random.default_rng(seed).integers(-40, 40, size=(frames, F)).astype(np.float32) / 8


@pytest.fixture
def raw_splits(tmp_path) -> dict:
    (tmp_path / "audio").mkdir()
    (tmp_path / "audio" / "a1.wav").write_bytes(make_wav(seconds=0.5))
    (tmp_path / "feats").mkdir()
    np.savetxt(tmp_path / "feats" / "t1.features.txt", feats(4, 3))  # one frame per line
    np.save(tmp_path / "feats" / "n1.npy", feats(5, 4))
    train = tmp_path / "train.jsonl"
    train.write_text(
        "".join(
            json.dumps(record) + "\n"
            for record in [
                {"id": "a1", "audio_path": "audio/a1.wav", "text": "The cat!"},
                {"id": "i2", "features": feats(3, 1).tolist(), "tokens": [3, 4], "text": "hello"},
                {
                    "id": "f1",
                    "features": feats(2, 2).reshape(-1).tolist(),
                    "rows": 2,
                    "cols": F,
                    "tokens": "5 6",
                },
                {"id": "t1", "features_path": "feats/t1.features.txt", "rows": 4, "cols": F, "text": "A dog"},
                {"id": "n1", "features_path": "feats/n1.npy", "tokens": [7]},
            ]
        )
    )
    dev = tmp_path / "dev.parquet"
    audio_struct = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    pq.write_table(
        pa.table(
            {
                "utt_id": ["hf1", "hf2"],
                "sentence": ["the mat", "a cat"],
                "audio": pa.array(
                    [
                        {"bytes": make_wav(seconds=0.7), "path": "x.wav"},
                        {"bytes": make_wav(0.4), "path": None},
                    ],
                    type=audio_struct,
                ),
            }
        ),
        dev,
        row_group_size=1,  # two row groups: the payload reader must walk across them
    )
    test = tmp_path / "test.tsv"
    test.write_text("features_path\trows\tcols\ttokens\ttext\nfeats/n1.npy\t5\t80\t8 9\tthe end\n")
    return {
        "train.raw_manifest": Manifest(train),
        "dev.raw_manifest": Manifest(dev),
        "test.raw_manifest": Manifest(test),
        "test_open.raw_manifest": Manifest(None),  # a corpus without an open test set
    }


def run_both_stages(
    tmp_path, raw_splits, spm_model, project_params, jobs: int = 1, executor: dict | None = None
) -> tuple:
    params = {"transcripts": project_params["transcripts"], "tokenizer": project_params["tokenizer"]}
    transcripts = run_stage(transcripts_pipeline(), raw_splits, params=params)
    manifests = {f"{s}.manifest": transcripts.load(f"{s}.manifest") for s in SPLITS}
    shards = feature_shard_datasets(tmp_path)
    features = run_stage(
        features_pipeline(),
        {**manifests, "tokenizer_model": spm_model},
        shards,
        params={
            **params,
            "features": {**project_params["features"], "jobs": jobs, "executor": executor},
            "train": project_params["train"],
            "augmentation": None,
        },
    )
    return transcripts, features


def shard_rows(catalog, split: str) -> dict[str, dict]:
    [path] = catalog.load(f"{split}.feature_shards")
    return {row["id"]: row for row in pq.read_table(path).to_pylist()}


def test_every_form_is_kept_by_transcripts_with_its_kind_and_without_payloads(
    tmp_path, raw_splits, spm_model, project_params
):
    transcripts, _ = run_both_stages(tmp_path, raw_splits, spm_model, project_params)
    train = transcripts.load("train.manifest")
    assert dict(zip(train["id"], train["kind"], strict=True)) == {
        "a1": "audio_file",
        "i2": "features_inline",
        "f1": "features_inline",
        "t1": "features_file",
        "n1": "features_file",
    }
    assert set(train["source"]) == {str(tmp_path / "train.jsonl")}
    assert (
        "features" not in train.columns and "audio_bytes" not in train.columns
    )  # payloads stay in the source
    assert train.filter(train["id"] == "f1")[["rows", "cols"]].row(0) == (2, F)
    assert transcripts.load("dev.manifest")["kind"].to_list() == ["audio_bytes", "audio_bytes"]
    assert transcripts.load("test.manifest")["kind"].to_list() == ["features_file"]
    for split in ("train", "dev", "test"):
        report = transcripts.load(f"{split}.transcripts_report")
        assert report["skipped"] == 0 and report["kept"] == report["seen"]


# 2 and dask: payload rows (embedded audio, inline features) and file paths travel to worker processes
@pytest.mark.parametrize("jobs", [1, 2, "dask"])
def test_the_features_stage_passes_precomputed_features_through_and_extracts_audio(
    tmp_path, raw_splits, spm_model, project_params, jobs, request
):
    executor = None
    if jobs == "dask":
        jobs, executor = 2, {"kind": "dask", "address": request.getfixturevalue("dask_address")}
    _, features = run_both_stages(tmp_path, raw_splits, spm_model, project_params, jobs, executor)
    tokenizer = CTCTokenizer(spm_model)
    train = shard_rows(features, "train")
    assert list(train) == ["a1", "i2", "f1", "t1", "n1"]  # manifest order, nothing lost
    expected = {"i2": feats(3, 1), "f1": feats(2, 2), "t1": feats(4, 3), "n1": feats(5, 4)}
    for utt_id, values in expected.items():
        row = train[utt_id]
        assert (row["rows"], row["cols"]) == values.shape
        np.testing.assert_array_equal(np.asarray(row["features"], dtype=np.float32), values.reshape(-1))
        assert row["duration_ms"] == 10 * values.shape[0]  # precomputed: rows x 10 ms
    assert (train["a1"]["rows"], train["a1"]["cols"], train["a1"]["duration_ms"]) == (48, F, 500)
    # Given tokens are kept; text without tokens is tokenized with the trained tokenizer.
    assert [train[i]["tokens"] for i in ("i2", "f1", "n1")] == [[3, 4], [5, 6], [7]]
    assert train["t1"]["tokens"] == tokenizer.encode("a dog")
    assert train["a1"]["tokens"] == tokenizer.encode("the cat")

    dev = shard_rows(features, "dev")
    assert [(row["rows"], row["duration_ms"]) for row in dev.values()] == [(68, 700), (38, 400)]
    assert dev["hf1"]["tokens"] == tokenizer.encode("the mat")
    test = shard_rows(features, "test")
    assert test["feats__n1"]["tokens"] == [8, 9]
    np.testing.assert_array_equal(np.asarray(test["feats__n1"]["features"]), feats(5, 4).reshape(-1))
    for split in ("train", "dev", "test"):
        report = features.load(f"{split}.extraction_report")
        assert report["skipped"] == 0 and report["kept"] == report["seen"] == len(shard_rows(features, split))


def test_a_payload_whose_source_changed_is_counted_not_lost(tmp_path, raw_splits, spm_model, project_params):
    params = {"transcripts": project_params["transcripts"]}
    transcripts = run_stage(transcripts_pipeline(), raw_splits, params=params)
    (tmp_path / "train.jsonl").write_text(json.dumps({"id": "other", "features": [[1.0] * F]}) + "\n")
    from asr_pipeline.pipelines.features.nodes import extract_features

    chunks = list(
        extract_features(
            transcripts.load("train.manifest"), spm_model, project_params["features"], {"blank_id": 0}
        )
    )
    report = chunks[-1][1]
    assert report["skipped_by_reason"] == {"record not found in its source": 2}  # i2 and f1 were inline
    assert report["kept"] + report["skipped"] == report["seen"] == 5
    assert "rerun it" in report["first_skipped"]["record not found in its source"][0]


def test_extract_features_cli_takes_one_manifest_of_each_form(tmp_path, raw_splits, spm_model):
    from asr_pipeline.cli import main

    model = tmp_path / "tok.model"
    model.write_bytes(spm_model)
    # The tokenizer's sidecar says how its text was normalized; extract-features must do the same.
    normalization = {"unicode_form": "NFKC", "lowercase": False, "strip_punctuation": True}
    (tmp_path / "tok.json").write_text(json.dumps({"normalization": normalization}))
    inputs = [str(raw_splits[f"{split}.raw_manifest"].path) for split in ("train", "dev", "test")]
    output = tmp_path / "all.parquet"
    argv = ["extract-features", "--output", str(output), "--tokenizer", str(model), "--input-dim", str(F)]
    assert main([*argv, *(part for path in inputs for part in ("--input", path))]) == 0

    rows = {row["id"]: row for row in pq.read_table(output).to_pylist()}
    assert list(rows) == ["a1", "i2", "f1", "t1", "n1", "hf1", "hf2", "feats__n1"]
    np.testing.assert_array_equal(
        np.asarray(rows["i2"]["features"], dtype=np.float32), feats(3, 1).reshape(-1)
    )
    np.testing.assert_array_equal(
        np.asarray(rows["f1"]["features"], dtype=np.float32), feats(2, 2).reshape(-1)
    )
    assert (rows["t1"]["rows"], rows["n1"]["rows"], rows["hf1"]["rows"]) == (4, 5, 68)
    assert (
        rows["a1"]["text"] == "The cat" and rows["t1"]["text"] == "A dog"
    )  # case kept, punctuation stripped
    assert rows["a1"]["tokens"] == CTCTokenizer(spm_model).encode("The cat")
