"""The words of the demo sentence grammar (``sentences.py``) and how they inflect.

Word lists by role (names, places, nouns, adjectives, adverbs, numbers, dates), the verbs with their
four forms spelled out, the function words the grammar's templates use, and the inflection helpers
(``plural``, ``number_words``, ``year_words``, ``indefinite_article``).

Every word the generator can emit is listed in ``VOCABULARY``, built from these lists and not from the
grammar's code: a test checks that nothing outside it ever appears, so a template literal missing from
``FUNCTION_WORDS`` fails loudly.
"""

from __future__ import annotations

from dataclasses import dataclass

# ---------------------------------------------------------------------------------------------- words


def _words(text: str) -> list[str]:
    return text.split()


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

# Verbs as "base third-person past -ing"; spelled out because English inflection is irregular.
THING_VERBS = """
open opens opened opening | close closes closed closing | paint paints painted painting
buy buys bought buying | sell sells sold selling | carry carries carried carrying
find finds found finding | lose loses lost losing | bring brings brought bringing
break breaks broke breaking | fix fixes fixed fixing | wash washes washed washing
clean cleans cleaned cleaning | cook cooks cooked cooking | eat eats ate eating
drop drops dropped dropping | hide hides hid hiding | throw throws threw throwing
catch catches caught catching | push pushes pushed pushing | pull pulls pulled pulling
move moves moved moving | draw draws drew drawing | read reads read reading
write writes wrote writing | build builds built building | borrow borrows borrowed borrowing
want wants wanted wanting | need needs needed needing | keep keeps kept keeping
check checks checked checking | order orders ordered ordering | pack packs packed packing
share shares shared sharing | watch watches watched watching | fill fills filled filling
""".replace("\n", " | ")
PERSON_VERBS = """
meet meets met meeting | call calls called calling | help helps helped helping
visit visits visited visiting | thank thanks thanked thanking | follow follows followed following
invite invites invited inviting | teach teaches taught teaching | remember remembers remembered remembering
tell tells told telling | ask asks asked asking | greet greets greeted greeting
""".replace("\n", " | ")
INTRANSITIVE_VERBS = """
sleep sleeps slept sleeping | arrive arrives arrived arriving | laugh laughs laughed laughing
wait waits waited waiting | run runs ran running | swim swims swam swimming
dance dances danced dancing | sing sings sang singing | smile smiles smiled smiling
travel travels traveled traveling | listen listens listened listening | work works worked working
rest rests rested resting | shout shouts shouted shouting | return returns returned returning
walk walks walked walking | talk talks talked talking | win wins won winning
fall falls fell falling | jump jumps jumped jumping | study studies studied studying
""".replace("\n", " | ")

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
# "an" before a vowel letter is right for every word above except these (sounded "you").
CONSONANT_SOUND_VOWELS = {"useful", "one"}
VOWEL_SOUND_CONSONANTS = {"honest"}

# Adverbs that can close a clause ("we left yesterday") and ones that sit before the verb ("we often left").
CLOSING_ADVERBS = _words(
    """
quickly slowly quietly loudly carefully happily gently early late soon today tomorrow yesterday
tonight again together outside inside here there politely patiently calmly suddenly proudly eagerly
nervously easily badly
"""
)
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
SINGULAR_DETERMINERS = _words("the the a this that my your his her our every each no")
PLURAL_DETERMINERS = _words("the these those my your our their some many any")

# ----------------------------------------------------------------------------------- word forms


@dataclass(frozen=True)
class Verb:
    base: str
    third: str
    past: str
    ing: str


def _parse_verbs(table: str) -> list[Verb]:
    return [Verb(*entry.split()) for entry in table.split("|") if entry.strip()]


THING_VERB_LIST = _parse_verbs(THING_VERBS)
PERSON_VERB_LIST = _parse_verbs(PERSON_VERBS)
INTRANSITIVE_VERB_LIST = _parse_verbs(INTRANSITIVE_VERBS)


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


ALL_NOUNS = THINGS + PLACE_NOUNS + ANIMALS + PEOPLE


def _build_vocabulary() -> frozenset[str]:
    words = set(NAMES + PLACES + ALL_NOUNS + [plural(n) for n in ALL_NOUNS])
    for verb in THING_VERB_LIST + PERSON_VERB_LIST + INTRANSITIVE_VERB_LIST:
        words.update((verb.base, verb.third, verb.past, verb.ing))
    words.update(ADJECTIVES + CLOSING_ADVERBS + FREQUENCY_ADVERBS + ONES[1:] + TENS[2:] + ORDINALS)
    words.update(DAYS + MONTHS)
    words.update(TIMES_OF_DAY + CURRENCIES + UNITS + EVENTS + FUNCTION_WORDS)
    return frozenset(words)


VOCABULARY: frozenset[str] = _build_vocabulary()
