"""training.config.data: ``--pad-to-buckets`` reads a count or frame lengths; the data section refuses bucket
lists, gain ranges and prefetching that cannot work, and knows when waveform augmentation is on."""

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
