"""Cutting a record's audio to its segment (io/audio_segment.py)."""

import io

import numpy as np
import pytest
import soundfile

from asr_pipeline.io import audio_segment
from asr_pipeline.io.audio import AudioDecodeError, AudioTooLongError, load_audio
from asr_pipeline.io.audio_segment import load_audio_segment, segment_bounds
from tests.io.audio_files import write_audio, write_ramp

RATE = 16000


@pytest.fixture
def ramp(tmp_path):
    """A 2 s FLAC at 16 kHz and its decoded samples (32000,)."""
    path = tmp_path / "rec.flac"
    return path, write_ramp(path, RATE, seconds=2.0)


def test_without_offset_or_duration_it_is_load_audio(ramp):
    path, samples = ramp
    np.testing.assert_array_equal(load_audio_segment(path, RATE), load_audio(path, RATE))
    np.testing.assert_array_equal(load_audio_segment(path, RATE), samples)


def test_a_segment_is_the_samples_from_offset_for_duration(ramp):
    path, samples = ramp
    cut = load_audio_segment(path, RATE, offset_sec=0.5, duration_sec=0.25)
    np.testing.assert_array_equal(cut, samples[8000:12000])  # 0.5 s * 16000 = 8000, + 0.25 s * 16000 = 4000


def test_no_duration_means_to_the_end(ramp):
    path, samples = ramp
    np.testing.assert_array_equal(load_audio_segment(path, RATE, offset_sec=1.75), samples[28000:])


def test_encoded_bytes_are_cut_the_same_way_after_a_whole_decode(ramp):
    path, _ = ramp
    from_bytes = load_audio_segment(path.read_bytes(), RATE, offset_sec=0.5, duration_sec=0.25)
    np.testing.assert_array_equal(from_bytes, load_audio_segment(path, RATE, 0.5, 0.25))


def test_a_resampled_segment_has_the_segments_length_at_the_target_rate(tmp_path):
    path = tmp_path / "rec44.wav"
    write_ramp(path, 44100, seconds=2.0)
    cut = load_audio_segment(path, RATE, offset_sec=0.5, duration_sec=1.0)
    assert cut.shape == (RATE,)  # 1.0 s at 16 kHz
    whole = load_audio(path, RATE)
    # Resampling the segment alone only differs from the whole recording's resampling near the cut edges.
    np.testing.assert_allclose(cut[400:-400], whole[8000 + 400 : 24000 - 400], atol=1e-3)


def test_a_stereo_segment_is_mixed_to_mono(tmp_path):
    path = write_audio(tmp_path / "stereo.wav", seconds=1.0, channels=2)
    cut = load_audio_segment(path, RATE, offset_sec=0.25, duration_sec=0.5)
    np.testing.assert_allclose(cut, load_audio(path, RATE)[4000:12000], atol=1e-6)


def test_an_end_up_to_half_a_second_past_the_recording_is_truncated_to_it(ramp):
    path, samples = ramp
    np.testing.assert_array_equal(load_audio_segment(path, RATE, 1.5, 0.9), samples[24000:])  # ends at 2.4 s


@pytest.mark.parametrize(("offset", "duration"), [(1.5, 1.1), (2.0, 0.5), (3.0, None)])
def test_a_segment_outside_the_recording_is_an_error_naming_file_and_segment(ramp, offset, duration):
    path, _ = ramp
    with pytest.raises(
        AudioDecodeError, match=r"rec\.flac \[.* s to .*\]: the segment lies outside"
    ) as error:
        load_audio_segment(path, RATE, offset, duration)
    assert error.value.reason == "segment outside the audio"


@pytest.mark.parametrize(("offset", "duration"), [(-0.1, 1.0), (0.0, 0.0), (0.0, -1.0), (float("nan"), 1.0)])
def test_an_invalid_segment_is_an_error(ramp, offset, duration):
    path, _ = ramp
    with pytest.raises(AudioDecodeError, match="invalid segment") as error:
        load_audio_segment(path, RATE, offset, duration)
    assert error.value.reason == "invalid segment"


def test_the_length_limit_applies_to_the_segment_not_the_recording(ramp):
    path, _ = ramp  # 2 s
    assert load_audio_segment(path, RATE, 0.0, 0.5, max_duration_sec=1.0).shape == (8000,)
    with pytest.raises(AudioTooLongError, match=r"the segment lasts 1500 ms") as error:
        load_audio_segment(path, RATE, 0.0, 1.5, max_duration_sec=1.0)
    assert error.value.duration_ms == 1500


def test_a_missing_file_is_reported_as_for_a_whole_file(tmp_path):
    with pytest.raises(AudioDecodeError) as error:
        load_audio_segment(tmp_path / "gone.flac", RATE, 0.0, 1.0)
    assert error.value.reason == "missing file"


@pytest.mark.parametrize(
    ("total", "offset", "duration", "expected"),
    [
        (32000, 0.5, 0.25, (8000, 12000)),  # 0.5 * 16000, + 0.25 * 16000
        (32000, 1.0, None, (16000, 32000)),  # to the end
        (32000, 1.5, 0.9, (24000, 32000)),  # 2.4 s ends 0.4 s past 2.0 s: truncated (<= 0.5 s)
        (32000, None, 1.0, (0, 16000)),
    ],
)
def test_segment_bounds_arithmetic(total, offset, duration, expected):
    assert segment_bounds(total, RATE, offset, duration) == expected


def test_a_file_libsndfile_reads_is_seeked_and_only_the_segment_decoded(ramp, monkeypatch):
    path, _ = ramp
    decoded_frames = []

    def spy(source, *args, **kwargs):
        decoded_frames.append(soundfile.info(io.BytesIO(source)).frames)
        return load_audio(source, *args, **kwargs)

    monkeypatch.setattr(audio_segment, "load_audio", spy)
    load_audio_segment(path, RATE, offset_sec=1.0, duration_sec=0.25)
    assert decoded_frames == [4000]  # 0.25 s of the 2 s recording
