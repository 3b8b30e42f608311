"""The verbs of the demo sentence grammar: every form spelled out, and the roles each verb can play.

English inflection is irregular enough that rules would get "runned" or "has ate" wrong, so each verb
is written once as "base third past participle -ing", and the role lists below name verbs by their base
form. A verb may play several roles ("read" takes a thing, "remember" a person, a ``to`` infinitive and
a ``that`` clause).

Heteronyms whose spoken form depends on the role (lead, wind, tear, record, present) are left out; the
few kept ("read", "live", "close") are used in one sense only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Verb:
    base: str
    third: str
    past: str
    participle: str
    ing: str


VERB_FORMS_TABLE = """
open opens opened opened opening | close closes closed closed closing | paint paints painted painted painting
buy buys bought bought buying | sell sells sold sold selling | carry carries carried carried carrying
find finds found found finding | lose loses lost lost losing | bring brings brought brought bringing
break breaks broke broken breaking | fix fixes fixed fixed fixing | wash washes washed washed washing
clean cleans cleaned cleaned cleaning | cook cooks cooked cooked cooking | eat eats ate eaten eating
drop drops dropped dropped dropping | hide hides hid hidden hiding | throw throws threw thrown throwing
catch catches caught caught catching | push pushes pushed pushed pushing | pull pulls pulled pulled pulling
move moves moved moved moving | draw draws drew drawn drawing | read reads read read reading
write writes wrote written writing | build builds built built building
borrow borrows borrowed borrowed borrowing | want wants wanted wanted wanting
need needs needed needed needing | keep keeps kept kept keeping | check checks checked checked checking
order orders ordered ordered ordering | pack packs packed packed packing
share shares shared shared sharing | watch watches watched watched watching | fill fills filled filled filling
meet meets met met meeting | call calls called called calling | help helps helped helped helping
visit visits visited visited visiting | thank thanks thanked thanked thanking
follow follows followed followed following | invite invites invited invited inviting
teach teaches taught taught teaching | remember remembers remembered remembered remembering
tell tells told told telling | ask asks asked asked asking | greet greets greeted greeted greeting
sleep sleeps slept slept sleeping | arrive arrives arrived arrived arriving
laugh laughs laughed laughed laughing | wait waits waited waited waiting | run runs ran run running
swim swims swam swum swimming | dance dances danced danced dancing | sing sings sang sung singing
smile smiles smiled smiled smiling | travel travels traveled traveled traveling
listen listens listened listened listening | work works worked worked working
rest rests rested rested resting | shout shouts shouted shouted shouting
return returns returned returned returning | walk walks walked walked walking
talk talks talked talked talking | win wins won won winning | fall falls fell fallen falling
jump jumps jumped jumped jumping | study studies studied studied studying
go goes went gone going | come comes came come coming | get gets got gotten getting
make makes made made making | take takes took taken taking | give gives gave given giving
have has had had having | do does did done doing | say says said said saying
know knows knew known knowing | think thinks thought thought thinking | see sees saw seen seeing
look looks looked looked looking | use uses used used using | try tries tried tried trying
feel feels felt felt feeling | leave leaves left left leaving | put puts put put putting
mean means meant meant meaning | begin begins began begun beginning
seem seems seemed seemed seeming | show shows showed shown showing | hear hears heard heard hearing
play plays played played playing | like likes liked liked liking | live lives lived lived living
believe believes believed believed believing | happen happens happened happened happening
stand stands stood stood standing | understand understands understood understood understanding
sit sits sat sat sitting | speak speaks spoke spoken speaking | spend spends spent spent spending
grow grows grew grown growing | send sends sent sent sending | pay pays paid paid paying
forget forgets forgot forgotten forgetting | choose chooses chose chosen choosing
drive drives drove driven driving | ride rides rode ridden riding | fly flies flew flown flying
wear wears wore worn wearing | steal steals stole stolen stealing | wake wakes woke woken waking
drink drinks drank drunk drinking | ring rings rang rung ringing | feed feeds fed fed feeding
hold holds held held holding | hang hangs hung hung hanging | cut cuts cut cut cutting
hit hits hit hit hitting | hurt hurts hurt hurt hurting | lend lends lent lent lending
bite bites bit bitten biting | blow blows blew blown blowing | dig digs dug dug digging
freeze freezes froze frozen freezing | shake shakes shook shaken shaking
fight fights fought fought fighting | forgive forgives forgave forgiven forgiving
sweep sweeps swept swept sweeping | quit quits quit quit quitting
start starts started started starting | stop stops stopped stopped stopping
turn turns turned turned turning | change changes changed changed changing
love loves loved loved loving | hate hates hated hated hating | stay stays stayed stayed staying
decide decides decided decided deciding | explain explains explained explained explaining
hope hopes hoped hoped hoping | agree agrees agreed agreed agreeing | expect expects expected expected expecting
finish finishes finished finished finishing | enjoy enjoys enjoyed enjoyed enjoying
save saves saved saved saving | prepare prepares prepared prepared preparing
plan plans planned planned planning | practice practices practiced practiced practicing
repair repairs repaired repaired repairing | join joins joined joined joining | miss misses missed missed missing
pick picks picked picked picking | fold folds folded folded folding | prefer prefers preferred preferred preferring
worry worries worried worried worrying | hurry hurries hurried hurried hurrying | cry cries cried cried crying
reply replies replied replied replying | copy copies copied copied copying
deliver delivers delivered delivered delivering | discover discovers discovered discovered discovering
answer answers answered answered answering | count counts counted counted counting
print prints printed printed printing | touch touches touched touched touching
taste tastes tasted tasted tasting | smell smells smelled smelled smelling | guess guesses guessed guessed guessing
mix mixes mixed mixed mixing | kick kicks kicked kicked kicking | knock knocks knocked knocked knocking
lock locks locked locked locking | unlock unlocks unlocked unlocked unlocking | boil boils boiled boiled boiling
bake bakes baked baked baking | fry fries fried fried frying | chop chops chopped chopped chopping
peel peels peeled peeled peeling | pour pours poured poured pouring | rent rents rented rented renting
hire hires hired hired hiring | unpack unpacks unpacked unpacked unpacking | load loads loaded loaded loading
arrange arranges arranged arranged arranging | attach attaches attached attached attaching
apologize apologizes apologized apologized apologizing | argue argues argued argued arguing
avoid avoids avoided avoided avoiding | blame blames blamed blamed blaming | bother bothers bothered bothered bothering
breathe breathes breathed breathed breathing | brush brushes brushed brushed brushing
celebrate celebrates celebrated celebrated celebrating | chase chases chased chased chasing
cheer cheers cheered cheered cheering | climb climbs climbed climbed climbing | clap claps clapped clapped clapping
complain complains complained complained complaining | compare compares compared compared comparing
connect connects connected connected connecting | continue continues continued continued continuing
correct corrects corrected corrected correcting | cough coughs coughed coughed coughing
cross crosses crossed crossed crossing | decorate decorates decorated decorated decorating
describe describes described described describing | destroy destroys destroyed destroyed destroying
disappear disappears disappeared disappeared disappearing | discuss discusses discussed discussed discussing
download downloads downloaded downloaded downloading | drag drags dragged dragged dragging
dream dreams dreamed dreamed dreaming | earn earns earned earned earning
encourage encourages encouraged encouraged encouraging | escape escapes escaped escaped escaping
explore explores explored explored exploring | fail fails failed failed failing | fetch fetches fetched fetched fetching
float floats floated floated floating | grab grabs grabbed grabbed grabbing | guide guides guided guided guiding
handle handles handled handled handling | heat heats heated heated heating | hunt hunts hunted hunted hunting
ignore ignores ignored ignored ignoring | imagine imagines imagined imagined imagining
improve improves improved improved improving | install installs installed installed installing
interrupt interrupts interrupted interrupted interrupting | introduce introduces introduced introduced introducing
invent invents invented invented inventing | jog jogs jogged jogged jogging | joke jokes joked joked joking
lift lifts lifted lifted lifting | manage manages managed managed managing | measure measures measured measured measuring
melt melts melted melted melting | mention mentions mentioned mentioned mentioning | nod nods nodded nodded nodding
notice notices noticed noticed noticing | own owns owned owned owning | park parks parked parked parking
perform performs performed performed performing | persuade persuades persuaded persuaded persuading
pray prays prayed prayed praying | predict predicts predicted predicted predicting
pretend pretends pretended pretended pretending | promise promises promised promised promising
protect protects protected protected protecting | realize realizes realized realized realizing
recognize recognizes recognized recognized recognizing | recommend recommends recommended recommended recommending
relax relaxes relaxed relaxed relaxing | remind reminds reminded reminded reminding
remove removes removed removed removing | repeat repeats repeated repeated repeating
replace replaces replaced replaced replacing | rescue rescues rescued rescued rescuing
respect respects respected respected respecting | retire retires retired retired retiring
rush rushes rushed rushed rushing | sail sails sailed sailed sailing | scare scares scared scared scaring
scream screams screamed screamed screaming | search searches searched searched searching
shave shaves shaved shaved shaving | shop shops shopped shopped shopping | sneeze sneezes sneezed sneezed sneezing
solve solves solved solved solving | sort sorts sorted sorted sorting | spell spells spelled spelled spelling
stare stares stared stared staring | succeed succeeds succeeded succeeded succeeding
suggest suggests suggested suggested suggesting | suppose supposes supposed supposed supposing
surprise surprises surprised surprised surprising | switch switches switched switched switching
trust trusts trusted trusted trusting | wander wanders wandered wandered wandering
warn warns warned warned warning | waste wastes wasted wasted wasting | weigh weighs weighed weighed weighing
whisper whispers whispered whispered whispering | wish wishes wished wished wishing
wonder wonders wondered wondered wondering | wrap wraps wrapped wrapped wrapping | yawn yawns yawned yawned yawning
yell yells yelled yelled yelling | learn learns learned learned learning | burn burns burned burned burning
spill spills spilled spilled spilling | appear appears appeared appeared appearing
collect collects collected collected collecting | cover covers covered covered covering
offer offers offered offered offering | receive receives received received receiving
reach reaches reached reached reaching | pass passes passed passed passing | support supports supported supported supporting
admit admits admitted admitted admitting | doubt doubts doubted doubted doubting | insist insists insisted insisted insisting
assume assumes assumed assumed assuming | announce announces announced announced announcing
convince convinces convinced convinced convincing | afford affords afforded afforded affording
deserve deserves deserved deserved deserving | hesitate hesitates hesitated hesitated hesitating
exercise exercises exercised exercised exercising | recover recovers recovered recovered recovering
shiver shivers shivered shivered shivering | survive survives survived survived surviving
struggle struggles struggled struggled struggling | behave behaves behaved behaved behaving
pause pauses paused paused pausing | bounce bounces bounced bounced bouncing | rain rains rained rained raining
snow snows snowed snowed snowing | shine shines shone shone shining | hug hugs hugged hugged hugging
kiss kisses kissed kissed kissing | wave waves waved waved waving | point points pointed pointed pointing
comfort comforts comforted comforted comforting | congratulate congratulates congratulated congratulated congratulating
annoy annoys annoyed annoyed annoying | test tests tested tested testing
sound sounds sounded sounded sounding | become becomes became become becoming | sign signs signed signed signing
"""


def _parse_forms(table: str) -> dict[str, Verb]:
    verbs = {}
    for entry in table.replace("\n", "|").split("|"):
        forms = entry.split()
        if not forms:
            continue
        if len(forms) != 5:
            raise ValueError(f"verbs.py: a verb needs 5 forms (base third past participle -ing), got {forms}")
        verbs[forms[0]] = Verb(*forms)
    return verbs


VERBS: dict[str, Verb] = _parse_forms(VERB_FORMS_TABLE)


def _words_of(text: str) -> list[str]:
    return text.split()


def _role(bases: str) -> list[Verb]:
    return [VERBS[base] for base in _words_of(bases)]


# Takes a thing as object ("she opened the box"); loosely semantic, like the rest of the grammar.
THING_VERB_LIST = _role(
    """
