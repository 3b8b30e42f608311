"""The phrase grammar under the demo sentence shapes: noun phrases, verb groups, predicates, clauses.

Noun phrases (optionally with adjectives, numbers, prepositional phrases and relative clauses) and
agreeing verb groups in simple, progressive, perfect, modal and "going to" forms. Verbs meet their
objects either loosely (any verb that takes a thing, any thing) or through ``COLLOCATIONS``, which pair
verbs with the nouns they are said with ("drink" with drinks, "solve" with problems), so that the model's
language model sees some plausible word order and not only a random one.

Every builder returns a list of words; an entry may hold two words ("did not"), which the sentence
generator splits.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TypeVar

import asr_pipeline.demo.common_words as common
from asr_pipeline.demo.verbs import (
    INFINITIVE_VERB_LIST,
    INTRANSITIVE_VERB_LIST,
    LINKING_VERB_LIST,
    PERSON_VERB_LIST,
    PHRASAL_VERBS,
    THING_VERB_LIST,
    VERBS,
    Verb,
)
from asr_pipeline.demo.words import (
    ADJECTIVES,
    ANIMALS,
    CLOSING_ADVERBS,
    COMPARATIVES,
    DAYS,
    EVENTS,
    FREQUENCY_ADVERBS,
    IDEAS,
    MONTHS,
    NAMES,
    ORDINALS,
    PEOPLE,
    PLACE_NOUNS,
    PLACES,
    PLURAL_DETERMINERS,
    SINGULAR_DETERMINERS,
    THINGS,
    TIME_NOUNS,
    TIMES_OF_DAY,
    comparative,
    indefinite_article,
    number_words,
    phrases,
    plural,
    superlative,
)

T = TypeVar("T")

# A subject carries its agreement class: "1s" (i), "3s" (he, the dog), "pl" (we, you, the dogs).
Subject = tuple[list[str], str]
BE_PRESENT = {"1s": "am", "3s": "is", "pl": "are"}
BE_PAST = {"1s": "was", "3s": "was", "pl": "were"}
BE_PRESENT_NOT = {"1s": "am not", "3s": "isn't", "pl": "aren't"}
BE_PAST_NOT = {"1s": "wasn't", "3s": "wasn't", "pl": "weren't"}
DO_PRESENT = {"1s": "do", "3s": "does", "pl": "do"}
HAVE_PRESENT = {"1s": "have", "3s": "has", "pl": "have"}
HAVE_PRESENT_NOT = {"1s": "haven't", "3s": "hasn't", "pl": "haven't"}
MODALS = ["can", "can't", "could", "should", "must", "might", "would", "may", "couldn't", "wouldn't"]
OBJECT_PRONOUNS = ["me", "you", "him", "her", "us", "them"]
POSSESSIVES = ["my", "your", "his", "her", "our", "their"]
THINGS_AND_ANIMALS = THINGS + ANIMALS
ALL_PLACE_NOUNS = THINGS + PLACE_NOUNS + ANIMALS


@dataclass(frozen=True)
class Collocation:
    verbs: list[Verb]
    nouns: list[str]
    # "count": "two red apples"; "mass": "some music"; "portion": "a cup of tea"; "chore": "the laundry";
    # "body": "her knee"; "place": "the bank"
    kind: str


def _collocation(verbs: str, nouns: list[str], kind: str = "count") -> Collocation:
    return Collocation([VERBS[base] for base in verbs.split()], nouns, kind)


COLLOCATIONS = [
    _collocation("eat cook bake taste order share buy want finish cut chop peel fry boil", common.FOOD),
    _collocation("eat cook buy want order share need", common.MASS_FOOD, "portion"),
    _collocation("drink pour spill order want buy make bring boil", common.DRINKS, "portion"),
    _collocation("wear buy wash fold lose find borrow choose", common.CLOTHES),
    _collocation("drive ride park fix wash rent sell buy repair", common.VEHICLES),
    _collocation("read write print send sign finish check copy receive deliver", common.DOCUMENTS),
    _collocation("solve discuss explain understand answer ignore mention describe change make", common.IDEAS),
    _collocation("open close lock paint fix clean repair move replace", common.HOUSEHOLD),
    _collocation("hurt wash brush lift touch", common.BODY_PARTS, "body"),
    _collocation("play watch win lose enjoy practice", common.SPORTS, "mass"),
    _collocation("visit leave reach find explore clean cross decorate sweep dig", common.PLACES, "place"),
    _collocation("feed chase watch catch follow hunt", common.ANIMALS),
    _collocation("speak learn study understand teach practice", common.LANGUAGES, "mass"),
    _collocation("do finish start", common.CHORES, "chore"),
    _collocation("spend save earn need borrow lend waste", ["money", "time"], "mass"),
    _collocation("hear enjoy play love hate", ["music", "noise"], "mass"),
]
MASS_ADJECTIVES = ["fresh", "hot", "cold", "warm", "sweet", "good", "delicious", "extra"]
MOTION_PREPOSITIONS = phrases(
    "in | near | from | to | around | across | along | into | over | through | toward | past | up | down | onto | beyond | out of"
)
PERSON_PREPOSITIONS = ["with", "for", "without", "like", "unlike", "against", "about", "behind", "near"]
STATIC_PREPOSITIONS = phrases(
    "on | under | behind | beside | near | with | without | inside | by | above | below | underneath | off | next to | on top of"
)
GRADABLE = [*COMPARATIVES, *common.LONG_ADJECTIVES]
# A pronoun and the auxiliary after it, contracted as people say them ("i'm", "she'll", "they've").
CONTRACTIONS = {
    **{(p, "will"): f"{p}'ll" for p in ("i", "you", "he", "she", "we", "they", "it")},
    **{(p, aux): f"{p}'d" for p in ("i", "you", "he", "she", "we", "they") for aux in ("would", "had")},
    **{(p, "have"): f"{p}'ve" for p in ("i", "you", "we", "they")},
    **{(p, aux): f"{p}'s" for p in ("he", "she", "it") for aux in ("is", "has")},
    **{(p, "are"): f"{p}'re" for p in ("you", "we", "they")},
    ("i", "am"): "i'm",
}
# "have" contracts only as an auxiliary: "i've seen it" but never "i've a car" or "i'd to go".
PERFECT_FOLLOWERS = {verb.participle for verb in VERBS.values()}
PERFECT_FOLLOWERS |= {"been", "already", "just", "never", "recently", "finally", "always", "often", "rarely"}
REFLEXIVES = {"i": "myself", "you": "yourself", "he": "himself", "she": "herself", "it": "itself"}
REFLEXIVES |= {"we": "ourselves", "they": "themselves"}


@cache
def _zipf_cumulative_weights(size: int) -> list[float]:
    """Cumulative weights 1 / (rank + 2.7) (Zipf-Mandelbrot), so rank 1 is ~5x as likely as rank 10."""
    total, cumulative = 0.0, []
    for rank in range(1, size + 1):
        total += 1.0 / (rank + 2.7)
        cumulative.append(total)
    return cumulative


class PhraseGrammar:
    """Phrase builders sharing one seeded RNG; each returns a list of words."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def pick(self, options: Sequence[T]) -> T:
        return self.rng.choice(options)

    def zipf_pick(self, options: Sequence[T]) -> T:
        """A word drawn with frequency-like weights from a most-common-first list."""
        return self.rng.choices(options, cum_weights=_zipf_cumulative_weights(len(options)))[0]

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    # --- noun phrases
    def noun_phrase(self, nouns: list[str], depth: int = 1, plural_ok: bool = True) -> Subject:
        noun = self.pick(nouns)
        is_plural = plural_ok and self.chance(0.35)
        head = [plural(noun)] if is_plural else [noun]
        if self.chance(0.4):
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
                det = [self.pick(["a few", "all the", "both", "several", "most", "other"])]
            else:
                det = []
        else:
            det = [self.pick(SINGULAR_DETERMINERS)]
            if det == ["the"] and self.chance(0.12):
                det = [
                    "the",
                    *([self.pick(ORDINALS)] if self.chance(0.5) else superlative(self.pick(GRADABLE))),
                ]
            if det == ["a"]:
                det = [indefinite_article(head[0])]
        words = det + head
        if depth > 0 and self.chance(0.2):
            words += self.prepositional_phrase(depth - 1)
        elif depth > 0 and self.chance(0.15):
            words += self.relative_clause(nouns is PEOPLE, depth - 1)
        return words, ("pl" if is_plural else "3s")

    def mass_phrase(self, nouns: list[str], portions: bool = True) -> list[str]:
        """'some water', 'a cup of tea' (with ``portions``), 'the fresh bread', 'no time'."""
        if portions and self.chance(0.2):
            count = self.rng.randint(1, 5)
            container = self.pick(common.CONTAINERS)
            quantity = (
                [indefinite_article(container), container]
                if count == 1
                else [*number_words(count), plural(container)]
            )
            return [*quantity, "of", self.pick(nouns)]
        det = self.pick(
            ["the", "some", "more", "less", "no", "a lot of", "a little", "enough", "", "", "this"]
        )
        adjective = [self.pick(MASS_ADJECTIVES)] if self.chance(0.2) else []
        return [*det.split(), *adjective, self.pick(nouns)]

    def person(self, depth: int = 1, as_object: bool = False) -> Subject:
        roll = self.rng.random()
        if roll < 0.3:
            return [self.pick(NAMES)], "3s"
        if roll < 0.38:
            return [self.pick(NAMES), "and", self.pick(NAMES)], "pl"
        if roll < 0.6:
            return self.noun_phrase(PEOPLE, depth)
        if roll < 0.66:
            return [self.pick(POSSESSIVES), self.pick(PEOPLE)], "3s"
        return ([self.pick(OBJECT_PRONOUNS)], "pl") if as_object else self.pronoun()

    def pronoun(self) -> Subject:
        word = self.pick(["i", "you", "he", "she", "it", "we", "they", "i", "you", "we"])
        return [word], {"i": "1s", "he": "3s", "she": "3s", "it": "3s"}.get(word, "pl")

    def thing(self, depth: int = 1) -> list[str]:
        return self.noun_phrase(THINGS_AND_ANIMALS, depth)[0]

    def place(self, depth: int = 0) -> list[str]:
        if self.chance(0.35):
            return [self.pick(PLACES)]
        return self.noun_phrase(PLACE_NOUNS, depth, plural_ok=False)[0]

    def prepositional_phrase(self, depth: int = 0) -> list[str]:
        roll = self.rng.random()
        if roll < 0.25:
            return [self.pick(MOTION_PREPOSITIONS), *self.place(depth)]
        if roll < 0.3:
            return [self.pick(PERSON_PREPOSITIONS), *self.person(depth, as_object=True)[0]]
        if roll < 0.33:
            return ["between", *self.place(), "and", *self.place()]
        if roll < 0.45:
            return self.time_phrase()
        if roll < 0.5:
            return ["about", *self.noun_phrase(IDEAS, 0)[0]]
        if roll < 0.53:
            return self.rare_prepositional_phrase()
        return [self.pick(STATIC_PREPOSITIONS), *self.noun_phrase(ALL_PLACE_NOUNS, depth)[0]]

    def rare_prepositional_phrase(self) -> list[str]:
        """'despite the rain', 'among the trees', 'within an hour', 'except her'."""
        roll = self.rng.random()
        if roll < 0.2:
            return [
                "despite",
                "the",
                self.pick(["rain", "snow", "noise", "traffic", "weather", "storm", "heat"]),
            ]
        if roll < 0.4:
            return ["among", "the", plural(self.pick(THINGS_AND_ANIMALS + PEOPLE))]
        if roll < 0.6:
            return [
                "within",
                *self.pick(["a few minutes", "an hour", "two days", "a week", "the hour"]).split(),
            ]
        if roll < 0.8:
            return ["throughout", "the", self.pick(["day", "night", "year", "week", "summer", "winter"])]
        return ["except", *self.person(0, as_object=True)[0]]

    def time_phrase(self) -> list[str]:
        roll = self.rng.random()
        if roll < 0.2:
            return ["on", self.pick(DAYS)] + ([self.pick(TIMES_OF_DAY)] if self.chance(0.3) else [])
        if roll < 0.3:
            return ["in", self.pick(MONTHS)]
        if roll < 0.45:
            return ["at", *self.clock_time()]
        if roll < 0.6:
            return [self.pick(["after", "before", "during"]), "the", self.pick(EVENTS)]
        return self.time_adverbial()

    def time_adverbial(self) -> list[str]:
        """'last week', 'two days ago', 'every morning', 'in the winter', 'at midnight'."""
        roll = self.rng.random()
        unit = self.pick(TIME_NOUNS[:6])
        if roll < 0.25:
            return [
                self.pick(["last", "next", "this", "every"]),
                self.pick([unit, *TIMES_OF_DAY[:3], *DAYS, *common.SEASONS]),
            ]
        if roll < 0.4:
            count = self.rng.randint(2, 12)
            amount = (
                [*number_words(count), plural(unit)] if self.chance(0.7) else [indefinite_article(unit), unit]
            )
            return [*amount, "ago"] if self.chance(0.6) else ["in", *amount]
        if roll < 0.55:
            return [
                self.pick(["today", "tomorrow", "yesterday", "tonight", "later", "soon", "now", "recently"])
            ]
        if roll < 0.7:
            return [self.pick(["tomorrow", "yesterday"]), self.pick(TIMES_OF_DAY[:3])]
        if roll < 0.85:
            return ["in", "the", self.pick([*common.SEASONS, *TIMES_OF_DAY[:3]])]
        return [
            "at",
            self.pick(
                ["noon", "midnight", "lunchtime", "bedtime", "sunrise", "sunset", "night", "the weekend"]
            ),
        ]

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
            verb = self.rng.choice(self.rng.choice([THING_VERB_LIST, INTRANSITIVE_VERB_LIST]))
            rest = self.thing(0) if verb in THING_VERB_LIST else self.closing(depth)
            return ["who", verb.past, *rest]
        subject, agreement = self.pronoun()
        verb = self.rng.choice(THING_VERB_LIST + PERSON_VERB_LIST)
        return [
            self.pick(["that", "which"]) if not about_person else "that",
            *subject,
            *self.verb_group(verb, agreement),
        ]

    def closing(self, depth: int) -> list[str]:
        if self.chance(0.5):
            return [self.pick(CLOSING_ADVERBS)]
        return self.prepositional_phrase(depth)

    # --- verbs and their objects
    def verb_group(self, verb: Verb, agreement: str) -> list[str]:
        """An agreeing finite verb group: 'opens', 'will open', 'hasn't opened', 'is going to open'..."""
        present = verb.third if agreement == "3s" else verb.base
        roll = self.rng.random()
        if roll < 0.2:
            return [present]
        if roll < 0.42:
            return [verb.past]
        if roll < 0.5:
            return [self.pick(["will", "won't"]), verb.base]
        if roll < 0.58:
            return [self.pick(MODALS), verb.base]
        if roll < 0.67:
            return [self.pick([BE_PRESENT[agreement], BE_PAST[agreement]]), verb.ing]
        if roll < 0.71:
            return [self.pick([BE_PRESENT_NOT[agreement], BE_PAST_NOT[agreement]]), verb.ing]
        if roll < 0.77:
            do = DO_PRESENT[agreement]
            return [self.pick([do + " not", do + "n't", "did not", "didn't"]), verb.base]
        if roll < 0.84:
            return [self.pick(FREQUENCY_ADVERBS), self.pick([present, verb.past])]
        if roll < 0.92:
            have = self.pick([HAVE_PRESENT[agreement], HAVE_PRESENT_NOT[agreement], "had"])
            adverb = (
                [self.pick(["already", "just", "never", "recently", "finally", "always"])]
                if self.chance(0.4)
                else []
            )
            return [have, *adverb, verb.participle]
        if roll < 0.96:
            return [BE_PRESENT[agreement], "going to", verb.base]
        return [self.pick(common.STANCE_ADVERBS), verb.past]

    def collocation(self) -> tuple[Verb, list[str]]:
        """A verb and an object it is said with: 'drank a glass of milk', 'solved the problem'."""
        pairing = self.rng.choice(COLLOCATIONS)
        verb = self.rng.choice(pairing.verbs)
        if pairing.kind in {"mass", "portion"}:
            return verb, self.mass_phrase(pairing.nouns, portions=pairing.kind == "portion")
        if pairing.kind == "chore":
            return verb, [self.pick(["the", "my", "your", "some", "their"]), self.pick(pairing.nouns)]
        if pairing.kind == "body":
            part = self.pick(pairing.nouns)
            return verb, [self.pick(POSSESSIVES), plural(part) if self.chance(0.3) else part]
        if pairing.kind == "place":
            return verb, self.noun_phrase(pairing.nouns, 0, plural_ok=False)[0]
        return verb, self.noun_phrase(pairing.nouns, 0)[0]

    def verb_phrase(self, depth: int = 1) -> tuple[Verb, list[str]]:
        """A verb and what follows it, for infinitives and commands: ('buy', ['a', 'new', 'coat'])."""
        roll = self.rng.random()
        if roll < 0.4:
            return self.collocation()
        if roll < 0.6:
            return self.rng.choice(THING_VERB_LIST), self.thing(depth)
        if roll < 0.75:
            return self.rng.choice(PERSON_VERB_LIST), self.person(depth, as_object=True)[0]
        if roll < 0.85:
            verb, particle = self.rng.choice(PHRASAL_VERBS)
            return verb, [particle, *self.noun_phrase(THINGS, 0)[0]]
        return self.rng.choice(INTRANSITIVE_VERB_LIST), self.closing(depth)

    def predicate(self, agreement: str, depth: int = 1) -> list[str]:
        roll = self.rng.random()
        if roll < 0.25:
            verb = self.rng.choice(THING_VERB_LIST)
            return [*self.verb_group(verb, agreement), *self.thing(depth)]
        if roll < 0.45:
            verb, words = self.collocation()
            return [*self.verb_group(verb, agreement), *words]
        if roll < 0.57:
            verb = self.rng.choice(PERSON_VERB_LIST)
            return [*self.verb_group(verb, agreement), *self.person(depth, as_object=True)[0]]
        if roll < 0.72:
            verb = self.rng.choice(INTRANSITIVE_VERB_LIST)
            return [*self.verb_group(verb, agreement), *self.closing(depth)]
        if roll < 0.8:
            wanting = self.rng.choice(INFINITIVE_VERB_LIST)
            verb, rest = self.verb_phrase(0)
            return [*self.verb_group(wanting, agreement), "to", verb.base, *rest]
        if roll < 0.85:
            verb, particle = self.rng.choice(PHRASAL_VERBS)
            return [*self.verb_group(verb, agreement), particle, *self.noun_phrase(THINGS, 0)[0]]
        if roll < 0.9:
            linking = self.rng.choice(LINKING_VERB_LIST)
            return [*self.verb_group(linking, agreement), self.pick(ADJECTIVES)]
        if self.chance(0.15):
            return ["will", "be", self.pick(ADJECTIVES)]
        be = self.pick(
            [BE_PRESENT[agreement], BE_PAST[agreement], BE_PRESENT_NOT[agreement], BE_PAST_NOT[agreement]]
        )
        if self.chance(0.2):
            than = ["than", *self.subject(0)[0]] if self.chance(0.5) else []
            return [be, self.pick(["", "even", "much", "a bit"]), *comparative(self.pick(GRADABLE)), *than]
        intensifier = (
            self.pick(["very", "too", "really", "so", "quite", "pretty", "a bit"]) if self.chance(0.4) else ""
        )
        return [be, intensifier, self.pick(ADJECTIVES)]

    def subject(self, depth: int = 1) -> Subject:
        if self.chance(0.6):
            return self.person(depth)
        return self.noun_phrase(THINGS_AND_ANIMALS, depth)

    def statement(self) -> list[str]:
        words, agreement = self.subject()
        clause = self.contract(words, self.predicate(agreement))
        if self.chance(0.3):
            clause += self.prepositional_phrase()
        return clause

    def contract(self, subject: list[str], rest: list[str]) -> list[str]:
        """The subject and what follows, "she will" said as "she'll" about half the time."""
        rest = " ".join(rest).split()  # "am not" -> "i'm not"
        key = (subject[0], rest[0]) if len(subject) == 1 and len(rest) > 1 else None
        if key not in CONTRACTIONS or (
            rest[0] in {"have", "has", "had"} and rest[1] not in PERFECT_FOLLOWERS
        ):
            return [*subject, *rest]
        return [CONTRACTIONS[key], *rest[1:]] if self.chance(0.5) else [*subject, *rest]
