"""Turning CTC outputs into text and scoring it.

``options`` (the one ``DecodingOptions`` shape), ``decoders`` (``build_decoder``: greedy; flashlight's lexicon
and lexicon-free beam searches with KenLM; our Python prefix beam search, their reference; the CUDA beam
search), ``lexicon`` (what flashlight reads), ``tuning`` (LM weight and scores on dev), ``evaluation``
(decode and score shards), ``lm`` (building KenLM models). Nothing is imported here, so that reading the
options (training configs, the CLI) does not load torch, KenLM or flashlight.
"""
