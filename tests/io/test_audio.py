import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile

from asr_pipeline.io.audio import (
    A_DIRECTORY,
    EMPTY_PATH,
    MISSING,
    NON_FINITE,
    NOT_AUDIO,
    NOT_REGULAR,
    OUT_OF_RANGE,
    OVER_BUDGET,
    TOO_LONG,
    AudioDecodeError,
    AudioTooLongError,
    load_audio,
)
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


FORMATS = ("wav", "flac", "mp3", "ogg", "opus", "m4a", "aac", "webm")
TONE_HZ = 440.0
TONE_SECONDS = 1.0
# Encoders add priming and pad the last frame. Raw AAC (ADTS) has no container to record the trim: 1024
# priming samples plus up to one 1024-sample frame, 0.256 s at 8 kHz (measured: 1.152 s for a 1 s tone).
CODEC_PADDING_S = 0.3


@pytest.fixture(scope="module")
def encoded_tones(tmp_path_factory):
    """{(format, source rate): path} for a 1 s 440 Hz stereo tone encoded by ffmpeg."""
    folder = tmp_path_factory.mktemp("tones")
    tones = {}
    for rate in (44100, 8000):
        for fmt in FORMATS:
            path = folder / f"tone_{rate}.{fmt}"
            tone = f"sine=frequency={TONE_HZ}:sample_rate={rate}:duration={TONE_SECONDS}"
            subprocess.run(
                ["ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", tone, "-ac", "2", str(path)],
                check=True,
            )
            tones[fmt, rate] = path
    return tones


def peak_frequency(waveform: np.ndarray, sample_rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(waveform * np.hanning(len(waveform))))
    return float(np.fft.rfftfreq(len(waveform), 1 / sample_rate)[spectrum.argmax()])


@pytest.mark.parametrize("source_kind", ["file", "bytes"])
@pytest.mark.parametrize("rate", [44100, 8000])
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_decodes_to_a_mono_16k_tone(encoded_tones, fmt, rate, source_kind):
    path = encoded_tones[fmt, rate]
    source = path if source_kind == "file" else path.read_bytes()
    waveform = load_audio(source, 16000, name=path.name)
    assert waveform.dtype == np.float32
    assert waveform.ndim == 1
    assert abs(len(waveform) - 16000 * TONE_SECONDS) <= 16000 * CODEC_PADDING_S
    assert abs(peak_frequency(waveform, 16000) - TONE_HZ) < 3.0


def test_bytes_without_a_name_still_reach_ffmpeg(encoded_tones):
    waveform = load_audio(encoded_tones["m4a", 44100].read_bytes(), 16000)
    assert abs(peak_frequency(waveform, 16000) - TONE_HZ) < 3.0


def test_m4a_bytes_with_the_index_at_the_end_decode_fully(tmp_path):
    # moov atom at the end (ffmpeg's default without +faststart): a pipe could not seek back to it.
    path = tmp_path / "long.m4a"
    tone = "sine=frequency=440:sample_rate=44100:duration=20"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", tone, str(path)], check=True)
    waveform = load_audio(path.read_bytes(), 16000, name="long.m4a")
    assert abs(len(waveform) - 20 * 16000) <= 16000 * CODEC_PADDING_S


def test_silent_audio_decodes_to_zeros(tmp_path):
    path = tmp_path / "silence.wav"
    path.write_bytes(make_wav(seconds=0.5, sample_rate=16000, freq=0.0))
    waveform = load_audio(path, 16000)
    assert waveform.shape == (8000,)
    assert not waveform.any()


@pytest.mark.parametrize("fmt", FORMATS)
def test_truncated_files_are_rejected_naming_the_file(encoded_tones, tmp_path, fmt):
    data = encoded_tones[fmt, 44100].read_bytes()
    path = tmp_path / f"cut.{fmt}"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(AudioDecodeError, match=r"cut\." + fmt):
        load_audio(path, 16000)


@pytest.mark.parametrize("name", [None, "clip.m4a", "clip.wav"])
def test_random_bytes_are_rejected_naming_the_source(name):
    noise = np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes()
    with pytest.raises(AudioDecodeError, match=re.escape(name or "<audio bytes>")):
        load_audio(noise, 16000, name=name)


def test_empty_bytes_are_rejected():
    with pytest.raises(AudioDecodeError, match="empty"):
        load_audio(b"", 16000, name="u1.wav")