open close paint buy sell carry find lose bring break fix wash clean cook eat drop hide throw catch
push pull move draw read write build borrow want need keep check order pack share watch fill use take
get make have hold cut send choose forget steal lend show grab lift drag replace remove repair collect
deliver describe destroy download enjoy explore finish hang ignore improve install measure mention
notice prepare print protect recognize recommend save search sort touch wrap weigh waste count mix fold
pick load unpack lock unlock attach compare shake spill taste smell heat test like love hate see
avoid blow burn connect correct cover fetch handle invent kick own pass repeat spell hit quit perform
ring
"""
)
# Takes a person as object ("we invited our neighbors").
PERSON_VERB_LIST = _role(
    """
meet call help visit thank follow invite teach remember tell ask greet see know like love hate trust
miss blame warn remind forgive hire interrupt introduce ignore encourage surprise pay bother believe
understand recognize join wake chase scare rescue respect support persuade convince hug comfort
congratulate annoy find hear watch drive kiss guide fight avoid hit bite
"""
)
INTRANSITIVE_VERB_LIST = _role(
    """
sleep arrive laugh wait run swim dance sing smile travel listen work rest shout return walk talk win
fall jump study go come leave stay sit stand cry relax hurry cough sneeze yawn scream whisper nod
complain worry agree succeed fail retire exercise jog climb sail cheer clap pray shop fly drive grow
change stop begin start continue appear disappear improve escape wander float melt freeze bounce play
read write cook eat drink move live breathe wake hide behave apologize argue celebrate practice learn
recover shiver struggle survive pause wave shave shine speak stare yell rush reply joke point knock
fight quit
"""
)
# Followed by "to" and a base form ("i decided to stay").
INFINITIVE_VERB_LIST = _role(
    """
