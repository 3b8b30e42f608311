"""ABX through fastabx: phones whose frames are told apart score 0 % error, frames that carry no phone
information score near chance (50 %), and a speaker-specific code fails across speakers only."""

import pytest
import torch

pytest.importorskip("fastabx", reason="fastabx needs Python >= 3.12 (.ci/setup.sh makes the venv with it)")

from asr_pipeline.hubert.abx import abx_errors

PHONES = ("a", "b")
SPEAKERS = ("s1", "s2")


def item_file(tmp_path):
    """Per speaker four utterances, each with three "k ? t" triplets (0.1 s per phone, a pause between):
    two utterances say "a" in the middle, two say "b"."""
    lines = ["#file onset offset #phone prev-phone next-phone speaker"]
    layout = {}
    for speaker in SPEAKERS:
        for k in range(4):
            utterance, phone = f"{speaker}-{k}", PHONES[k % 2]
            layout[utterance] = (speaker, phone)
            for n in range(3):
                start = 0.4 * n + 0.1
                lines.append(f"{utterance} {start:.4f} {start + 0.1:.4f} {phone} k t {speaker}")
    path = tmp_path / "dev.item"
    path.write_text("\n".join(lines) + "\n")
    return path, layout


def features(layout, code, seed=0):
    """(60, 8) frames at 50 Hz per utterance: random, with code(speaker, phone) on the middle phones' frames."""
    generator = torch.Generator().manual_seed(seed)
    out = {}
    for utterance, (speaker, phone) in layout.items():
        frames = torch.randn(60, 8, generator=generator)
        for n in range(3):
            start = round((0.4 * n + 0.1) * 50)
            frames[start : start + 5] = code(speaker, phone) + 0.01 * torch.randn(5, 8, generator=generator)
        out[utterance] = frames
    return out


def one_hot(index):
    vector = torch.zeros(8)
    vector[index] = 1.0
    return vector


def test_phones_with_their_own_direction_are_always_told_apart(tmp_path):
    item, layout = item_file(tmp_path)
    errors = abx_errors(item, features(layout, lambda speaker, phone: one_hot(PHONES.index(phone))), 50)
    assert errors == {"within": 0.0, "across": 0.0}


def test_frames_without_phone_information_score_near_chance(tmp_path):
    item, layout = item_file(tmp_path)
    generator = torch.Generator().manual_seed(1)
    errors = abx_errors(
        item, features(layout, lambda speaker, phone: torch.randn(8, generator=generator)), 50
    )
    assert 25 < errors["within"] < 75 and 25 < errors["across"] < 75


def test_a_code_that_swaps_between_speakers_fails_across_speakers_only(tmp_path):
    item, layout = item_file(tmp_path)
    # s1 says a with direction 0 and b with 1; s2 the other way round: within a speaker every triplet is
    # right, across speakers X always lies on B's side.
    code = lambda speaker, phone: one_hot((PHONES.index(phone) + SPEAKERS.index(speaker)) % 2)  # noqa: E731
    errors = abx_errors(item, features(layout, code), 50)
    assert errors["within"] == 0.0 and errors["across"] == 100.0
