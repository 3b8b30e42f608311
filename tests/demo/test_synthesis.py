import io
import random
import shutil
import struct
import wave

import pytest

from asr_pipeline.demo.synthesis import (
    BASE_VOICES,
    FEMALE_VARIANTS,
    MALE_VARIANTS,
    PITCH_RANGE,
    RATE_WPM_RANGE,
    Voice,
    draw_voice,
    split_voices,
    synthesize,
    wav_duration_seconds,
)
from tests.conftest import make_wav

needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
VOICE = Voice("en-us", "m3", rate_wpm=170, pitch=50)


@needs_espeak
def test_wav_is_22050_hz_16_bit_mono_with_exact_header_sizes():
    wav = synthesize("the quick brown fox", VOICE)
    with wave.open(io.BytesIO(wav)) as reader:
        assert (reader.getframerate(), reader.getnchannels(), reader.getsampwidth()) == (22050, 1, 2)
        frames = reader.getnframes()
    # espeak-ng's --stdout header carries placeholder sizes; ours must be the real ones.
    riff_size, data_size = struct.unpack("<I", wav[4:8])[0], struct.unpack("<I", wav[40:44])[0]
    assert riff_size == len(wav) - 8
    assert data_size == len(wav) - 44 == frames * 2


@needs_espeak
def test_synthesis_is_byte_identical_for_the_same_input():
    assert synthesize("seven green parrots", VOICE) == synthesize("seven green parrots", VOICE)


@needs_espeak
def test_duration_grows_with_text_and_shrinks_with_rate():
    short = wav_duration_seconds(synthesize("hello", VOICE))
    long = wav_duration_seconds(synthesize("hello there my friend how are you today", VOICE))
    fast = Voice("en-us", "m3", rate_wpm=200, pitch=50)
    slow = Voice("en-us", "m3", rate_wpm=130, pitch=50)
    text = "we walked to the old market on monday morning"
    assert 0.2 < short < long < 5.0
    assert wav_duration_seconds(synthesize(text, fast)) < wav_duration_seconds(synthesize(text, slow))


@needs_espeak
def test_every_configured_voice_and_variant_exists_in_espeak():
    # espeak-ng fails on an unknown base voice but silently ignores an unknown variant, so a typo
    # in a variant name would show up only as audio identical to the base voice's.
    text = "hello there"
    base = {name: synthesize(text, Voice(name, None, 170, 50)) for name in BASE_VOICES}
    assert len(set(base.values())) == len(BASE_VOICES)
    for variant in FEMALE_VARIANTS + MALE_VARIANTS:
        assert synthesize(text, Voice("en-us", variant, 170, 50)) != base["en-us"], variant


@needs_espeak
def test_failing_espeak_raises_with_the_command_and_its_message():
    with pytest.raises(RuntimeError, match=r"espeak-ng -v xx-nope.*exit status"):
        synthesize("hello", Voice("xx-nope", None, 170, 50))


def test_missing_espeak_binary_raises_a_clear_error():
    with pytest.raises(RuntimeError, match=r"cannot run `/nonexistent/espeak-ng -v en-us\+m3.*not found"):
        synthesize("hello", VOICE, espeak_binary="/nonexistent/espeak-ng")


def test_wav_duration_seconds_reads_the_header():
    assert wav_duration_seconds(make_wav(seconds=1.5, sample_rate=22050)) == pytest.approx(1.5)
    assert wav_duration_seconds(make_wav(seconds=0.25, sample_rate=16000)) == pytest.approx(0.25)


def test_dev_and_test_speakers_and_variants_never_occur_in_train():
    splits = split_voices(seed=1234)
    pairs = {split: set(voices) for split, voices in splits.items()}
    variants = {split: {variant for _, variant in voices} for split, voices in splits.items()}
    for held_out in ("dev", "test"):
        assert not pairs[held_out] & pairs["train"]
        assert not variants[held_out] & variants["train"]
    assert not variants["dev"] & variants["test"]


def test_every_split_has_every_accent_and_both_genders():
    for split, voices in split_voices(seed=1234).items():
        assert {name for name, _ in voices} == set(BASE_VOICES), split
        variants = {variant for _, variant in voices}
        assert variants & set(FEMALE_VARIANTS) and variants & set(MALE_VARIANTS), split


def test_voice_split_is_deterministic_per_seed_and_varies_across_seeds():
    assert split_voices(seed=1) == split_voices(seed=1)
    held_out = {frozenset(v for _, v in split_voices(seed)["test"]) for seed in range(5)}
    assert len(held_out) > 1


def test_drawn_voices_stay_in_the_configured_ranges():
    pairs = split_voices(seed=0)["train"]
    rng = random.Random(0)
    voices = [draw_voice(pairs, rng) for _ in range(200)]
    assert {(v.name, v.variant) for v in voices} <= set(pairs)
    assert all(RATE_WPM_RANGE[0] <= v.rate_wpm <= RATE_WPM_RANGE[1] for v in voices)
    assert all(PITCH_RANGE[0] <= v.pitch <= PITCH_RANGE[1] for v in voices)
    assert len({v.rate_wpm for v in voices}) > 20 and len({v.pitch for v in voices}) > 20


def test_rate_and_pitch_ranges_are_wide_and_inside_what_espeak_accepts():
    low_rate, high_rate = RATE_WPM_RANGE
    low_pitch, high_pitch = PITCH_RANGE
    assert 80 <= low_rate <= 120 and 240 <= high_rate <= 450  # espeak-ng -s takes 80..450 wpm
    assert 0 <= low_pitch <= 10 and 90 <= high_pitch <= 99  # -p takes 0..99
    rng, pairs = random.Random(1), split_voices(seed=0)["train"]
    voices = [draw_voice(pairs, rng) for _ in range(2000)]
    assert (
        min(v.rate_wpm for v in voices) <= low_rate + 5 and max(v.rate_wpm for v in voices) >= high_rate - 5
    )
    assert min(v.pitch for v in voices) <= low_pitch + 5 and max(v.pitch for v in voices) >= high_pitch - 5


@needs_espeak
def test_duration_scales_with_rate_across_the_whole_range():
    text = "we walked to the old market on monday morning because the weather was nice and warm"
    low_rate, high_rate = RATE_WPM_RANGE
    slowest = wav_duration_seconds(synthesize(text, Voice("en-us", "m3", low_rate, 50)))
    fastest = wav_duration_seconds(synthesize(text, Voice("en-us", "m3", high_rate, 50)))
    # espeak-ng keeps close to its nominal rate: 110 -> 260 wpm measured 2.34x shorter, 2.36x nominal
    assert 0.85 * high_rate / low_rate < slowest / fastest < 1.1 * high_rate / low_rate


@needs_espeak
def test_pitch_extremes_change_the_voice_but_not_the_timing():
    text = "the pitch changes but not the timing"
    low, high = (synthesize(text, Voice("en-gb", "f2", 170, pitch)) for pitch in PITCH_RANGE)
    assert low != high
    assert wav_duration_seconds(low) == pytest.approx(wav_duration_seconds(high), rel=0.05)
