"""On-the-fly training data: indexing raw manifests without decoding, featurizing per item, skipping bad
records, seeded waveform augmentation, and telling shards from raw manifests."""

from __future__ import annotations

import json
import os
import pickle
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from torch.utils.data import DataLoader

from asr_pipeline.data.audio_dataset import (
    AudioDataset,
    EpochTaggedBatchSampler,
    build_audio_index,
    planned_frontend,
)
from asr_pipeline.data.collate import SkippedExample, collate_batch
from asr_pipeline.data.sampler import LengthBucketedBatchSampler
from asr_pipeline.data.sources import is_feature_shard, resolve_manifests
from asr_pipeline.features.augment import SpecAugment, WaveformAugment
from asr_pipeline.features.fbank import compute_fbank
from asr_pipeline.io.audio import A_DIRECTORY, NOT_AUDIO, NOT_REGULAR, load_audio
from asr_pipeline.io.report import SkipReport
from asr_pipeline.text.tokenizer import CTCTokenizer
from tests.conftest import make_wav

from .conftest import write_random_shard

FRONTEND = planned_frontend("fbank")  # squeezeformer's: 80 bins


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


@pytest.fixture
def tone_manifest(tmp_path: Path) -> Path:
    """Six tones at three sample rates and odd lengths, with token ids, as a JSONL manifest."""
    specs = [(16000, 0.333), (22050, 0.7), (8000, 1.3), (44100, 0.51), (16000, 1.0), (22050, 0.26)]
    records = []
    for i, (rate, seconds) in enumerate(specs):
        (tmp_path / f"tone{i}.wav").write_bytes(make_wav(seconds, rate, freq=200.0 + 50 * i))
        records.append({"id": f"tone{i}", "audio_path": f"tone{i}.wav", "tokens": [1 + i % 3, 2]})
    return write_jsonl(tmp_path / "train.jsonl", records)


def index_of(
    *manifests: Path, tokenizer: CTCTokenizer | None = None, frontend=FRONTEND
) -> tuple[pa.Table, SkipReport]:
    report = SkipReport()
    return build_audio_index(manifests, frontend, tokenizer, report), report


def test_header_based_frame_counts_equal_the_real_fbank_frame_counts(tone_manifest):
    index, report = index_of(tone_manifest)
    dataset = AudioDataset(index, FRONTEND)

    real = [dataset[i]["features"].shape[0] for i in range(len(dataset))]

    # e.g. 0.7 s at 22050 Hz: 15435 samples -> ceil(15435 * 16000 / 22050) = 11200 at 16 kHz
    # -> 1 + (11200 - 400) // 160 = 68 frames.
    assert dataset.num_frames.tolist() == real
    assert real[1] == 68
    assert dataset.duration_ms.tolist() == [333, 700, 1300, 510, 1000, 260]
    assert (report.seen, report.kept, report.skipped) == (6, 6, 0)


def test_items_are_the_fbank_of_the_decoded_audio_with_the_manifest_tokens(tone_manifest, tmp_path):
    index, _ = index_of(tone_manifest)

    item = AudioDataset(index, FRONTEND)[2]

    expected = compute_fbank(load_audio(tmp_path / "tone2.wav", 16000))
    assert item["id"] == "tone2"
    assert item["features"].shape == (128, 80)  # (T, F): 1.3 s -> 1 + (20800 - 400) // 160
    np.testing.assert_array_equal(item["features"].numpy(), expected)
    assert item["tokens"].tolist() == [3, 2]
    assert item["text"] == "3 2", "without text or tokenizer, the reference is the token ids"


