"""Shapes for 2–4 word utterances: stock phrases, replies, short questions and commands, fragments.

Much of real conversation is this short ("not really", "where's the station", "turn it off", "a cup of
tea"). ``sentences.py`` uses these for targets of 2–4 words and never lengthens them.
"""

from __future__ import annotations

from collections.abc import Callable

from asr_pipeline.demo.grammar import DO_PRESENT, THINGS_AND_ANIMALS, PhraseGrammar
from asr_pipeline.demo.verbs import INTRANSITIVE_VERB_LIST, PHRASAL_VERBS, THING_VERB_LIST
from asr_pipeline.demo.words import (
    ADJECTIVES,
    ALL_NOUNS,
    CLOSING_ADVERBS,
    DAYS,
    EVENTS,
    IDEAS,
    MASS_NOUNS,
    NAMES,
    ORDINALS,
    PEOPLE,
    PLACE_NOUNS,
    PLACES,
    THINGS,
    TIMES_OF_DAY,
    number_words,
    phrases,
    plural,
)

REPLIES = phrases(
    """of course | not really | i don't know | i think so | i don't think so | me too | me neither | no problem
    | sounds good | that's right | fair enough | good idea | not yet | of course not | why not | maybe later
    | not at all | i'm not sure | thanks anyway | never mind | you're right | that's true | i agree | no thanks
    | that's fine | it's okay | same here | good luck | well done | take care | have fun | excuse me | i'm sorry
    | i'm fine thanks | not bad | pretty good | i hope so | i guess so | let me see | hang on | just a moment
    | one second | go ahead | after you | here you are | i'll try | we'll see | it depends | who knows
    | you're kidding | bless you | see you soon | nice to meet you | good night | goodbye | congratulations
    | cheers | i can't wait | it's up to you | no way | what a pity | i'm on my way | exactly | absolutely
    | definitely | cool | great | fine | here's your change"""
)
REPLY_OPENERS = phrases("| | | yes | no | oh | well | yeah | okay | sure | hey | hi | right | alright | wow")
STOCK_QUESTIONS = phrases(
    """how are you | where are you | what time is it | are you ready | are you sure | what happened
    | who's there | what's wrong | can you hear me | is it ready | is that yours | how was it | where were you
    | what did you say | are you okay | what do you mean | what's your name | how much is it | what are you doing
    | did you sleep well | is anyone here | what's the matter | are we there yet | how's it going"""
)
STOCK_COMMANDS = phrases(
    """sit down | come here | wait a minute | hurry up | look at this | be careful | calm down | watch out
    | listen to me | take a seat | follow me | try again | keep going | slow down | stand up | come in
    | go away | don't worry | stop it | let's go | help me | wake up | have a seat | look out | come on
    | get in | hold on"""
)


def reply(g: PhraseGrammar) -> list[str]:
    """'yes of course', 'oh not really', 'well i guess so'."""
    return [*g.pick(REPLY_OPENERS).split(), *g.pick(REPLIES).split()]


def short_question(g: PhraseGrammar) -> list[str]:
    """'where's the station', 'are you sure', 'when was the party'."""
    roll = g.rng.random()
    if roll < 0.2:
        noun = g.pick(g.rng.choice([THINGS, PLACE_NOUNS, PEOPLE]))
        where = g.pick(["where is", "where's", "where was"])
        return [*where.split(), g.pick(["the", "my", "your", "our"]), noun]
    if roll < 0.3:
        return ["when", g.pick(["is", "was"]), g.pick(["the", "your", "our"]), g.pick(EVENTS)]
    if roll < 0.4:
        return [
            *g.pick(["who is", "who's", "who was"]).split(),
            g.pick(["the", "that", "your"]),
            g.pick(PEOPLE),
        ]
    if roll < 0.7:
        return g.pick(STOCK_QUESTIONS).split()
    subject, agreement = g.pronoun()
    verb = g.rng.choice(INTRANSITIVE_VERB_LIST)
    return [
        g.pick(["where", "when", "why", "how"]),
        g.pick([DO_PRESENT[agreement], "did"]),
        *subject,
        verb.base,
    ]


def short_command(g: PhraseGrammar) -> list[str]:
    """'sit down', 'turn it off', 'close the door'."""
    roll = g.rng.random()
    if roll < 0.4:
        return g.pick(STOCK_COMMANDS).split()
    if roll < 0.7:
        verb, particle = g.rng.choice(PHRASAL_VERBS)
        return [verb.base, g.pick(["it", "them", "this", "that"]), particle]
    return [g.rng.choice(THING_VERB_LIST).base, g.pick(["the", "your", "my", "this", "that"]), g.pick(THINGS)]


def fragment(g: PhraseGrammar) -> list[str]:
    """'a cup of tea', 'the big red car', 'last summer in rome', 'maybe tomorrow'."""
    roll = g.rng.random()
    if roll < 0.35:
        return g.mass_phrase(MASS_NOUNS)
    if roll < 0.7:
        noun = g.pick(g.rng.choice([THINGS, PEOPLE, PLACE_NOUNS, IDEAS]))
        adjectives = [g.pick(ADJECTIVES) for _ in range(g.rng.randint(1, 2))]
        return [g.pick(["the", "my", "your", "our", "this", "that"]), *adjectives, noun]
    if roll < 0.85:
        return [*g.time_adverbial(), *(["in", g.pick(PLACES)] if g.chance(0.5) else [])]
    return [g.pick(["not", "right", "just", "maybe", "probably", "definitely"]), g.pick(CLOSING_ADVERBS)]


def short_phrase(g: PhraseGrammar) -> list[str]:
    """The original stock phrases: 'hello anna', 'see you on monday', 'seven red apples'."""
    shapes: list[Callable[[], list[str]]] = [
        lambda: ["hello", g.pick(NAMES)],
        lambda: ["good", g.pick(TIMES_OF_DAY)] + ([g.pick(NAMES)] if g.chance(0.5) else []),
        lambda: g.pick([["thank", "you"], ["thank", "you", "very", "much"], ["thanks", "a", "lot"]]),
        lambda: ["see", "you", g.pick(["later", "soon", "tomorrow", "tonight"])],
        lambda: ["see", "you", "on", g.pick(DAYS)],
        lambda: [g.pick(ADJECTIVES), plural(g.pick(ALL_NOUNS))],
        lambda: [*number_words(g.rng.randint(2, 99)), plural(g.pick(THINGS_AND_ANIMALS))],
        lambda: [g.rng.choice(THING_VERB_LIST).base, "the", g.pick(THINGS)],
        lambda: ["please", g.rng.choice(INTRANSITIVE_VERB_LIST).base, g.pick(CLOSING_ADVERBS)],
        lambda: [g.pick(NAMES), "and", g.pick(NAMES)],
        lambda: [g.pick(PLACES), "on", g.pick(DAYS)],
        lambda: ["the", g.pick(ORDINALS), g.pick(THINGS + PLACE_NOUNS)],
        lambda: [g.pick(NAMES), g.rng.choice(INTRANSITIVE_VERB_LIST).past],
        lambda: g.pick(
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
            g.pick(["in", "near", "behind", "under"]),
            "the",
            g.pick(ADJECTIVES),
            g.pick(PLACE_NOUNS + THINGS),
        ],
    ]
    return g.rng.choice(shapes)()
