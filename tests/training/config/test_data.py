"""training.config.data: ``--pad-to-buckets`` reads a count or frame lengths; the data section refuses bucket
lists, gain ranges, prefetching and chunking that cannot work, and knows when waveform augmentation is on and
how far apart chunks start."""

from __future__ import annotations

import pytest

from asr_pipeline.training.config.data import DataConfig, bucket_spec


def data(**fields) -> DataConfig:
    return DataConfig(train_manifests=["train.parquet"], **fields)


@pytest.mark.parametrize(("text", "spec"), [("8", 8), ("400,800,1600", [400, 800, 1600]), ("400,", [400])])
def test_pad_to_buckets_is_a_count_or_comma_separated_lengths(text, spec):
    assert bucket_spec(text) == spec


def test_pad_to_buckets_that_is_not_numbers_says_what_it_takes():
    with pytest.raises(
        ValueError, match=r"--pad-to-buckets: expected a count \(8\) or ascending frame lengths"
    ):
        bucket_spec("short,long")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"pad_to_buckets": 0}, r"pad_to_buckets must be a count >= 1 or a list of frame lengths, got 0"),
        (
            {"pad_to_buckets": [800, 400]},
            r"pad_to_buckets=\[800, 400\]: give strictly ascending frame lengths",
        ),
        ({"pad_to_buckets": []}, r"give strictly ascending frame lengths >= 1"),
        ({"waveform_gain_min_db": 3.0, "waveform_gain_max_db": -3.0}, r"waveform_gain_min_db=3.0 is above"),
        ({"prefetch_factor": 2}, r"prefetch_factor=2 needs num_workers > 0"),
        ({"batch_size": 0}, r"batch_size must be > 0"),
        ({"spec_time_masks": -1}, r"spec_time_masks must be >= 0"),
        ({"chunk_frames": 400}, r"^chunk_frames needs per-frame targets: set alignment \(--alignment"),
        ({"chunk_step_frames": 200}, r"chunk_step_frames=200 spaces chunks, but chunk_frames is unset"),
        (
            {"alignment": "a.parquet", "chunk_frames": 200, "chunk_step_frames": 400},
            r"chunk_step_frames=400 is above chunk_frames=200: the frames between two chunks would never",
        ),
        ({"alignment": "a.parquet", "chunk_frames": 0}, r"chunk_frames must be > 0"),
    ],
)
def test_the_data_section_refuses_what_cannot_work_naming_the_field(fields, message):
    with pytest.raises(ValueError, match=message):
        data(**fields)


def test_waveform_augmentation_is_on_when_any_gain_or_noise_is_set():
    assert not data(
        waveform_gain_min_db=0.0, waveform_gain_max_db=0.0, waveform_noise_std=0.0
    ).waveform_augmentation
    assert data(waveform_gain_min_db=-6.0, waveform_gain_max_db=0.0).waveform_augmentation
    assert data(waveform_noise_std=0.01).waveform_augmentation


def test_chunking_is_off_by_default_and_steps_by_the_chunk_size_unless_told():
    assert data().chunk_frames is None and data().chunk_step == 0
    assert data(alignment="a.parquet", chunk_frames=400).chunk_step == 400
    assert data(alignment="a.parquet", chunk_frames=400, chunk_step_frames=200).chunk_step == 200
