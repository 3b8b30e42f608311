"""demo.conversation (and the clause shapes of demo.clauses it re-exports): each everyday sentence shape is a lowercase sentence of a few words, varied, the same for
the same seed, and takes its shape's form (opinions open with an opener, passives have a participle after a
form of be, comparisons compare)."""

from __future__ import annotations

import random

import pytest

from asr_pipeline.demo import conversation
from asr_pipeline.demo.clauses import OPINION_OPENERS
from asr_pipeline.demo.grammar import PhraseGrammar

SHAPES = [
    conversation.opinion,
    conversation.reported_speech,
    conversation.conditional,
    conversation.comparison,
    conversation.negative,
    conversation.subordinate_first,
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


def draws(shape, seed: int, count: int = 300) -> list[str]:
    grammar = PhraseGrammar(random.Random(seed))
    return [" ".join(shape(grammar)) for _ in range(count)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.__name__)
def test_a_shape_is_a_varied_lowercase_sentence_of_three_to_forty_words(shape):
    sentences = draws(shape, seed=3)
    assert all(3 <= len(s.split()) <= 40 for s in sentences)
    assert all(s == s.lower() and "  " not in s and s.strip() == s for s in sentences)
    assert len(set(sentences)) > 200  # of 300: a shape is not a handful of fixed strings


@pytest.mark.parametrize("shape", SHAPES[:5], ids=lambda shape: shape.__name__)
def test_the_same_seed_gives_the_same_sentences(shape):
    assert draws(shape, seed=9, count=30) == draws(shape, seed=9, count=30)
    assert draws(shape, seed=9, count=30) != draws(shape, seed=10, count=30)


def share(sentences: list[str], has) -> float:
    return sum(map(has, sentences)) / len(sentences)


def test_shapes_take_their_forms():
    # Shares measured at seed 1 (opinion 0.56, conditional 0.82, the others all): each shape has other forms too
    opinions = draws(conversation.opinion, 1)
    assert share(opinions, lambda s: s.startswith(tuple(OPINION_OPENERS))) > 0.4
    assert share(draws(conversation.conditional, 1), lambda s: " if " in f" {s} ") > 0.7
    markers = (" than ", " as ", " the most ", "the more ", " prefer")

    def compares(sentence: str) -> bool:
        superlative = any(w.endswith("est") or w in ("best", "worst") for w in sentence.split())
        return superlative or any(m in f" {sentence} " for m in markers)

    assert share(draws(conversation.comparison, 1), compares) == 1.0
    be = {"be", "is", "are", "was", "were", "been", "being"}
    assert share(draws(conversation.passive, 1), lambda s: bool(be & set(s.split()))) == 1.0
    assert (
        share(draws(conversation.everyday_question, 1), lambda s: s.split()[0] in conversation.WH_WORDS)
        == 1.0
    )
