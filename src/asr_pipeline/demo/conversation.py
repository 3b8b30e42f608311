"""Everyday conversational sentence shapes for the demo corpus, built on ``PhraseGrammar``.

Opinions ("i think that ..."), reported speech, conditionals, comparisons, negatives, clauses that open
with because/although/when, how/why/where/when questions, requests, plans, experiences ("have you
ever ..."), descriptions ("the soup smells delicious"), instructions with objects, pronouns ("is this
bag yours"), the passive, and a bag of frequent words in a plausible order. The clause shapes (opinions
to subordinate clauses) live in ``clauses.py`` and are re-exported here; the 2–4 word replies, questions and
commands live in ``short_shapes.py``.

Each shape is a function of the grammar returning a list of words (an entry may hold several, "going
to"); ``sentences.py`` picks among them and splits the entries.
"""

from __future__ import annotations

import asr_pipeline.demo.common_words as common
from asr_pipeline.demo.clauses import (
    WH_WORDS,
    comparison,
    conditional,
    negative,
    opinion,
    reported_speech,
    some_noun_phrase,
    subordinate_first,
)
from asr_pipeline.demo.grammar import (
    BE_PAST,
    BE_PRESENT,
    DO_PRESENT,
    HAVE_PRESENT,
    REFLEXIVES,
    THINGS_AND_ANIMALS,
    PhraseGrammar,
)
from asr_pipeline.demo.verbs import (
    FREQUENT_VERB_LIST,
    HAPPENING_VERB_LIST,
    INTRANSITIVE_VERB_LIST,
    LINKING_VERB_LIST,
    PHRASAL_VERBS,
    REFLEXIVE_VERB_LIST,
    THING_VERB_LIST,
    WEATHER_VERB_LIST,
)
from asr_pipeline.demo.words import (
    ADJECTIVES,
    EVENTS,
    IDEAS,
    MASS_NOUNS,
    PLACE_NOUNS,
    THINGS,
    indefinite_article,
    number_words,
    phrases,
    plural,
)

WEATHER_ADJECTIVES = phrases(
    "sunny | cloudy | rainy | windy | snowy | foggy | stormy | cold | hot | warm | mild"
)

__all__ = [
    "chatter",
    "comparison",
    "conditional",
    "description",
    "everyday_question",
    "experience",
    "instruction",
    "intention",
    "negative",
    "opinion",
    "passive",
    "pronouns",
    "reported_speech",
    "request",
    "subordinate_first",
]

# ------------------------------------------------------------------------------- everyday shapes


def everyday_question(g: PhraseGrammar) -> list[str]:
    """'why are you leaving so early', 'how long have you lived here', 'what time does it open'."""
    wh = g.pick(WH_WORDS)
    subject, agreement = g.subject(0) if g.chance(0.4) else g.pronoun()
    verb, rest = g.verb_phrase(0)
    roll = g.rng.random()
    if roll < 0.25:
        return [wh, g.pick([DO_PRESENT[agreement], "did", "didn't"]), *subject, verb.base, *rest]
    if roll < 0.45:
        return [wh, g.pick([BE_PRESENT[agreement], BE_PAST[agreement]]), *subject, verb.ing, *rest]
    if roll < 0.55:
        return [wh, HAVE_PRESENT[agreement], *subject, verb.participle, *rest]
    if roll < 0.75:
        how = g.pick(["how long", "how often", "how many times", "how much", "how far", "how soon"])
        auxiliary = g.pick([DO_PRESENT[agreement], "did", HAVE_PRESENT[agreement], "will", "can"])
        form = verb.participle if auxiliary in {"have", "has"} else verb.base
        return [*how.split(), auxiliary, *subject, form, *rest]
    if roll < 0.87:
        noun = g.pick(g.rng.choice([THINGS, PLACE_NOUNS, EVENTS]))
        when = g.pick(["open", "close", "start", "leave", "arrive", "finish"])
        return ["what", "time", "does", "the", noun, when]
    return [*g.pick(["how about", "what about", "why not try"]).split(), verb.ing, *rest]


