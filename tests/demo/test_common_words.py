"""demo.common_words: the topic word lists are lowercase words without repeats (a repeat would double a
word's Zipf weight), hold none of the words the module leaves out on purpose, and every irregular plural is
of a noun the lists hold."""

from __future__ import annotations

import re

import pytest

from asr_pipeline.demo import common_words

LISTS = {
    name: value for name, value in vars(common_words).items() if name.isupper() and isinstance(value, list)
}
LEFT_OUT = [
    *common_words.HETERONYMS,
    "mark",
    "bill",
    "rose",
    "will",
    "sara",
]


def test_there_are_the_topic_lists_the_grammar_reads():
    assert {"FOOD", "ANIMALS", "PEOPLE", "PLACES", "FREQUENT_NOUNS", "ADJECTIVES", "NAMES"} <= set(LISTS)


@pytest.mark.parametrize("name", sorted(LISTS))
def test_a_list_holds_lowercase_words_once_each(name):
    words = LISTS[name]
    assert words, f"{name} is empty"
    assert [w for w in words if not re.fullmatch(r"[a-z']+", w)] == []
    assert len(words) == len(set(words)), f"{name} repeats {sorted({w for w in words if words.count(w) > 1})}"


def test_heteronyms_and_names_that_are_common_words_are_left_out():
    every_word = {word for words in LISTS.values() for word in words}
    assert every_word.isdisjoint(LEFT_OUT)


def test_every_irregular_plural_is_of_a_listed_noun():
    every_word = {word for words in LISTS.values() for word in words}
    assert set(common_words.IRREGULAR_PLURALS) <= every_word
    assert common_words.IRREGULAR_PLURALS["goose"] == "geese"
