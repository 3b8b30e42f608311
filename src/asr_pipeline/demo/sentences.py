"""A seeded English sentence generator for the built-in demo corpus.

A sentence is one of ``SHAPES`` — statements, yes/no and wh- questions, commands, lists, existentials,
times and numbers (the original grammar, below), and the everyday shapes of ``conversation.py``:
opinions, reported speech, conditionals, comparisons, negatives, because/although clauses, requests,
plans, experiences, descriptions, instructions, pronouns, the passive and a bag of frequent words —
lengthened by conjunctions and phrases up to a drawn target length. Targets of 2–4 words get the stock
phrases, replies, questions and commands of ``short_shapes.py``. The phrase grammar under all of them
lives in ``grammar.py``, the words in ``words.py`` (with ``common_words.py`` and ``verbs.py``).

Output is lowercase words separated by single spaces, using only letters and apostrophes: the ASR
text normalization lowercases and strips punctuation anyway, so emitting none keeps every transcript
identical before and after normalization.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import asr_pipeline.demo.conversation as conversation
import asr_pipeline.demo.short_shapes as short_shapes
from asr_pipeline.demo.grammar import (
    BE_PAST,
    BE_PRESENT,
    DO_PRESENT,
    THINGS_AND_ANIMALS,
    PhraseGrammar,
)
from asr_pipeline.demo.verbs import INTRANSITIVE_VERB_LIST, PERSON_VERB_LIST, THING_VERB_LIST
from asr_pipeline.demo.words import (
    ADJECTIVES,
    CLOSING_ADVERBS,
    CURRENCIES,
    EVENTS,
    MONTHS,
    NAMES,
    PEOPLE,
    PLACE_NOUNS,
    THINGS,
    UNITS,
    VOCABULARY,
    indefinite_article,
    number_words,
    plural,
    year_words,
)

__all__ = [
    "SHAPES",
    "VOCABULARY",
    "generate_sentences",
    "generate_shaped_sentences",
    "number_words",
    "plural",
    "year_words",
]

Shape = Callable[[PhraseGrammar], list[str]]

# ------------------------------------------------------------------------- the original shapes


def statement(g: PhraseGrammar) -> list[str]:
    return g.statement()


def yes_no_question(g: PhraseGrammar) -> list[str]:
    words, agreement = g.subject()
    verb = g.rng.choice(THING_VERB_LIST)
    roll = g.rng.random()
    if roll < 0.5:
        aux = g.pick(["did", DO_PRESENT[agreement], "can", "will", "should"])
        return [aux, *words, verb.base, *g.thing()]
    if roll < 0.75:
        return [BE_PRESENT[agreement], *words, verb.ing, *g.thing()]
    return [BE_PAST[agreement], *words, g.pick(["very", "too", "really"]), g.pick(ADJECTIVES)]


def wh_question(g: PhraseGrammar) -> list[str]:
    words, agreement = g.subject()
    verb = g.rng.choice(THING_VERB_LIST)
    aux = g.pick(["did", DO_PRESENT[agreement], "will", "can", "should"])
    roll = g.rng.random()
    if roll < 0.25:
        return [g.pick(["where", "when", "why", "how"]), aux, *words, verb.base, *g.thing(0)]
    if roll < 0.4:
        return ["what", aux, *words, verb.base, *g.prepositional_phrase()]
    if roll < 0.55:
        return ["who", verb.past, *g.thing()]
    if roll < 0.7:
        return ["how", "many", plural(g.pick(THINGS_AND_ANIMALS)), aux, *words, verb.base]
    if roll < 0.85:
        return ["which", g.pick(THINGS), aux, *words, verb.base]
    return ["whose", g.pick(THINGS), g.pick(["is", "was"]), g.pick(["this", "that"])]


def command(g: PhraseGrammar) -> list[str]:
    opener = g.pick([[], [], ["please"], ["don't"], ["let's"]])
    roll = g.rng.random()
    if roll < 0.6:
        body = [g.rng.choice(THING_VERB_LIST).base, *g.thing()]
    elif roll < 0.8:
        body = [g.rng.choice(PERSON_VERB_LIST).base, *g.person(as_object=True)[0]]
    else:
        body = [g.rng.choice(INTRANSITIVE_VERB_LIST).base, *g.closing(1)]
    return opener + body


def list_sentence(g: PhraseGrammar) -> list[str]:
    """'we need apples two lemons a knife and some bread': 2-7 items."""
    subject, agreement = g.person(0)
    verb = g.pick(["need", "bought", "want", "found", "packed", "ordered", "shared"])
    if verb in {"need", "want"} and agreement == "3s":
        verb += "s"
    items: list[list[str]] = []
    for _ in range(g.rng.randint(2, 7)):
        noun = g.pick(THINGS)
        item = [plural(noun)] if g.chance(0.5) else [indefinite_article(noun), noun]
        if g.chance(0.3):
            item = [*number_words(g.rng.randint(2, 12)), plural(noun)]
        items.append(item)
    listed = [w for item in items[:-1] for w in item]
    return [*subject, verb, *listed, "and", *items[-1]]


def numbers_and_times(g: PhraseGrammar) -> list[str]:
    roll = g.rng.random()
    if roll < 0.2:
        noun = g.pick(["train", "bus", "plane", "boat", *EVENTS])
        return [
            "the",
            noun,
            g.pick(["leaves", "starts", "arrives", "left", "started"]),
            "at",
            *g.clock_time(),
        ]
    if roll < 0.4:
        return [g.pick(NAMES), "is", *number_words(g.rng.randint(2, 99)), "years", "old"]
    if roll < 0.55:
        year = g.rng.randint(1900, 2029)
        return [g.pick(NAMES), "was", "born", "in", g.pick(MONTHS), *year_words(year)]
    if roll < 0.75:
        return [
            "the",
            g.pick(THINGS),
            g.pick(["costs", "cost"]),
            *number_words(g.rng.randint(2, 9999)),
            g.pick(CURRENCIES),
        ]
    if roll < 0.9:
        be = g.pick(["are", "were"])
        return [
            "there",
            be,
            *number_words(g.rng.randint(2, 500)),
            plural(g.pick(THINGS_AND_ANIMALS)),
            "in",
            "the",
            g.pick(PLACE_NOUNS),
        ]
    return ["we", "waited", *number_words(g.rng.randint(2, 90)), g.pick(UNITS)]


def existential(g: PhraseGrammar) -> list[str]:
    words, agreement = g.noun_phrase(THINGS_AND_ANIMALS + PEOPLE, 0)
    there_is = g.pick(
        ["there is", "there's", "there was"] if agreement == "3s" else ["there are", "there were"]
    )
    return [*there_is.split(), *words, *g.prepositional_phrase(1)]


# ------------------------------------------------------------------------------ choosing a shape

# Shapes for targets of 5+ words and their weights: the plain statement twice the others, the
# narrower original shapes (lists, existentials) a little less. Over 2000 seeded sentences no shape
# makes more than ~10% of them (see tests/demo/test_sentences.py).
CLAUSE_SHAPES: dict[str, tuple[Shape, float]] = {
    "statement": (statement, 2.0),
    "yes_no_question": (yes_no_question, 1.0),
    "wh_question": (wh_question, 1.0),
    "command": (command, 1.0),
    "list": (list_sentence, 0.7),
    "numbers_and_times": (numbers_and_times, 1.0),
    "existential": (existential, 0.7),
    "opinion": (conversation.opinion, 1.0),
    "reported_speech": (conversation.reported_speech, 1.0),
    "conditional": (conversation.conditional, 1.0),
    "comparison": (conversation.comparison, 1.0),
    "negative": (conversation.negative, 1.0),
    "subordinate_first": (conversation.subordinate_first, 1.0),
    "everyday_question": (conversation.everyday_question, 1.0),
    "request": (conversation.request, 1.0),
    "intention": (conversation.intention, 1.0),
    "experience": (conversation.experience, 1.0),
    "description": (conversation.description, 1.0),
    "instruction": (conversation.instruction, 1.0),
    "pronouns": (conversation.pronouns, 1.0),
    "passive": (conversation.passive, 1.0),
    "chatter": (conversation.chatter, 1.0),
}
# Shapes for targets of 2-4 words; never lengthened.
SHORT_SHAPES: dict[str, tuple[Shape, float]] = {
    "short_phrase": (short_shapes.short_phrase, 1.0),
    "reply": (short_shapes.reply, 1.0),
    "short_question": (short_shapes.short_question, 1.0),
    "short_command": (short_shapes.short_command, 1.0),
    "fragment": (short_shapes.fragment, 1.0),
}
SHAPES: tuple[str, ...] = (*CLAUSE_SHAPES, *SHORT_SHAPES)
JOINING_CONJUNCTIONS = [
    "and",
    "but",
    "or",
    "then",
    "because",
    "while",
    "although",
    "so",
    "when",
    "if",
    "until",
    "since",
    "unless",
    "though",
    "as soon as",
    "even though",
    "and then",
    "but then",
    "so that",
    "before",
    "after",
]
# A clause or an extension may overshoot the target by one word; a longer one is redrawn up to this
# many times, so that the length distribution follows the uniform target (without it, the 10-word
# "and" + statement extensions pushed targets of 8-12 words into the 20s).
_MAX_CLAUSE_TRIES = 4


class _ShapePicker:
    def __init__(self, shapes: dict[str, tuple[Shape, float]]) -> None:
        self.names = list(shapes)
        self.functions = [shape for shape, _ in shapes.values()]
        self.cum_weights = []
        total = 0.0
        for _, weight in shapes.values():
            total += weight
            self.cum_weights.append(total)

    def draw(self, g: PhraseGrammar) -> tuple[str, list[str]]:
        index = g.rng.choices(range(len(self.names)), cum_weights=self.cum_weights)[0]
        return self.names[index], " ".join(
            self.functions[index](g)
        ).split()  # "did not" entries hold two words


_CLAUSES = _ShapePicker(CLAUSE_SHAPES)
_SHORTS = _ShapePicker(SHORT_SHAPES)


def _extension(g: PhraseGrammar) -> list[str]:
    """Material appended to lengthen a clause: a conjunction and a statement, or a phrase."""
    roll = g.rng.random()
    if roll < 0.6:
        return [*g.pick(JOINING_CONJUNCTIONS).split(), *g.statement()]
    if roll < 0.85:
        return g.prepositional_phrase(1)
    return [g.pick(CLOSING_ADVERBS)]


def _sentence(g: PhraseGrammar, target_words: int) -> tuple[str, list[str]]:
    if target_words <= 4:
        return _SHORTS.draw(g)
    for _ in range(_MAX_CLAUSE_TRIES):
        shape, words = _CLAUSES.draw(g)
        if len(words) <= target_words + 1:
            break
    while len(words) < target_words - 1:
        for _ in range(_MAX_CLAUSE_TRIES):
            extra = " ".join(_extension(g)).split()
            if len(words) + len(extra) <= target_words + 1:
                break
        words += extra
    return shape, words


# ------------------------------------------------------------------------------------ public API

_MAX_TRIES_PER_SENTENCE = 200


def generate_shaped_sentences(
    count: int, seed: int, min_words: int = 2, max_words: int = 30
) -> list[tuple[str, str]]:
    """``count`` (shape, sentence) pairs; the shape is the name in ``SHAPES`` that began the sentence.

    Each sentence aims at a target length drawn uniformly from ``min_words``..``max_words``, so short
    phrases and long compound sentences are equally likely; a draw that lands outside the range is
    redrawn. Deterministic for ``seed``.
    """
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    if not 2 <= min_words <= max_words:
        raise ValueError(
            f"need 2 <= min_words <= max_words, got min_words={min_words}, max_words={max_words}"
        )
    grammar = PhraseGrammar(random.Random(seed))
    sentences = []
    for _ in range(count):
        for _ in range(_MAX_TRIES_PER_SENTENCE):
            target = grammar.rng.randint(min_words, max_words)
            shape, words = _sentence(grammar, target)
            if min_words <= len(words) <= max_words:
                sentences.append((shape, " ".join(words)))
                break
        else:
            raise RuntimeError(
                f"could not generate a sentence of {min_words}..{max_words} words in "
                f"{_MAX_TRIES_PER_SENTENCE} tries (seed={seed}); widen the word range"
            )
    return sentences


def generate_sentences(count: int, seed: int, min_words: int = 2, max_words: int = 30) -> list[str]:
    """``count`` sentences with ``min_words``..``max_words`` words each, deterministic for ``seed``."""
    return [sentence for _, sentence in generate_shaped_sentences(count, seed, min_words, max_words)]
