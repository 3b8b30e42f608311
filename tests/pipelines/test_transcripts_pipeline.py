import json

from asr_pipeline.io.datasets import Manifest
from asr_pipeline.pipelines.transcripts import create_pipeline
from tests.conftest import make_wav
from tests.pipelines.conftest import run_stage


def _raw_splits(tmp_path):
    train = tmp_path / "train"
    train.mkdir()
    for name, text in [("a", "Hello, World!"), ("b", "  "), ("c", "Good  MORNING")]:
        (train / f"{name}.wav").write_bytes(make_wav())
        (train / f"{name}.txt").write_text(text)
    dev = tmp_path / "dev.jsonl"
    dev.write_text(
        "\n".join(
            [
                json.dumps({"id": "d1", "audio_path": "a.wav", "text": "One"}),
                json.dumps({"id": "d1", "audio_path": "b.wav", "text": "Two"}),
                '{"broken": ',
                json.dumps({"id": "d3", "text": "no audio"}),
            ]
        )
        + "\n"
    )
    test = tmp_path / "test.jsonl"
    test.write_text(json.dumps({"id": "t1", "audio_path": "a.wav", "transcript": "Three."}) + "\n")
    return {
        "train.raw_manifest": Manifest(train),
        "dev.raw_manifest": Manifest(dev),
        "test.raw_manifest": Manifest(test),
    }


def test_transcripts_stage_normalizes_every_split_and_counts_skips(tmp_path, project_params):
    catalog = run_stage(
        create_pipeline(), _raw_splits(tmp_path), params={"transcripts": project_params["transcripts"]}
    )
    train = catalog.load("train.manifest")
    assert train["text"].to_list() == ["hello world", "good morning"]
    assert train.columns == [
        "id", "location", "source", "kind", "audio_path", "features_path", "rows", "cols", "text", "tokens",
        "offset_sec", "duration_sec",
    ]  # fmt: skip
    assert set(train["kind"]) == {"audio_file"}
    assert catalog.load("tokenizer_corpus") == "hello world\ngood morning\n"
    assert catalog.load("train.transcripts_report")["skipped_by_reason"] == {"empty transcript": 1}
    dev_report = catalog.load("dev.transcripts_report")
    assert dev_report["skipped_by_reason"] == {
        "duplicate id": 1,
        "malformed JSON": 1,
        "no audio or features": 1,
    }
    assert (dev_report["seen"], dev_report["kept"]) == (4, 1)
    assert catalog.load("test.manifest")["text"].to_list() == ["three"]
