"""Nodes of the `lm` stage."""

from __future__ import annotations

from asr_pipeline.decoding.lm import KenLMOptions, build_kenlm


def train_language_model(tokenizer_corpus: str, params: dict) -> tuple[str, bytes]:
    """Estimate an n-gram LM on the normalized training transcripts; return (ARPA text, binary)."""
    values = dict(params)
    if "prune" in values:
        values["prune"] = tuple(values["prune"])
    return build_kenlm(tokenizer_corpus, KenLMOptions(**values))
