"""The demo's clause shapes, built on ``PhraseGrammar``: opinions ("i think that ..."), reported speech,
conditionals, comparisons, negatives and clauses that open with because/although/when.

``conversation.py`` re-exports them beside the everyday shapes; each is a function of the grammar returning a
list of words (an entry may hold several, "going to").
"""

from __future__ import annotations

from asr_pipeline.demo.grammar import (
    BE_PAST,
    BE_PRESENT,
    DO_PRESENT,
    GRADABLE,
    HAVE_PRESENT,
    HAVE_PRESENT_NOT,
    POSSESSIVES,
    THINGS_AND_ANIMALS,
    PhraseGrammar,
    Subject,
)
from asr_pipeline.demo.verbs import (
    ASK_VERB_LIST,
    INTRANSITIVE_VERB_LIST,
    TELL_VERB_LIST,
    THAT_VERB_LIST,
    WEATHER_VERB_LIST,
)
from asr_pipeline.demo.words import (
    IDEAS,
    MASS_NOUNS,
    PEOPLE,
    PLACE_NOUNS,
    THINGS,
    comparative,
    phrases,
    plural,
    superlative,
)

WH_WORDS = ["where", "when", "why", "how", "what"]
OPINION_OPENERS = phrases(
    """i think | i don't think | i believe | i guess | i'm sure | i hope | i doubt | i bet | i feel like
    | in my opinion | personally i think | it seems like | i'm afraid | i suppose | honestly i think
    | i have a feeling | we all know | don't you think | do you think | i'm pretty sure"""
)


def _present(g: PhraseGrammar, subject: Subject) -> list[str]:
    """A present-tense clause: 'the train leaves', 'you need a new coat'."""
    words, agreement = subject
    verb, rest = g.verb_phrase(0)
    return [*words, verb.third if agreement == "3s" else verb.base, *rest]


def _past(g: PhraseGrammar, subject: Subject) -> list[str]:
    verb, rest = g.verb_phrase(0)
    return [*subject[0], verb.past, *rest]


def some_noun_phrase(g: PhraseGrammar) -> Subject:
    """A thing, an animal, a person or a place: 'the old dog', 'my sister', 'the station'."""
    return g.noun_phrase(g.rng.choice([THINGS_AND_ANIMALS, PEOPLE, PLACE_NOUNS]), 0)


# ------------------------------------------------------------------------------- clause shapes


def opinion(g: PhraseGrammar) -> list[str]:
    """'i don't think that the bus will come', 'what do you think about the plan'."""
    if g.chance(0.15):
        return ["what", "do", "you", "think", "about", *some_noun_phrase(g)[0]]
    that = ["that"] if g.chance(0.35) else []
    if g.chance(0.3):
        subject, agreement = g.pronoun()
        return g.contract(
            subject, [*g.verb_group(g.rng.choice(THAT_VERB_LIST), agreement), *that, *g.statement()]
        )
    opener = g.pick(OPINION_OPENERS)
    that = [] if opener.endswith(("like", "opinion")) else that
    return [*opener.split(), *that, *g.statement()]


def reported_speech(g: PhraseGrammar) -> list[str]:
    """'she told us that the shop was closed', 'he is asking if you were coming'."""
    speaker, agreement = g.person(0)
    roll = g.rng.random()
    if roll < 0.35:
        verb = g.rng.choice(THAT_VERB_LIST)
        that = ["that"] if g.chance(0.5) else []
        return g.contract(speaker, [*g.verb_group(verb, agreement), *that, *g.statement()])
    if roll < 0.55:
        verb = g.rng.choice(TELL_VERB_LIST)
        listener = g.person(0, as_object=True)[0]
        return g.contract(speaker, [*g.verb_group(verb, agreement), *listener, "that", *g.statement()])
    if roll < 0.75:
        verb = g.rng.choice(ASK_VERB_LIST)
        listener = g.person(0, as_object=True)[0] if verb.base == "ask" and g.chance(0.5) else []
        whether = g.pick(["if", "whether"])
        return g.contract(speaker, [*g.verb_group(verb, agreement), *listener, whether, *g.statement()])
    if roll < 0.9:
        asking = g.pick(["wanted to know", "asked", "wondered", "didn't know", "forgot", "explained"])
        return [*speaker, *asking.split(), g.pick(WH_WORDS), *_past(g, g.pronoun())]
    said = g.pick(["yes", "no", "hello", "hi", "goodbye", "thank you", "sorry", "nothing", "something"])
    return [*speaker, "said", said]


def conditional(g: PhraseGrammar) -> list[str]:
    """'if you need help then call me', 'if i were you i would wait', 'unless it rains we'll go'."""
    roll = g.rng.random()
    verb, rest = g.verb_phrase(0)
    if roll < 0.35:
        condition = ["if", *_present(g, g.subject(0))]
        then = ["then"] if g.chance(0.3) else []
        modal = g.pick(["will", "can", "should", "won't", "might"])
        return [*condition, *then, *g.contract(g.subject(0)[0], [modal, verb.base, *rest])]
    if roll < 0.55:
        unless = g.pick(["if", "unless", "as long as"])
        return [*g.contract(g.subject(0)[0], ["will", verb.base, *rest]), unless, *_present(g, g.subject(0))]
    if roll < 0.7:
        return ["if", "i", "were", "you", *g.pick(["i would", "i'd", "i wouldn't"]).split(), verb.base, *rest]
    if roll < 0.87:
        modal = g.pick(["would", "could", "might", "wouldn't"])
        return ["if", *_past(g, g.subject(0)), *g.contract(g.pronoun()[0], [modal, verb.base, *rest])]
    weather = g.rng.choice(WEATHER_VERB_LIST)
    if g.chance(0.5):
        return [
            g.pick(["if", "unless", "when"]),
            "it",
            weather.third,
            *g.contract(g.pronoun()[0], ["will", verb.base, *rest]),
        ]
    return ["if", "it", weather.past, *g.contract(g.pronoun()[0], ["would", verb.base, *rest])]


