"""demo.conversation's everyday shapes (the clause shapes it re-exports: tests/demo/test_clauses.py): each is a
lowercase sentence of a few words, varied, the same for the same seed, and takes its shape's form (passives
have a form of be, questions open with a wh-word)."""

from __future__ import annotations

import pytest

from asr_pipeline.demo import clauses, conversation
from tests.demo.shapes import assert_seeded, assert_varied_lowercase_sentences, draws, share

SHAPES = [
    conversation.everyday_question,
    conversation.request,
    conversation.intention,
    conversation.experience,
    conversation.description,
    conversation.instruction,
    conversation.pronouns,
    conversation.passive,
    conversation.chatter,
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.__name__)
def test_a_shape_is_a_varied_lowercase_sentence_of_three_to_forty_words(shape):
    assert_varied_lowercase_sentences(shape)


@pytest.mark.parametrize("shape", SHAPES[:5], ids=lambda shape: shape.__name__)
def test_the_same_seed_gives_the_same_sentences(shape):
    assert_seeded(shape)


def test_shapes_take_their_forms():
    be = {"be", "is", "are", "was", "were", "been", "being"}
    assert share(draws(conversation.passive, 1), lambda s: bool(be & set(s.split()))) == 1.0
    assert (
        share(draws(conversation.everyday_question, 1), lambda s: s.split()[0] in conversation.WH_WORDS)
        == 1.0
    )


def test_the_clause_shapes_are_re_exported_beside_the_everyday_ones():
    assert (
        conversation.opinion is clauses.opinion
        and conversation.subordinate_first is clauses.subordinate_first
    )
