"""Shared decoding fixtures: a real (tiny) SentencePiece tokenizer and a real KenLM model."""

from __future__ import annotations

import io
import string
from pathlib import Path

import kenlm
import pytest
import sentencepiece as spm

from asr_pipeline.decoding.lm import KenLMOptions, build_kenlm
from asr_pipeline.text.tokenizer import CTCTokenizer

from .factories import LM_CORPUS

# Every letter appears, so a character model can spell any lowercase word ("cot" included).
TOKENIZER_SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "the cat sat on the mat",
    "a cot is a small bed",
    string.ascii_lowercase,
]


@pytest.fixture(scope="session")
def char_tokenizer() -> CTCTokenizer:
    """One piece per character plus "▁" (word start): 27 pieces + <unk>, <s>, </s> + blank = 31 outputs."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TOKENIZER_SENTENCES),
        model_writer=model,
        model_type="char",
        vocab_size=40,
        hard_vocab_limit=False,  # a char model's size is its alphabet; 40 is only an upper bound
        minloglevel=2,
    )
    return CTCTokenizer(model.getvalue())


@pytest.fixture(scope="session")
def tiny_lm_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A word 3-gram of ``LM_CORPUS`` (ARPA)."""
    arpa, _ = build_kenlm(LM_CORPUS, KenLMOptions(order=3))
    path = tmp_path_factory.mktemp("lm") / "tiny.arpa"
    path.write_text(arpa, encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tiny_lm(tiny_lm_path: Path) -> kenlm.Model:
    return kenlm.Model(str(tiny_lm_path))
