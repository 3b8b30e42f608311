"""Nodes of the `tokenizer` stage."""

from __future__ import annotations

from asr_pipeline.text.normalize import NormalizationOptions
from asr_pipeline.text.sentencepiece_training import (
    SentencePieceOptions,
    tokenizer_summary,
    train_sentencepiece,
    vocab_text,
)


def train_tokenizer(tokenizer_corpus: str, params: dict, normalization: dict) -> tuple[bytes, str, dict]:
    """Train SentencePiece; return the model, its ``.vocab`` text and a summary (``tokenizer.json``).

    The summary records the training ``vocab_size`` (pieces + 1 CTC blank), the blank id and the text
    normalization the transcripts went through (every option, defaults filled in), so the model is never
    used with different text rules (``normalization_for_model`` reads it back).
    """
    options = SentencePieceOptions.from_dict(params)
    resolved = NormalizationOptions.from_dict(normalization).to_dict()
    sentences = [line for line in tokenizer_corpus.splitlines() if line.strip()]
    model = train_sentencepiece(sentences, options)
    return model, vocab_text(model), tokenizer_summary(model, options, resolved, len(sentences))
