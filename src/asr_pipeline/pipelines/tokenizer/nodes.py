"""Nodes of the `tokenizer` stage."""

from __future__ import annotations

from dataclasses import asdict

from asr_pipeline.text.sentencepiece_training import SentencePieceOptions, train_sentencepiece, vocab_text
from asr_pipeline.text.tokenizer import CTCTokenizer


def train_tokenizer(tokenizer_corpus: str, params: dict, normalization: dict) -> tuple[bytes, str, dict]:
    """Train SentencePiece; return the model, its ``.vocab`` text and a summary.

    The summary records the training ``vocab_size`` (pieces + 1 CTC blank), the blank id and the text
    normalization the transcripts went through, so the model is never used with different text rules.
    """
    options = SentencePieceOptions.from_dict(params)
    sentences = [line for line in tokenizer_corpus.splitlines() if line.strip()]
    model = train_sentencepiece(sentences, options)
    tokenizer = CTCTokenizer(model, blank_id=options.blank_id)
    info = {
        "num_pieces": tokenizer.num_pieces,
        "vocab_size": tokenizer.vocab_size,
        "blank_id": tokenizer.blank_id,
        "id_mapping": "model id = piece id + 1 for piece ids >= blank_id, else piece id",
        "options": asdict(options),
        "normalization": normalization,
        "corpus_sentences": len(sentences),
    }
    return model, vocab_text(model), info
