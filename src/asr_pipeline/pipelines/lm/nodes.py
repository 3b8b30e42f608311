"""Nodes of the `lm` stage."""

from __future__ import annotations

from asr_pipeline.decoding.lexicon import piece_corpus
from asr_pipeline.decoding.lm import KenLMOptions, build_kenlm
from asr_pipeline.text.tokenizer import CTCTokenizer


def _kenlm_options(params: dict, order_key: str) -> KenLMOptions:
    values = {key: value for key, value in params.items() if key not in ("order", "token_order")}
    if "prune" in values:
        values["prune"] = tuple(values["prune"])
    return KenLMOptions(order=int(params.get(order_key, KenLMOptions.order)), **values)


def train_language_model(tokenizer_corpus: str, params: dict) -> tuple[str, bytes]:
    """Estimate a word n-gram LM (``lm.order``) on the normalized training transcripts; return (ARPA text,
    binary). The lexicon and prefix-beam decoders fuse it."""
    return build_kenlm(tokenizer_corpus, _kenlm_options(params, "order"))


def train_piece_language_model(tokenizer_corpus: str, tokenizer_model: bytes, params: dict) -> bytes:
    """Estimate a piece n-gram LM (``lm.token_order``) on the training transcripts as the tokenizer spells them;
    return its binary. The lexicon-free decoder fuses it: any piece sequence, so any word, stays possible."""
    _, binary = build_kenlm(
        piece_corpus(tokenizer_corpus, CTCTokenizer(tokenizer_model)), _kenlm_options(params, "token_order")
    )
    return binary
