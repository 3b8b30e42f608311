"""pron.phone_manifests: each split's transcripts become phone targets with word boundaries and CTC ids; an
utterance with a word no G2P stage spells (or with no words) is skipped and named, never guessed."""

from __future__ import annotations

import polars as pl

from asr_pipeline.pron.phone_manifests import PHONE_SCHEMA, phone_manifests
from asr_pipeline.text.phones import phone_ids


def manifest(*texts: str) -> pl.DataFrame:
    return pl.DataFrame(
        {"id": [f"u{i}" for i in range(len(texts))], "text": list(texts),
         "location": [f"m.jsonl:{i + 1}" for i in range(len(texts))]}
    )  # fmt: skip


def test_words_become_stress_free_phones_with_their_boundaries_and_ids():
    tables, report = phone_manifests({"train": manifest("the cat", "a dog")})
    table = tables["train"]
    assert dict(table.schema) == PHONE_SCHEMA
    first = table.row(0, named=True)
    assert first["words"] == ["the", "cat"]
    assert first["phones"][-3:] == ["K", "AE", "T"] and sum(first["word_phones"]) == len(first["phones"])
    assert first["phone_ids"] == phone_ids(first["phones"])
    assert report["utterances"]["train"]["kept"] == 2 and report["g2p"]


def test_an_utterance_with_a_word_nothing_spells_or_without_words_is_skipped_and_named():
    tables, report = phone_manifests({"dev": manifest("the cat", "the 日本 cat", "")})
    assert tables["dev"]["id"].to_list() == ["u0"]
    skips = report["utterances"]["dev"]
    assert (skips["seen"], skips["kept"], skips["skipped"]) == (3, 1, 2)
    assert skips["skipped_by_reason"] == {"no phones for a word": 2}
    first = skips["first_skipped"]["no phones for a word"][0]
    assert "m.jsonl:2" in first and "日本" in first


def test_without_letter_to_sound_an_unknown_word_is_spelled_out_letter_by_letter():
    spelled, _ = phone_manifests({"dev": manifest("xzqj")}, letter_to_sound=False)
    sounded, _ = phone_manifests({"dev": manifest("xzqj")})
    assert spelled["dev"]["phones"].to_list() == [["EH", "K", "S", "Z", "IY", "K", "Y", "UW", "JH", "EY"]]
    assert sounded["dev"]["phones"].to_list() != spelled["dev"]["phones"].to_list()