def test_a_frame_count_hint_is_trusted_without_reading_the_audio(tmp_path):
    folder = tmp_path / "clips"
    folder.mkdir()
    (folder / "a.wav").write_bytes(b"not audio at all")
    (folder / "a.rows").write_text("42\n")
    (folder / "a.tokens").write_text("1 2 3")

    index, report = index_of(folder)

    assert index.column("rows").to_pylist() == [42]
    assert index.column("duration_ms").to_pylist() == [435]  # 25 ms window + 41 * 10 ms shifts
    assert report.skipped == 0
    skipped = AudioDataset(index, FRONTEND)[0]
    assert isinstance(skipped, SkippedExample) and skipped.reason == NOT_AUDIO


def test_records_with_text_only_are_tokenized_with_the_run_tokenizer(tmp_path, spm_model):
    tokenizer = CTCTokenizer(spm_model)
    (tmp_path / "a.wav").write_bytes(make_wav(0.5, 16000))
    manifest = write_jsonl(tmp_path / "m.jsonl", [{"audio_path": "a.wav", "text": "the quick brown fox"}])

    index, _ = index_of(manifest, tokenizer=tokenizer)

    assert index.column("tokens").to_pylist() == [tokenizer.encode("the quick brown fox")]
    assert index.column("text").to_pylist() == ["the quick brown fox"]


def test_bad_records_are_skipped_and_counted_by_reason(tmp_path, spm_model):
    (tmp_path / "good.wav").write_bytes(make_wav(0.5, 16000))
    (tmp_path / "garbage.wav").write_bytes(b"RIFF....WAVEfmt nothing useful")
    (tmp_path / "tiny.wav").write_bytes(make_wav(0.01, 16000))  # 160 samples: no 400-sample window
    records = [
        {"id": "good", "audio_path": "good.wav", "tokens": [1, 2]},
        {"id": "missing", "audio_path": "missing.wav", "tokens": [1]},
        {"id": "garbage", "audio_path": "garbage.wav", "tokens": [1]},
        {"id": "tiny", "audio_path": "tiny.wav", "tokens": [1]},
        {"id": "untranscribed", "audio_path": "good.wav"},
        {"id": "text-only", "audio_path": "good.wav", "text": "a cat"},  # no tokenizer given
        {"id": "features", "features_path": "x.npy", "rows": 3, "cols": 80, "tokens": [1]},
    ]
    manifest = write_jsonl(tmp_path / "m.jsonl", records)

    index, report = index_of(manifest)

    assert index.column("id").to_pylist() == ["good"]
    assert dict(report.counts) == {
        "undecodable audio": 1,
        "audio shorter than one frame": 1,
        "no text and no tokens": 1,
        "text but no tokens, and no tokenizer": 1,
        "missing file": 2,  # the missing audio file, and the missing feature file
    }
    assert any("missing.wav" in example for example in report.examples["missing file"])


def test_a_fifo_or_a_folder_in_a_manifest_is_counted_by_what_it_is_and_never_opened(tmp_path):
    (tmp_path / "good.wav").write_bytes(make_wav(0.5, 16000))
    os.mkfifo(tmp_path / "pipe.wav")  # soundfile.info blocks forever opening it for reading
    (tmp_path / "folder.wav").mkdir()
    records = [
        {"id": "good", "audio_path": "good.wav", "tokens": [1, 2]},
        {"id": "pipe", "audio_path": "pipe.wav", "tokens": [1]},
        {"id": "folder", "audio_path": "folder.wav", "tokens": [1]},
    ]
    manifest = write_jsonl(tmp_path / "m.jsonl", records)
    indexed: list = []
    worker = threading.Thread(target=lambda: indexed.append(index_of(manifest)), daemon=True)

    worker.start()
    worker.join(timeout=30)
    if worker.is_alive():  # unblock the reader that opened the FIFO, then fail
        with open(tmp_path / "pipe.wav", "wb"):
            pass
        pytest.fail("indexing opened the FIFO and blocked on it")
    index, report = indexed[0]

    assert index.column("id").to_pylist() == ["good"]
    assert dict(report.counts) == {NOT_REGULAR: 1, A_DIRECTORY: 1}


