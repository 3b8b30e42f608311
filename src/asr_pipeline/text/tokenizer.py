"""SentencePiece wrapped for CTC: the model's vocabulary is the SentencePiece pieces plus one blank.

Id mapping (``blank_id`` is configurable, default 0)::

    model id == blank_id            -> CTC blank (no piece)
    model id <  blank_id            -> SentencePiece id == model id
    model id >  blank_id            -> SentencePiece id == model id - 1

So with the default ``blank_id=0`` a SentencePiece id ``p`` becomes model id ``p + 1`` and the training
``vocab_size`` is ``len(pieces) + 1``. Feature shards store model ids in their ``tokens`` column.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import sentencepiece as spm

WORD_BOUNDARY = "\u2581"  # SentencePiece marks the start of a word with "▁"


class CTCTokenizer:
    """Text <-> CTC model ids through a trained SentencePiece model."""

    def __init__(self, model_proto: bytes, blank_id: int = 0) -> None:
        self.processor = spm.SentencePieceProcessor(model_proto=model_proto)
        num_pieces = self.processor.get_piece_size()
        if not 0 <= blank_id <= num_pieces:
            raise ValueError(f"blank_id={blank_id} must lie in [0, {num_pieces}] for {num_pieces} pieces")
        self.blank_id = blank_id
        self.model_proto = model_proto

    @classmethod
    def from_file(cls, path: str | Path, blank_id: int = 0) -> CTCTokenizer:
        return cls(Path(path).read_bytes(), blank_id=blank_id)

    @property
    def num_pieces(self) -> int:
        return self.processor.get_piece_size()

    @property
    def vocab_size(self) -> int:
        """Size of the CTC output layer: pieces + 1 blank."""
        return self.num_pieces + 1

    def to_model_id(self, piece_id: int) -> int:
        return piece_id if piece_id < self.blank_id else piece_id + 1

    def to_piece_id(self, model_id: int) -> int:
        if model_id == self.blank_id:
            raise ValueError(f"model id {model_id} is the CTC blank and has no piece")
        return model_id if model_id < self.blank_id else model_id - 1

    @property
    def unk_id(self) -> int:
        """Model id of SentencePiece's ``<unk>``: what text the model cannot spell encodes to."""
        return self.to_model_id(self.processor.unk_id())

    def unknown_share(self, model_ids: Sequence[int]) -> float:
        """Share of the pieces of ``model_ids`` that are ``<unk>`` (0.0 for none).

        Bare word boundaries ("▁" alone) are not counted: SentencePiece puts one before every word it
        cannot spell, so a transcript in a script the model never saw scores 1.0 rather than 0.5.
        """
        boundary = self.processor.piece_to_id(WORD_BOUNDARY)
        # piece_to_id answers <unk> for a piece the model lacks: then no id is a bare boundary.
        boundary_id = None if boundary == self.processor.unk_id() else self.to_model_id(boundary)
        counted = [int(i) for i in model_ids if int(i) != boundary_id]
        return sum(i == self.unk_id for i in counted) / len(counted) if counted else 0.0

    def encode(self, text: str) -> list[int]:
        return [self.to_model_id(p) for p in self.processor.encode(text, out_type=int)]

    def decode(self, model_ids: Sequence[int]) -> str:
        return self.processor.decode([self.to_piece_id(int(i)) for i in model_ids if int(i) != self.blank_id])

    def piece(self, model_id: int) -> str:
        """The piece string of a model id ("" for the blank)."""
        if model_id == self.blank_id:
            return ""
        return self.processor.id_to_piece(self.to_piece_id(model_id))

    def pieces(self) -> list[str]:
        """Piece strings indexed by model id (the blank is "")."""
        return [self.piece(i) for i in range(self.vocab_size)]
