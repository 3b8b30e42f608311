"""Features are computed once per input and extractor, whatever the training options."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf

from asr_pipeline.hf_finetune.features import FeatureShards, featurize
from asr_pipeline.io.audio import load_audio
from tests.hf_finetune.conftest import feature_extractor


def test_features_come_from_the_cache_on_a_rerun(demo_speech, tmp_path):
    extractor = feature_extractor()
    first = featurize(demo_speech["train"], extractor, tmp_path, max_windows=1, max_audio_sec=30)
    again = featurize(demo_speech["train"], extractor, tmp_path, max_windows=1, max_audio_sec=30)
    assert (first.reused, again.reused) == (False, True)
    assert again.directory == first.directory and first.report["kept"] == 10
    shards = FeatureShards(first.directory)
    item = shards[0]
    assert item["features"].shape == (400, 16)  # one 4 s window of 16 mel bins, (T, F)
    assert item["text"] == demo_speech["texts"][0]


def test_another_extractor_setting_featurizes_again(demo_speech, tmp_path):
    first = featurize(demo_speech["val"], feature_extractor(), tmp_path, max_windows=1, max_audio_sec=30)
    other = feature_extractor()
    other.dither = 0.5
    second = featurize(demo_speech["val"], other, tmp_path, max_windows=1, max_audio_sec=30)
    assert second.directory != first.directory and not second.reused


def test_utterances_without_text_or_past_the_window_are_skipped_and_counted(demo_speech, tmp_path):
    lines = demo_speech["val"].read_text().splitlines()
    first = json.loads(lines[0])
    speech = load_audio(demo_speech["val"].parent / first["audio_path"])  # (N,) at 16 kHz
    sf.write(tmp_path / "long.wav", np.tile(speech, 4), 16000)  # past the 4 s window
    extra = [
        {**first, "id": "no-text", "text": ""},
        {"id": "long", "audio_path": str(tmp_path / "long.wav"), "text": "x"},
    ]
    manifest = demo_speech["val"].with_name("val-mixed.jsonl")
    manifest.write_text("\n".join([*lines, *map(json.dumps, extra)]) + "\n")
    cached = featurize(manifest, feature_extractor(), tmp_path, max_windows=1, max_audio_sec=30)
    assert cached.report["kept"] == 4
    assert cached.report["skipped"] == {"no transcript": 1, "longer than 4 s": 1}


def test_a_hugging_face_saved_dataset_is_featurized_like_a_manifest(demo_speech, tmp_path):
    datasets = pytest.importorskip("datasets")
    records = [json.loads(line) for line in demo_speech["val"].read_text().splitlines()]
    audio = [
        {"bytes": (demo_speech["val"].parent / r["audio_path"]).read_bytes(), "path": r["audio_path"]}
        for r in records
    ]
    rows = {"id": [r["id"] for r in records], "sentence": [r["text"] for r in records], "audio": audio}
    saved = tmp_path / "saved"
    datasets.Dataset.from_dict(rows).cast_column("audio", datasets.Audio(decode=False)).save_to_disk(
        str(saved), num_shards=2
    )
    from_saved = featurize(saved, feature_extractor(), tmp_path / "a", max_windows=1, max_audio_sec=30)
    from_jsonl = featurize(
        demo_speech["val"], feature_extractor(), tmp_path / "b", max_windows=1, max_audio_sec=30
    )
    a, b = FeatureShards(from_saved.directory), FeatureShards(from_jsonl.directory)
    assert len(a) == len(b) == 4
    assert all(
        np.array_equal(a[i]["features"], b[i]["features"]) and a[i]["text"] == b[i]["text"] for i in range(4)
    )
