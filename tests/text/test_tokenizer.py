import pytest

from asr_pipeline.text.sentencepiece_training import SentencePieceOptions, train_sentencepiece, vocab_text
from asr_pipeline.text.tokenizer import CTCTokenizer
from tests.conftest import TINY_SENTENCES


def test_vocab_is_pieces_plus_one_blank(spm_model):
    tokenizer = CTCTokenizer(spm_model)
    assert tokenizer.num_pieces == 40
    assert tokenizer.vocab_size == 41


@pytest.mark.parametrize("blank_id", [0, 5, 40])
def test_model_ids_skip_the_blank_and_round_trip(spm_model, blank_id):
    tokenizer = CTCTokenizer(spm_model, blank_id=blank_id)
    ids = tokenizer.encode("the lazy dog sat on the mat")
    assert blank_id not in ids
    assert all(0 <= i < tokenizer.vocab_size for i in ids)
    assert tokenizer.decode(ids) == "the lazy dog sat on the mat"
    assert tokenizer.decode([blank_id, *ids, blank_id]) == "the lazy dog sat on the mat"
    assert tokenizer.piece(blank_id) == ""


def test_blank_id_zero_shifts_every_piece_by_one(spm_model):
    tokenizer = CTCTokenizer(spm_model, blank_id=0)
    pieces = tokenizer.processor.encode("the cat", out_type=int)
    assert tokenizer.encode("the cat") == [p + 1 for p in pieces]


def test_blank_id_out_of_range_is_rejected(spm_model):
    with pytest.raises(ValueError, match="blank_id"):
        CTCTokenizer(spm_model, blank_id=41)


def test_training_is_deterministic_and_vocab_file_lists_every_piece():
    options = SentencePieceOptions(vocab_size=40)
    first = train_sentencepiece(TINY_SENTENCES, options)
    assert first == train_sentencepiece(TINY_SENTENCES, options)
    lines = vocab_text(first).splitlines()
    assert len(lines) == 40
    assert lines[0].split("\t")[0] == "<unk>"


def test_too_large_vocab_gives_an_actionable_error():
    with pytest.raises(ValueError, match="vocab_size"):
        train_sentencepiece(TINY_SENTENCES[:2], SentencePieceOptions(vocab_size=5000))


def test_char_model_treats_vocab_size_as_an_upper_bound():
    model = train_sentencepiece(TINY_SENTENCES, SentencePieceOptions(vocab_size=200, model_type="char"))
    assert CTCTokenizer(model).num_pieces < 200


@pytest.mark.parametrize("blank_id", [0, 5])
def test_unknown_share_counts_unk_pieces_but_not_bare_word_boundaries(spm_model, blank_id):
    tokenizer = CTCTokenizer(spm_model, blank_id=blank_id)
    cyrillic = tokenizer.encode("привет мир")  # "▁", <unk>, "▁", <unk>: the model never saw this script

    assert tokenizer.piece(tokenizer.unk_id) == "<unk>"
    assert cyrillic.count(tokenizer.unk_id) == 2 and len(cyrillic) == 4
    assert tokenizer.unknown_share(cyrillic) == 1.0, "bare boundaries do not dilute it to 0.5"
    assert tokenizer.unknown_share(tokenizer.encode("the cat sat")) == 0.0
    # One unknown letter among 12 pieces, 2 of them bare boundaries: 1 / 10.
    assert tokenizer.unknown_share(tokenizer.encode("the quick josé")) == pytest.approx(0.1)
    assert tokenizer.unknown_share([]) == 0.0