def test_precomputed_features_are_used_as_given_and_checked(tmp_path):
    inline = np.arange(3 * 80, dtype=np.float32).reshape(3, 80) / 100
    from_file = np.linspace(-1, 1, 5 * 80, dtype=np.float32).reshape(5, 80)
    np.save(tmp_path / "f.npy", from_file)
    np.save(tmp_path / "narrow.npy", from_file[:, :40])
    records = [
        {"id": "inline", "features": inline.tolist(), "tokens": [1, 2]},
        {"id": "file", "features_path": "f.npy", "tokens": [3]},  # shape read from the file
        {"id": "file-hinted", "features_path": "f.npy", "rows": 5, "cols": 80, "tokens": [3]},
        {"id": "narrow", "features_path": "narrow.npy", "tokens": [3]},
        {"id": "nan", "features": [[float("nan")] * 80], "tokens": [1]},
    ]
    manifest = write_jsonl(tmp_path / "m.jsonl", records)

    index, report = index_of(manifest)
    dataset = AudioDataset(index, FRONTEND)

    assert index.column("id").to_pylist() == ["inline", "file", "file-hinted"]
    assert dataset.num_frames.tolist() == [3, 5, 5]
    assert index.column("duration_ms").to_pylist() == [30, 50, 50]  # rows * 10 ms
    np.testing.assert_array_equal(dataset[0]["features"].numpy(), inline)
    np.testing.assert_array_equal(dataset[1]["features"].numpy(), from_file)
    np.testing.assert_array_equal(dataset[2]["features"].numpy(), from_file)
    assert dict(report.counts) == {"feature width differs from input_dim": 1, "NaN/Inf features": 1}


def test_a_feature_file_broken_after_indexing_is_a_skipped_item_not_a_crash(tmp_path):
    np.save(tmp_path / "f.npy", np.ones((4, 80), dtype=np.float32))
    manifest = write_jsonl(
        tmp_path / "m.jsonl", [{"id": "f", "features_path": "f.npy", "rows": 4, "cols": 80, "tokens": [1]}]
    )
    index, _ = index_of(manifest)
    np.save(tmp_path / "f.npy", np.full((4, 80), np.inf, dtype=np.float32))

    item = AudioDataset(index, FRONTEND)[0]

    assert isinstance(item, SkippedExample)
    assert item.reason == "NaN/Inf features"


def test_embedded_audio_bytes_of_a_parquet_manifest_are_measured_and_decoded(tmp_path):
    wavs = [make_wav(0.4, 16000, freq=300.0), make_wav(0.9, 22050, freq=500.0)]
    table = pa.table({"id": ["x", "y"], "audio_bytes": pa.array(wavs, pa.binary()), "tokens": [[1, 2], [3]]})
    pq.write_table(table, tmp_path / "embedded.parquet")

    index, _ = index_of(tmp_path / "embedded.parquet")
    dataset = AudioDataset(index, FRONTEND)

    assert index.column("audio_path").to_pylist() == [None, None]
    assert dataset.num_frames.tolist() == [dataset[i]["features"].shape[0] for i in range(2)] == [38, 88]


def test_augmentation_is_a_function_of_seed_epoch_and_example_only(tone_manifest):
    index, _ = index_of(tone_manifest)
    augmented = AudioDataset(
        index,
        FRONTEND,
        waveform_augment=WaveformAugment(-6.0, 6.0, noise_std=0.01),
        spec_augment=SpecAugment(2, 10, 2, 8),
        seed=7,
    )
    twin = pickle.loads(pickle.dumps(augmented))  # as a spawned worker would hold it
    plain = AudioDataset(index, FRONTEND)

    first = augmented[(0, 4)]["features"]
    assert torch.equal(first, twin[(0, 4)]["features"]), "same seed, epoch, example: same draw"
    assert not torch.equal(first, augmented[(1, 4)]["features"]), "another epoch draws again"
    assert not torch.equal(first, plain[4]["features"])
    assert torch.equal(plain[4]["features"], plain[4]["features"]), "no augmentation: deterministic"


