from asr_pipeline.demo import verbs
from asr_pipeline.demo.grammar import COLLOCATIONS
from asr_pipeline.demo.verbs import PHRASAL_VERBS, VERBS
from asr_pipeline.demo.words import VOCABULARY


def test_every_verb_has_five_forms_with_the_expected_endings():
    for verb in VERBS.values():
        assert verb.third.endswith("s") and verb.ing.endswith("ing"), verb
        assert verb.base[:2] == verb.ing[:2], (
            verb
        )  # a misaligned row would pair one verb's forms with another's


def test_irregular_participles_differ_from_the_past():
    forms = {
        base: (VERBS[base].past, VERBS[base].participle) for base in ("eat", "go", "swim", "write", "see")
    }
    assert forms == {
        "eat": ("ate", "eaten"),
        "go": ("went", "gone"),
        "swim": ("swam", "swum"),
        "write": ("wrote", "written"),
        "see": ("saw", "seen"),
    }


def test_every_verb_plays_a_role_so_its_forms_can_be_said():
    # VOCABULARY holds all five forms of every verb; a verb in no role would never be spoken.
    roles = [value for name, value in vars(verbs).items() if name.endswith("_VERB_LIST")]
    in_a_role = {verb.base for role in roles for verb in role}
    in_a_role |= {verb.base for verb, _ in PHRASAL_VERBS}
    in_a_role |= {verb.base for pairing in COLLOCATIONS for verb in pairing.verbs}
    assert set(VERBS) - in_a_role == set()


def test_every_verb_form_is_in_the_vocabulary():
    forms = {f for v in VERBS.values() for f in (v.base, v.third, v.past, v.participle, v.ing)}
    assert forms - VOCABULARY == set()
