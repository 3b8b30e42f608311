import re
import statistics
from collections import Counter
from itertools import pairwise

import pytest

from asr_pipeline.demo import common_words
from asr_pipeline.demo.sentences import (
    SHAPES,
    SHORT_SHAPES,
    VOCABULARY,
    generate_sentences,
    generate_shaped_sentences,
    number_words,
    plural,
    year_words,
)
from asr_pipeline.demo.verbs import ASK_VERB_LIST, TELL_VERB_LIST, THAT_VERB_LIST, VERBS
from asr_pipeline.demo.words import phrases
from asr_pipeline.text.normalize import normalize_text

WORDS_ONLY = re.compile(r"[a-z']+( [a-z']+)*")


@pytest.fixture(scope="module")
def shaped() -> list[tuple[str, str]]:
    return generate_shaped_sentences(3000, seed=8)


def test_same_seed_gives_the_same_sentences():
    assert generate_sentences(50, seed=3) == generate_sentences(50, seed=3)


def test_different_seeds_give_different_sentences():
    first, second = generate_sentences(50, seed=3), generate_sentences(50, seed=4)
    assert len(set(first) & set(second)) < 5  # only short stock phrases may coincide


def test_a_prefix_of_the_stream_does_not_depend_on_count():
    assert generate_sentences(10, seed=9) == generate_sentences(40, seed=9)[:10]


def test_vocabulary_has_at_least_3000_words():
    assert len(VOCABULARY) >= 3000
    assert all(WORDS_ONLY.fullmatch(word) for word in VOCABULARY)


def test_vocabulary_leaves_out_heteronyms_whose_sound_depends_on_meaning():
    assert sorted(common_words.HETERONYMS & VOCABULARY) == []


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


def test_shapes_are_reported_with_the_same_sentences_generate_sentences_gives():
    shaped = generate_shaped_sentences(200, seed=4)
    assert [sentence for _, sentence in shaped] == generate_sentences(200, seed=4)
    assert generate_shaped_sentences(200, seed=4) == shaped


def test_every_shape_occurs_and_none_dominates(shaped):
    counts = Counter(shape for shape, _ in shaped)
    assert set(counts) == set(SHAPES)
    assert len(SHAPES) >= 25
    assert max(counts.values()) <= 0.12 * len(shaped)  # the plain statement, at 2x weight, is the largest


PARTICIPLES = {verb.participle for verb in VERBS.values()}
REPORTING_FORMS = {
    form
    for verb in THAT_VERB_LIST + TELL_VERB_LIST + ASK_VERB_LIST
    for form in (verb.base, verb.third, verb.past, verb.participle, verb.ing)
}
OPENING_CONJUNCTIONS = set(
    phrases("although | because | when | while | before | after | since | as | once | even | whenever")
)
PRONOUN_WORDS = set(
    phrases(
        """myself | yourself | himself | herself | itself | ourselves | themselves | mine | yours | his | hers | ours
        | theirs | somebody | someone | everyone | everybody | nobody | no | anyone | anybody | something | nothing
        | everything | anything | neither | either"""
    )
)
# What every sentence of a shape must contain somewhere (its opening clause is never cut).
SHAPE_MARKERS = {
    "conditional": lambda s: re.search(r"\b(if|unless|as long as|when)\b", s),
    "comparison": lambda s: re.search(r"\b(than|as|prefers?|the more|the most)\b|\bthe \w+est\b", s),
    "negative": lambda s: re.search(r"n't\b|\b(not|never|nobody|no one|nothing|none|neither)\b", s),
    "reported_speech": lambda s: set(s.split()[:8]) & (REPORTING_FORMS | {"said", "wanted", "asked"}),
    "experience": lambda s: re.search(r"\b(have|has|had|hadn't|haven't|hasn't)\b|'(ve|d|s)\b", s),
    "intention": lambda s: re.search(
        r"\b(going to|like to|have to|has to|had to|needs? to|might|used to|supposed to)\b", s
    ),
    "opinion": lambda s: (
        set(s.split()[:4]) & (REPORTING_FORMS | {"opinion", "sure", "afraid", "seems", "bet"})
    ),
    "everyday_question": lambda s: s.split()[0] in {"where", "when", "why", "how", "what"},
    "subordinate_first": lambda s: s.split()[0] in OPENING_CONJUNCTIONS,
    "passive": lambda s: any(
        a in {"is", "are", "was", "were", "be", "been", "being"} and b in PARTICIPLES
        for a, b in pairwise(s.split())
    ),
    "pronouns": lambda s: set(s.split()) & PRONOUN_WORDS,
    "request": lambda s: re.search(
        r"\b(could|can|would|may|shall|mind|like|need|please|sure|remember|try|forget|why don't)\b", s
    ),
}


@pytest.mark.parametrize("shape", sorted(SHAPE_MARKERS))
def test_each_conversational_shape_says_what_it_is_named_for(shaped, shape):
    sentences = [sentence for name, sentence in shaped if name == shape]
    assert len(sentences) >= 50
    unmarked = [s for s in sentences if not SHAPE_MARKERS[shape](s)]
    assert unmarked == [], unmarked[:3]


def test_short_targets_get_short_shapes_and_longer_ones_clause_shapes():
    for shape, sentence in generate_shaped_sentences(300, seed=3, min_words=2, max_words=4):
        assert shape in SHORT_SHAPES, sentence
    for shape, _ in generate_shaped_sentences(300, seed=3, min_words=8, max_words=30):
        assert shape not in SHORT_SHAPES


def test_lengths_follow_the_uniform_target():
    # A target drawn uniformly from 2..30 has mean 16; extensions that overshoot would push it up.
    lengths = [len(s.split()) for s in generate_sentences(2000, seed=11)]
    assert 15.0 <= statistics.mean(lengths) <= 17.0
    assert 14 <= statistics.median(lengths) <= 18
    deciles = statistics.quantiles(lengths, n=10)
    assert deciles[0] <= 5 and deciles[-1] >= 26


def test_have_contracts_only_as_an_auxiliary():
    text = "\n".join(generate_sentences(4000, seed=12))
    assert "i'm" in text and "n't" in text and re.search(r"\b(i|you|we|they)'ve \w+", text)
    assert not re.search(r"'ve (to|a|an|the|some|my|your)\b", text)
    assert not re.search(r"'d (to|a|an|the|some|my|your)\b", text)


def test_sentence_shapes_vary():
    sentences = generate_sentences(2000, seed=8)
    first_words = Counter(s.split()[0] for s in sentences)
    for opener in ("where", "did", "who", "please", "let's", "there", "hello", "the"):
        assert first_words[opener] > 0, f"no sentence starts with {opener!r}"
    joined = "\n".join(sentences)
    for marker in (" who ", " that ", " because ", " o'clock", " years old", " thousand ", " than ", " if "):
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
