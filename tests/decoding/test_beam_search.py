import itertools
import math
from collections import defaultdict

import pytest
import torch

from asr_pipeline.decoding.beam_search import (
    CTCPrefixBeamSearch,
    _logaddexp,
    _Prefix,
    load_lm,
)
from asr_pipeline.decoding.greedy import greedy_decode
from asr_pipeline.decoding.options import DecodingOptions

from .factories import ambiguous_cat_or_cot, log_probs_from_rows, peaky_log_probs, spelled_rows

LN_10 = math.log(10.0)


def prefix_options(**values) -> DecodingOptions:
    """The prefix beam search's options in the shared shape."""
    return DecodingOptions(decoder="prefix_beam", **values)


def test_beam_width_one_without_lm_equals_greedy(char_tokenizer):
    vocab = char_tokenizer.vocab_size
    peaky = peaky_log_probs(batch=4, frames=40, vocab_size=vocab, seed=0)
    flat = torch.randn(4, 40, vocab, generator=torch.Generator().manual_seed(1)).log_softmax(-1)
    lengths = torch.tensor([40, 33, 1, 0])
    search = CTCPrefixBeamSearch(prefix_options(beam_width=1), char_tokenizer)
    for log_probs in (peaky, flat):
        expected = greedy_decode(log_probs, lengths)
        decoded = search.decode_batch(log_probs, lengths)
        assert [list(hyps[0].tokens) for hyps in decoded] == expected
        assert [hyps[0].text for hyps in decoded] == [char_tokenizer.decode(ids) for ids in expected]


def test_merging_alignments_beats_the_best_path(char_tokenizer):
    # The classic case: two frames, blank 0.55 and "a" 0.40 in each. The best path is blank-blank
    # (0.3025, the empty labelling), but "a" is produced by "a a", "a _" and "_ a":
    # 0.16 + 0.22 + 0.22 = 0.60.
    a = char_tokenizer.encode("a")[-1]
    blank = char_tokenizer.blank_id
    log_probs = log_probs_from_rows([{blank: 0.55, a: 0.40}] * 2, char_tokenizer.vocab_size)

    assert greedy_decode(log_probs[None], torch.tensor([2])) == [[]]
    best = CTCPrefixBeamSearch(prefix_options(beam_width=4), char_tokenizer).decode(log_probs)[0]
    assert best.tokens == (a,)
    assert best.acoustic_score == pytest.approx(math.log(0.60))


def brute_force_labelling_log_probs(log_probs: torch.Tensor, outputs: list[int], blank: int) -> dict:
    """ln P(labelling) by enumerating every alignment over ``outputs``: the definition of CTC."""
    totals: dict[tuple[int, ...], float] = defaultdict(float)
    probs = log_probs.exp()
    for path in itertools.product(outputs, repeat=log_probs.shape[0]):
        collapsed = [token for i, token in enumerate(path) if i == 0 or token != path[i - 1]]
        labelling = tuple(token for token in collapsed if token != blank)
        totals[labelling] += math.prod(float(probs[t, token]) for t, token in enumerate(path))
    return {labelling: math.log(p) for labelling, p in totals.items()}


def test_an_unpruned_search_scores_every_labelling_by_the_sum_over_its_alignments(char_tokenizer):
    # Three live outputs (blank, "a", "b") over six frames: 127 labellings, all kept by a beam of 128.
    blank = char_tokenizer.blank_id
    a, b = char_tokenizer.encode("a")[-1], char_tokenizer.encode("b")[-1]
    # Normalised exponentials are uniform on the simplex: every frame a different, honest mixture.
    mass = -torch.rand(6, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64).log()  # (T, 3)
    mass = mass / mass.sum(dim=-1, keepdim=True)
    rows = [{blank: float(m[0]), a: float(m[1]), b: float(m[2])} for m in mass]
    log_probs = log_probs_from_rows(rows, char_tokenizer.vocab_size)

    expected = brute_force_labelling_log_probs(log_probs, [blank, a, b], blank)
    options = prefix_options(beam_width=128, n_best=128, beam_size_token=3)
    hypotheses = CTCPrefixBeamSearch(options, char_tokenizer).decode(log_probs)

    assert {h.tokens: pytest.approx(h.acoustic_score) for h in hypotheses} == expected
    assert math.fsum(math.exp(h.acoustic_score) for h in hypotheses) == pytest.approx(1.0)


def test_n_best_hypotheses_come_best_first_and_are_distinct(char_tokenizer):
    a = char_tokenizer.encode("a")[-1]
    blank = char_tokenizer.blank_id
    log_probs = log_probs_from_rows([{blank: 0.55, a: 0.40}] * 2, char_tokenizer.vocab_size)
    hypotheses = CTCPrefixBeamSearch(prefix_options(beam_width=8, n_best=3), char_tokenizer).decode(log_probs)
    assert len(hypotheses) == 3
    assert [h.tokens for h in hypotheses[:2]] == [(a,), ()]
    assert hypotheses[1].acoustic_score == pytest.approx(2 * math.log(0.55))
    scores = [h.score for h in hypotheses]
    assert scores == sorted(scores, reverse=True)
    assert len({h.tokens for h in hypotheses}) == 3


def test_acoustics_alone_prefer_the_word_the_lm_has_never_seen(char_tokenizer):
    search = CTCPrefixBeamSearch(prefix_options(beam_width=8), char_tokenizer)
    assert search.decode(ambiguous_cat_or_cot(char_tokenizer))[0].text == "the cot sat"


def test_lm_fusion_flips_an_ambiguous_word_to_the_one_the_lm_knows(char_tokenizer, tiny_lm):
    search = CTCPrefixBeamSearch(prefix_options(beam_width=8, lm_weight=0.45), char_tokenizer, tiny_lm)
    assert search.decode(ambiguous_cat_or_cot(char_tokenizer))[0].text == "the cat sat"