# --- non-finite samples and the duration limit ------------------------------------------------------------
def test_nan_or_inf_samples_are_refused_naming_the_file_and_the_first_bad_sample(tmp_path):
    samples = np.full(1600, 0.1, dtype=np.float32)
    samples[800] = np.nan
    path = tmp_path / "corrupt.wav"
    soundfile.write(path, samples, 16000, subtype="FLOAT")  # only float WAV/FLAC can hold NaN

    with pytest.raises(
        AudioDecodeError, match=r"corrupt\.wav: sample 800 \(0\.050 s\) is NaN or Inf"
    ) as error:
        load_audio(path, 16000)
    assert error.value.reason == NON_FINITE == "non-finite audio samples"


@pytest.fixture(scope="module")
def three_minute_wav(tmp_path_factory) -> Path:
    """3 min at 44.1 kHz: silence with a 1 s tone at the start (16 MB; 31 MB of float32 decoded)."""
    rate = 44100
    samples = np.zeros(180 * rate, dtype=np.int16)
    samples[:rate] = (0.3 * 32767 * np.sin(2 * np.pi * 440 * np.arange(rate) / rate)).astype(np.int16)
    path = tmp_path_factory.mktemp("long") / "lecture.wav"
    soundfile.write(path, samples, rate, subtype="PCM_16")
    return path


def test_a_file_longer_than_the_limit_is_refused_from_its_header_without_decoding(
    three_minute_wav, monkeypatch
):
    def never(*args, **kwargs):
        raise AssertionError("decoded or resampled although the header already says it is too long")

    monkeypatch.setattr(soundfile.SoundFile, "read", never)
    monkeypatch.setattr("asr_pipeline.io.audio._resampler", never)
    monkeypatch.setattr("asr_pipeline.io.audio._decode_ffmpeg", never)

    with pytest.raises(AudioTooLongError, match=r"lecture\.wav: the header declares 180000 ms") as error:
        load_audio(three_minute_wav, 16000, max_duration_sec=10.0)
    assert (error.value.reason, error.value.duration_ms) == (TOO_LONG, 180_000)
    with pytest.raises(AudioTooLongError):  # embedded bytes: the same header check
        load_audio(three_minute_wav.read_bytes(), 16000, name="lecture.wav", max_duration_sec=10.0)


def test_audio_within_the_limit_decodes_as_without_one(three_minute_wav):
    limited = load_audio(three_minute_wav, 16000, max_duration_sec=180.0)
    assert limited.shape == (180 * 16000,)


def test_an_ffmpeg_format_is_decoded_only_up_to_the_limit(tmp_path):
    path = tmp_path / "long.m4a"
    tone = "sine=frequency=440:sample_rate=44100:duration=20"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", tone, str(path)], check=True)

    with pytest.raises(AudioTooLongError, match=r"long\.m4a: at least 2000 ms decoded") as error:
        load_audio(path, 16000, max_duration_sec=2.0)
    assert error.value.duration_ms == 2000, "ffmpeg stopped one sample past the 2 s limit, not at 20 s"


def test_audio_within_the_decoded_size_budget_decodes_as_without_one(three_minute_wav):
    # 180 s x 44,100 Hz x 1 channel x 4 bytes = 30.3 MB of float32
    assert load_audio(three_minute_wav, 16000, max_decoded_mb=31.0).shape == (180 * 16000,)


def test_a_many_channel_high_rate_file_is_refused_from_its_header_without_decoding(tmp_path, monkeypatch):
    # The upload, 5 s instead of 119: 8 channels at FLAC's highest rate, 30 KB of silence on disk,
    # 8 x 655,350 x 5 x 4 bytes = 100 MB of float32 once read (the original code decoded it).
    path = tmp_path / "tiny.flac"
    soundfile.write(path, np.zeros((655_350 * 5, 8), dtype=np.int16), 655_350, format="FLAC")

    def never(*args, **kwargs):
        raise AssertionError("decoded although the header already says it is over the budget")

    monkeypatch.setattr(soundfile.SoundFile, "read", never)
    monkeypatch.setattr("asr_pipeline.io.audio._decode_ffmpeg", never)

    with pytest.raises(
        AudioDecodeError, match=r"tiny\.flac: the header declares 8 channels x 655350 Hz"
    ) as error:
        load_audio(path, 16000, max_duration_sec=120.0, max_decoded_mb=64.0)
    assert error.value.reason == OVER_BUDGET
    assert "100 MB of decoded samples, more than the 64 MB allowed" in str(error.value)


