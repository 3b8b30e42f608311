"""Nodes of the `tokenizer` stage."""

from __future__ import annotations

import logging

from asr_pipeline.decoding.lexicon import build_lexicon
from asr_pipeline.text.normalize import NormalizationOptions
from asr_pipeline.text.sentencepiece_training import (
    SentencePieceOptions,
    tokenizer_summary,
    train_sentencepiece,
    vocab_text,
)
from asr_pipeline.text.tokenizer import CTCTokenizer

logger = logging.getLogger(__name__)


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


def build_decoding_lexicon(tokenizer_corpus: str, tokenizer_model: bytes) -> tuple[str, dict]:
    """The lexicon of the training words, spelled in the new tokenizer's pieces (the lexicon decoder's word
    list), and a report: words, and the words left out because only ``<unk>`` could spell them."""
    lexicon, unspellable = build_lexicon(tokenizer_corpus, CTCTokenizer(tokenizer_model))
    if unspellable:
        logger.warning(
            "lexicon: %d words need <unk> pieces and are left out: %s", len(unspellable), unspellable[:10]
        )
    return lexicon, {
        "words": lexicon.count("\n"),
        "unspellable": len(unspellable),
        "first_unspellable": unspellable[:10],
    }
