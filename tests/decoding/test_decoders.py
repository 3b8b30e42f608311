"""decoding.decoders: build_decoder gives the strategy DecodingOptions names (and refuses what cannot work,
saying what to change), greedy decoding's text and score, and DecodingResources handing each decoder its LM."""

from __future__ import annotations

import pytest
import torch

from asr_pipeline.decoding.beam_search import CTCPrefixBeamSearch
from asr_pipeline.decoding.decoders import CudaDecoder, DecodingResources, GreedyDecoder, build_decoder
from asr_pipeline.decoding.flashlight import FlashlightDecoder
from asr_pipeline.decoding.options import DecodingOptions

from .factories import ambiguous_cat_or_cot


def test_greedy_decoding_reads_the_best_path_and_scores_it_by_its_frame_maxima(char_tokenizer):
    log_probs = ambiguous_cat_or_cot(char_tokenizer).float()[None]  # (1, T, V)
    frames = log_probs.shape[1]
    decoder = build_decoder(DecodingOptions(decoder="greedy"), char_tokenizer)
    assert isinstance(decoder, GreedyDecoder)
    [[best]] = decoder.decode_batch(log_probs, torch.tensor([frames]))
    assert best.text == "the cot sat"  # "o" (0.5) beats "a" (0.4) without an LM
    expected = log_probs[0].max(-1).values.double().sum().item()
    assert best.score == pytest.approx(expected) and best.acoustic_score == pytest.approx(expected)


def test_greedy_decoding_stops_at_each_utterances_length(char_tokenizer):
    log_probs = ambiguous_cat_or_cot(char_tokenizer).float()[None].repeat(2, 1, 1)  # (2, T, V)
    full, cut = GreedyDecoder(DecodingOptions(), char_tokenizer).decode_batch(
        log_probs, torch.tensor([log_probs.shape[1], 0])
    )
    assert full[0].text == "the cot sat" and (cut[0].text, cut[0].score) == ("", 0.0)


def test_each_beam_decoder_name_builds_its_strategy(char_tokenizer, tiny_lm_path):
    assert isinstance(
        build_decoder(DecodingOptions(decoder="prefix_beam"), char_tokenizer), CTCPrefixBeamSearch
    )
    assert isinstance(
        build_decoder(DecodingOptions(decoder="lexicon_free"), char_tokenizer), FlashlightDecoder
    )
    with_lm = build_decoder(DecodingOptions(decoder="prefix_beam"), char_tokenizer, lm_path=tiny_lm_path)
    assert isinstance(with_lm, CTCPrefixBeamSearch)


@pytest.mark.parametrize(
    ("options", "lm", "message"),
    [
        (DecodingOptions(decoder="greedy"), "word.arpa", "the greedy decoder fuses no LM"),
        (DecodingOptions(decoder="lexicon"), None, "the lexicon decoder needs a lexicon"),
    ],
)
def test_a_decoder_that_cannot_work_is_refused_saying_what_to_change(char_tokenizer, options, lm, message):
    with pytest.raises(ValueError, match=message):
        build_decoder(options, char_tokenizer, lm_path=lm)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without a CUDA device")
def test_the_cuda_decoder_without_a_gpu_names_the_cpu_decoders(char_tokenizer):
    with pytest.raises(RuntimeError, match="use lexicon or lexicon_free on the CPU"):
        CudaDecoder(DecodingOptions(decoder="cuda"), char_tokenizer)


def test_resources_give_word_decoders_the_word_lm_and_lexicon_free_the_piece_lm(
    char_tokenizer, tiny_lm_path, tmp_path
):
    # the word LM path does not exist: a decoder that read it would fail, so only the piece LM may be read
    resources = DecodingResources(word_lm=tmp_path / "missing.arpa", token_lm=tiny_lm_path)
    assert isinstance(
        resources.build(DecodingOptions(decoder="lexicon_free"), char_tokenizer), FlashlightDecoder
    )
    assert isinstance(resources.build(DecodingOptions(decoder="greedy"), char_tokenizer), GreedyDecoder)
    with pytest.raises(Exception, match=r"missing\.arpa"):
        resources.build(DecodingOptions(decoder="prefix_beam"), char_tokenizer)
