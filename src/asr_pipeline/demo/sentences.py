"""A seeded English sentence generator for the built-in demo corpus.

A small hand-written grammar: noun phrases (optionally with adjectives, numbers, prepositional
phrases and relative clauses), agreeing verb phrases in several tenses, and sentence shapes that
cover statements, yes/no and wh- questions, commands, lists, existentials, times and numbers, short
2–4 word phrases, and clauses joined by conjunctions up to ~30 words.

Output is lowercase words separated by single spaces, using only letters and apostrophes: the ASR
text normalization lowercases and strips punctuation anyway, so emitting none keeps every transcript
identical before and after normalization.

The words themselves, their inflections and ``VOCABULARY`` (every word the generator can emit) live in
``words.py``; they are re-exported here.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from asr_pipeline.demo.words import (
    ADJECTIVES,
    ALL_NOUNS,
    ANIMALS,
    CLOSING_ADVERBS,
    CURRENCIES,
    DAYS,
    EVENTS,
    FREQUENCY_ADVERBS,
    INTRANSITIVE_VERB_LIST,
    MONTHS,
    NAMES,
    ORDINALS,
    PEOPLE,
    PERSON_VERB_LIST,
    PLACE_NOUNS,
    PLACES,
    PLURAL_DETERMINERS,
    SINGULAR_DETERMINERS,
    THING_VERB_LIST,
    THINGS,
    TIMES_OF_DAY,
    UNITS,
    VOCABULARY,
    Verb,
    indefinite_article,
    number_words,
    plural,
    year_words,
)

__all__ = ["VOCABULARY", "generate_sentences", "number_words", "plural", "year_words"]

# ------------------------------------------------------------------------------- phrase grammar

# A subject carries its agreement class: "1s" (i), "3s" (he, the dog), "pl" (we, you, the dogs).
Subject = tuple[list[str], str]
BE_PRESENT = {"1s": "am", "3s": "is", "pl": "are"}
BE_PAST = {"1s": "was", "3s": "was", "pl": "were"}
BE_PRESENT_NOT = {"1s": "am not", "3s": "isn't", "pl": "aren't"}
BE_PAST_NOT = {"1s": "wasn't", "3s": "wasn't", "pl": "weren't"}
DO_PRESENT = {"1s": "do", "3s": "does", "pl": "do"}


class _Grammar:
    """Phrase builders sharing one seeded RNG; each returns a list of words."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def pick(self, options: list[str]) -> str:
        return self.rng.choice(options)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    # --- noun phrases
    def noun_phrase(self, nouns: list[str], depth: int = 1, plural_ok: bool = True) -> tuple[list[str], str]:
        noun = self.pick(nouns)
        is_plural = plural_ok and self.chance(0.35)
        head = [plural(noun)] if is_plural else [noun]
        if self.chance(0.45):
            head = [self.pick(ADJECTIVES), *head]
            if self.chance(0.15):
                head = [self.pick(ADJECTIVES), *head]
        if is_plural:
            roll = self.rng.random()
            if roll < 0.3:
                det = number_words(self.rng.randint(2, 30 if self.chance(0.8) else 999))
            elif roll < 0.75:
                det = [self.pick(PLURAL_DETERMINERS)]
            elif roll < 0.85:
                det = ["a", "few"]
            else:
                det = []
        else:
            det = [self.pick(SINGULAR_DETERMINERS)]
            if det == ["the"] and self.chance(0.1):
                det = ["the", self.pick(ORDINALS)]
            if det == ["a"]:
                det = [indefinite_article(head[0])]
        words = det + head
        if depth > 0 and self.chance(0.2):
            words += self.prepositional_phrase(depth - 1)
        elif depth > 0 and self.chance(0.15):
            words += self.relative_clause(nouns is PEOPLE, depth - 1)
        return words, ("pl" if is_plural else "3s")

    def person(self, depth: int = 1, as_object: bool = False) -> Subject:
        roll = self.rng.random()
        if roll < 0.3:
            return [self.pick(NAMES)], "3s"
        if roll < 0.4:
            return [self.pick(NAMES), "and", self.pick(NAMES)], "pl"
        if roll < 0.65:
            return self.noun_phrase(PEOPLE, depth)
        return ([self.pick(["me", "you", "him", "her", "us", "them"])], "pl") if as_object else self.pronoun()

    def pronoun(self) -> Subject:
        word = self.pick(["i", "you", "he", "she", "it", "we", "they"])
        return [word], {"i": "1s", "he": "3s", "she": "3s", "it": "3s"}.get(word, "pl")

    def thing(self, depth: int = 1) -> list[str]:
        return self.noun_phrase(THINGS + ANIMALS, depth)[0]

    def place(self, depth: int = 0) -> list[str]:
        if self.chance(0.4):
            return [self.pick(PLACES)]
        return self.noun_phrase(PLACE_NOUNS, depth, plural_ok=False)[0]

    def prepositional_phrase(self, depth: int = 0) -> list[str]:
        roll = self.rng.random()
        if roll < 0.25:
            prep = self.pick(
                ["in", "near", "from", "to", "around", "across", "along", "into", "over", "through"]
            )
            return [prep, *self.place(depth)]
        if roll < 0.3:
            return [self.pick(["with", "for", "without"]), *self.person(depth, as_object=True)[0]]
        if roll < 0.35:
            return ["between", *self.place(), "and", *self.place()]
        if roll < 0.45:
            return self.time_phrase()
        prep = self.pick(["on", "under", "behind", "beside", "near", "with", "without", "inside", "by"])
        return [prep, *self.noun_phrase(THINGS + PLACE_NOUNS + ANIMALS, depth)[0]]

    def time_phrase(self) -> list[str]:
        roll = self.rng.random()
        if roll < 0.3:
            return ["on", self.pick(DAYS)] + ([self.pick(TIMES_OF_DAY)] if self.chance(0.3) else [])
        if roll < 0.5:
            return ["in", self.pick(MONTHS)]
        if roll < 0.75:
            return ["at", *self.clock_time()]
        return [self.pick(["after", "before", "during"]), "the", self.pick(EVENTS)]

    def clock_time(self) -> list[str]:
        hour = number_words(self.rng.randint(1, 12))
        roll = self.rng.random()
        if roll < 0.3:
            return [*hour, "o'clock"]
        if roll < 0.5:
            return [self.pick(["half", "quarter"]), "past", *hour]
        return [*hour, *number_words(self.rng.choice([10, 15, 20, 25, 30, 40, 45, 50, 55]))]

    def relative_clause(self, about_person: bool, depth: int) -> list[str]:
        if about_person and self.chance(0.6):
            verb = self.pick_verb(self.rng.choice([THING_VERB_LIST, INTRANSITIVE_VERB_LIST]))
            rest = self.thing(0) if verb in THING_VERB_LIST else self.closing(depth)
            return ["who", verb.past, *rest]
        subject, agreement = self.pronoun()
        verb = self.pick_verb(THING_VERB_LIST + PERSON_VERB_LIST)
        return ["that", *subject, *self.verb_group(verb, agreement)]

    def closing(self, depth: int) -> list[str]:
        if self.chance(0.5):
            return [self.pick(CLOSING_ADVERBS)]
        return self.prepositional_phrase(depth)

    # --- verbs
    def pick_verb(self, verbs: list[Verb]) -> Verb:
        return self.rng.choice(verbs)

    def verb_group(self, verb: Verb, agreement: str) -> list[str]:
        """An agreeing finite verb group: 'opens', 'will open', 'didn't open', 'wasn't opening'..."""
        roll = self.rng.random()
        if roll < 0.25:
            return [verb.third if agreement == "3s" else verb.base]
        if roll < 0.5:
            return [verb.past]
        if roll < 0.6:
            return [self.pick(["will", "won't"]), verb.base]
        if roll < 0.7:
            return [self.pick(["can", "can't", "could", "should", "must", "might", "would"]), verb.base]
        if roll < 0.8:
            return [self.pick([BE_PRESENT[agreement], BE_PAST[agreement]]), verb.ing]
        if roll < 0.85:
            return [self.pick([BE_PRESENT_NOT[agreement], BE_PAST_NOT[agreement]]), verb.ing]
        if roll < 0.9:
            do = DO_PRESENT[agreement]
            return [self.pick([do + " not", do + "n't", "did not", "didn't"]), verb.base]
        return [self.pick(FREQUENCY_ADVERBS), verb.third if agreement == "3s" else verb.base]

    def predicate(self, agreement: str, depth: int = 1) -> list[str]:
        roll = self.rng.random()
        if roll < 0.45:
            verb = self.pick_verb(THING_VERB_LIST)
            return [*self.verb_group(verb, agreement), *self.thing(depth)]
        if roll < 0.65:
            verb = self.pick_verb(PERSON_VERB_LIST)
            return [*self.verb_group(verb, agreement), *self.person(depth, as_object=True)[0]]
        if roll < 0.85:
            verb = self.pick_verb(INTRANSITIVE_VERB_LIST)
            return [*self.verb_group(verb, agreement), *self.closing(depth)]
        if self.chance(0.15):
            return ["will", "be", self.pick(ADJECTIVES)]
        be = self.pick(
            [BE_PRESENT[agreement], BE_PAST[agreement], BE_PRESENT_NOT[agreement], BE_PAST_NOT[agreement]]
        )
        intensifier = [self.pick(["very", "too", "really", "so"])] if self.chance(0.4) else []
        return [be, *intensifier, self.pick(ADJECTIVES)]

    def subject(self, depth: int = 1) -> Subject:
        if self.chance(0.6):
            return self.person(depth)
        return self.noun_phrase(THINGS + ANIMALS, depth)

    # --- clauses and sentence shapes
    def statement(self) -> list[str]:
        words, agreement = self.subject()
        clause = words + self.predicate(agreement)
        if self.chance(0.3):
            clause += self.prepositional_phrase()
        return clause

    def yes_no_question(self) -> list[str]:
        words, agreement = self.subject()
        verb = self.pick_verb(THING_VERB_LIST)
        roll = self.rng.random()
        if roll < 0.5:
            aux = self.pick(["did", DO_PRESENT[agreement], "can", "will", "should"])
            return [aux, *words, verb.base, *self.thing()]
        if roll < 0.75:
            return [BE_PRESENT[agreement], *words, verb.ing, *self.thing()]
        return [BE_PAST[agreement], *words, self.pick(["very", "too", "really"]), self.pick(ADJECTIVES)]

    def wh_question(self) -> list[str]:
        words, agreement = self.subject()
        verb = self.pick_verb(THING_VERB_LIST)
        aux = self.pick(["did", DO_PRESENT[agreement], "will", "can", "should"])
        roll = self.rng.random()
        if roll < 0.25:
            return [self.pick(["where", "when", "why", "how"]), aux, *words, verb.base, *self.thing(0)]
        if roll < 0.4:
            return ["what", aux, *words, verb.base, *self.prepositional_phrase()]
        if roll < 0.55:
            return ["who", verb.past, *self.thing()]
        if roll < 0.7:
            return ["how", "many", plural(self.pick(THINGS + ANIMALS)), aux, *words, verb.base]
        if roll < 0.85:
            return ["which", self.pick(THINGS), aux, *words, verb.base]
        return ["whose", self.pick(THINGS), self.pick(["is", "was"]), self.pick(["this", "that"])]

    def command(self) -> list[str]:
        opener = self.pick([[], [], ["please"], ["don't"], ["let's"]])
        roll = self.rng.random()
        if roll < 0.6:
            body = [self.pick_verb(THING_VERB_LIST).base, *self.thing()]
        elif roll < 0.8:
            body = [self.pick_verb(PERSON_VERB_LIST).base, *self.person(as_object=True)[0]]
        else:
            body = [self.pick_verb(INTRANSITIVE_VERB_LIST).base, *self.closing(1)]
        return opener + body

    def list_sentence(self, target: int) -> list[str]:
        subject, agreement = self.person(0)
        verb = self.pick(["need", "bought", "want", "found", "packed", "ordered", "shared"])
        if verb in {"need", "want"} and agreement == "3s":
            verb += "s"
        items: list[list[str]] = []
        while len(subject) + 1 + sum(len(i) + 1 for i in items) < target and len(items) < 8:
            noun = self.pick(THINGS)
            item = [plural(noun)] if self.chance(0.5) else [indefinite_article(noun), noun]
            if self.chance(0.3):
                item = [*number_words(self.rng.randint(2, 12)), plural(noun)]
            items.append(item)
        items = items if len(items) >= 2 else [*items, ["some", plural(self.pick(THINGS))]]
        listed = [w for item in items[:-1] for w in item]
        return [*subject, verb, *listed, "and", *items[-1]]

    def numbers_and_times(self) -> list[str]:
        roll = self.rng.random()
        if roll < 0.2:
            noun = self.pick(["train", "bus", "plane", "boat", *EVENTS])
            return [
                "the",
                noun,
                self.pick(["leaves", "starts", "arrives", "left", "started"]),
                "at",
                *self.clock_time(),
            ]
        if roll < 0.4:
            return [self.pick(NAMES), "is", *number_words(self.rng.randint(2, 99)), "years", "old"]
        if roll < 0.55:
            year = self.rng.randint(1900, 2029)
            return [self.pick(NAMES), "was", "born", "in", self.pick(MONTHS), *year_words(year)]
        if roll < 0.75:
            return [
                "the",
                self.pick(THINGS),
                self.pick(["costs", "cost"]),
                *number_words(self.rng.randint(2, 9999)),
                self.pick(CURRENCIES),
            ]
        if roll < 0.9:
            be = self.pick(["are", "were"])
            return [
                "there",
                be,
                *number_words(self.rng.randint(2, 500)),
                plural(self.pick(THINGS + ANIMALS)),
                "in",
                "the",
                self.pick(PLACE_NOUNS),
            ]
        return ["we", "waited", *number_words(self.rng.randint(2, 90)), self.pick(UNITS)]

    def existential(self) -> list[str]:
        words, agreement = self.noun_phrase(THINGS + ANIMALS + PEOPLE, 0)
        be = self.pick(["is", "was"] if agreement == "3s" else ["are", "were"])
        return ["there", be, *words, *self.prepositional_phrase(1)]

    def short_phrase(self) -> list[str]:
        shapes: list[Callable[[], list[str]]] = [
            lambda: ["hello", self.pick(NAMES)],
            lambda: ["good", self.pick(TIMES_OF_DAY)] + ([self.pick(NAMES)] if self.chance(0.5) else []),
            lambda: self.pick([["thank", "you"], ["thank", "you", "very", "much"], ["thanks", "a", "lot"]]),
            lambda: ["see", "you", self.pick(["later", "soon", "tomorrow", "tonight"])],
            lambda: ["see", "you", "on", self.pick(DAYS)],
            lambda: [self.pick(ADJECTIVES), plural(self.pick(ALL_NOUNS))],
            lambda: [*number_words(self.rng.randint(2, 99)), plural(self.pick(THINGS + ANIMALS))],
            lambda: [self.pick_verb(THING_VERB_LIST).base, "the", self.pick(THINGS)],
            lambda: ["please", self.pick_verb(INTRANSITIVE_VERB_LIST).base, self.pick(CLOSING_ADVERBS)],
            lambda: [self.pick(NAMES), "and", self.pick(NAMES)],
            lambda: [self.pick(PLACES), "on", self.pick(DAYS)],
            lambda: ["the", self.pick(ORDINALS), self.pick(THINGS + PLACE_NOUNS)],
            lambda: [self.pick(NAMES), self.pick_verb(INTRANSITIVE_VERB_LIST).past],
            lambda: self.pick(
                [
                    ["of", "course"],
                    ["maybe", "tomorrow"],
                    ["yes", "please"],
                    ["sorry", "about", "that"],
                    ["you're", "welcome"],
                    ["okay", "sure"],
                ]
            ),
            lambda: [
                self.pick(["in", "near", "behind", "under"]),
                "the",
                self.pick(ADJECTIVES),
                self.pick(PLACE_NOUNS + THINGS),
            ],
        ]
        return self.rng.choice(shapes)()

    def clause(self) -> list[str]:
        shapes = [self.statement] * 5 + [
            self.yes_no_question,
            self.wh_question,
            self.command,
            self.existential,
        ] * 2
        return self.rng.choice([*shapes, self.numbers_and_times])()

    def extension(self) -> list[str]:
        """Material appended to lengthen a clause: a conjunction and a statement, or a phrase."""
        roll = self.rng.random()
        if roll < 0.6:
            conjunction = self.pick(
                ["and", "but", "or", "then", "because", "while", "although", "so", "when", "if", "until"]
            )
            return [conjunction, *self.statement()]
        if roll < 0.85:
            return self.prepositional_phrase(1)
        return [self.pick(CLOSING_ADVERBS)]

    def sentence(self, target_words: int) -> list[str]:
        if target_words <= 4:
            return self.short_phrase()
        if self.chance(0.12):
            return self.list_sentence(target_words)
        words = self.clause()
        while len(words) < target_words - 1:
            words += self.extension()
        return words


# ------------------------------------------------------------------------------------ public API

_MAX_TRIES_PER_SENTENCE = 200


def generate_sentences(count: int, seed: int, min_words: int = 2, max_words: int = 30) -> list[str]:
    """``count`` sentences with ``min_words``..``max_words`` words each, deterministic for ``seed``.

    Each sentence aims at a target length drawn uniformly from the range, so short phrases and
    long compound sentences are equally likely; a draw that lands outside the range is redrawn.
    """
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    if not 2 <= min_words <= max_words:
        raise ValueError(
            f"need 2 <= min_words <= max_words, got min_words={min_words}, max_words={max_words}"
        )
    grammar = _Grammar(random.Random(seed))
    sentences = []
    for _ in range(count):
        for _ in range(_MAX_TRIES_PER_SENTENCE):
            target = grammar.rng.randint(min_words, max_words)
            words = " ".join(grammar.sentence(target)).split()  # "did not" style entries hold two words
            if min_words <= len(words) <= max_words:
                sentences.append(" ".join(words))
                break
        else:
            raise RuntimeError(
                f"could not generate a sentence of {min_words}..{max_words} words in "
                f"{_MAX_TRIES_PER_SENTENCE} tries (seed={seed}); widen the word range"
            )
    return sentences