def comparison(g: PhraseGrammar) -> list[str]:
    """'my brother is taller than me', 'this is the most expensive hotel in paris', 'as old as ...'."""
    roll = g.rng.random()
    first, agreement = some_noun_phrase(g) if g.chance(0.6) else g.person(0)
    be = g.pick([BE_PRESENT[agreement], BE_PAST[agreement]])
    adjective = g.pick(GRADABLE)
    if roll < 0.3:
        second = some_noun_phrase(g)[0] if g.chance(0.6) else g.person(0, as_object=True)[0]
        return [*first, be, *comparative(adjective), "than", *second]
    if roll < 0.45:
        noun = g.pick(g.rng.choice([THINGS, PLACE_NOUNS, PEOPLE, IDEAS]))
        where = g.prepositional_phrase(0) if g.chance(0.5) else ["i've", "ever", "seen"]
        return [*first, be, "the", *superlative(adjective), noun, *where]
    if roll < 0.6:
        negation = ["not"] if g.chance(0.4) else []
        return [*first, be, *negation, "as", adjective, "as", *some_noun_phrase(g)[0]]
    if roll < 0.75:
        verb = g.rng.choice(INTRANSITIVE_VERB_LIST)
        manner = g.pick(
            phrases("faster | slower | harder | better | worse | earlier | later | more carefully")
        )
        than = g.pick(["me", "him", "her", "us", "them", "anyone", "everyone", "the others"])
        return [*g.person(0)[0], verb.past, *manner.split(), "than", *than.split()]
    if roll < 0.9:
        liking = g.pick(phrases("i prefer | we prefer | most people prefer | she prefers | he prefers"))
        if g.chance(0.5):
            return [*liking.split(), g.pick(MASS_NOUNS), "to", g.pick(MASS_NOUNS)]
        return [*liking.split(), plural(g.pick(THINGS_AND_ANIMALS)), "to", plural(g.pick(THINGS_AND_ANIMALS))]
    verb = g.rng.choice(INTRANSITIVE_VERB_LIST)
    better = g.pick(["better", "happier", "stronger", "faster", "calmer", "healthier", "smarter", "busier"])
    return ["the", "more", "you", verb.base, "the", better, "you", g.pick(["get", "feel", "become"])]


def negative(g: PhraseGrammar) -> list[str]:
    """'nobody came to the party', 'there isn't any milk left', 'we haven't decided yet'."""
    roll = g.rng.random()
    subject, agreement = g.subject(0)
    verb, rest = g.verb_phrase(0)
    if roll < 0.25:
        auxiliary = g.pick(
            [DO_PRESENT[agreement] + "n't", "didn't", "won't", "can't", "couldn't", "shouldn't"]
        )
        ending = g.pick(["anymore", "at all", "yet", "either", "again", "", ""])
        return [*subject, auxiliary, verb.base, *rest, *ending.split()]
    if roll < 0.4:
        nobody = g.pick(phrases("nobody | no one | nothing | none of us | neither of them | not everyone"))
        return [*nobody.split(), g.rng.choice(INTRANSITIVE_VERB_LIST).past, *g.closing(1)]
    if roll < 0.55:
        if g.chance(0.5):
            where = g.pick(["left", "here", "in the fridge", "at all", ""])
            return ["there", g.pick(["isn't", "wasn't"]), "any", g.pick(MASS_NOUNS), *where.split()]
        return [
            "there",
            g.pick(["aren't", "weren't"]),
            "any",
            plural(g.pick(THINGS_AND_ANIMALS)),
            *g.prepositional_phrase(0),
        ]
    if roll < 0.75:
        if g.chance(0.5):
            return g.contract(subject, [HAVE_PRESENT_NOT[agreement], verb.participle, *rest, "yet"])
        return g.contract(subject, [HAVE_PRESENT[agreement], "never", verb.participle, *rest])
    if roll < 0.9:
        whose = g.pick(["fault", "problem", "idea", "job", "decision", "money", "business"])
        return [
            *g.pick(["it isn't", "it wasn't", "that's not", "this isn't"]).split(),
            g.pick(POSSESSIVES),
            whose,
        ]
    opener = g.pick(["it doesn't matter", "i don't care", "i don't mind", "i don't know"])
    return [*opener.split(), g.pick(WH_WORDS[:4]), *_past(g, g.pronoun())]


def subordinate_first(g: PhraseGrammar) -> list[str]:
    """'although it was raining we went to the beach', 'as soon as you arrive call me'."""
    conjunction = g.pick(
        phrases(
            "although | because | when | while | before | after | since | as soon as | once | even though | whenever"
        )
    )
    return [*conjunction.split(), *g.statement(), *g.statement()]