def test_an_augmenting_dataset_refuses_keys_without_the_epoch(tone_manifest):
    index, _ = index_of(tone_manifest)
    dataset = AudioDataset(index, FRONTEND, waveform_augment=WaveformAugment(noise_std=0.1))

    with pytest.raises(ValueError, match="EpochTaggedBatchSampler"):
        dataset[0]


def test_waveform_gain_scales_by_the_drawn_decibels_and_noise_has_the_given_spread():
    waveform = np.full(20000, 0.1, dtype=np.float32)

    louder = WaveformAugment(6.0, 6.0)(waveform, np.random.default_rng(0))
    noisy = WaveformAugment(noise_std=0.05)(waveform, np.random.default_rng(0))

    np.testing.assert_allclose(louder, 0.1 * 10 ** (6 / 20), rtol=1e-6)  # +6 dB ~ x1.995
    assert abs(float(np.std(noisy - waveform)) - 0.05) < 0.002
    assert np.all(waveform == np.float32(0.1)), "the input is left untouched"


def test_uniform_noise_stays_within_its_amplitude_with_the_spread_of_a_uniform_draw():
    waveform = np.zeros(20000, dtype=np.float32)

    noise = WaveformAugment(noise_std=0.05, noise_kind="uniform")(waveform, np.random.default_rng(0))

    assert float(np.abs(noise).max()) <= 0.05 and float(np.abs(noise).max()) > 0.049
    assert abs(float(np.std(noise)) - 0.05 / np.sqrt(3)) < 0.001  # U(-a, a) has std a / sqrt(3)


def test_an_unknown_noise_kind_is_refused_naming_the_kinds():
    with pytest.raises(ValueError, match="noise_kind must be one of gaussian, uniform"):
        WaveformAugment(noise_std=0.1, noise_kind="pink")


def test_workers_yield_exactly_the_batches_of_the_main_process_with_augmentation(tone_manifest):
    index, _ = index_of(tone_manifest)
    dataset = AudioDataset(
        index,
        FRONTEND,
        waveform_augment=WaveformAugment(-3.0, 3.0, 0.005),
        spec_augment=SpecAugment(),
        seed=1,
    )
    sampler = LengthBucketedBatchSampler(dataset.num_frames, budget=300, seed=2)
    sampler.set_epoch(1)

    def batches(num_workers: int) -> list:
        loader = DataLoader(
            dataset,
            batch_sampler=EpochTaggedBatchSampler(sampler),
            collate_fn=collate_batch,
            num_workers=num_workers,
            **({"persistent_workers": True, "prefetch_factor": 1} if num_workers else {}),
        )
        return [(batch.ids, batch.features) for batch in loader]

    in_process, in_workers = batches(0), batches(2)

    assert [ids for ids, _ in in_workers] == [ids for ids, _ in in_process]
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(in_workers, in_process, strict=True))


def test_the_collate_drops_skipped_items_and_lists_them():
    item = {
        "id": "a",
        "features": torch.ones(3, 4),
        "tokens": torch.tensor([1]),
        "text": "a",
        "duration_ms": 30,
    }
    bad = SkippedExample("b", "m.jsonl:2", "undecodable audio", "truncated WAV")

    batch = collate_batch([bad, item])
    empty = collate_batch([bad], feature_dim=4)

    assert batch.ids == ["a"] and batch.skipped == ["m.jsonl:2: undecodable audio (truncated WAV)"]
    assert len(empty) == 0 and empty.features.shape == (0, 0, 4) and empty.skipped == batch.skipped
    assert empty.to("cpu").skipped == batch.skipped, "moving a batch keeps its skip list"
    with pytest.raises(ValueError, match="every item of the batch was skipped"):
        collate_batch([bad])


