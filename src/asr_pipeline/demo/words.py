"""The words of the demo sentence grammar (``grammar.py``, ``sentences.py``) and how they inflect.

Word lists by role (names, places, nouns, adjectives, adverbs, numbers, dates), the function words the
grammar's templates use, and the inflection helpers (``plural``, ``comparative``, ``number_words``,
``year_words``, ``indefinite_article``). The original lists below are extended with the everyday
words of ``common_words.py``; verbs and their forms live in ``verbs.py``.

Every word the generator can emit is listed in ``VOCABULARY``, built from these lists and not from the
grammar's code: a test checks that nothing outside it ever appears, so a template literal missing from
``FUNCTION_WORDS`` or ``common_words.TEMPLATE_WORDS`` fails loudly.
"""

from __future__ import annotations

import asr_pipeline.demo.common_words as common
from asr_pipeline.demo.verbs import VERBS

# ---------------------------------------------------------------------------------------------- words


def _words(text: str) -> list[str]:
    return text.split()


def phrases(text: str) -> list[str]:
    """'of course | not really | ' -> ['of course', 'not really', '']: the grammar's multiword choices.

    An empty entry is a choice of saying nothing; the generator splits every entry into words.
    """
    return [" ".join(phrase.split()) for phrase in text.split("|")]


NAMES = _words(
    """
anna ben carlos diana emma frank grace henry isabel jack karen leo maria nina oscar paula rosa sam
tina victor wendy xavier yusuf zoe alice bruno chloe daniel elena felix george hannah ivan julia
kevin laura martin nora oliver peter rachel simon teresa umar vera william yara amir bianca colin
dora ethan fiona hugo lucy
"""
)

PLACES = _words(
    """
london paris tokyo berlin madrid rome cairo lisbon dublin oslo vienna prague boston chicago denver
seattle toronto sydney mumbai lagos nairobi lima quito havana athens warsaw helsinki stockholm
edinburgh glasgow manchester liverpool brussels amsterdam geneva zurich milan naples venice florence
kyoto seoul beijing shanghai bangkok jakarta manila auckland vancouver montreal
"""
)

# Count nouns that take a regular plural (see ``plural``); irregular ones are listed with their plural.
THINGS = _words(
    """
apple banana orange lemon cake sandwich cookie egg potato tomato carrot onion bottle cup glass plate
spoon bowl box bag basket book letter newspaper magazine map ticket key coin wallet phone camera
computer radio lamp clock chair table bed sofa door window wall roof floor carpet blanket pillow
mirror picture painting candle umbrella hat coat jacket shirt dress shoe sock glove scarf ring watch
bicycle car truck bus train boat ship plane tractor kite ball toy drum guitar piano violin flower
tree stone shell feather bucket ladder hammer rope envelope parcel pencil notebook backpack suitcase
"""
)
PLACE_NOUNS = _words(
    """
library market station garden kitchen office school hospital museum park beach river mountain
village city airport bridge forest island harbor farm bakery cafe theater church castle hotel
restaurant street square lake valley tower
"""
)
ANIMALS = _words(
    """
dog cat horse bird rabbit cow duck goat lion tiger bear monkey fox wolf frog owl
"""
)
PEOPLE = _words(
    """
teacher doctor farmer student driver baker nurse pilot painter writer singer neighbor friend brother
sister mother father uncle aunt cousin baby captain waiter soldier artist engineer lawyer guest
"""
)
IRREGULAR_PLURALS = {
    "child": "children",
    "woman": "women",
    "man": "men",
    "mouse": "mice",
    "sheep": "sheep",
    "knife": "knives",
    "leaf": "leaves",
    "wolf": "wolves",
    "shelf": "shelves",
    "scarf": "scarves",
    "person": "people",
}
PEOPLE += ["child", "woman", "man", "person"]
THINGS += ["knife", "leaf", "shelf"]
ANIMALS += ["mouse", "sheep"]


def _merge(*lists: list[str]) -> list[str]:
    """The lists joined in order without repeats (a repeat would double a word's chance of a pick)."""
    return list(dict.fromkeys(word for words in lists for word in words))