want need try decide plan hope forget remember learn start like love hate prefer agree promise offer
manage expect choose deserve afford fail continue begin wait wish prepare hesitate pretend arrange
"""
)
# Followed by a "that" clause ("she explained that the shop was closed").
THAT_VERB_LIST = _role(
    """
think know believe hope guess feel hear say understand remember forget realize notice suppose expect
imagine mean explain suggest mention admit agree promise worry dream complain discover learn pretend
decide predict insist assume doubt announce find
"""
)
# Take a person and then a "that" clause ("he reminded us that the bus was late").
TELL_VERB_LIST = _role("tell remind warn promise show teach convince")
# Followed by "if" or "whether" and a clause ("she wondered if the shop was open").
ASK_VERB_LIST = _role("ask wonder")
# Take the subject's own reflexive pronoun ("he hurt himself", "we enjoyed ourselves").
REFLEXIVE_VERB_LIST = _role(
    "hurt enjoy introduce blame teach help cut burn remind forgive see find ask promise"
)
# Verb and particle, for everyday commands ("turn off the lights", "put away your toys").
PHRASAL_VERBS = [
    (VERBS[verb], particle)
    for verb, particle in (
        pair.split("_")
        for pair in _words_of("""
turn_off turn_on pick_up put_away put_down put_on take_off take_out throw_away clean_up write_down
switch_off switch_on try_on give_back bring_back hang_up wake_up turn_down turn_up put_back
""")
    )
]
# Take "something", "nothing" or "everything" as subject ("nothing happened", "everything changed").
HAPPENING_VERB_LIST = _role("happen start begin finish stop change continue improve")
# Weather verbs take "it" ("it rained all night").
WEATHER_VERB_LIST = _role("rain snow")
# Take an adjective ("the soup smells delicious", "you look tired").
LINKING_VERB_LIST = _role("look seem sound feel taste smell become")
# The most used verbs first, for the bag-of-words shape's Zipf draw (objects follow the verb).
FREQUENT_VERB_LIST = _role(
    """
have get make take see know find give tell use want need like love call try ask show bring keep
leave buy pay meet help hear watch play read write send remember forget lose hold open start finish
"""
)
