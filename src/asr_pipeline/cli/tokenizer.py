"""``asr-pipeline tokenizer``: train a SentencePiece model on the normalized transcripts of the inputs."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from asr_pipeline.cli.common import HelpFormatter, existing_path, print_json
from asr_pipeline.io.report import SkipReport
from asr_pipeline.text.normalize import NormalizationOptions, normalize_text


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "tokenizer",
        formatter_class=HelpFormatter,
        help="train a SentencePiece tokenizer on normalized transcripts",
        description="Train a SentencePiece model on the normalized transcripts of --input; write "
        "<output-dir>/<model-prefix>.model and .vocab and print the training vocab_size (pieces + 1 blank).",
    )
    parser.add_argument(
        "--input",
        action="append",
        required=True,
        metavar="PATH",
        help="a JSONL/JSON manifest, an audio folder with .txt sidecars, or a .txt file with one sentence "
        "per non-empty line; repeat for several",
    )
    parser.add_argument("--output-dir", default="tokenizer", help="folder to write into")
    parser.add_argument("--model-prefix", default="tokenizer", help="file name stem of .model/.vocab")
    parser.add_argument("--vocab-size", type=int, default=5000, help="SentencePiece pieces, blank excluded")
    parser.add_argument(
        "--model-type",
        choices=["unigram", "bpe", "char", "word"],
        default="unigram",
        help="SentencePiece model type",
    )
    parser.add_argument(
        "--character-coverage", type=float, default=1.0, help="fraction of characters the pieces must cover"
    )
    parser.add_argument(
        "--input-sentence-size", type=int, default=0, help="train on at most this many sentences; 0 uses all"
    )
    parser.add_argument(
        "--shuffle-input-sentence",
        action="store_true",
        help="shuffle before sampling --input-sentence-size sentences",
    )
    parser.add_argument(
        "--user-defined-symbols",
        metavar="CSV",
        help="comma-separated pieces that are never split, e.g. '<noise>,<laugh>'",
    )
    parser.add_argument(
        "--byte-fallback", action="store_true", help="spell unknown characters as UTF-8 bytes"
    )
    parser.add_argument("--blank-id", type=int, default=0, help="CTC blank position among the model ids")
    parser.add_argument(
        "--no-lowercase", action="store_true", help="keep the transcripts' case (default: lowercase them)"
    )
    parser.add_argument(
        "--keep-punctuation",
        action="store_true",
        help="keep punctuation (default: strip it, keeping apostrophes inside words)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from asr_pipeline.pipelines.tokenizer.nodes import train_tokenizer

    inputs = [existing_path(path, "--input") for path in args.input]
    normalization = NormalizationOptions(
        lowercase=not args.no_lowercase, strip_punctuation=not args.keep_punctuation
    )
    report = SkipReport()
    sentences = list(_iter_sentences(inputs, normalization, report))
    params: dict[str, Any] = {
        "vocab_size": args.vocab_size,
        "model_type": args.model_type,
        "character_coverage": args.character_coverage,
        "input_sentence_size": args.input_sentence_size,
        "shuffle_input_sentence": args.shuffle_input_sentence,
        "byte_fallback": args.byte_fallback,
        "blank_id": args.blank_id,
    }
    if args.user_defined_symbols:
        params["user_defined_symbols"] = [s for s in args.user_defined_symbols.split(",") if s]
    corpus = "".join(sentence + "\n" for sentence in sentences)
    model, vocab, info = train_tokenizer(corpus, params, dataclasses.asdict(normalization))

    output_dir = Path(args.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    model_path = output_dir / f"{args.model_prefix}.model"
    vocab_path = output_dir / f"{args.model_prefix}.vocab"
    model_path.write_bytes(model)
    vocab_path.write_text(vocab, encoding="utf-8")
    print(
        f"training vocab_size: {info['vocab_size']} ({info['num_pieces']} pieces + 1 blank at id "
        f"{info['blank_id']}); wrote {model_path}",
        file=sys.stderr,
    )
    print_json({**info, "model": str(model_path), "vocab": str(vocab_path), "report": report.to_dict()})
    return 0


def _iter_sentences(inputs: list[Path], options: NormalizationOptions, report: SkipReport) -> Iterator[str]:
    """Normalized transcripts of every input; records without a usable one are counted in ``report``."""
    from asr_pipeline.io.manifests import iter_manifest, iter_text_lines  # heavy imports: not for --help

    for path in inputs:
        if path.is_file() and path.suffix == ".txt":
            transcripts = iter_text_lines(path, report)
        else:
            transcripts = ((record.location, record.text) for record in iter_manifest(path, report))
        for location, text in transcripts:
            if text is None:
                report.skip("no transcript", location)
                continue
            normalized = normalize_text(text, options)
            if not normalized:
                report.skip("empty transcript", location)
                continue
            report.kept += 1
            yield normalized
