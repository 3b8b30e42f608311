"""demo.short_shapes: the short utterances (replies, questions, commands, fragments, stock phrases) are one to
five lowercase words, varied, and the same for the same seed."""

from __future__ import annotations

import random

import pytest

from asr_pipeline.demo.grammar import PhraseGrammar
from asr_pipeline.demo.short_shapes import fragment, reply, short_command, short_phrase, short_question

SHAPES = [reply, short_question, short_command, fragment, short_phrase]


def draws(shape, seed: int, count: int = 500) -> list[str]:
    grammar = PhraseGrammar(random.Random(seed))
    return [" ".join(shape(grammar)) for _ in range(count)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.__name__)
def test_a_short_shape_is_one_to_five_lowercase_words_and_varied(shape):
    sentences = draws(shape, seed=5)

    assert {len(s.split()) for s in sentences} <= {1, 2, 3, 4, 5}
    assert all(s == s.lower() and "  " not in s and s.strip() == s for s in sentences)
    assert len(set(sentences)) > 150  # of 500: a shape is not a handful of fixed strings


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.__name__)
def test_the_same_seed_gives_the_same_utterances(shape):
    assert draws(shape, seed=9, count=50) == draws(shape, seed=9, count=50)
    assert draws(shape, seed=9, count=50) != draws(shape, seed=10, count=50)


def test_commands_and_questions_take_their_stock_forms_and_built_ones():
    commands, questions = set(draws(short_command, 1)), set(draws(short_question, 1))

    assert "sit down" in commands and any(s.split()[1] in ("it", "them", "this", "that") for s in commands)
    assert "are you sure" in questions and any(s.startswith(("where is", "where's")) for s in questions)
