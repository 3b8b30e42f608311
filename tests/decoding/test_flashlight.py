"""flashlight's lexicon and lexicon-free searches, checked against our prefix beam search (the reference)."""

from __future__ import annotations

import math

import pytest
import torch

from asr_pipeline.decoding.beam_search import CTCPrefixBeamSearch
from asr_pipeline.decoding.decoders import (
    HOPPER,
    HOPPER_SAFE_BEAM,
    DecodingResources,
    GreedyDecoder,
    build_decoder,
)
from asr_pipeline.decoding.flashlight import FlashlightDecoder
from asr_pipeline.decoding.lexicon import build_lexicon
from asr_pipeline.decoding.options import DecodingOptions

from .factories import LM_CORPUS, ambiguous_cat_or_cot, log_probs_from_rows, peaky_log_probs, spelled_rows

LN_10 = math.log(10.0)


@pytest.fixture(scope="module")
def lexicon_path(char_tokenizer, tmp_path_factory):
    """The LM corpus' words (no "cot") in the char tokenizer's pieces."""
    text, unspellable = build_lexicon(LM_CORPUS, char_tokenizer)
    assert unspellable == []
    path = tmp_path_factory.mktemp("lexicon") / "lexicon.txt"
    path.write_text(text, encoding="utf-8")
    return path


def decode_one(decoder, log_probs: torch.Tensor):
    return decoder.decode_batch(log_probs[None].float(), torch.tensor([log_probs.shape[0]]))[0]


def spelled(tokenizer, text: str) -> torch.Tensor:
    rows = spelled_rows(tokenizer.encode(text), tokenizer.blank_id)
    return log_probs_from_rows(rows, tokenizer.vocab_size)


def test_a_clean_spelling_decodes_to_its_text_with_every_decoder(char_tokenizer, tiny_lm_path, lexicon_path):
    resources = DecodingResources(word_lm=tiny_lm_path, lexicon=lexicon_path)
    log_probs = spelled(char_tokenizer, "the dog ate the fish")
    for decoder in ("greedy", "lexicon", "lexicon_free", "prefix_beam"):
        best = decode_one(
            resources.build(DecodingOptions(decoder=decoder, beam_width=8), char_tokenizer), log_probs
        )
        assert best[0].text == "the dog ate the fish", decoder


def test_token_start_frames_are_where_each_piece_is_spoken(char_tokenizer, lexicon_path):
    log_probs = spelled(char_tokenizer, "the cat")  # one frame per piece, each followed by a blank frame
    decoder = build_decoder(DecodingOptions(decoder="lexicon"), char_tokenizer, lexicon_path=lexicon_path)
    best = decode_one(decoder, log_probs)[0]
    assert best.frames == tuple(range(0, 2 * len(best.tokens), 2))


def test_the_lexicon_keeps_out_a_word_it_lacks_and_lexicon_free_lets_it_through(char_tokenizer, lexicon_path):
    log_probs = ambiguous_cat_or_cot(char_tokenizer)  # acoustics prefer "cot", which no training text has
    lexicon = build_decoder(DecodingOptions(decoder="lexicon"), char_tokenizer, lexicon_path=lexicon_path)
    free = build_decoder(DecodingOptions(decoder="lexicon_free"), char_tokenizer)
    assert decode_one(lexicon, log_probs)[0].text == "the cat sat"
    assert decode_one(free, log_probs)[0].text == "the cot sat"


def test_lm_weight_means_the_same_as_in_the_reference_search(
    char_tokenizer, tiny_lm, tiny_lm_path, lexicon_path
):
    # Same weight, same words: flashlight's hypothesis carries the reference's natural-log LM score, and the
    # score it ranks by is acoustic + weight * ln P_LM + word_score * words.
    options = DecodingOptions(decoder="lexicon", beam_width=8, lm_weight=0.3, word_score=0.7)
    best = decode_one(
        build_decoder(options, char_tokenizer, tiny_lm_path, lexicon_path),
        ambiguous_cat_or_cot(char_tokenizer),
    )[0]
    expected_lm = tiny_lm.score(best.text, bos=True, eos=True) * LN_10
    assert best.lm_score == pytest.approx(expected_lm, abs=1e-4)
    words = len(best.text.split())
    assert best.score == pytest.approx(best.acoustic_score + 0.3 * expected_lm + 0.7 * words, abs=1e-3)


def test_lexicon_free_without_an_lm_finds_what_the_reference_prefix_search_finds(char_tokenizer):
    log_probs = peaky_log_probs(batch=6, frames=40, vocab_size=char_tokenizer.vocab_size, seed=3)
    lengths = torch.full((6,), 40)
    flashlight = build_decoder(DecodingOptions(decoder="lexicon_free", beam_width=32), char_tokenizer)
    reference = CTCPrefixBeamSearch(DecodingOptions(decoder="prefix_beam", beam_width=32), char_tokenizer)
    greedy = GreedyDecoder(DecodingOptions(), char_tokenizer)
    ours = [n[0].text for n in flashlight.decode_batch(log_probs, lengths)]
    # flashlight ranks single best alignments (Viterbi), the prefix search sums alignments: on peaky frames
    # the best path dominates, so both agree with each other and with greedy.
    assert ours == [n[0].text for n in reference.decode_batch(log_probs, lengths)]
    assert ours == [n[0].text for n in greedy.decode_batch(log_probs, lengths)]