# The original lists grown with everyday words; concrete things only, ideas and body parts kept apart.
NAMES = _merge(NAMES, common.NAMES)
PLACES = _merge(PLACES, common.COUNTRIES, common.CITIES)
THINGS = _merge(
    THINGS,
    common.FOOD,
    common.CLOTHES,
    common.VEHICLES,
    common.HOUSEHOLD,
    common.DOCUMENTS,
    common.NATURE,
    common.OBJECTS,
)
PLACE_NOUNS = _merge(PLACE_NOUNS, common.PLACES)
ANIMALS = _merge(ANIMALS, common.ANIMALS)
PEOPLE = _merge(PEOPLE, common.PEOPLE)
IRREGULAR_PLURALS |= common.IRREGULAR_PLURALS

ADJECTIVES = _words(
    """
red blue green yellow black white brown purple orange grey pink golden silver big small tiny huge
tall short long wide narrow heavy light old new young ancient modern fresh clean dirty wet dry warm
cold hot cool soft hard smooth rough bright dark quiet loud happy sad angry calm brave clever kind
gentle friendly busy lazy tired hungry lucky famous strange simple empty full cheap expensive
beautiful ugly pretty shiny wooden plastic broken favorite secret strong weak rich poor sweet sour
bitter salty early late noisy careful polite honest useful
"""
)
ADJECTIVES = _merge(ADJECTIVES, common.ADJECTIVES)
# adjective -> (comparative, superlative) for those that inflect; the rest take "more" and "most".
COMPARATIVES = {
    forms[0]: (forms[1], forms[2])
    for forms in (entry.split() for entry in common.COMPARATIVE_TABLE.replace("\n", "|").split("|"))
    if forms
}
# "an" before a vowel letter is right for every word above except these (sounded "you", "wun").
CONSONANT_SOUND_VOWELS = {"useful", "useless", "one", "uniform", "university", "usual"}
VOWEL_SOUND_CONSONANTS = {"honest", "hour"}

# Adverbs that can close a clause ("we left yesterday") and ones that sit before the verb ("we often left").
CLOSING_ADVERBS = _words(
    """
quickly slowly quietly loudly carefully happily gently early late soon today tomorrow yesterday
tonight again together outside inside here there politely patiently calmly suddenly proudly eagerly
nervously easily badly
"""
)
CLOSING_ADVERBS = _merge(CLOSING_ADVERBS, common.CLOSING_ADVERBS)
FREQUENCY_ADVERBS = _words(
    """
always never often sometimes usually rarely really almost finally also just still
"""
)

ONES = _words(
    """
zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
sixteen seventeen eighteen nineteen
"""
)
TENS = _words("_ _ twenty thirty forty fifty sixty seventy eighty ninety")
ORDINALS = _words("first second third fourth fifth sixth seventh eighth ninth tenth last next")
DAYS = _words("monday tuesday wednesday thursday friday saturday sunday")
MONTHS = _words(
    """
january february march april may june july august september october november december
"""
)
TIMES_OF_DAY = ["morning", "afternoon", "evening", "night"]
CURRENCIES = ["dollars", "euros", "pounds"]
UNITS = _words("minutes hours days weeks months years miles meters")
EVENTS = _words("storm party lesson meeting concert game holiday festival")

# Every literal the grammar's templates use; ``VOCABULARY`` is built from these lists, not from the code.
FUNCTION_WORDS = _words(
    """
the a an this that these those my your his her our their some every each no any many few i you he
she we they it me him us them in on at under over near behind beside between across through into
from to with without after before during around along inside outside by for and but or because while
although so when if then until am is are was were be will can could should must might would do does
did not don't doesn't didn't can't won't isn't aren't wasn't weren't who what where when why how
which whose there please let's very too about hundred thousand o'clock half past quarter oh years old born
cost costs hello good thank thanks see later of course maybe yes sure sorry welcome you're okay much
lot leaves starts started left arrives
"""
)
# "the" twice: the most common determiner in speech should also be the most common here.
SINGULAR_DETERMINERS = _words("the the a this that my your his her our every each no another")
PLURAL_DETERMINERS = _words("the these those my your our their some many any")


