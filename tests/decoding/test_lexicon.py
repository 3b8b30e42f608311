"""The lexicon and piece corpus the flashlight decoders read, made with the model's own tokenizer."""

from __future__ import annotations

from asr_pipeline.decoding.lexicon import build_lexicon, piece_corpus


def test_every_training_word_is_listed_once_sorted_with_its_pieces(char_tokenizer):
    text, unspellable = build_lexicon("the cat sat\nthe dog\n\n", char_tokenizer)
    rows = [line.split("\t") for line in text.splitlines()]
    assert [word for word, _ in rows] == ["cat", "dog", "sat", "the"]
    assert dict(rows)["cat"] == " ".join(char_tokenizer.processor.encode("cat", out_type=str))
    assert unspellable == []


def test_words_only_unk_pieces_can_spell_are_left_out_and_named(char_tokenizer):
    text, unspellable = build_lexicon(["the cat", "the ñandú"], char_tokenizer)
    assert unspellable == ["ñandú"]
    assert "ñandú" not in text and "cat\t" in text


def test_the_piece_corpus_spells_each_transcript_in_pieces(char_tokenizer):
    corpus = piece_corpus("the cat\n\nthe ñ\n", char_tokenizer)
    assert corpus.splitlines() == ["▁ t h e ▁ c a t", "▁ t h e ▁ <unk>"]
