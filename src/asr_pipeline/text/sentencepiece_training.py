"""Train a SentencePiece model in memory with the Python library and check that it loads."""

from __future__ import annotations

import io
from dataclasses import dataclass

import sentencepiece as spm

from asr_pipeline.options import options_from_dict
from asr_pipeline.text.tokenizer import CTCTokenizer


@dataclass(frozen=True)
class SentencePieceOptions:
    vocab_size: int = 256
    model_type: str = "unigram"  # unigram | bpe | char | word
    character_coverage: float = 1.0
    input_sentence_size: int = 0  # 0 = use every sentence
    shuffle_input_sentence: bool = True
    user_defined_symbols: tuple[str, ...] = ()
    byte_fallback: bool = False
    blank_id: int = 0  # CTC blank position in the model's vocabulary (see text/tokenizer.py)

    @classmethod
    def from_dict(cls, values: dict | None) -> SentencePieceOptions:
        values = dict(values or {})
        if "user_defined_symbols" in values:
            symbols = values["user_defined_symbols"]
            values["user_defined_symbols"] = tuple(
                symbols.split(",") if isinstance(symbols, str) else symbols
            )
        options = options_from_dict(cls, values, "params.yaml tokenizer")
        if options.model_type not in ("unigram", "bpe", "char", "word"):
            raise ValueError(f"model_type must be unigram, bpe, char or word, got {options.model_type!r}")
        return options


def train_sentencepiece(sentences: list[str], options: SentencePieceOptions) -> bytes:
    """Return the serialized model. Single-threaded so the same corpus gives the same bytes."""
    if not sentences:
        raise ValueError("cannot train a tokenizer on an empty corpus")
    model = io.BytesIO()
    kwargs = {
        "sentence_iterator": iter(sentences),
        "model_writer": model,
        "vocab_size": options.vocab_size,
        "model_type": options.model_type,
        "character_coverage": options.character_coverage,
        "input_sentence_size": options.input_sentence_size,
        "shuffle_input_sentence": options.shuffle_input_sentence,
        "byte_fallback": options.byte_fallback,
        "num_threads": 1,
        # CTC needs no sentence markers; keep <unk> for unseen characters at id 0.
        "bos_id": -1,
        "eos_id": -1,
        "pad_id": -1,
        "unk_id": 0,
        "minloglevel": 2,
    }
    if options.user_defined_symbols:
        kwargs["user_defined_symbols"] = list(options.user_defined_symbols)
    if options.model_type in ("char", "word"):
        kwargs["hard_vocab_limit"] = False  # the alphabet decides the size; vocab_size is an upper bound
    try:
        spm.SentencePieceTrainer.train(**kwargs)
    except RuntimeError as error:
        raise ValueError(
            f"SentencePiece training failed ({error}); a vocab_size of {options.vocab_size} "
            "may be too large for this corpus: lower `tokenizer.vocab_size`"
        ) from None
    proto = model.getvalue()
    CTCTokenizer(proto, blank_id=options.blank_id)  # fails loudly if the model does not load
    return proto


def vocab_text(model_proto: bytes) -> str:
    """The ``.vocab`` file spm_train writes: one ``piece<TAB>score`` line per SentencePiece id."""
    processor = spm.SentencePieceProcessor(model_proto=model_proto)
    lines = [
        f"{processor.id_to_piece(i)}\t{processor.get_score(i):g}" for i in range(processor.get_piece_size())
    ]
    return "\n".join(lines) + "\n"
