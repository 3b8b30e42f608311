"""Draws from a sentence shape of demo.clauses / demo.conversation, and the share of them with a form."""

from __future__ import annotations

import random

from asr_pipeline.demo.grammar import PhraseGrammar


def draws(shape, seed: int, count: int = 300) -> list[str]:
    grammar = PhraseGrammar(random.Random(seed))
    return [" ".join(shape(grammar)) for _ in range(count)]


def share(sentences: list[str], has) -> float:
    return sum(map(has, sentences)) / len(sentences)


def assert_varied_lowercase_sentences(shape) -> None:
    """300 draws: each 3 to 40 lowercase words, single-spaced, and over 200 of them distinct."""
    sentences = draws(shape, seed=3)
    assert all(3 <= len(s.split()) <= 40 for s in sentences)
    assert all(s == s.lower() and "  " not in s and s.strip() == s for s in sentences)
    assert len(set(sentences)) > 200  # of 300: a shape is not a handful of fixed strings


def assert_seeded(shape) -> None:
    assert draws(shape, seed=9, count=30) == draws(shape, seed=9, count=30)
    assert draws(shape, seed=9, count=30) != draws(shape, seed=10, count=30)
