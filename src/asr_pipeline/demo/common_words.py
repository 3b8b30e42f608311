"""The everyday words of the demo grammar, by topic: what people say most, beyond the original lists.

Written from general knowledge of the most frequent words of English conversation and general text
(not copied from a frequency list). Each list is roughly most-common-first, because the bag-of-words
shape draws from them with Zipf weights by rank. ``words.py`` merges these into its role lists.

Left out on purpose: heteronyms whose sound depends on meaning (``HETERONYMS``), homophones of words already
here where both would be common (sara/sarah), and names that are also common words (mark, bill, rose, will).
"""

from __future__ import annotations

# espeak-ng picks one pronunciation per spelling; these would teach the model the wrong one half the time. No
# list here, nor the demo's vocabulary (``sentences.VOCABULARY``), holds them.
HETERONYMS = frozenset({"lead", "wind", "tear", "desert", "record", "present", "object", "bow", "wound"})


def _words(text: str) -> list[str]:
    return text.split()


# ------------------------------------------------------------------------------------- count nouns
# Each topic pairs with the verbs that make sense for it in ``COLLOCATIONS`` (``grammar.py``).

FOOD = _words(
    """
apple sandwich egg cake cookie pizza banana orange potato tomato salad burger carrot onion lemon
sausage steak biscuit pie muffin pancake peach pear plum grape cherry strawberry melon pineapple mango
lime peanut bean pea cucumber pepper mushroom cabbage candy snack meal dessert cupcake omelet noodle
"""
)
CLOTHES = _words(
    """
shirt shoe hat coat jacket dress sock glove scarf sweater skirt boot sandal belt tie uniform necklace
bracelet earring helmet mask suit cap raincoat apron swimsuit
"""
)
VEHICLES = _words(
    "car bus train bike bicycle truck taxi boat plane van ship motorbike scooter tractor helicopter ambulance canoe"
)
HOUSEHOLD = _words(
    """
cup glass plate bowl spoon fork knife bottle box bag key phone chair table bed door window lamp light
towel brush comb pen pencil desk drawer cupboard fridge oven stove sink pan pot kettle jar mug tray
napkin dish menu card gift photo poster screen keyboard laptop charger cable battery button switch plug fan
heater television video puzzle doll purse passport toothbrush mattress curtain cushion vase rug broom
sponge tissue calculator printer microwave toaster blender umbrella wallet
"""
)
DOCUMENTS = _words(
    """
book letter email message report newspaper magazine article novel diary calendar recipe list note form
page chapter document receipt postcard textbook dictionary poem essay ticket map
"""
)
BODY_PARTS = _words(
    """
hand head eye face arm leg foot ear nose mouth tooth finger back heart knee shoulder neck lip tongue
thumb toe elbow wrist ankle chin cheek bone brain stomach
"""
)
NATURE = _words(
    "tree flower leaf stone rock plant branch seed bush hill cloud star moon wave field nest puddle rainbow"
)
OBJECTS = _words(
    """
tool machine engine wheel tire fence gate step corner pipe wire chain lock hook net flag sign label
ribbon balloon prize medal trophy alarm bell whistle horn flute trumpet instrument song album drill
nail screw shovel needle
"""
)
# Abstract count nouns: the "idea", "problem", "question" of everyday talk.
IDEAS = _words(
    """
thing way idea problem question answer reason story plan decision mistake chance choice change
difference job word name number part point side fact result rule secret trip journey dream joke class
test exam task topic opinion feeling habit memory experience solution situation example detail goal
price deal offer favor promise risk career business company team group conversation discussion
argument agreement appointment interview accident adventure challenge competition conference deadline
effort emergency event explanation hobby invitation issue language mood movie performance
program relationship request reservation schedule show skill speech sport surprise tradition trick
vacation view visit voice warning wish world
"""
)
PEOPLE = _words(
    """
friend kid boy girl guy lady parent son daughter wife husband brother sister mother father family
grandmother grandfather grandparent niece nephew twin classmate roommate neighbor boss colleague
partner customer stranger member chef clerk dentist judge king queen prince princess officer guard
mayor president scientist professor musician actor actress dancer player coach hero author reporter
journalist photographer designer manager assistant secretary cashier mechanic plumber electrician
carpenter gardener librarian tourist passenger visitor patient owner leader worker volunteer expert
adult teenager gentleman firefighter fisherman postman grandchild
"""
)
PLACES = _words(
    """
house room home shop store bank school office hospital kitchen bedroom bathroom hall supermarket mall
pharmacy cinema gym pool stadium zoo factory garage yard playground campus university college
classroom apartment building neighborhood town country coast pond cave port road avenue highway path
tunnel embassy clinic laboratory studio gallery pub club basement attic balcony backyard temple mosque
cathedral palace camp tent cabin ranch bay shore ocean sea waterfall jungle lobby corridor platform
bookstore
"""
)
ANIMALS = _words(
    """
dog cat bird fish chicken horse cow pig puppy kitten snake spider butterfly shark whale
dolphin turtle elephant giraffe zebra camel deer squirrel eagle parrot penguin crow pigeon donkey
kangaroo mosquito crab lobster hamster dinosaur goose hen lamb pony bull insect worm bug beetle swan
"""
)
IRREGULAR_PLURALS = {
    "tooth": "teeth",
    "foot": "feet",
    "fish": "fish",
    "deer": "deer",
    "wife": "wives",
    "goose": "geese",
    "hero": "heroes",
    "mosquito": "mosquitoes",
    "mango": "mangoes",
    "stomach": "stomachs",
    "fisherman": "fishermen",
    "postman": "postmen",
    "grandchild": "grandchildren",
    "gentleman": "gentlemen",
}

