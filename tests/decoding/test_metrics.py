import pytest

from asr_pipeline.decoding.metrics import ErrorRates, edit_distance, error_rates


@pytest.mark.parametrize(
    ("ref", "hyp", "distance"),
    [
        ("", "", 0),
        ("abc", "abc", 0),
        ("abc", "", 3),  # three deletions
        ("", "abc", 3),  # three insertions
        ("abc", "abd", 1),  # one substitution
        ("abc", "abxc", 1),  # one insertion
        ("abc", "ac", 1),  # one deletion
        ("kitten", "sitting", 3),  # k->s, e->i, +g
        ("flaw", "lawn", 2),  # -f, +n: cheaper than four substitutions
    ],
)
def test_edit_distance_counts_the_fewest_unit_edits(ref, hyp, distance):
    assert edit_distance(ref, hyp) == distance
    assert edit_distance(hyp, ref) == distance  # symmetric, whichever argument is longer


def test_edit_distance_compares_whole_elements_of_any_sequence():
    assert edit_distance(["the", "cat", "sat"], ["the", "bat", "sat"]) == 1
    assert edit_distance([1, 2, 3, 4], (1, 3, 4)) == 1


def test_error_rates_count_a_substituted_word_as_one_word_and_one_char_error():
    rates = error_rates(["the cat sat"], ["the bat sat"])
    # 3 words, 11 characters ("the cat sat" with its two spaces)
    assert rates == ErrorRates(wer=100 / 3, cer=100 / 11, words=3, chars=11, word_errors=1, char_errors=1)


def test_error_rates_count_an_inserted_word_and_its_space():
    rates = error_rates(["a b"], ["a x b"])
    assert (rates.word_errors, rates.words, rates.wer) == (1, 2, 50.0)
    # "a b" -> "a x b" inserts "x" and one space: 2 of 3 characters
    assert (rates.char_errors, rates.chars) == (2, 3)
    assert rates.cer == pytest.approx(200 / 3)


def test_error_rates_count_a_deleted_word_and_its_space():
    rates = error_rates(["hello world"], ["hello"])
    assert (rates.word_errors, rates.wer) == (1, 50.0)
    assert (rates.char_errors, rates.chars) == (6, 11)  # " world"


def test_empty_hypothesis_deletes_everything():
    rates = error_rates(["a b c"], [""])
    assert (rates.wer, rates.cer) == (100.0, 100.0)


def test_rates_can_exceed_100_percent_when_the_hypothesis_inserts():
    assert error_rates(["a"], ["a b c"]).wer == 200.0


def test_rates_pool_errors_over_the_corpus_instead_of_averaging_utterances():
    rates = error_rates(["a", "b c d e"], ["x", "b c d e"])
    # one error in five words overall; the per-utterance mean would be (100 + 0) / 2 = 50
    assert rates.wer == 20.0


def test_whitespace_runs_count_as_one_space():
    rates = error_rates(["  the   cat "], ["the cat"])
    assert (rates.word_errors, rates.char_errors, rates.chars) == (0, 0, 7)


def test_characters_are_unicode_code_points():
    rates = error_rates(["naïve café", "日本語"], ["naive café", "日本"])
    # "ï" -> "i" is one substitution; "語" is one deletion; 10 + 3 characters
    assert (rates.char_errors, rates.chars) == (2, 13)
    assert (rates.word_errors, rates.words) == (2, 3)


def test_mismatched_lengths_are_rejected_with_both_counts():
    with pytest.raises(ValueError, match="2 references but 1 hypotheses"):
        error_rates(["a", "b"], ["a"])


def test_references_without_words_are_rejected():
    with pytest.raises(ValueError, match="no words"):
        error_rates(["", "  "], ["a", ""])
