import re
from collections import Counter

import pytest

from asr_pipeline.demo.sentences import VOCABULARY, generate_sentences, number_words, plural, year_words
from asr_pipeline.text.normalize import normalize_text

WORDS_ONLY = re.compile(r"[a-z']+( [a-z']+)*")


def test_same_seed_gives_the_same_sentences():
    assert generate_sentences(50, seed=3) == generate_sentences(50, seed=3)


def test_different_seeds_give_different_sentences():
    first, second = generate_sentences(50, seed=3), generate_sentences(50, seed=4)
    assert len(set(first) & set(second)) < 5  # only short stock phrases may coincide


def test_a_prefix_of_the_stream_does_not_depend_on_count():
    assert generate_sentences(10, seed=9) == generate_sentences(40, seed=9)[:10]


def test_vocabulary_has_at_least_500_words():
    assert len(VOCABULARY) >= 500
    assert all(WORDS_ONLY.fullmatch(word) for word in VOCABULARY)


def test_every_emitted_word_is_in_vocabulary_and_most_of_vocabulary_is_emitted():
    emitted = Counter(word for sentence in generate_sentences(4000, seed=1) for word in sentence.split())
    assert set(emitted) - VOCABULARY == set()  # a template literal missing from FUNCTION_WORDS lands here
    assert len(set(emitted)) >= 0.9 * len(VOCABULARY)


def test_output_is_lowercase_words_and_apostrophes_separated_by_single_spaces():
    for sentence in generate_sentences(500, seed=2):
        assert WORDS_ONLY.fullmatch(sentence), sentence
        assert normalize_text(sentence) == sentence  # already in the ASR's normalized form


def test_lengths_span_short_phrases_to_long_sentences_within_bounds():
    lengths = [len(s.split()) for s in generate_sentences(1000, seed=5, min_words=2, max_words=30)]
    assert min(lengths) == 2 and max(lengths) == 30
    assert sum(n <= 4 for n in lengths) >= 50  # short phrases
    assert sum(n >= 25 for n in lengths) >= 50  # long compound sentences
    assert len(set(lengths)) == 29  # every length in between occurs


@pytest.mark.parametrize(("min_words", "max_words"), [(2, 2), (7, 7), (30, 30), (3, 5)])
def test_narrow_length_bounds_are_honored(min_words, max_words):
    lengths = {
        len(s.split()) for s in generate_sentences(100, seed=6, min_words=min_words, max_words=max_words)
    }
    assert lengths <= set(range(min_words, max_words + 1))


def test_sentence_shapes_vary():
    sentences = generate_sentences(2000, seed=8)
    first_words = Counter(s.split()[0] for s in sentences)
    for opener in ("where", "did", "who", "please", "let's", "there", "hello", "the"):
        assert first_words[opener] > 0, f"no sentence starts with {opener!r}"
    joined = "\n".join(sentences)
    for marker in (" who ", " that ", " because ", " o'clock", " years old", " thousand "):
        assert marker in joined, f"no sentence contains {marker!r}"


def test_invalid_arguments_are_rejected():
    with pytest.raises(ValueError, match="min_words"):
        generate_sentences(1, seed=0, min_words=5, max_words=4)
    with pytest.raises(ValueError, match="count"):
        generate_sentences(-1, seed=0)


def test_numbers_are_spelled_as_spoken():
    assert " ".join(number_words(2405)) == "two thousand four hundred five"
    assert " ".join(number_words(17)) == "seventeen"
    assert " ".join(number_words(90)) == "ninety"
    assert " ".join(year_words(1998)) == "nineteen ninety eight"
    assert " ".join(year_words(1905)) == "nineteen oh five"
    assert " ".join(year_words(2007)) == "two thousand seven"
    assert " ".join(year_words(2024)) == "twenty twenty four"


def test_plurals_follow_english_rules():
    assert [plural(n) for n in ("dog", "box", "baby", "key", "child", "knife", "tomato")] == [
        "dogs",
        "boxes",
        "babies",
        "keys",
        "children",
        "knives",
        "tomatoes",
    ]