def request(g: PhraseGrammar) -> list[str]:
    """'could you please pass me the salt', 'would you mind closing the window', 'shall we go'."""
    verb, rest = g.verb_phrase(0)
    please = ["please"] if g.chance(0.4) else []
    roll = g.rng.random()
    if roll < 0.2:
        return [g.pick(["could", "can", "would"]), "you", *please, verb.base, *rest]
    if roll < 0.35:
        wanted = g.mass_phrase(MASS_NOUNS) if g.chance(0.5) else g.thing(0)
        return [
            g.pick(["can", "could", "may"]),
            "i",
            g.pick(["have", "borrow", "use", "get", "take"]),
            *wanted,
            *please,
        ]
    if roll < 0.45:
        return ["would", "you", "mind", verb.ing, *rest]
    if roll < 0.55:
        return [
            *g.pick(["do you mind if i", "shall we", "shall i", "why don't we"]).split(),
            verb.base,
            *rest,
        ]
    if roll < 0.7:
        wanted = g.mass_phrase(MASS_NOUNS) if g.chance(0.5) else ["to", verb.base, *rest]
        return [*g.pick(["i'd like", "i would like", "we'd like", "would you like"]).split(), *wanted]
    if roll < 0.85:
        asking = g.pick(["let me know if you need", "tell me if you need", "call me if you need"])
        return [*asking.split(), *g.pick(["anything", "help", "a ride", "more time", "some money"]).split()]
    reminder = g.pick(
        phrases("please don't forget to | make sure you | remember to | try not to | don't forget to")
    )
    return [*reminder.split(), verb.base, *rest]


def intention(g: PhraseGrammar) -> list[str]:
    """'next week we're going to visit our grandparents', 'she has to finish the report tonight'."""
    subject, agreement = g.subject(0) if g.chance(0.4) else g.pronoun()
    verb, rest = g.verb_phrase(0)
    going = g.pick(
        [
            f"{BE_PRESENT[agreement]} going to",
            f"{BE_PAST[agreement]} going to",
            "would like to",
            f"{HAVE_PRESENT[agreement]} to",
            "had to",
            "will have to",
            "needs to" if agreement == "3s" else "need to",
            "might",
            "used to",
            f"{BE_PRESENT[agreement]} supposed to",
        ]
    )
    clause = g.contract(subject, [*going.split(), verb.base, *rest])
    when = g.time_adverbial()
    return [*when, *clause] if g.chance(0.5) else [*clause, *when]


def experience(g: PhraseGrammar) -> list[str]:
    """'have you ever been to japan', 'she has already finished her homework', 'i've been waiting for hours'."""
    subject, agreement = g.subject(0) if g.chance(0.3) else g.pronoun()
    verb, rest = g.verb_phrase(0)
    roll = g.rng.random()
    if roll < 0.3:
        if g.chance(0.4):
            return [HAVE_PRESENT[agreement], *subject, "ever", "been", "to", *g.place()]
        return [HAVE_PRESENT[agreement], *subject, "ever", verb.participle, *rest]
    if roll < 0.55:
        adverb = g.pick(["already", "just", "never", "recently", "finally", "always", "often", "rarely"])
        return g.contract(subject, [HAVE_PRESENT[agreement], adverb, verb.participle, *rest])
    if roll < 0.85:
        if g.chance(0.5):
            since = ["for", *number_words(g.rng.randint(2, 12)), plural(g.pick(common.TIME_NOUNS))]
        else:
            since = [
                "since",
                *g.pick(["monday", "last week", "this morning", "lunchtime", "march", "yesterday"]).split(),
            ]
        return g.contract(subject, [HAVE_PRESENT[agreement], "been", verb.ing, *rest, *since])
    had = g.pick(["had already", "hadn't", "had just", "had never"])
    later = [g.rng.choice(INTRANSITIVE_VERB_LIST).past]
    return [*g.contract(subject, [*had.split(), verb.participle, *rest]), "when", *g.pronoun()[0], *later]


