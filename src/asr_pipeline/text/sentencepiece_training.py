"""Train a SentencePiece model, with the Python library or an external ``spm_train``, and check it loads.

Both routes get the same trainer flags (``trainer_flags``), so ``--sentencepiece-command /usr/bin/spm_train``
trains the model the library would, apart from the library version (a system ``spm_train`` may be older).
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import sentencepiece as spm

from asr_pipeline.options import options_from_dict, setting
from asr_pipeline.text.tokenizer import CTCTokenizer

MODEL_TYPES = ("unigram", "bpe", "char", "word")
MIN_INPUT_SENTENCE_SIZE = 100  # SentencePiece rejects 1..100 (trainer_interface.cc)


@dataclass(frozen=True)
class SentencePieceOptions:
    vocab_size: int = setting(
        256,
        help="SentencePiece pieces, blank excluded",
        flag="--vocab-size",
        reference=5000,
        reference_note="the reference trainer's 5000 pieces suit thousands of hours; 256 measured better on "
        "the demo and small corpora (docs/results/accuracy-per-minute.md), and params.yaml sets the stage's",
    )
    model_type: str = setting(
        "unigram", help="SentencePiece model type", flag="--model-type", choices=MODEL_TYPES
    )
    character_coverage: float = setting(
        1.0, help="fraction of characters the pieces must cover", flag="--character-coverage"
    )
    input_sentence_size: int = setting(
        0, help="train on at most this many sentences; 0 uses all", flag="--input-sentence-size"
    )
    shuffle_input_sentence: bool = setting(
        True,
        help="sample the --input-sentence-size sentences at random (--no-shuffle-input-sentence: take the first "
        "ones)",
        flag="--shuffle-input-sentence",
        reference=False,
        reference_note="the reference trainer takes the first --input-sentence-size sentences; a random sample "
        "represents a corpus sorted by speaker or source",
    )
    # Wider counters for unigram on very large corpora; spm_train 0.1.x honors it, the 0.2 library has
    # deprecated it (accepted, ignored, not saved in the model).
    train_extremely_large_corpus: bool = setting(
        False,
        help="wider counters for unigram training on very large corpora (more memory)",
        flag="--train-extremely-large-corpus",
    )
    user_defined_symbols: tuple[str, ...] = setting(
        (),
        help="comma-separated pieces that are never split, e.g. '<noise>,<laugh>'",
        flag="--user-defined-symbols",
        metavar="CSV",
        parse=str,  # from_dict splits the commas
    )
    byte_fallback: bool = setting(
        False, help="spell unknown characters as UTF-8 bytes", flag="--byte-fallback"
    )
    blank_id: int = setting(
        0, help="CTC blank position among the model ids (text/tokenizer.py)", flag="--blank-id"
    )
    sentencepiece_command: str | None = setting(
        None,
        help="train with this external spm_train (same flags) instead of the Python library",
        flag="--sentencepiece-command",
    )

    @classmethod
    def from_dict(cls, values: dict | None) -> SentencePieceOptions:
        values = dict(values or {})
        if "user_defined_symbols" in values:
            symbols = values["user_defined_symbols"] or ()
            values["user_defined_symbols"] = tuple(
                s for s in (symbols.split(",") if isinstance(symbols, str) else symbols) if s
            )
        options = options_from_dict(cls, values, "params.yaml tokenizer")
        if options.model_type not in MODEL_TYPES:
            raise ValueError(f"model_type must be unigram, bpe, char or word, got {options.model_type!r}")
        if 0 < options.input_sentence_size <= MIN_INPUT_SENTENCE_SIZE:
            raise ValueError(
                f"input_sentence_size must be 0 (every sentence) or above {MIN_INPUT_SENTENCE_SIZE} "
                f"(SentencePiece's own limit), got {options.input_sentence_size}"
            )
        return options


def trainer_flags(options: SentencePieceOptions) -> dict[str, str | int | float | bool]:
    """The SentencePiece trainer flags for ``options`` (library keywords = ``spm_train --flag`` names)."""
    flags: dict[str, str | int | float | bool] = {
        "vocab_size": options.vocab_size,
        "model_type": options.model_type,
        "character_coverage": options.character_coverage,
        "input_sentence_size": options.input_sentence_size,
        "shuffle_input_sentence": options.shuffle_input_sentence,
        "train_extremely_large_corpus": options.train_extremely_large_corpus,
        "byte_fallback": options.byte_fallback,
        "num_threads": 1,  # one thread: the same corpus gives the same model bytes
        # CTC needs no sentence markers; keep <unk> for unseen characters at id 0.
        "bos_id": -1,
        "eos_id": -1,
        "pad_id": -1,
        "unk_id": 0,
        "minloglevel": 2,
        # The project's normalization (text/normalize.py, recorded with the model) is the only one: the
        # default nmt_nfkc rule would apply NFKC again inside SentencePiece and undo `unicode_form`.
        "normalization_rule_name": "identity",
    }
    if options.user_defined_symbols:
        flags["user_defined_symbols"] = ",".join(options.user_defined_symbols)
    if options.model_type in ("char", "word"):
        flags["hard_vocab_limit"] = False  # the alphabet decides the size; vocab_size is an upper bound
    return flags


def train_sentencepiece(sentences: Iterable[str], options: SentencePieceOptions) -> bytes:
    """Return the serialized model trained on ``sentences`` (one per item)."""
    sentences = list(sentences)
    if not sentences:
        raise ValueError("cannot train a tokenizer on an empty corpus")
    if options.sentencepiece_command:
        with tempfile.TemporaryDirectory(prefix="spm-corpus-") as folder:
            corpus = Path(folder) / "corpus.txt"
            corpus.write_text("".join(s + "\n" for s in sentences), encoding="utf-8")
            return train_sentencepiece_file(corpus, options)
    return _train_library({"sentence_iterator": iter(sentences)}, options)


def train_sentencepiece_file(corpus: Path, options: SentencePieceOptions) -> bytes:
    """Return the serialized model trained on a text file holding one sentence per line."""
    if not corpus.is_file() or corpus.stat().st_size == 0:
        raise ValueError(f"cannot train a tokenizer on an empty corpus ({corpus})")
    if options.sentencepiece_command:
        return _train_external(corpus, options)
    return _train_library({"input": str(corpus)}, options)


def _train_library(source: dict, options: SentencePieceOptions) -> bytes:
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(**source, model_writer=model, **trainer_flags(options))
    except RuntimeError as error:
        raise ValueError(_training_failed(str(error), options)) from None
    return _checked(model.getvalue(), options)


def _train_external(corpus: Path, options: SentencePieceOptions) -> bytes:
    command = shutil.which(str(options.sentencepiece_command))
    if command is None:
        raise ValueError(
            f"--sentencepiece-command {options.sentencepiece_command}: not an executable (install "
            "sentencepiece's spm_train, e.g. `apt install sentencepiece`, or drop the flag to use the library)"
        )
    with tempfile.TemporaryDirectory(prefix="spm-train-") as folder:
        prefix = Path(folder) / "model"
        flags = {"input": str(corpus), "model_prefix": str(prefix), **trainer_flags(options)}
        argv = [command, *(f"--{name}={_flag_value(value)}" for name, value in flags.items())]
        result = subprocess.run(argv, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            log = (result.stderr or result.stdout).strip().splitlines()
            raise ValueError(
                _training_failed(f"{command} exited {result.returncode}: {log[-1:] or ''}", options)
            )
        return _checked(prefix.with_suffix(".model").read_bytes(), options)


def _flag_value(value: str | int | float | bool) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _training_failed(error: str, options: SentencePieceOptions) -> str:
    if "vocab" not in error.lower():
        return f"SentencePiece training failed ({error}); check the tokenizer options"
    if options.byte_fallback and options.vocab_size <= 256 + 3:
        return (
            f"SentencePiece training failed ({error}); byte_fallback adds 256 byte pieces, so vocab_size "
            f"{options.vocab_size} is too small: raise it above 256 + the pieces you want"
        )
    return (
        f"SentencePiece training failed ({error}); a vocab_size of {options.vocab_size} may be too large for "
        "this corpus: lower `tokenizer.vocab_size` (--vocab-size)"
    )


def _checked(proto: bytes, options: SentencePieceOptions) -> bytes:
    CTCTokenizer(proto, blank_id=options.blank_id)  # fails loudly if the model does not load
    return proto


def tokenizer_summary(
    model: bytes, options: SentencePieceOptions, normalization: dict, sentences: int
) -> dict:
    """What is saved next to a model (``<prefix>.json``): the training ``vocab_size`` (pieces + 1 blank), the
    blank id, the trainer options and the text normalization, so the model is never used with other text rules.
    """
    tokenizer = CTCTokenizer(model, blank_id=options.blank_id)
    return {
        "num_pieces": tokenizer.num_pieces,
        "vocab_size": tokenizer.vocab_size,
        "blank_id": tokenizer.blank_id,
        "id_mapping": "model id = piece id + 1 for piece ids >= blank_id, else piece id",
        "options": asdict(options),
        "normalization": normalization,
        "corpus_sentences": sentences,
    }


def vocab_text(model_proto: bytes) -> str:
    """The ``.vocab`` file spm_train writes: one ``piece<TAB>score`` line per SentencePiece id."""
    processor = spm.SentencePieceProcessor(model_proto=model_proto)
    lines = [
        f"{processor.id_to_piece(i)}\t{processor.get_score(i):g}" for i in range(processor.get_piece_size())
    ]
    return "\n".join(lines) + "\n"
