"""codec_round_trip: MP3/Opus through ffmpeg, realigned to the input and cut to its length."""

from __future__ import annotations

import numpy as np
import pytest

from asr_pipeline.augment import CodecError, codec_round_trip
from tests.augment.signals import RATE, snr_db, tone_mix


@pytest.mark.parametrize(
    ("codec", "bitrate_kbps", "sample_rate"),
    [
        ("mp3", 64, 16000),  # measured SNR 26 dB (LAME's 0.95 gain dominates), correlation 1.000
        ("mp3", 32, 8000),  # LAME's 1105-sample delay is 0.14 s here: the delay search must reach it
        ("opus", 32, 16000),  # measured 36 dB
        ("opus", 32, 22050),  # not an Opus rate: coded at 24 kHz, decoded back at 22.05 kHz; 29 dB
    ],
)
def test_codec_round_trip_keeps_length_and_alignment_and_stays_close(codec, bitrate_kbps, sample_rate):
    clean = tone_mix(seconds=0.5, sample_rate=sample_rate)
    coded = codec_round_trip(clean, sample_rate, codec, bitrate_kbps)
    assert coded.shape == clean.shape and coded.dtype == np.float32
    assert np.corrcoef(clean, coded)[0, 1] > 0.99  # a delay left in would decorrelate the tones
    assert 15.0 < snr_db(clean, coded) < 60.0  # close, but really coded


def test_lower_bitrate_means_more_coding_noise():
    clean = tone_mix(seconds=0.5)
    assert snr_db(clean, codec_round_trip(clean, RATE, "opus", 12)) < snr_db(
        clean, codec_round_trip(clean, RATE, "opus", 32)
    )


def test_an_unknown_codec_or_bitrate_is_refused_listing_the_codecs():
    with pytest.raises(ValueError, match=r"one of \['mp3', 'opus'\], got 'aac'"):
        codec_round_trip(tone_mix(0.1), RATE, "aac", 64)
    with pytest.raises(ValueError, match="bitrate_kbps must be a positive number"):
        codec_round_trip(tone_mix(0.1), RATE, "mp3", 0)


def test_an_ffmpeg_failure_quotes_its_stderr():
    with pytest.raises(
        CodecError, match=r"ffmpeg failed encoding opus at 900 kbps .*bit rate 900000 bps is unsupported"
    ):
        codec_round_trip(tone_mix(0.1), RATE, "opus", 900)


def test_missing_ffmpeg_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without ffmpeg
    with pytest.raises(CodecError, match=r"not on PATH; install it \(apt-get install ffmpeg\)"):
        codec_round_trip(tone_mix(0.1), RATE, "mp3", 64)