def description(g: PhraseGrammar) -> list[str]:
    """'the soup smells delicious', 'it was such a nice day', 'that sounds like a great idea'."""
    roll = g.rng.random()
    adjective = g.pick(ADJECTIVES)
    if roll < 0.3:
        subject, agreement = some_noun_phrase(g) if g.chance(0.6) else g.pronoun()
        linking = g.rng.choice(LINKING_VERB_LIST)
        form = g.pick([linking.third if agreement == "3s" else linking.base, linking.past])
        return [*subject, form, *g.pick(["really", "so", "quite", "a bit", ""]).split(), adjective]
    if roll < 0.5:
        opener = g.pick(
            ["it's", "it is", "it was", "it will be", "everything was", "it's getting", "it was such a"]
        )
        if opener.endswith("such a"):
            noun = g.pick(g.rng.choice([IDEAS, THINGS, common.TIME_NOUNS]))
            return [*opener[: -len(" a")].split(), indefinite_article(adjective), adjective, noun]
        intensifier = g.pick(["really", "so", "too", "quite", "pretty", "very", ""])
        return [*opener.split(), *intensifier.split(), adjective, *g.closing(0)]
    if roll < 0.58:
        return ["it", *g.verb_group(g.rng.choice(WEATHER_VERB_LIST), "3s"), *g.time_adverbial()]
    if roll < 0.65:
        who = g.pick(["the weather", "the sky", "the night", "the morning"])
        be = g.pick(["is", "was", "will be", "has been"])
        return [*who.split(), *be.split(), g.pick(WEATHER_ADJECTIVES), *g.time_adverbial()]
    noun = g.pick(g.rng.choice([IDEAS, THINGS, PLACE_NOUNS]))
    if roll < 0.85:
        looks = g.pick(["sounds", "looks", "seems", "sounded", "looked"])
        return [g.pick(["that", "it", "this"]), looks, "like", indefinite_article(adjective), adjective, noun]
    return ["what", indefinite_article(adjective), adjective, noun]


def instruction(g: PhraseGrammar) -> list[str]:
    """'put the books on the shelf', 'turn off the lights before you leave', 'give me the keys'."""
    roll = g.rng.random()
    thing = g.noun_phrase(THINGS, 0)[0]
    if roll < 0.3:
        verb, particle = g.rng.choice(PHRASAL_VERBS)
        body = [verb.base, particle, *thing] if g.chance(0.6) else [verb.base, *thing, particle]
    elif roll < 0.5:
        body = [g.pick(["put", "leave", "keep", "hang", "hide"]), *thing, *g.prepositional_phrase(0)]
    elif roll < 0.7:
        body = [
            g.pick(["give", "show", "send", "bring", "pass", "lend"]),
            g.pick(["me", "us", "him", "her", "them"]),
            *thing,
        ]
    else:
        verb, rest = g.collocation()
        body = [verb.base, *rest]
    opener = g.pick(["", "", "please", "don't", "just", "now", "always", "never"])
    ending = g.pick(
        phrases("| | | please | right now | for me | before you leave | when you get home | carefully")
    )
    return [*opener.split(), *body, *ending.split()]


NAMES_OR_PEOPLE = phrases(
    "anna | ben | maria | sam | the teacher | my brother | his sister | the children | the others"
)


