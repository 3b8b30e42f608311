"""What the flashlight decoders read besides the LM: a lexicon, and the piece corpus of the piece LM.

Both are made from the training transcripts with the tokenizer the model was trained with, so that every
spelling is the piece sequence the model learned to emit for that word:

    lexicon.txt    one line per word: ``word<TAB>▁pi ece s`` (flashlight's lexicon format), sorted
    piece corpus   each transcript as its pieces separated by spaces, for ``lmplz`` (a piece n-gram LM)

A word is spelled as SentencePiece segments it alone (``▁word``...). Inside a sentence SentencePiece
segments each whitespace-separated word independently too (it splits on whitespace before the unigram or BPE
search), so the spelling is the one the model was trained on.
"""

from __future__ import annotations

from collections.abc import Iterable

from asr_pipeline.text.tokenizer import CTCTokenizer


def _lines(transcripts: str | Iterable[str]) -> list[str]:
    lines = transcripts.splitlines() if isinstance(transcripts, str) else list(transcripts)
    return [line.strip() for line in lines if line.strip()]


def _pieces(text: str, tokenizer: CTCTokenizer) -> list[str]:
    # Through ids, so a character the tokenizer lacks is "<unk>" (the surface form would be a piece name
    # the model has no output for).
    processor = tokenizer.processor
    return [processor.id_to_piece(i) for i in processor.encode(text, out_type=int)]


def build_lexicon(transcripts: str | Iterable[str], tokenizer: CTCTokenizer) -> tuple[str, list[str]]:
    """The lexicon of every word of ``transcripts`` (text, one transcript per line, or an iterable), and the
    words left out because the tokenizer spells them with ``<unk>`` (no decoder could emit them)."""
    words = sorted({word for line in _lines(transcripts) for word in line.split()})
    unk = tokenizer.processor.id_to_piece(tokenizer.processor.unk_id())
    rows, unspellable = [], []
    for word in words:
        pieces = _pieces(word, tokenizer)
        if unk in pieces:
            unspellable.append(word)
            continue
        rows.append(f"{word}\t{' '.join(pieces)}\n")
    return "".join(rows), unspellable


def piece_corpus(transcripts: str | Iterable[str], tokenizer: CTCTokenizer) -> str:
    """Every transcript as space-separated pieces: the training text of the lexicon-free decoder's LM."""
    return "".join(" ".join(_pieces(line, tokenizer)) + "\n" for line in _lines(transcripts))