def test_a_zero_lm_weight_leaves_the_acoustic_decision(char_tokenizer, tiny_lm):
    search = CTCPrefixBeamSearch(prefix_options(beam_width=8, lm_weight=0.0), char_tokenizer, tiny_lm)
    assert search.decode(ambiguous_cat_or_cot(char_tokenizer))[0].text == "the cot sat"


@pytest.mark.parametrize(("lm_bos", "lm_eos"), [(True, True), (False, False), (True, False)])
def test_each_hypothesis_carries_the_lm_score_of_its_own_words(char_tokenizer, tiny_lm, lm_bos, lm_eos):
    options = prefix_options(
        beam_width=8, n_best=4, lm_weight=0.3, word_score=0.7, lm_no_bos=not lm_bos, lm_no_eos=not lm_eos
    )
    hypotheses = CTCPrefixBeamSearch(options, char_tokenizer, tiny_lm).decode(
        ambiguous_cat_or_cot(char_tokenizer)
    )
    assert len({h.text for h in hypotheses}) > 1  # different word sequences, different LM states
    for h in hypotheses:
        expected_lm = tiny_lm.score(h.text, bos=lm_bos, eos=lm_eos) * LN_10
        assert h.lm_score == pytest.approx(expected_lm)
        assert h.score == pytest.approx(h.acoustic_score + 0.3 * expected_lm + 0.7 * len(h.text.split()))


def test_decode_batch_decodes_each_utterance_within_its_length(char_tokenizer, tiny_lm):
    vocab = char_tokenizer.vocab_size
    log_probs = peaky_log_probs(batch=3, frames=30, vocab_size=vocab, seed=5)
    lengths = torch.tensor([30, 12, 0])
    search = CTCPrefixBeamSearch(prefix_options(beam_width=4, n_best=2), char_tokenizer, tiny_lm)
    batched = search.decode_batch(log_probs, lengths)
    assert batched[:2] == [search.decode(log_probs[0]), search.decode(log_probs[1, :12])]
    assert batched[2][0].tokens == ()
    assert batched[0] != search.decode(log_probs[0, :12])  # the padding frames really would change it


def test_log_probs_from_another_vocabulary_are_rejected(char_tokenizer):
    search = CTCPrefixBeamSearch(prefix_options(), char_tokenizer)
    with pytest.raises(ValueError, match=f"V=7 outputs but the tokenizer has {char_tokenizer.vocab_size}"):
        search.decode(torch.zeros(3, 7))


def test_n_best_cannot_exceed_the_beam():
    with pytest.raises(ValueError, match="n_best must lie in"):
        prefix_options(beam_width=2, n_best=3)


def test_load_lm_names_the_missing_file(tmp_path):
    missing = tmp_path / "nowhere" / "lm.bin"
    with pytest.raises(FileNotFoundError, match=str(missing)):
        load_lm(missing)


def test_lm_scores_steer_the_pruning_not_only_the_final_ranking(char_tokenizer, tiny_lm):
    # A second ambiguous vowel ("s?t": a 0.32, o 0.30, e 0.28) makes three continuations per word. On
    # acoustics alone the two "cot" continuations fill a beam of 2 and "cat" is pruned before "sat" is
    # reached; only if the completed word "cat" is scored while pruning does it stay in the beam.
    ids = char_tokenizer.encode("the cat sat")
    a, o, e = (char_tokenizer.encode(letter)[-1] for letter in "aoe")
    first_vowel, second_vowel = (i for i, token in enumerate(ids) if token == a)
    spelled = list(ids)
    spelled[first_vowel] = {o: 0.5, a: 0.4}
    spelled[second_vowel] = {a: 0.32, o: 0.30, e: 0.28}
    log_probs = log_probs_from_rows(spelled_rows(spelled, char_tokenizer.blank_id), char_tokenizer.vocab_size)

    options = prefix_options(beam_width=2)
    assert CTCPrefixBeamSearch(options, char_tokenizer).decode(log_probs)[0].text == "the cot sat"
    assert CTCPrefixBeamSearch(options, char_tokenizer, tiny_lm).decode(log_probs)[0].text == "the cat sat"


class ExhaustivePruning(CTCPrefixBeamSearch):
    """Reference: scores every extension exactly before keeping the best, as the textbook algorithm does.

    The real search bounds scores to skip most LM calls; it must keep exactly the same prefixes.
    """

    def _prune(self, extended):
        scored = []
        for key, (p_blank, p_token) in extended.items():
            prefix = key if isinstance(key, _Prefix) else self._child(*key)
            scored.append((_logaddexp(p_blank, p_token) + prefix.fusion, prefix, [p_blank, p_token]))
        scored.sort(key=lambda entry: entry[0], reverse=True)
        return {prefix: probs for _, prefix, probs in scored[: self.options.beam_width]}


@pytest.mark.parametrize("word_bonus", [-1.0, 0.0, 2.5])
def test_bounded_pruning_keeps_what_exhaustive_pruning_keeps(char_tokenizer, tiny_lm, word_bonus):
    options = prefix_options(beam_width=4, n_best=4, lm_weight=0.8, word_score=word_bonus)
    log_probs = peaky_log_probs(
        batch=6, frames=40, vocab_size=char_tokenizer.vocab_size, seed=11, sharpness=2.0
    )
    lengths = torch.full((6,), 40)
    expected = ExhaustivePruning(options, char_tokenizer, tiny_lm).decode_batch(log_probs, lengths)
    assert CTCPrefixBeamSearch(options, char_tokenizer, tiny_lm).decode_batch(log_probs, lengths) == expected
