"""text.sentencepiece_training: the trainer's flags, from a list or a file, through the library or an external
spm_train, with errors that say what to change, and the summary saved beside a model."""

from __future__ import annotations

import pytest

from asr_pipeline.text.sentencepiece_training import (
    SentencePieceOptions,
    tokenizer_summary,
    train_sentencepiece,
    train_sentencepiece_file,
    trainer_flags,
    vocab_text,
)
from asr_pipeline.text.tokenizer import CTCTokenizer
from tests.conftest import TINY_SENTENCES


def test_flags_keep_no_sentence_markers_and_our_normalization_and_name_the_users_symbols():
    flags = trainer_flags(SentencePieceOptions(vocab_size=50, user_defined_symbols=("<noise>", "<laugh>")))

    assert (flags["bos_id"], flags["eos_id"], flags["pad_id"], flags["unk_id"]) == (-1, -1, -1, 0)
    assert flags["normalization_rule_name"] == "identity" and flags["num_threads"] == 1
    assert flags["user_defined_symbols"] == "<noise>,<laugh>"
    assert "hard_vocab_limit" not in flags
    assert trainer_flags(SentencePieceOptions(model_type="char"))["hard_vocab_limit"] is False


def test_a_file_corpus_trains_the_same_model_as_the_same_sentences_given_as_a_list(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(s + "\n" for s in TINY_SENTENCES))
    options = SentencePieceOptions(vocab_size=40, user_defined_symbols=("<noise>",))

    from_file = train_sentencepiece_file(corpus, options)

    # the same pieces and scores (the bytes differ: the model records its input, a file or none)
    assert vocab_text(from_file) == vocab_text(train_sentencepiece(TINY_SENTENCES, options))
    assert CTCTokenizer(from_file).encode("<noise>")[-1] == CTCTokenizer(from_file).to_model_id(
        1
    )  # one piece


def test_an_empty_corpus_is_refused(tmp_path):
    (tmp_path / "empty.txt").write_text("")

    with pytest.raises(ValueError, match="cannot train a tokenizer on an empty corpus"):
        train_sentencepiece([], SentencePieceOptions())
    with pytest.raises(ValueError, match=r"empty corpus \(.*empty.txt\)"):
        train_sentencepiece_file(tmp_path / "empty.txt", SentencePieceOptions())


def test_byte_fallback_with_too_few_pieces_says_to_raise_the_vocab_above_256():
    with pytest.raises(
        ValueError, match="byte_fallback adds 256 byte pieces, so vocab_size 100 is too small"
    ):
        train_sentencepiece(TINY_SENTENCES, SentencePieceOptions(vocab_size=100, byte_fallback=True))


def test_an_external_trainer_that_is_missing_or_fails_is_named(tmp_path):
    with pytest.raises(ValueError, match="--sentencepiece-command no-such-spm-train: not an executable"):
        train_sentencepiece(TINY_SENTENCES, SentencePieceOptions(sentencepiece_command="no-such-spm-train"))
    with pytest.raises(ValueError, match=r"SentencePiece training failed \(.*false exited 1"):
        train_sentencepiece(TINY_SENTENCES, SentencePieceOptions(sentencepiece_command="false"))


def test_the_summary_counts_pieces_plus_the_blank_and_keeps_the_options_and_normalization():
    options = SentencePieceOptions(vocab_size=40, blank_id=0)
    model = train_sentencepiece(TINY_SENTENCES, options)

    summary = tokenizer_summary(model, options, {"lowercase": True}, sentences=len(TINY_SENTENCES))

    assert summary["vocab_size"] == summary["num_pieces"] + 1 == 41
    assert (summary["blank_id"], summary["corpus_sentences"]) == (0, len(TINY_SENTENCES))
    assert summary["options"]["vocab_size"] == 40 and summary["normalization"] == {"lowercase": True}
