import pytest

from asr_pipeline.features.fbank_options import FbankOptions


def test_nonzero_dither_is_rejected_because_shards_must_be_reproducible():
    with pytest.raises(ValueError, match=r"features\.fbank: dither must be 0\.0 \(got 1\.0\)"):
        FbankOptions.from_dict({"dither": 1.0})


@pytest.mark.parametrize(("sample_rate", "expected"), [(16000, (400, 160, 512)), (8000, (200, 80, 256))])
def test_the_frame_sizes_follow_the_rate_and_the_fft_is_the_next_power_of_two(sample_rate, expected):
    options = FbankOptions(sample_rate=sample_rate)

    assert (options.frame_length, options.frame_shift, options.fft_size) == expected
