import subprocess

import numpy as np
import pytest

from asr_pipeline.io.audio import AudioDecodeError, load_audio
from tests.conftest import make_wav


def test_wav_is_resampled_to_16k_mono(tmp_path):
    path = tmp_path / "tone.wav"
    path.write_bytes(make_wav(seconds=0.5, sample_rate=22050, channels=2))
    waveform = load_audio(path, 16000)
    assert waveform.dtype == np.float32
    assert waveform.shape == (8000,)  # 0.5 s * 16 kHz
    assert 0.25 < np.abs(waveform).max() < 0.35


def test_bytes_decode_like_files(tmp_path):
    data = make_wav(seconds=0.25, sample_rate=16000)
    path = tmp_path / "tone.wav"
    path.write_bytes(data)
    np.testing.assert_array_equal(load_audio(data), load_audio(path))


def test_formats_libsndfile_refuses_go_through_ffmpeg(tmp_path):
    wav = tmp_path / "tone.wav"
    wav.write_bytes(make_wav(seconds=1.0, sample_rate=44100))
    m4a = tmp_path / "tone.m4a"
    subprocess.run(["ffmpeg", "-v", "error", "-i", str(wav), str(m4a)], check=True)
    waveform = load_audio(m4a, 16000)
    assert abs(waveform.shape[0] - 16000) < 2000  # AAC adds priming samples


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "not found"), (b"", "empty"), (b"RIFF\x00\x00garbage" * 10, "cannot decode")],
)
def test_bad_audio_names_the_file(tmp_path, content, message):
    path = tmp_path / "bad.wav"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(AudioDecodeError, match=message) as error:
        load_audio(path)
    assert "bad.wav" in str(error.value)


def test_truncated_wav_is_rejected_or_shorter(tmp_path):
    data = make_wav(seconds=0.5)
    path = tmp_path / "cut.wav"
    path.write_bytes(data[:40])  # header only, no samples
    with pytest.raises(AudioDecodeError):
        load_audio(path)