# --- shards or raw manifests -----------------------------------------------------------------------------
def test_feature_shards_are_told_from_raw_parquet_manifests_by_their_columns(tmp_path, two_shards):
    raw = tmp_path / "raw.parquet"
    pq.write_table(pa.table({"id": ["x"], "audio_bytes": pa.array([b"RIFF"], pa.binary())}), raw)

    assert is_feature_shard(two_shards[0])
    assert not is_feature_shard(raw)
    assert resolve_manifests([two_shards[0].parent]).paths == [str(p) for p in two_shards]
    assert resolve_manifests([raw]).kind == "raw"


def test_a_folder_without_shards_is_one_raw_manifest(tone_manifest):
    resolved = resolve_manifests([tone_manifest.parent])

    assert (resolved.kind, resolved.paths) == ("raw", [str(tone_manifest.parent)])


def test_a_split_mixing_shards_and_raw_manifests_is_refused_naming_both(tmp_path, tone_manifest):
    (tmp_path / "shards").mkdir()
    shard = write_random_shard(tmp_path / "shards" / "shard-00000.parquet", [5, 6])

    with pytest.raises(ValueError, match=r"mix feature shards \(.*shard-00000.parquet\) and raw manifests"):
        resolve_manifests([shard, tone_manifest])


def test_w2v_bert_frame_estimates_count_stacked_pairs_of_fbank_frames():
    frontend = planned_frontend("w2v-bert")

    for seconds in (0.02, 0.035, 0.333, 1.0, 1.27):
        waveform = np.random.default_rng(0).uniform(-0.3, 0.3, round(16000 * seconds)).astype(np.float32)
        assert frontend.num_frames(len(waveform)) == frontend(waveform).shape[0], seconds
    assert frontend.feature_dim == 160
    # 3 stacked frames need 6 Kaldi frames: 400 + 5 * 160 samples.
    assert (
        frontend.min_samples(3) == 1200 and frontend.num_frames(1200) == 3 and frontend.num_frames(1199) == 2
    )


def test_a_precomputed_frame_lasts_one_frame_shift_of_the_frontend(tmp_path):
    # w2v-bert stacks pairs of 10 ms frames: one of its frames covers 20 ms of audio.
    manifest = write_jsonl(
        tmp_path / "m.jsonl", [{"id": "w", "features": np.zeros((7, 160)).tolist(), "tokens": [1]}]
    )

    index, _ = index_of(manifest, frontend=planned_frontend("w2v-bert"))

    assert index.column("duration_ms").to_pylist() == [140]


def test_kaldi_segments_are_measured_and_decoded_as_their_own_stretch_of_the_recording(tmp_path, spm_model):
    from tests.io.audio_files import write_ramp

    data = tmp_path / "kaldi"
    write_ramp(data / "meeting.wav", seconds=2.0)
    (data / "wav.scp").write_text("meeting meeting.wav\n")
    (data / "text").write_text("m-a the cat\nm-b a dog\nm-c the mat\n")
    (data / "segments").write_text("m-a meeting 0.00 0.50\nm-b meeting 0.50 1.25\nm-c meeting 1.25 -1\n")
    tokenizer = CTCTokenizer(spm_model)

    index, report = index_of(data, tokenizer=tokenizer)
    dataset = AudioDataset(index, FRONTEND)

    assert report.skipped == 0
    assert index.column("rows").to_pylist() == [48, 73, 73], "from the header and the segment, not decoded"
    assert index.column("duration_ms").to_pylist() == [500, 750, 750]
    assert [dataset[i]["features"].shape[0] for i in range(3)] == [48, 73, 73]
    waveform = load_audio(data / "meeting.wav")  # (32000,)
    expected = torch.from_numpy(np.ascontiguousarray(FRONTEND(waveform[8000:20000])))
    assert torch.equal(dataset[1]["features"], expected), "m-b is samples 8000..20000 of the recording"