def pronouns(g: PhraseGrammar) -> list[str]:
    """'she hurt herself', 'we fixed it by ourselves', 'is this bag yours', 'nothing happened yesterday'."""
    roll = g.rng.random()
    subject, agreement = g.pronoun()
    if roll < 0.25:
        verb = g.rng.choice(REFLEXIVE_VERB_LIST)
        reflexive = REFLEXIVES[subject[0]]
        ending = g.closing(0) if g.chance(0.5) else []
        if g.chance(0.25):
            return g.contract(
                subject, [*g.verb_group(g.rng.choice(THING_VERB_LIST), agreement), "it", "by", reflexive]
            )
        return g.contract(subject, [*g.verb_group(verb, agreement), reflexive, *ending])
    if roll < 0.45:
        owner = g.pick(["mine", "yours", "his", "hers", "ours", "theirs"])
        noun_phrase, agreement = g.noun_phrase(THINGS_AND_ANIMALS, 0)
        if g.chance(0.4):
            return [BE_PRESENT[agreement], *noun_phrase, owner]
        return [
            *noun_phrase,
            g.pick([BE_PRESENT[agreement], BE_PAST[agreement]]),
            *g.pick(["", "not", "really"]).split(),
            owner,
        ]
    if roll < 0.75:
        someone = g.pick(
            phrases("somebody | someone | everyone | everybody | nobody | no one | anyone | anybody")
        )
        verb, rest = g.verb_phrase(0)
        if someone.startswith("any"):
            return [g.pick(["does", "did", "can", "will"]), someone, verb.base, *rest]
        return [*someone.split(), *g.verb_group(verb, "3s"), *rest]
    if roll < 0.9:
        something = g.pick(["something", "nothing", "everything", "anything"])
        if something == "anything":
            return [g.pick(["did", "will", "can"]), "anything", "happen", *g.time_adverbial()]
        if g.chance(0.3):
            return [something, g.pick(["was", "is", "seems", "looked"]), g.pick(ADJECTIVES)]
        return [something, *g.verb_group(g.rng.choice(HAPPENING_VERB_LIST), "3s"), *g.time_adverbial()]
    first, second = g.pick(NAMES_OR_PEOPLE), g.pick(NAMES_OR_PEOPLE)
    if g.chance(0.5):
        return ["neither", *first.split(), "nor", *second.split(), g.rng.choice(INTRANSITIVE_VERB_LIST).past]
    return [
        "either",
        *first.split(),
        "or",
        *second.split(),
        "will",
        g.rng.choice(INTRANSITIVE_VERB_LIST).base,
    ]


def passive(g: PhraseGrammar) -> list[str]:
    """'the old bridge was built by the farmers', 'the letters have been sent', 'the car is being fixed'."""
    thing, agreement = g.noun_phrase(THINGS, 0)
    verb = g.rng.choice(THING_VERB_LIST)
    voice = g.pick(
        [
            BE_PRESENT[agreement],
            BE_PAST[agreement],
            f"{HAVE_PRESENT[agreement]} been",
            "will be",
            "can be",
            "should be",
            "must be",
            f"{BE_PRESENT[agreement]} being",
            f"{BE_PAST[agreement]} being",
            "had been",
        ]
    )
    roll = g.rng.random()
    by = (
        ["by", *g.person(0, as_object=True)[0]]
        if roll < 0.4
        else g.prepositional_phrase(0)
        if roll < 0.7
        else []
    )
    return [*thing, *voice.split(), verb.participle, *by]


def chatter(g: PhraseGrammar) -> list[str]:
    """Frequent words in a plausible order, drawn with Zipf weights: 'you know i really need a new car'."""
    opener = g.zipf_pick(["", "so", "well", "you know", "and", "but", "oh", "okay", "actually", "anyway"])
    subject = g.zipf_pick(["i", "you", "we", "they", "he", "she"])
    agreement = "1s" if subject == "i" else "3s" if subject in {"he", "she"} else "pl"
    adverb = g.zipf_pick(common.STANCE_ADVERBS) if g.chance(0.3) else ""
    verb = g.zipf_pick(FREQUENT_VERB_LIST)
    form = g.pick([verb.third if agreement == "3s" else verb.base, verb.past, verb.past])
    noun = g.zipf_pick(common.FREQUENT_NOUNS)
    adjective = g.zipf_pick(common.ADJECTIVES[:80]) if g.chance(0.4) else ""
    if g.chance(0.25):
        determiner = g.zipf_pick(
            ["the", "my", "your", "some", "these", "those", "our", "their", "all the", "two"]
        )
        noun = plural(noun)
    else:
        determiner = g.zipf_pick(
            ["the", "a", "my", "your", "that", "this", "our", "their", "every", "another"]
        )
        if determiner == "a":
            determiner = indefinite_article(adjective or noun)
    tail = g.time_adverbial() if g.chance(0.4) else []
    if not tail and g.chance(0.4):
        tail = g.zipf_pick(
            ["again", "today", "too", "now", "there", "here", "yesterday", "at home", "at work"]
        ).split()
    return [
        *opener.split(),
        subject,
        *adverb.split(),
        form,
        *determiner.split(),
        *adjective.split(),
        noun,
        *tail,
    ]