# The count nouns of everyday talk, most frequent first, for the bag-of-words shape's Zipf draw.
FREQUENT_NOUNS = _words(
    """
time thing day year way man woman child friend house home car book room school family
question problem idea job week night door phone name story kid place word hand
morning dog city teacher doctor picture game letter plan reason table movie party mother father
class trip dinner bag box key street shop computer bus train window office answer minute hour
"""
)

# ----------------------------------------------------------------------------- mass nouns and time

MASS_FOOD = _words(
    """
food bread rice cheese chocolate soup meat fruit pasta butter sugar salt cream honey jam yogurt
cereal garlic popcorn toast
"""
)
DRINKS = _words("water coffee tea milk juice wine beer soda lemonade")
# Uncountable nouns that take "some", "much", "no" but never a plural or "a".
MASS_NOUNS = _words(
    """
time money work music help information advice news homework weather traffic furniture luggage paper
wood snow rain ice air fire smoke sand grass hair fun love luck health noise power energy space
history art science math practice research knowledge heat laundry equipment electricity oil soap shampoo toothpaste
"""
)
LANGUAGES = _words("english spanish french german italian chinese japanese arabic russian portuguese")
# Chores and activities "done" ("she did the shopping").
CHORES = _words("homework work research shopping laundry cooking cleaning")
SPORTS = _words("football soccer tennis basketball golf chess volleyball baseball hockey")
# Containers for "a cup of tea", "two bags of rice".
CONTAINERS = _words("cup glass bottle bowl piece bag box jar slice can")
TIME_NOUNS = _words("minute hour day week month year weekend moment season")
SEASONS = _words("spring summer autumn winter")
TIME_WORDS = _words("ago noon midnight sunrise sunset lunchtime bedtime")

# ------------------------------------------------------------------------------------ adjectives

ADJECTIVES = _words(
    """
good bad great little big small old new young nice fine right wrong sure ready easy difficult hard
important different same free whole real true possible special certain available likely main serious
recent private public foreign natural normal similar popular perfect terrible awful wonderful amazing
excellent fantastic lovely pleasant comfortable uncomfortable dangerous safe healthy sick ill sleepy
thirsty bored boring interesting exciting excited worried nervous scared afraid proud surprised
embarrassed confused upset glad pleased fair unfair funny silly crazy smart wise wild fast slow quick
thick thin slim deep shallow flat round sharp fancy ordinary basic single double extra rare
common usual unusual typical traditional classic rotten ripe raw spicy delicious tasty crowded
peaceful messy tidy neat sunny cloudy rainy windy snowy foggy stormy icy freezing mild rude generous
selfish shy loyal curious confident independent responsible helpful careless hopeful grateful jealous
lonely cute handsome elegant fake false local international online electric pale colorful curly
straight giant enormous low high central northern southern eastern western nearby distant previous
final current daily weekly monthly brief sudden permanent temporary active awake asleep alive obvious
complicated tough powerful useless valuable necessary impossible unlikely unlucky unhappy relaxed
convenient successful intelligent reliable frozen
"""
)
# "adjective comparative superlative" for the short adjectives that inflect.
COMPARATIVE_TABLE = """
big bigger biggest | small smaller smallest | tall taller tallest | short shorter shortest
long longer longest | old older oldest | young younger youngest | new newer newest | fast faster fastest
slow slower slowest | quick quicker quickest | cheap cheaper cheapest | rich richer richest
poor poorer poorest | hot hotter hottest | cold colder coldest | warm warmer warmest | cool cooler coolest
wet wetter wettest | dry drier driest | easy easier easiest | busy busier busiest | happy happier happiest
heavy heavier heaviest | funny funnier funniest | early earlier earliest | late later latest
good better best | bad worse worst | strong stronger strongest | weak weaker weakest | hard harder hardest
soft softer softest | loud louder loudest | quiet quieter quietest | bright brighter brightest
dark darker darkest | clean cleaner cleanest | dirty dirtier dirtiest | nice nicer nicest | safe safer safest
large larger largest | wide wider widest | deep deeper deepest | high higher highest | low lower lowest
thick thicker thickest | thin thinner thinnest | sweet sweeter sweetest | smart smarter smartest
kind kinder kindest | calm calmer calmest | brave braver bravest | lucky luckier luckiest
pretty prettier prettiest | simple simpler simplest | fresh fresher freshest | sharp sharper sharpest
light lighter lightest | wise wiser wisest | lazy lazier laziest | healthy healthier healthiest
noisy noisier noisiest | sunny sunnier sunniest | great greater greatest | tough tougher toughest
fair fairer fairest | wild wilder wildest | rare rarer rarest
"""
# Adjectives compared with "more" and "most".
LONG_ADJECTIVES = _words(
    """
expensive beautiful important interesting dangerous comfortable difficult popular famous careful useful
modern exciting boring delicious powerful crowded peaceful generous honest helpful serious confident
complicated colorful traditional valuable reliable elegant curious nervous relaxed independent
convenient successful intelligent polite patient
"""
)

