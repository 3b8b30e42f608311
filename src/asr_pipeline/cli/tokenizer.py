"""``asr-pipeline tokenizer``: train a SentencePiece model on the normalized transcripts of the inputs.

Flag names follow the reference Rust trainer; every trainer default is the field of
``text.sentencepiece_training.SentencePieceOptions`` (the library's, which the tokenizer stage uses under
params.yaml ``tokenizer``), and the text normalization's is ``NormalizationOptions``'. The transcripts are
streamed into a corpus file (``<output-dir>/<model-prefix>.corpus.txt``, one normalized sentence per line)
that the library or an external ``spm_train`` trains on; it is deleted afterwards unless ``--keep-corpus``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from asr_pipeline.cli.common import HelpFormatter, UsageError, existing_path, print_json
from asr_pipeline.cli.config_flags import add_config_flags, config_flags, given_overrides
from asr_pipeline.io.report import SkipReport
from asr_pipeline.options import reference_values
from asr_pipeline.text.normalize import UNICODE_FORMS, NormalizationOptions, normalize_text, tokenizer_sidecar
from asr_pipeline.text.sentencepiece_training import SentencePieceOptions


def _default(options: type, name: str) -> Any:
    """The default of the ``options`` dataclass field ``name``: the one place it is set."""
    return {field.name: field.default for field in dataclasses.fields(options)}[name]


TRAINER_FLAGS = config_flags(SentencePieceOptions)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "tokenizer",
        formatter_class=HelpFormatter,
        help="train a SentencePiece tokenizer on normalized transcripts",
        description="Train a SentencePiece model on the normalized transcripts of --input; write "
        "<output-dir>/<model-prefix>.model, .vocab and .json (the training vocab_size, blank id and text "
        "normalization) and print the training vocab_size (pieces + 1 blank).",
    )
    parser.add_argument(
        "--input",
        action="append",
        metavar="PATH",
        help="a manifest (JSONL/JSON/TSV/Parquet), a folder of them, a Kaldi data dir (wav.scp + text), a "
        "LibriSpeech split folder, an audio folder with .txt/.lab/.transcript sidecars, a plain-text file "
        "(one sentence per non-empty line) or a folder of such .txt files; relative paths in a manifest "
        "resolve against its folder; repeat for several",
    )
    parser.add_argument(
        "--manifest-dir",
        metavar="DIR",
        help="train on DIR/train.jsonl (the training half of the split `train --manifest-dir` makes when "
        "DIR has no val/validation/dev.jsonl, written under --output-dir); instead of or besides --input",
    )
    parser.add_argument("--output-dir", default="tokenizer", help="folder to write into")
    parser.add_argument("--model-prefix", default="tokenizer", help="file name stem of .model/.vocab/.json")
    parser.add_argument(
        "--defaults",
        choices=("ours", "reference"),
        default="ours",
        help="whose defaults fill the trainer options not given: ours, or the reference trainer's "
        "(docs/reference/defaults.md)",
    )
    # The trainer options are SentencePieceOptions' fields (help, flag, default): no argparse default, so
    # --defaults decides what an option not given takes.
    add_config_flags(parser, TRAINER_FLAGS, negatable=True)
    parser.add_argument(
        "--keep-corpus",
        action="store_true",
        help="keep the training text (<model-prefix>.corpus.txt) next to the model instead of deleting it",
    )
    parser.add_argument(
        "--unicode-form",
        choices=[*UNICODE_FORMS, "none"],
        default=_default(NormalizationOptions, "unicode_form") or "none",
        help="Unicode normalization of the transcripts ('none' keeps them as they are)",
    )
    parser.add_argument(
        "--no-lowercase", action="store_true", help="keep the transcripts' case (default: lowercase them)"
    )
    parser.add_argument(
        "--keep-punctuation",
        action="store_true",
        help="keep punctuation (default: strip it, keeping apostrophes inside words)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="fail on the first bad record (naming file and line) instead of skipping and counting it",
    )
    parser.set_defaults(handler=run)


def sentencepiece_options(args: argparse.Namespace) -> SentencePieceOptions:
    """The trainer options given, over the chosen defaults (ours: the library's; --defaults reference)."""
    given = {key: value for key, (value, _) in given_overrides(args, TRAINER_FLAGS).items()}
    defaults = reference_values(SentencePieceOptions) if args.defaults == "reference" else {}
    return SentencePieceOptions.from_dict({**defaults, **given})


def run(args: argparse.Namespace) -> int:
    from asr_pipeline.text.sentencepiece_training import (
        tokenizer_summary,
        train_sentencepiece_file,
        vocab_text,
    )

    output_dir = Path(args.output_dir)
    inputs = [existing_path(path, "--input") for path in args.input or []]
    if args.manifest_dir is not None:
        from asr_pipeline.io.manifest_dir import resolve_manifest_dir

        inputs.append(
            resolve_manifest_dir(existing_path(args.manifest_dir, "--manifest-dir"), output_dir).train
        )
    if not inputs:
        raise UsageError("give the training text with --input (repeatable) or --manifest-dir")
    if args.sentencepiece_command is not None and shutil.which(args.sentencepiece_command) is None:
        raise UsageError(
            f"--sentencepiece-command {args.sentencepiece_command}: no such executable (a path, or a name "
            "on PATH such as spm_train)"
        )
    normalization = NormalizationOptions(
        unicode_form=None if args.unicode_form == "none" else args.unicode_form,
        lowercase=not args.no_lowercase,
        strip_punctuation=not args.keep_punctuation,
    )
    options = sentencepiece_options(args)
    report = SkipReport(strict=args.strict)
    output_dir.mkdir(parents=True, exist_ok=True)
    corpus = output_dir / f"{args.model_prefix}.corpus.txt"
    try:
        with corpus.open("w", encoding="utf-8") as handle:  # streamed: the corpus may exceed memory
            sentences = 0
            for sentence in _iter_sentences(inputs, normalization, report):
                handle.write(sentence + "\n")
                sentences += 1
        if sentences == 0:
            raise ValueError(
                f"no usable transcripts in {', '.join(map(str, inputs))} "
                f"(skipped: {report.to_dict()['skipped_by_reason']})"
            )
        model = train_sentencepiece_file(corpus, options)
    finally:
        if not args.keep_corpus:
            corpus.unlink(missing_ok=True)
    info = tokenizer_summary(model, options, normalization.to_dict(), sentences)

    model_path = output_dir / f"{args.model_prefix}.model"
    vocab_path = output_dir / f"{args.model_prefix}.vocab"
    model_path.write_bytes(model)
    vocab_path.write_text(vocab_text(model), encoding="utf-8")
    tokenizer_sidecar(model_path).write_text(
        json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    print(
        f"training --vocab-size {info['vocab_size']} ({info['num_pieces']} pieces + 1 blank at id "
        f"{info['blank_id']}); wrote {model_path}",
        file=sys.stderr,
    )
    outputs = {"model": str(model_path), "vocab": str(vocab_path), "info": str(tokenizer_sidecar(model_path))}
    if args.keep_corpus:
        outputs["corpus"] = str(corpus)
    print_json({**info, **outputs, "report": report.to_dict()})
    return 0


def _iter_sentences(inputs: list[Path], options: NormalizationOptions, report: SkipReport) -> Iterator[str]:
    """Normalized transcripts of every input; records without a usable one are counted in ``report``."""
    for path in inputs:
        for location, text in _iter_transcripts(path, report):
            if text is None:
                report.skip("no transcript", location, "the record has tokens or audio but no text")
                continue
            normalized = normalize_text(text, options)
            if not normalized:
                report.skip("empty transcript", location, "nothing left after normalization")
                continue
            report.kept += 1
            yield normalized


def _iter_transcripts(path: Path, report: SkipReport) -> Iterator[tuple[str, str | None]]:
    """(location, transcript or None) of each record or text line of one --input."""
    from asr_pipeline.io.audio import AUDIO_EXTENSIONS  # heavy imports: not for --help
    from asr_pipeline.io.kaldi import is_kaldi_data_dir
    from asr_pipeline.io.manifests import RECORD_FILE_SUFFIXES, iter_manifest, iter_text_lines

    if path.is_file() and path.suffix.lower() == ".txt":
        yield from iter_text_lines(path, report)
        return
    if path.is_dir() and not is_kaldi_data_dir(path):  # a Kaldi dir's audio may live elsewhere
        has = {p.suffix.lower() for p in path.rglob("*") if p.is_file()}
        if not has & {*RECORD_FILE_SUFFIXES, *AUDIO_EXTENSIONS} and ".txt" in has:
            # Neither manifests nor audio (whose .txt files are sidecars): a folder of plain-text corpora.
            for text_file in sorted(path.rglob("*.txt")):
                yield from iter_text_lines(text_file, report)
            return
    for record in iter_manifest(path, report):
        yield record.location, record.text
