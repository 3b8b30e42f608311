import random
from collections import Counter

from asr_pipeline.demo.grammar import PhraseGrammar
from asr_pipeline.demo.verbs import VERBS


def grammar(seed: int = 0) -> PhraseGrammar:
    return PhraseGrammar(random.Random(seed))


def test_zipf_pick_favors_the_front_of_the_list_but_reaches_its_end():
    words = [f"w{i}" for i in range(50)]
    g = grammar()
    counts = Counter(g.zipf_pick(words) for _ in range(20_000))
    # weights 1 / (rank + 2.7): rank 1 vs rank 10 is 12.7 / 3.7 = 3.4x
    assert 2.8 < counts["w0"] / counts["w9"] < 4.2
    assert set(counts) == set(words)


def test_verb_groups_agree_with_their_subject():
    wrong_auxiliaries = {
        "1s": {"is", "are", "were", "has", "hasn't", "does", "doesn't", "isn't", "aren't", "weren't"},
        "3s": {"am", "are", "were", "have", "haven't", "do", "don't", "aren't", "weren't"},
        "pl": {"am", "is", "was", "has", "hasn't", "does", "doesn't", "isn't", "wasn't"},
    }
    g = grammar()
    for agreement, wrong in wrong_auxiliaries.items():
        for _ in range(300):
            words = " ".join(g.verb_group(VERBS["go"], agreement)).split()
            assert not set(words) & wrong, (agreement, words)
            if len(words) == 1 and words[0] in {"go", "goes"}:  # the simple present
                assert words[0] == ("goes" if agreement == "3s" else "go")


def test_contractions_join_a_pronoun_and_its_auxiliary_some_of_the_time():
    said = {" ".join(grammar(seed).contract(["she"], ["will", "go"])) for seed in range(40)}
    assert said == {"she'll go", "she will go"}
    said = {" ".join(grammar(seed).contract(["i"], ["am not", "sure"])) for seed in range(40)}
    assert said == {"i'm not sure", "i am not sure"}


def test_have_contracts_only_before_a_participle():
    assert {" ".join(grammar(seed).contract(["i"], ["have", "seen", "it"])) for seed in range(40)} == {
        "i've seen it",
        "i have seen it",
    }
    for seed in range(40):
        assert grammar(seed).contract(["i"], ["had", "to", "go"]) == ["i", "had", "to", "go"]
        assert grammar(seed).contract(["they"], ["have", "a", "car"]) == ["they", "have", "a", "car"]
        assert grammar(seed).contract(["the", "dog"], ["is", "here"]) == ["the", "dog", "is", "here"]


def test_mass_nouns_never_take_a_or_a_plural():
    g = grammar()
    for _ in range(500):
        words = " ".join(g.mass_phrase(["water"])).split()
        assert words[-1] == "water"
        assert len(words) == 1 or words[-2] not in {"a", "an"}, words
