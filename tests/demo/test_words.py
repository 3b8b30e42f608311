from collections import Counter

import pytest

from asr_pipeline.demo.words import (
    ADJECTIVES,
    ALL_NOUNS,
    NAMES,
    PEOPLE,
    PLACE_NOUNS,
    PLACES,
    THINGS,
    VOCABULARY,
    comparative,
    indefinite_article,
    phrases,
    plural,
    superlative,
)


@pytest.mark.parametrize("words", [NAMES, PLACES, THINGS, PLACE_NOUNS, PEOPLE, ADJECTIVES, ALL_NOUNS])
def test_role_lists_hold_no_repeats(words):
    # a repeat would double the word's chance of being picked
    assert [word for word, count in Counter(words).items() if count > 1] == []


def test_short_adjectives_inflect_and_long_ones_take_more_and_most():
    assert comparative("big") == ["bigger"] and superlative("big") == ["biggest"]
    assert comparative("good") == ["better"] and superlative("bad") == ["worst"]
    assert comparative("easy") == ["easier"] and superlative("thin") == ["thinnest"]
    assert comparative("expensive") == ["more", "expensive"]
    assert superlative("comfortable") == ["most", "comfortable"]


def test_irregular_plurals_of_the_everyday_nouns():
    nouns = ("tooth", "foot", "fish", "deer", "wife", "goose", "fisherman", "stomach", "dish", "hero", "city")
    assert [plural(n) for n in nouns] == [
        "teeth",
        "feet",
        "fish",
        "deer",
        "wives",
        "geese",
        "fishermen",
        "stomachs",
        "dishes",
        "heroes",
        "cities",
    ]


def test_every_noun_and_its_plural_is_in_the_vocabulary():
    assert {noun for noun in ALL_NOUNS if noun not in VOCABULARY or plural(noun) not in VOCABULARY} == set()


@pytest.mark.parametrize(
    ("word", "article"),
    [
        ("apple", "an"),
        ("hour", "an"),
        ("honest", "an"),
        ("umbrella", "an"),
        ("university", "a"),
        ("useless", "a"),
    ],
)
def test_the_indefinite_article_follows_the_sound(word, article):
    assert indefinite_article(word) == article


def test_phrases_split_on_bars_and_keep_empty_choices():
    assert phrases("of course | not\n really | ") == ["of course", "not really", ""]