def plural(noun: str) -> str:
    if noun in IRREGULAR_PLURALS:
        return IRREGULAR_PLURALS[noun]
    if noun.endswith(("s", "x", "z", "ch", "sh")) or noun in {"potato", "tomato"}:
        return noun + "es"
    if noun.endswith("y") and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


def number_words(n: int) -> list[str]:
    """0 <= n <= 9999 as spoken words without "and": 2405 -> two thousand four hundred five."""
    if not 0 <= n <= 9999:
        raise ValueError(f"number_words supports 0..9999, got {n}")
    if n < 20:
        return [ONES[n]]
    if n < 100:
        return [TENS[n // 10]] + ([ONES[n % 10]] if n % 10 else [])
    if n < 1000:
        return [ONES[n // 100], "hundred"] + (number_words(n % 100) if n % 100 else [])
    return [*number_words(n // 1000), "thousand"] + (number_words(n % 1000) if n % 1000 else [])


def year_words(year: int) -> list[str]:
    """Years as people say them: 1998 -> nineteen ninety eight, 1905 -> nineteen oh five, 2007 -> two thousand seven."""
    century, rest = divmod(year, 100)
    if 2000 <= year <= 2009 or (rest == 0 and century % 10 == 0):
        return number_words(year)
    if rest == 0:
        return [*number_words(century), "hundred"]
    return number_words(century) + (["oh"] if rest < 10 else []) + number_words(rest)


def indefinite_article(next_word: str) -> str:
    vowel_sound = next_word[0] in "aeiou"
    if next_word in CONSONANT_SOUND_VOWELS:
        vowel_sound = False
    if next_word in VOWEL_SOUND_CONSONANTS:
        vowel_sound = True
    return "an" if vowel_sound else "a"


def comparative(adjective: str) -> list[str]:
    """bigger, better, more expensive."""
    return [COMPARATIVES[adjective][0]] if adjective in COMPARATIVES else ["more", adjective]


def superlative(adjective: str) -> list[str]:
    """biggest, best, most expensive."""
    return [COMPARATIVES[adjective][1]] if adjective in COMPARATIVES else ["most", adjective]


IDEAS = common.IDEAS
BODY_PARTS = common.BODY_PARTS
TIME_NOUNS = common.TIME_NOUNS
ALL_NOUNS = _merge(
    THINGS,
    PLACE_NOUNS,
    ANIMALS,
    PEOPLE,
    IDEAS,
    BODY_PARTS,
    TIME_NOUNS,
    common.FREQUENT_NOUNS,
    common.CONTAINERS,
)
MASS_NOUNS = _merge(common.MASS_NOUNS, common.MASS_FOOD, common.DRINKS, common.SPORTS, common.LANGUAGES)


def _build_vocabulary() -> frozenset[str]:
    words = set(NAMES + PLACES + ALL_NOUNS + [plural(n) for n in ALL_NOUNS] + MASS_NOUNS)
    for verb in VERBS.values():
        words.update((verb.base, verb.third, verb.past, verb.participle, verb.ing))
    words.update(ADJECTIVES + common.LONG_ADJECTIVES + list(COMPARATIVES))
    words.update(form for forms in COMPARATIVES.values() for form in forms)
    words.update(CLOSING_ADVERBS + FREQUENCY_ADVERBS + common.STANCE_ADVERBS + ONES[1:] + TENS[2:] + ORDINALS)
    words.update(DAYS + MONTHS + common.SEASONS + common.TIME_WORDS)
    words.update(TIMES_OF_DAY + CURRENCIES + UNITS + EVENTS + FUNCTION_WORDS)
    for words_of_a_kind in (
        common.PRONOUNS,
        common.DETERMINERS,
        common.PREPOSITIONS,
        common.CONJUNCTIONS,
        common.AUXILIARIES,
        common.CONTRACTIONS,
        common.INTERJECTIONS,
        common.TEMPLATE_WORDS,
    ):
        words.update(words_of_a_kind)
    return frozenset(words)


VOCABULARY: frozenset[str] = _build_vocabulary()
