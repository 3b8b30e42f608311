"""Condition: the typed, validated config of one degradation, and apply_condition, its one entry point."""

from __future__ import annotations

import re

import numpy as np
import pytest
import soundfile
import yaml

from asr_pipeline.augment import KINDS, Condition, apply_condition, conditions
from tests.augment.signals import RATE, sine, snr_db

DOCUMENTED = [yaml.safe_load(line) for line in re.findall(r"^\s+(\{kind: .*\})", conditions.__doc__, re.M)]


def test_every_documented_yaml_condition_parses_and_round_trips():
    assert {raw["kind"] for raw in DOCUMENTED} == set(KINDS)
    for raw in DOCUMENTED:
        condition = Condition.from_dict(raw, "doc")
        assert Condition.from_dict(condition.to_dict(), "doc") == condition


def test_to_dict_holds_kind_and_its_own_options_only():
    condition = Condition.from_dict({"kind": "noise", "noise": "pink", "snr_db": [5, 20]}, "test")
    assert condition.to_dict() == {
        "kind": "noise",
        "noise": "pink",
        "snr_db": [5.0, 20.0],
    }  # noise_dir and babble_speakers only with the folder and babble sources
    babble = Condition(kind="noise", noise="babble", babble_speakers=3)
    assert babble.to_dict() == {
        "kind": "noise",
        "noise": "babble",
        "snr_db": [10.0, 20.0],
        "babble_speakers": 3,
    }


def test_a_single_snr_is_a_fixed_range():
    assert Condition.from_dict({"kind": "noise", "snr_db": 10}, "test").snr_db == (10.0, 10.0)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"kind": "noise", "snr": 5},
            r"eval\.noisy: unknown option 'snr' for a noise condition; the allowed "
            r"options are \['kind', 'noise', 'snr_db', 'noise_dir', 'babble_speakers'\]",
        ),
        ({"kind": "speed", "snr_db": 5}, r"eval\.noisy: unknown option 'snr_db' for a speed condition"),
        ({"kind": "loud"}, r"eval\.noisy: unknown kind 'loud'; the kinds are \['clean', 'speed', 'noise'"),
        ({"factor": 1.1}, r"eval\.noisy: a condition is a mapping with a `kind`"),
        (
            {"kind": "noise", "noise": "blue"},
            r"eval\.noisy: noise must be one of \['white', 'pink', 'brown', "
            r"'babble', 'folder'\], got 'blue'",
        ),
        (
            {"kind": "codec", "codec": "aac"},
            r"eval\.noisy: codec must be one of \['mp3', 'opus'\], got 'aac'",
        ),
        (
            {"kind": "noise", "snr_db": [20, 5]},
            r"eval\.noisy: snr_db must be a \[low, high\] pair with low <= high",
        ),
        ({"kind": "noise", "snr_db": [1, 2, 3]}, r"snr_db must be a number or a \[low, high\] pair"),
        ({"kind": "speed", "factor": 4}, r"eval\.noisy: factor must be in \(0, 3\], got 4"),
        ({"kind": "speed", "factor": "fast"}, r"factor must be a finite number, got 'fast'"),
        ({"kind": "reverb", "rt60_sec": [0, 1]}, r"rt60_sec must be > 0, got 0"),
        ({"kind": "telephone", "mu_law": "yes"}, r"mu_law must be true or false, got 'yes'"),
        ({"kind": "noise", "noise": "folder"}, r"noise_dir is needed with noise: folder"),
        ({"kind": "noise", "babble_speakers": 3}, r"babble_speakers applies to noise: babble only"),
        ({"kind": "noise", "noise": "babble", "babble_speakers": 0}, r"babble_speakers must be at least 1"),
    ],
)
def test_from_dict_errors_name_the_place_and_the_bad_key(raw, message):
    with pytest.raises(ValueError, match=message):
        Condition.from_dict(raw, "eval.noisy")


def test_clean_returns_the_input_and_speed_changes_the_length():
    speech = sine(500.0, seconds=0.5)
    rng = np.random.default_rng(0)
    assert apply_condition(Condition(), speech, RATE, rng) is speech
    faster = apply_condition(Condition(kind="speed", factor=1.1), speech, RATE, rng)
    assert abs(len(faster) - round(len(speech) / 1.1)) <= 1


@pytest.mark.parametrize(
    "raw",
    [
        {"kind": "noise", "noise": "brown", "snr_db": [5, 20]},
        {"kind": "reverb", "rt60_sec": [0.2, 0.4]},
        {"kind": "telephone"},
        {"kind": "codec", "codec": "opus", "bitrate_kbps": 24},
    ],
)
def test_every_other_kind_keeps_the_length_and_changes_the_audio(raw):
    speech = sine(500.0, seconds=0.5) + sine(1500.0, seconds=0.5, amplitude=0.2)
    degraded = apply_condition(Condition.from_dict(raw, "test"), speech, RATE, np.random.default_rng(0))
    assert degraded.shape == speech.shape and degraded.dtype == np.float32
    assert not np.allclose(degraded, speech, atol=1e-3)


def test_noise_snr_is_drawn_from_the_range_by_the_generator():
    speech = sine(500.0, seconds=0.25)
    condition = Condition(kind="noise", noise="white", snr_db=(5.0, 15.0))
    measured = [
        snr_db(speech, apply_condition(condition, speech, RATE, np.random.default_rng(seed)))
        for seed in range(8)
    ]
    assert all(5.0 - 0.01 <= value <= 15.0 + 0.01 for value in measured)
    assert max(measured) - min(measured) > 2.0  # drawn, not fixed


def test_babble_needs_a_pool_big_enough_and_takes_a_sequence_or_a_callable():
    speech = sine(500.0, seconds=0.25)
    condition = Condition(kind="noise", noise="babble", snr_db=(10.0, 10.0), babble_speakers=2)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="babble noise needs other utterances: pass babble_pool"):
        apply_condition(condition, speech, RATE, rng)
    with pytest.raises(ValueError, match="babble_speakers is 2 but the babble pool holds 1"):
        apply_condition(condition, speech, RATE, rng, babble_pool=[sine(300.0)])
    pool = [sine(300.0), sine(700.0), sine(900.0)]
    noisy = apply_condition(condition, speech, RATE, rng, babble_pool=pool)
    assert snr_db(speech, noisy) == pytest.approx(10.0, abs=0.01)
    asked = []
    apply_condition(
        condition, speech, RATE, rng, babble_pool=lambda count, _rng: asked.append(count) or pool[:count]
    )
    assert asked == [2]


def test_folder_noise_draws_from_the_noise_dir(tmp_path):
    soundfile.write(tmp_path / "hum.wav", sine(120.0, seconds=0.5), RATE, subtype="FLOAT")
    condition = Condition.from_dict(
        {"kind": "noise", "noise": "folder", "noise_dir": str(tmp_path), "snr_db": 0}, "t"
    )
    speech = sine(2000.0, seconds=0.25)
    noisy = apply_condition(condition, speech, RATE, np.random.default_rng(0))
    assert snr_db(speech, noisy) == pytest.approx(0.0, abs=0.01)
