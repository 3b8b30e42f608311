"""Features are computed once per input and extractor, whatever the training options, and read in memory or
streamed shard by shard in the same order."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf

from asr_pipeline.hf_finetune.features import FeatureShards, condition_split, featurize, window_features
from asr_pipeline.io.audio import load_audio
from asr_pipeline.io.shards import records_to_table, shard_name, write_shard
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


def write_feature_shards(folder, shards: int, rows_per_shard: int):
    """``shards`` shards of ``rows_per_shard`` tiny (4, 2) feature rows each, ids u<shard>-<row>."""
    folder.mkdir(parents=True)
    for shard in range(shards):
        records = [{"id": f"u{shard}-{row}", "features": np.full((4, 2), shard + row / 10, np.float32),
                    "tokens": [], "duration_ms": 100, "text": "a"} for row in range(rows_per_shard)]  # fmt: skip
        write_shard(records_to_table(records), folder / shard_name(shard))
    return folder


def test_streamed_and_in_memory_shards_give_the_same_examples_in_the_same_order(tmp_path):
    folder = write_feature_shards(tmp_path / "shards", shards=4, rows_per_shard=3)
    streamed, in_memory = FeatureShards(folder, streaming=True), FeatureShards(folder)
    order = streamed.epoch_order(seed=7)
    assert order == in_memory.epoch_order(seed=7) and sorted(order) == list(range(12))
    assert order != streamed.epoch_order(seed=8)
    shards_in_order = [order[i] // 3 for i in range(0, 12, 3)]
    assert all(order[i] // 3 == order[i - i % 3] // 3 for i in range(12)), "a shard at a time"
    assert sorted(shards_in_order) == [0, 1, 2, 3]
    for item in order:
        a, b = streamed[item], in_memory[item]
        assert a["id"] == b["id"] and np.array_equal(a["features"], b["features"])


@pytest.mark.parametrize("shards", [2, 6])
def test_streaming_holds_one_shard_whatever_the_corpus_size(tmp_path, shards):
    folder = write_feature_shards(tmp_path / "shards", shards=shards, rows_per_shard=5)
    streamed = FeatureShards(folder, streaming=True)
    ids = [streamed[item]["id"] for item in streamed.epoch_order(seed=0)]
    ids += [streamed[item]["id"] for item in range(len(streamed))]  # validation's pass, in index order
    assert len(set(ids)) == 5 * shards
    assert streamed.peak_rows_held == 5  # one shard, however many there are
    assert FeatureShards(folder).peak_rows_held == 5 * shards  # in memory: the whole corpus


NOISY = {
    "seed": 7,
    "noisy": {"kind": "noise", "noise": "white", "snr_db": [5, 15]},
    "fast": {"kind": "speed", "factor": 1.25},
}


def test_a_condition_split_is_the_audio_degraded_as_the_conditions_stage_degrades_it(demo_speech, tmp_path):
    extractor = feature_extractor()
    noisy = condition_split("noisy", NOISY)
    clean = featurize(demo_speech["val"], extractor, tmp_path, max_windows=1, max_audio_sec=30)
    degraded = featurize(
        demo_speech["val"], extractor, tmp_path, max_windows=1, max_audio_sec=30, condition=noisy
    )
    assert degraded.directory != clean.directory and degraded.report["condition"] == "noisy"
    first = json.loads(demo_speech["val"].read_text().splitlines()[0])
    speech = load_audio(demo_speech["val"].parent / first["audio_path"])  # (N,) at 16 kHz
    # The conditions stage's draws: (conditions.seed, utterance id) through features.split.condition_mix.
    expected = window_features(extractor, noisy.augment(first["id"], speech, 16000)[1])
    item = FeatureShards(degraded.directory)[0]
    assert item["id"] == first["id"] and np.array_equal(item["features"], expected)
    assert not np.array_equal(item["features"], FeatureShards(clean.directory)[0]["features"])


def test_a_condition_not_in_params_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match=r"'reverb' is not in params.yaml conditions \(known: fast, noisy\)"):
        condition_split("reverb", NOISY)