# --------------------------------------------------------------------------------------- adverbs

# Close a clause ("we moved abroad", "she answered correctly").
CLOSING_ADVERBS = _words(
    """
home away back abroad downstairs upstairs nearby everywhere somewhere anywhere online afterwards
lately properly well alone instead anyway twice once immediately eventually recently already yet
clearly correctly differently perfectly safely seriously silently smoothly warmly wisely angrily
cheerfully anxiously bravely carelessly comfortably confidently gratefully hungrily lazily
peacefully rudely sadly secretly sleepily tightly wildly briefly softly neatly gladly kindly freely
"""
)
# Sit before the verb or open a sentence ("i actually liked it", "honestly it was fine").
STANCE_ADVERBS = _words(
    """
actually probably really maybe perhaps honestly obviously certainly clearly definitely apparently
basically hopefully luckily unfortunately fortunately personally seriously surely naturally normally
generally usually mostly especially simply totally completely absolutely nearly hardly quite rather
"""
)

# ------------------------------------------------------------------------------ function words

PRONOUNS = _words(
    """
myself yourself himself herself itself ourselves themselves mine yours hers ours theirs someone
somebody anyone anybody everyone everybody nobody something anything everything nothing
"""
)
DETERMINERS = _words("another other others both either neither several enough all most more less such")
PREPOSITIONS = _words(
    """
about above against among below beyond despite down except like off onto out past since than toward
underneath unlike up within throughout
"""
)
CONJUNCTIONS = _words("unless whether though once as nor yet")
AUXILIARIES = _words("has had have having been being shall may")
CONTRACTIONS = _words(
    """
i'm you're he's she's it's we're they're i've you've we've they've i'll you'll he'll she'll we'll
they'll it'll i'd you'd he'd she'd we'd they'd that's there's here's what's where's who's how's
haven't hasn't hadn't wouldn't shouldn't couldn't
"""
)
INTERJECTIONS = _words(
    """
yes no yeah okay sure right well oh wow hey hi goodbye alright absolutely definitely exactly fine
great cool excuse congratulations cheers
"""
)
# Words that only the templates of ``grammar.py`` and ``conversation.py`` use ("even though", "bless you").
TEMPLATE_WORDS = _words(
    "even ever now whenever sky far care matter none fault anymore seat ahead kidding bless depends pity let bet mind top"
)

# ----------------------------------------------------------------------------------------- names

NAMES = _words(
    """
adam alex andrew charlie david emily eric gabriel helen james jane jason jessica john joseph kate
linda lisa mary matthew michael mike nancy natalie nick paul ryan sarah sophia steven susan thomas tom
tony amy brian chris claire edward irene jacob lily lucas mia noah olivia patrick robert ruth sandra
sophie tim ahmed fatima mei raj priya omar ali
"""
)
COUNTRIES = _words(
    """
france spain italy germany japan china india brazil mexico canada egypt kenya peru chile greece norway
sweden poland ireland scotland england america africa europe asia australia russia portugal argentina
colombia nigeria ghana morocco vietnam thailand korea indonesia iceland finland denmark austria
switzerland belgium cuba jamaica singapore pakistan
"""
)
CITIES = _words(
    """
miami dallas houston atlanta detroit oxford cambridge bristol leeds delhi dubai istanbul moscow
barcelona munich hamburg copenhagen budapest santiago melbourne perth casablanca accra dakar
"""
)
