"""Turning CTC outputs into text (greedy, prefix beam search with KenLM fusion) and scoring it."""

from asr_pipeline.decoding.beam_search import BeamSearchOptions, CTCPrefixBeamSearch, Hypothesis, load_lm
from asr_pipeline.decoding.greedy import greedy_decode
from asr_pipeline.decoding.lm import KenLMOptions, build_kenlm, find_kenlm_tool
from asr_pipeline.decoding.metrics import ErrorRates, edit_distance, error_rates

__all__ = [
    "BeamSearchOptions",
    "CTCPrefixBeamSearch",
    "ErrorRates",
    "Hypothesis",
    "KenLMOptions",
    "build_kenlm",
    "edit_distance",
    "error_rates",
    "find_kenlm_tool",
    "greedy_decode",
    "load_lm",
]