def test_each_utterance_is_decoded_within_its_own_length(char_tokenizer):
    log_probs = peaky_log_probs(batch=2, frames=30, vocab_size=char_tokenizer.vocab_size, seed=8)
    decoder = build_decoder(DecodingOptions(decoder="lexicon_free", beam_width=4), char_tokenizer)
    batched = decoder.decode_batch(log_probs, torch.tensor([30, 11]))
    assert batched[1] == decoder.decode_batch(log_probs[1:, :11].contiguous(), torch.tensor([11]))[0]
    assert batched[1] != decoder.decode_batch(log_probs[1:], torch.tensor([30]))[0]


def test_n_best_lists_are_ranked_best_first(char_tokenizer, tiny_lm_path):
    options = DecodingOptions(decoder="lexicon_free", beam_width=8, n_best=3)
    hypotheses = decode_one(build_decoder(options, char_tokenizer), ambiguous_cat_or_cot(char_tokenizer))
    assert len(hypotheses) == 3
    assert [h.score for h in hypotheses] == sorted((h.score for h in hypotheses), reverse=True)


def test_a_lexicon_spelled_with_pieces_the_tokenizer_lacks_is_refused(char_tokenizer):
    with pytest.raises(ValueError, match="spelled with \\['▁qx'\\]"):
        FlashlightDecoder(DecodingOptions(decoder="lexicon"), char_tokenizer, lexicon={"qx": [["▁qx"]]})


def test_log_probs_of_another_vocabulary_are_refused(char_tokenizer):
    decoder = build_decoder(DecodingOptions(decoder="lexicon_free"), char_tokenizer)
    with pytest.raises(ValueError, match="was the model trained with this tokenizer"):
        decoder.decode_batch(torch.zeros(1, 5, 7), torch.tensor([5]))


def test_resources_hand_each_decoder_its_own_lm(char_tokenizer, tiny_lm_path, lexicon_path, tmp_path):
    resources = DecodingResources(
        word_lm=tiny_lm_path, token_lm=tmp_path / "missing.binary", lexicon=lexicon_path
    )
    assert resources.build(DecodingOptions(decoder="lexicon"), char_tokenizer) is not None  # word LM exists
    with pytest.raises(FileNotFoundError, match=r"missing\.binary"):
        resources.build(DecodingOptions(decoder="lexicon_free"), char_tokenizer)


def test_decoders_without_the_files_they_need_are_refused(char_tokenizer, tiny_lm_path):
    with pytest.raises(ValueError, match="needs a lexicon"):
        build_decoder(DecodingOptions(decoder="lexicon"), char_tokenizer)
    with pytest.raises(ValueError, match="fuses no LM"):
        build_decoder(DecodingOptions(decoder="greedy"), char_tokenizer, lm_path=tiny_lm_path)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"decoder": "viterbi"}, "decoder must be one of"),
        ({"beam_width": 0}, "beam_width must be >= 1"),
        ({"beam_width": 2, "n_best": 3}, "n_best must lie in"),
        ({"decoder": "lexicon", "lm_no_eos": True}, "options of the prefix_beam decoder"),
        ({"lm_weight": -1.0}, "lm_weight must be >= 0"),
    ],
)
def test_invalid_options_say_what_is_wrong(values, message):
    with pytest.raises(ValueError, match=message):
        DecodingOptions(**values)


@pytest.mark.gpu
def test_the_cuda_decoder_agrees_with_the_cpu_lexicon_free_search(char_tokenizer):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    log_probs = peaky_log_probs(batch=4, frames=50, vocab_size=char_tokenizer.vocab_size, seed=11)
    lengths = torch.tensor([50, 41, 30, 12])
    beam = HOPPER_SAFE_BEAM if torch.cuda.get_device_capability() >= HOPPER else 10
    cuda = build_decoder(DecodingOptions(decoder="cuda", beam_width=beam), char_tokenizer)
    cpu = build_decoder(DecodingOptions(decoder="lexicon_free", beam_width=beam), char_tokenizer)
    on_gpu = [n[0].text for n in cuda.decode_batch(log_probs, lengths)]
    assert on_gpu == [n[0].text for n in cpu.decode_batch(log_probs, lengths)]


def test_the_cuda_decoder_refuses_the_beams_that_abort_it_on_hopper(char_tokenizer, monkeypatch):
    # torchaudio's kernels read out of bounds from beam 8 on an H100 and abort the process: refused up front.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    with pytest.raises(ValueError, match=r"beam_width 8 on this GPU \(compute capability 9\.0\).*#3754"):
        build_decoder(DecodingOptions(decoder="cuda", beam_width=8), char_tokenizer)


def test_a_blank_penalty_lets_a_weak_piece_through_the_blank(char_tokenizer):
    # "the ca?" where the last frame's "t" (0.3) loses to the blank (0.6): emitted only once the blank's
    # log-prob is lowered by more than ln(0.6 / 0.3).
    ids = char_tokenizer.encode("the cat")
    rows = [*spelled_rows(ids[:-1], char_tokenizer.blank_id), {ids[-1]: 0.3, char_tokenizer.blank_id: 0.6}]
    log_probs = log_probs_from_rows(rows, char_tokenizer.vocab_size)
    for penalty, text in ((0.0, "the ca"), (math.log(2.0) + 0.1, "the cat")):
        options = DecodingOptions(decoder="lexicon_free", beam_width=8, blank_penalty=penalty)
        assert decode_one(build_decoder(options, char_tokenizer), log_probs)[0].text == text
