"""Noise sources (coloured, babble, a folder of recordings) and mixing at an exact SNR."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile

from asr_pipeline.augment import NoiseFolder, add_noise, babble, coloured_noise
from asr_pipeline.io.audio import AudioDecodeError
from tests.augment.signals import RATE, sine, snr_db, tone_level_db


def spectral_slope_db_per_decade(noise: np.ndarray) -> float:
    """Least-squares slope of the averaged periodogram (1024-sample Hann segments) in dB per decade,
    fitted from bin 8 (125 Hz at 16 kHz, clear of the window's leakage) to Nyquist."""
    segments = noise[: len(noise) // 1024 * 1024].reshape(-1, 1024) * np.hanning(1024)
    power = np.mean(np.abs(np.fft.rfft(segments, axis=1)) ** 2, axis=0)[8:]
    frequencies = np.fft.rfftfreq(1024)[8:]
    return float(np.polyfit(np.log10(frequencies), 10 * np.log10(power), 1)[0])


@pytest.mark.parametrize(("colour", "slope"), [("white", 0.0), ("pink", -10.0), ("brown", -20.0)])
def test_coloured_noise_has_its_colours_spectral_slope_at_unit_rms(colour, slope):
    noise = coloured_noise(2**16, colour, np.random.default_rng(0))
    assert noise.shape == (2**16,) and noise.dtype == np.float32
    assert np.sqrt(np.mean(noise.astype(np.float64) ** 2)) == pytest.approx(1.0, rel=1e-5)
    assert spectral_slope_db_per_decade(noise) == pytest.approx(slope, abs=1.0)


def test_coloured_noise_is_reproducible_from_the_generator():
    first = coloured_noise(1000, "pink", np.random.default_rng(7))
    np.testing.assert_array_equal(first, coloured_noise(1000, "pink", np.random.default_rng(7)))
    assert not np.array_equal(first, coloured_noise(1000, "pink", np.random.default_rng(8)))


def test_an_unknown_colour_is_refused_listing_the_colours():
    with pytest.raises(ValueError, match=r"one of \['white', 'pink', 'brown'\], got 'blue'"):
        coloured_noise(100, "blue", np.random.default_rng(0))


@pytest.mark.parametrize("target_db", [-5.0, 0.0, 7.5, 30.0])
def test_add_noise_mixes_at_exactly_the_requested_snr(target_db):
    speech = sine(300.0, seconds=0.5)
    noise = coloured_noise(len(speech), "white", np.random.default_rng(1))
    noisy = add_noise(speech, noise, target_db)
    assert noisy.dtype == np.float32 and noisy.shape == speech.shape
    assert snr_db(speech, noisy) == pytest.approx(target_db, abs=0.01)


def test_add_noise_leaves_silent_speech_unchanged():
    silence = np.zeros(800, np.float32)
    assert add_noise(silence, coloured_noise(800, "white", np.random.default_rng(0)), 10.0) is silence


def test_add_noise_refuses_mismatched_lengths_and_silent_noise():
    speech = sine(300.0, seconds=0.1)
    with pytest.raises(ValueError, match="same shape"):
        add_noise(speech, np.ones(10, np.float32), 10.0)
    with pytest.raises(ValueError, match="noise is silent"):
        add_noise(speech, np.zeros_like(speech), 10.0)


def test_babble_gives_every_voice_the_same_level_however_loud_it_was():
    quiet, loud = sine(300.0, amplitude=0.01), sine(700.0, amplitude=0.9)
    mixture = babble([quiet, loud], RATE, np.random.default_rng(0))
    assert mixture.shape == (RATE,) and mixture.dtype == np.float32
    assert np.sqrt(np.mean(mixture.astype(np.float64) ** 2)) == pytest.approx(1.0, rel=1e-5)
    assert tone_level_db(mixture, RATE, 300.0) == pytest.approx(tone_level_db(mixture, RATE, 700.0), abs=1.0)


def test_babble_loops_voices_shorter_than_the_request():
    short = np.arange(1, 101, dtype=np.float32)  # (100,): a ramp that says where it is
    looped = babble([short], 250, np.random.default_rng(0))
    np.testing.assert_allclose(looped[100:200], looped[:100], rtol=1e-6)  # period 100


def test_babble_skips_silent_voices_and_refuses_when_all_are_silent():
    voice = sine(300.0, seconds=0.1)
    rng = np.random.default_rng(0)
    with_silence = babble([voice, np.zeros(50, np.float32)], 400, np.random.default_rng(0))
    np.testing.assert_array_equal(with_silence, babble([voice], 400, rng))
    with pytest.raises(ValueError, match="non-silent"):
        babble([np.zeros(50, np.float32), np.zeros(0, np.float32)], 400, rng)
    with pytest.raises(ValueError, match="non-silent"):
        babble([], 400, rng)


def write_wav(path, samples, sample_rate=RATE):
    path.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(path, samples, sample_rate, subtype="FLOAT")
    return path


def test_noise_folder_lists_audio_recursively_and_draws_a_segment_of_one_file(tmp_path):
    low = write_wav(tmp_path / "a" / "low.wav", sine(200.0, seconds=0.5))
    high = write_wav(tmp_path / "b" / "c" / "high.wav", sine(2000.0, seconds=0.5))
    (tmp_path / "README.txt").write_text("not audio")
    folder = NoiseFolder(tmp_path)
    assert folder.files == (low, high)
    sources = [sine(200.0, seconds=0.5), sine(2000.0, seconds=0.5)]
    for seed in range(6):
        drawn = folder.draw(1600, RATE, np.random.default_rng(seed))
        assert drawn.shape == (1600,)
        # Exactly a contiguous piece of one of the files.
        assert any(
            any(np.array_equal(drawn, source[start : start + 1600]) for start in range(len(source) - 1599))
            for source in sources
        )


def test_noise_folder_loops_short_files_and_resamples_to_the_requested_rate(tmp_path):
    write_wav(tmp_path / "short.wav", sine(400.0, seconds=0.1, sample_rate=8000), sample_rate=8000)
    drawn = NoiseFolder(tmp_path).draw(RATE, RATE, np.random.default_rng(0))  # 1 s from a 0.1 s file
    assert drawn.shape == (RATE,)
    assert tone_level_db(drawn, RATE, 400.0) > tone_level_db(drawn, RATE, 800.0) + 20


def test_noise_folder_draws_are_reproducible_from_the_generator(tmp_path):
    write_wav(tmp_path / "one.wav", coloured_noise(RATE, "white", np.random.default_rng(0)) * 0.1)
    write_wav(tmp_path / "two.wav", coloured_noise(RATE, "brown", np.random.default_rng(1)) * 0.1)
    folder = NoiseFolder(tmp_path)
    first = folder.draw(4000, RATE, np.random.default_rng(3))
    np.testing.assert_array_equal(first, NoiseFolder(tmp_path).draw(4000, RATE, np.random.default_rng(3)))


def test_an_empty_noise_folder_is_refused_naming_the_folder(tmp_path):
    (tmp_path / "notes.txt").write_text("no audio here")
    with pytest.raises(ValueError, match=f"noise folder {tmp_path} holds no audio files"):
        NoiseFolder(tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        NoiseFolder(tmp_path / "missing")


def test_an_undecodable_noise_file_is_named_when_drawn(tmp_path):
    broken = tmp_path / "broken.wav"
    broken.write_bytes(b"RIFF not really a wav file")
    with pytest.raises(AudioDecodeError, match=f"cannot use {broken}"):
        NoiseFolder(tmp_path).draw(100, RATE, np.random.default_rng(0))


def test_a_silent_noise_file_is_named_when_drawn(tmp_path):
    silent = write_wav(tmp_path / "silent.wav", np.zeros(800, np.float32))
    with pytest.raises(ValueError, match=f"{silent} is silent"):
        NoiseFolder(tmp_path).draw(100, RATE, np.random.default_rng(0))