def test_an_ffmpeg_format_is_decoded_only_up_to_the_decoded_size_budget(tmp_path):
    path = tmp_path / "long.m4a"
    tone = "sine=frequency=440:sample_rate=44100:duration=20"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", tone, str(path)], check=True)

    # 0.25 MB = 65,536 mono float32 samples at 16 kHz (4.1 s of the 20 s)
    with pytest.raises(
        AudioDecodeError, match=r"long\.m4a: at least 65537 mono samples at 16000 Hz"
    ) as error:
        load_audio(path, 16000, max_decoded_mb=0.25)
    assert error.value.reason == OVER_BUDGET


# --- float range ------------------------------------------------------------------------------------------
def test_float_samples_far_outside_full_scale_are_refused(tmp_path):
    samples = np.full(1600, 0.1, dtype=np.float32)
    samples[400] = -1000.0  # integer-scale values written as float
    path = tmp_path / "loud.wav"
    soundfile.write(path, samples, 16000, subtype="FLOAT")

    with pytest.raises(AudioDecodeError, match=r"loud\.wav: samples reach 1000, far outside") as error:
        load_audio(path, 16000)
    assert error.value.reason == OUT_OF_RANGE == "float samples out of range"


def test_float_samples_a_little_over_full_scale_are_kept(tmp_path):
    samples = np.full(1600, 1.5, dtype=np.float32)  # +3.5 dB: headroom a float master may keep
    path = tmp_path / "hot.wav"
    soundfile.write(path, samples, 16000, subtype="FLOAT")
    assert load_audio(path, 16000).max() == pytest.approx(1.5)


# --- paths that are not audio files -----------------------------------------------------------------------
def test_paths_that_are_not_audio_files_say_what_they_are(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.wav").mkdir()
    os.mkfifo(tmp_path / "pipe.wav")  # never opened: reading it would block
    (tmp_path / "dangling.wav").symlink_to(tmp_path / "gone.wav")
    expected = {
        "": (EMPTY_PATH, "the audio path is empty"),
        ".": (A_DIRECTORY, "a directory, not an audio file"),
        "x.wav": (A_DIRECTORY, "a directory, not an audio file"),
        "/dev/zero": (NOT_REGULAR, "a character device, not a regular file"),
        "pipe.wav": (NOT_REGULAR, "a FIFO (named pipe), not a regular file"),
        "dangling.wav": (MISSING, "broken symlink"),
        "nothing.wav": (MISSING, "audio file not found"),
    }
    for path, (reason, message) in expected.items():
        with pytest.raises(AudioDecodeError, match=re.escape(message)) as error:
            load_audio(path, 16000)
        assert error.value.reason == reason, path


# --- references to other files: playlists and concat lists are never followed ------------------------------
@pytest.fixture(scope="module")
def referenced_mp3(tmp_path_factory) -> Path:
    """A real 3 s mp3 "elsewhere on the server", in a subfolder so that a relative reference reaches it."""
    path = tmp_path_factory.mktemp("server") / "private" / "secret.mp3"
    path.parent.mkdir()
    tone = "sine=frequency=440:sample_rate=16000:duration=3"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", tone, str(path)], check=True)
    return path


REFERENCES = {
    # HLS: ffmpeg probes it from the content under any name and opens the segments it lists (the issue's
    # 129-byte upload; the original code decoded the mp3 from a path and from bytes).
    "hls": "#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\n{absolute}\n#EXT-X-ENDLIST\n",
    # ffconcat: ffmpeg's safe mode refuses absolute paths but follows relative ones.
    "ffconcat": "ffconcat version 1.0\nfile {relative}\n",
    "m3u": "#EXTM3U\n#EXTINF:3,secret\n{absolute}\n",
}


@pytest.mark.parametrize("source_kind", ["path", "bytes"])
@pytest.mark.parametrize("name", ["upload.wav", "upload.m4a", "upload"])
@pytest.mark.parametrize("kind", REFERENCES)
def test_a_playlist_or_concat_list_is_refused_and_the_file_it_names_is_not_decoded(
    referenced_mp3, tmp_path, kind, name, source_kind
):
    text = REFERENCES[kind].format(absolute=referenced_mp3, relative="private/secret.mp3")
    path = referenced_mp3.parent.parent / name  # beside the folder, so the relative reference resolves
    path.write_text(text)
    source = path if source_kind == "path" else path.read_bytes()

    with pytest.raises(
        AudioDecodeError, match=re.escape(f"{name}: cannot decode audio: the content is")
    ) as error:
        load_audio(source, 16000, name=name)

    assert error.value.reason == NOT_AUDIO
    assert "never followed" in str(error.value)
    assert ("ffconcat list" if kind == "ffconcat" else "M3U/HLS playlist") in str(error.value)
