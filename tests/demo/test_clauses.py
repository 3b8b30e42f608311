"""demo.clauses: each clause shape is a varied lowercase sentence of a few words, the same for the same seed,
and takes its shape's form (opinions open with an opener, conditionals say if, comparisons compare, negatives
negate, subordinate clauses open with their conjunction)."""

from __future__ import annotations

import random

import pytest

from asr_pipeline.demo import clauses
from asr_pipeline.demo.grammar import PhraseGrammar
from tests.demo.shapes import assert_seeded, assert_varied_lowercase_sentences, draws, share

SHAPES = [
    clauses.opinion,
    clauses.reported_speech,
    clauses.conditional,
    clauses.comparison,
    clauses.negative,
    clauses.subordinate_first,
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.__name__)
def test_a_clause_shape_is_a_varied_lowercase_sentence_of_three_to_forty_words(shape):
    assert_varied_lowercase_sentences(shape)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.__name__)
def test_the_same_seed_gives_the_same_clauses(shape):
    assert_seeded(shape)


def test_clause_shapes_take_their_forms():
    # Shares measured at seed 1 (opinion 0.56, conditional 0.82, the others all): each shape has other forms too
    opinions = draws(clauses.opinion, 1)
    assert share(opinions, lambda s: s.startswith(tuple(clauses.OPINION_OPENERS))) > 0.4
    assert share(draws(clauses.conditional, 1), lambda s: " if " in f" {s} ") > 0.7
    markers = (" than ", " as ", " the most ", "the more ", " prefer")

    def compares(sentence: str) -> bool:
        superlative = any(w.endswith("est") or w in ("best", "worst") for w in sentence.split())
        return superlative or any(m in f" {sentence} " for m in markers)

    assert share(draws(clauses.comparison, 1), compares) == 1.0


def test_a_negative_clause_always_negates():
    negations = {"not", "never", "nobody", "nothing", "none", "neither", "no"}

    def negates(sentence: str) -> bool:
        words = sentence.split()
        return any(w.endswith("n't") for w in words) or bool(negations & set(words))

    assert share(draws(clauses.negative, 1), negates) == 1.0


def test_a_subordinate_first_clause_opens_with_its_conjunction_and_holds_two_statements():
    conjunctions = ("although", "because", "when", "while", "before", "after", "since", "as soon as", "once")
    conjunctions += ("even though", "whenever")
    sentences = draws(clauses.subordinate_first, 1)

    assert all(s.startswith(conjunctions) for s in sentences)
    assert all(len(s.split()) >= 5 for s in sentences)  # conjunction + two statements of 2+ words


def test_some_noun_phrase_is_a_third_person_singular_or_plural_subject_of_lowercase_words():
    grammar = PhraseGrammar(random.Random(4))
    phrases = [clauses.some_noun_phrase(grammar) for _ in range(200)]

    assert all(words and all(w == w.lower() for w in words) for words, _ in phrases)
    assert {agreement for _, agreement in phrases} <= {"3s", "pl"}
    assert len({" ".join(words) for words, _ in phrases}) > 100
