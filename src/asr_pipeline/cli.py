"""``asr-pipeline``: the command line, a thin layer over the library functions the Kedro nodes call.

Subcommands mirror the reference Rust trainer (``tokenizer``, ``extract-features``, ``train``, same flag
names and defaults) plus ``index`` and ``decode``. Each reads its paths from flags, calls what the stage's
node calls, and prints a JSON summary on stdout (progress goes to stderr).

Exit status: 0 done; 2 a usage error (an unknown flag, a bad combination, an input path that does not
exist), printed as one line; 1 the library rejected the input (bad records in ``--strict`` mode, a
failed training run, ...), printed as ``asr-pipeline <command>: error: <message>`` without a traceback.
Heavy libraries (torch, kedro) are imported inside the commands, so ``--help`` answers at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import click

from asr_pipeline.io.report import SkipReport
from asr_pipeline.text.normalize import NormalizationOptions, normalize_text
from asr_pipeline.training.config import (
    DataConfig,
    ModelConfig,
    OptimConfig,
    RunConfig,
    TrainConfig,
    resolve_config,
)
from asr_pipeline.training.launch import TrainingFailedError

PROG = "asr-pipeline"
# What the library raises for input it cannot use; shown as one line, exit 1.
LIBRARY_ERRORS = (ValueError, NotImplementedError, OSError, TrainingFailedError)


class HelpFormatter(argparse.HelpFormatter):
    """Appends "(default: X)" to the help of every flag that has a default other than None/False."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False or action.default is argparse.SUPPRESS:
            return action.help
        return f"{action.help} (default: %(default)s)"


class UsageError(Exception):
    """A bad flag combination or a missing input path: one line on stderr, exit 2 (as argparse does)."""


# --- tokenizer ------------------------------------------------------------------------------------------
def add_tokenizer_parser(subparsers: argparse._SubParsersAction) -> None:
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
    parser.set_defaults(handler=run_tokenizer)


def run_tokenizer(args: argparse.Namespace) -> int:
    from asr_pipeline.pipelines.tokenizer.nodes import train_tokenizer

    inputs = [_existing(path, "--input") for path in args.input]
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
    _print_json({**info, "model": str(model_path), "vocab": str(vocab_path), "report": report.to_dict()})
    return 0


def _iter_sentences(inputs: list[Path], options: NormalizationOptions, report: SkipReport) -> Iterator[str]:
    """Normalized transcripts of every input; records without a usable one are counted in ``report``."""
    from asr_pipeline.io.manifests import iter_manifest  # imports torch (audio): not needed for --help

    for path in inputs:
        if path.is_file() and path.suffix == ".txt":
            transcripts = _iter_text_lines(path, report)
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


def _iter_text_lines(path: Path, report: SkipReport) -> Iterator[tuple[str, str]]:
    """(location, line) for every non-empty line of a plain text file: one sentence per line."""
    for number, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), start=1):
        if line.strip():
            report.seen += 1
            yield f"{path}:{number}", line


# --- extract-features ----------------------------------------------------------------------------------
def add_extract_features_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "extract-features",
        formatter_class=HelpFormatter,
        help="decode audio, compute fbank features, tokenize: write Parquet feature shards",
        description="Read manifests/audio folders, normalize transcripts, compute 80-bin fbank features "
        "and token ids, and write feature shards (directly usable as training manifests). Prints the "
        "skip report as JSON.",
    )
    parser.add_argument(
        "--input",
        action="append",
        required=True,
        metavar="PATH",
        help="a JSONL/JSON manifest or an audio folder with .txt sidecars; repeat for several",
    )
    parser.add_argument(
        "--output",
        required=True,
        metavar="PATH",
        help="a .parquet file (one shard holding every example) or a folder (numbered shards "
        "shard-00000.parquet, ... of --shard-size examples; earlier shards there are replaced)",
    )
    parser.add_argument("--tokenizer", required=True, metavar="MODEL", help="SentencePiece .model file")
    parser.add_argument("--blank-id", type=int, default=0, help="CTC blank id the tokenizer maps around")
    parser.add_argument(
        "--max-audio-duration-sec", type=float, default=30.0, help="skip (and count) longer utterances"
    )
    parser.add_argument(
        "--max-samples", type=int, metavar="N", help="stop after N kept examples (default: all)"
    )
    parser.add_argument(
        "--shard-size", type=int, default=512, help="examples per shard when --output is a folder"
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="fail on the first bad record (naming it) instead of skipping and counting it",
    )
    parser.set_defaults(handler=run_extract_features)


def run_extract_features(args: argparse.Namespace) -> int:
    from asr_pipeline.features.extract import ExtractionOptions, batch_into_shards, extract_records
    from asr_pipeline.io.datasets import FeatureShardsDataset, ShardChunk
    from asr_pipeline.io.shards import records_to_table, shard_name, write_shard
    from asr_pipeline.text.tokenizer import CTCTokenizer

    inputs = [_existing(path, "--input") for path in args.input]
    tokenizer_path = _existing(args.tokenizer, "--tokenizer")
    if args.max_samples is not None and args.max_samples < 1:
        raise UsageError("--max-samples must be >= 1")
    options = ExtractionOptions.from_dict(
        {
            "shard_size": args.shard_size,
            "max_audio_duration_sec": args.max_audio_duration_sec,
            "strict": args.strict,
        }
    )
    tokenizer = CTCTokenizer.from_file(tokenizer_path, blank_id=args.blank_id)
    rows, read_report = _read_manifest_rows(inputs, strict=args.strict)
    extraction_report = SkipReport(strict=args.strict)
    totals = {"frames": 0, "duration_ms": 0}
    records = extract_records(rows, tokenizer, options, extraction_report, total=len(rows))
    records = _count_frames(islice(records, args.max_samples), totals)  # islice(.., None): every record

    output = Path(args.output)
    if output.suffix == ".parquet":
        output.parent.mkdir(parents=True, exist_ok=True)
        write_shard(records_to_table(list(records)), output)
        written = [output]
    else:
        shards = FeatureShardsDataset(str(output))  # replaces stale shards exactly as the features stage does
        written = []
        for index, table in enumerate(batch_into_shards(records, options.shard_size)):
            shards.save(ShardChunk(index, table))
            written.append(output / shard_name(index))
        if not written:  # nothing survived: still write an (empty) shard so the result is explicit
            shards.save(ShardChunk(0, records_to_table([])))
            written.append(output / shard_name(0))

    report = _combine_reports(read_report, extraction_report)
    stopped = args.max_samples is not None and extraction_report.kept >= args.max_samples
    _print_json(
        {
            **report,
            "stopped_at_max_samples": stopped,
            **totals,
            "hours": round(totals["duration_ms"] / 3.6e6, 4),
            "shards": [str(path) for path in written],
        }
    )
    return 0


def _read_manifest_rows(inputs: list[Path], strict: bool) -> tuple[list[dict], SkipReport]:
    """Manifest rows as the transcripts stage makes them (normalized text, duplicates and bad rows skipped).

    An id repeated across inputs is skipped too: shard ids must be unique within a split.
    """
    from asr_pipeline.io.datasets import Manifest
    from asr_pipeline.pipelines.transcripts.nodes import normalize_manifest

    report = SkipReport(strict=strict)
    rows: list[dict] = []
    first_seen: dict[str, str] = {}
    for path in inputs:
        manifest, manifest_report = normalize_manifest(Manifest(path), {"strict": strict})
        _absorb(report, manifest_report)
        for row in manifest.iter_rows(named=True):
            if row["id"] in first_seen:
                where = first_seen[row["id"]]
                report.skip("duplicate id", row["location"], f"{row['id']!r} first seen at {where}")
                continue
            first_seen[row["id"]] = row["location"]
            rows.append(row)
    return rows, report


def _count_frames(records: Iterable[dict], totals: dict[str, int]) -> Iterator[dict]:
    for record in records:
        totals["frames"] += int(record["features"].shape[0])
        totals["duration_ms"] += int(record["duration_ms"])
        yield record


def _absorb(report: SkipReport, other: dict) -> None:
    """Add another report's counts (``SkipReport.to_dict`` form) to ``report``."""
    report.seen += other["seen"]
    report.counts.update(other["skipped_by_reason"])
    for reason, examples in other["first_skipped"].items():
        shown = report.examples.setdefault(reason, [])
        shown.extend(examples[: report.max_examples - len(shown)])


def _combine_reports(read: SkipReport, extraction: SkipReport) -> dict:
    """One report: every manifest record seen, skipped while reading or extracting, or kept in a shard."""
    combined = SkipReport(seen=read.seen)
    _absorb(combined, {**read.to_dict(), "seen": 0})
    _absorb(combined, {**extraction.to_dict(), "seen": 0})
    combined.kept = extraction.kept
    return combined.to_dict()


# --- index ----------------------------------------------------------------------------------------------
def add_index_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "index",
        formatter_class=HelpFormatter,
        help="build the length index of feature shards",
        description="Read the length columns of every shard (never the features) into one Parquet index: "
        "shard, shard_fingerprint, row, rows, cols, tokens, duration_ms.",
    )
    parser.add_argument(
        "--input",
        action="append",
        required=True,
        metavar="PATH",
        help="a shard file or a folder of shards; repeat for several",
    )
    parser.add_argument("--output", required=True, metavar="PARQUET", help="the index file to write")
    parser.set_defaults(handler=run_index)


def run_index(args: argparse.Namespace) -> int:
    import pyarrow.parquet as pq

    from asr_pipeline.data.length_index import build_length_index

    shards = _shard_paths(args.input, "--input")
    index = build_length_index(shards)
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(index, output)
    _print_json({"output": str(output), "shards": len(shards), "rows": index.num_rows})
    return 0


# --- train ----------------------------------------------------------------------------------------------
_SECTIONS = {"data": DataConfig, "model": ModelConfig, "optim": OptimConfig, "run": RunConfig}
VAL_MANIFEST_ALIASES = ("--validation-manifest", "--valid-manifest", "--validation-set", "--val-set")
DEFAULT_OUTPUT_DIR = "runs/asr"

# (flag, training config key, type, help, choices); defaults come from training.config, except output_dir.
TRAIN_FLAGS: list[tuple[str, str, Callable[[str], Any], str, list[str] | None]] = [
    ("--architecture", "model.architecture", str, "model architecture (models.registry)", None),
    ("--variant", "model.variant", str, "named size of the architecture, e.g. tiny, demo, xs", None),
    ("--d-model", "model.d_model", int, "model width; overrides the variant's", None),
    ("--num-layers", "model.num_layers", int, "encoder blocks; overrides the variant's", None),
    ("--num-heads", "model.num_heads", int, "attention heads; overrides the variant's", None),
    ("--blank-id", "model.blank_id", int, "CTC blank id (as given to the tokenizer)", None),
    ("--epochs", "optim.epochs", int, "passes over the training data", None),
    ("--learning-rate", "optim.learning_rate", float, "peak learning rate; unset: the variant's", None),
    ("--weight-decay", "optim.weight_decay", float, "AdamW weight decay", None),
    ("--lr-warmup-steps", "optim.lr_warmup_steps", int, "optimizer steps of linear warmup", None),
    ("--batch-size", "data.batch_size", int, "fixed batch size; unset: adaptive batches", None),
    ("--adaptive-batch-budget", "data.adaptive_batch_budget", int, "padded frames per adaptive batch", None),
    ("--seed", "run.seed", int, "random seed", None),
    ("--log-every", "run.log_every", int, "optimizer steps between train events", None),
    ("--backend", "run.backend", str, "device type", ["cpu", "cuda"]),
    ("--precision", "run.precision", str, "training precision", ["f32", "bf16", "f16"]),
]


def add_train_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        formatter_class=HelpFormatter,
        help="train a CTC model under torchrun",
        description="Resolve a training config (a --config file, flags, or both: flags win), save it as "
        "<output-dir>/training_config.json and run the training worker under torchrun.",
    )
    parser.add_argument(
        "--config",
        metavar="JSON",
        help="a full training_config.json (as the train stage writes it); flags given too override its values",
    )
    parser.add_argument(
        "--train-manifest",
        action="append",
        metavar="PATH",
        help="a feature shard or a folder of shards; repeat for several (required without --config)",
    )
    parser.add_argument(
        "--val-manifest",
        *VAL_MANIFEST_ALIASES,
        dest="val_manifest",
        action="append",
        metavar="PATH",
        help="a validation shard or folder of shards; repeat for several (default: no validation)",
    )
    parser.add_argument(
        "--tokenizer",
        metavar="MODEL",
        help="SentencePiece .model; copied into the run dir, sets the vocabulary size and scores text",
    )
    parser.add_argument(
        "--output-dir", help=f"the run dir (default: {DEFAULT_OUTPUT_DIR}, or the config file's)"
    )
    for flag, key, type_, text, choices in TRAIN_FLAGS:
        section, name = key.split(".")
        default = _config_default(_SECTIONS[section], name)
        shown = "" if default is None else f" (default: {default}, or the config file's)"
        parser.add_argument(flag, type=type_, choices=choices, help=text + shown)
    parser.add_argument(
        "--nproc-per-node",
        type=int,
        default=1,
        help="training processes on this machine (CPU ranks, or one per GPU)",
    )
    parser.set_defaults(handler=run_train)


def _config_default(section: type, name: str) -> Any:
    field = {f.name: f for f in dataclasses.fields(section)}[name]
    return None if field.default is dataclasses.MISSING else field.default


def train_config_from_args(args: argparse.Namespace) -> tuple[TrainConfig, Path | None]:
    """The resolved config (the --config file, then flags) and the tokenizer to copy into the run dir."""
    if args.config:
        try:
            base = json.loads(_existing(args.config, "--config").read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{args.config}: not a JSON training config ({error})") from None
    else:
        required = {
            "--train-manifest": args.train_manifest,
            "--epochs": args.epochs,
            "--lr-warmup-steps": args.lr_warmup_steps,
        }
        missing = [flag for flag, value in required.items() if value is None]
        if missing:
            raise UsageError(f"without --config, {', '.join(missing)} must be given")
        base = {"run": {"output_dir": DEFAULT_OUTPUT_DIR}}
    overrides: dict[str, Any] = {}
    for flag, key, *_ in TRAIN_FLAGS:
        value = getattr(args, flag.lstrip("-").replace("-", "_"))
        if value is not None:
            overrides[key] = value
    if args.train_manifest:
        overrides["data.train_manifests"] = _shard_paths(args.train_manifest, "--train-manifest")
    if args.val_manifest:
        overrides["data.val_manifests"] = _shard_paths(args.val_manifest, "--val-manifest")
    if args.output_dir:
        overrides["run.output_dir"] = args.output_dir
    if args.tokenizer:
        overrides["run.tokenizer"] = args.tokenizer
    config = resolve_config(base, overrides)
    for path in [*config.data.train_manifests, *config.data.val_manifests]:  # the config file's too
        _existing(path, "training manifest")
    if config.run.tokenizer is None:
        return config, None
    # Like the train stage, keep the tokenizer in the run dir: the run is then self-contained for decoding.
    from asr_pipeline.pipelines.train.nodes import TOKENIZER_FILE

    source = _existing(config.run.tokenizer, "--tokenizer" if args.tokenizer else "run.tokenizer")
    in_run = str(Path(config.run.output_dir) / TOKENIZER_FILE)
    return dataclasses.replace(config, run=dataclasses.replace(config.run, tokenizer=in_run)), source


def run_train(args: argparse.Namespace) -> int:
    from asr_pipeline.pipelines.train.nodes import CONFIG_FILE, METRICS_FILE
    from asr_pipeline.training.config import save_json
    from asr_pipeline.training.launch import launch_training

    if args.nproc_per_node < 1:
        raise UsageError("--nproc-per-node must be >= 1")
    config, tokenizer_source = train_config_from_args(args)
    run_dir = Path(config.run.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if tokenizer_source is not None and tokenizer_source.resolve() != Path(config.run.tokenizer).resolve():
        shutil.copyfile(tokenizer_source, config.run.tokenizer)
    config_path = run_dir / CONFIG_FILE
    save_json(config, config_path)
    launch_training(config_path, nproc_per_node=args.nproc_per_node)
    metrics_path = run_dir / METRICS_FILE
    _print_json({"run_dir": str(run_dir), **json.loads(metrics_path.read_text())})
    return 0


# --- decode ---------------------------------------------------------------------------------------------
def add_decode_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "decode",
        formatter_class=HelpFormatter,
        help="decode feature shards with a trained run; print WER/CER",
        description="Decode every utterance of --input with the run's latest checkpoint, greedily and by "
        "CTC prefix beam search (with KenLM shallow fusion when --lm is given); print WER/CER as JSON.",
    )
    parser.add_argument(
        "--run-dir", required=True, help="a training run dir (training_config.json, checkpoint)"
    )
    parser.add_argument(
        "--input",
        action="append",
        required=True,
        metavar="PATH",
        help="a feature shard or a folder of shards; repeat for several",
    )
    parser.add_argument(
        "--tokenizer", metavar="MODEL", help="SentencePiece .model (default: <run-dir>/tokenizer.model)"
    )
    parser.add_argument(
        "--lm", metavar="KENLM", help="KenLM binary or ARPA for shallow fusion (default: none)"
    )
    parser.add_argument("--beam-width", type=int, default=8, help="beam width")
    parser.add_argument("--lm-weight", type=float, default=0.45, help="weight of the LM log-probability")
    parser.add_argument("--word-bonus", type=float, default=0.0, help="score added per completed word")
    parser.add_argument("--batch-size", type=int, default=16, help="utterances per forward pass")
    parser.add_argument(
        "--output", metavar="JSONL", help="write hypotheses here (id, reference, greedy, beam)"
    )
    parser.set_defaults(handler=run_decode)


def run_decode(args: argparse.Namespace) -> int:
    from asr_pipeline.decoding.beam_search import BeamSearchOptions, load_lm
    from asr_pipeline.pipelines.evaluate.nodes import decode_and_score
    from asr_pipeline.pipelines.train.nodes import CONFIG_FILE, TOKENIZER_FILE

    run_dir = _existing(args.run_dir, "--run-dir")
    _existing(str(run_dir / CONFIG_FILE), "--run-dir")
    shards = _shard_paths(args.input, "--input")
    if args.tokenizer:
        tokenizer_path = _existing(args.tokenizer, "--tokenizer")
    elif (run_dir / TOKENIZER_FILE).is_file():
        tokenizer_path = run_dir / TOKENIZER_FILE
    else:
        raise UsageError(f"{run_dir / TOKENIZER_FILE} does not exist; pass --tokenizer")
    lm = load_lm(_existing(args.lm, "--lm")) if args.lm else None
    options = BeamSearchOptions(
        beam_width=args.beam_width, lm_weight=args.lm_weight, word_bonus=args.word_bonus
    )
    beam_name = "beam_lm" if lm is not None else "beam"
    hypotheses, metrics = decode_and_score(
        run_dir,
        shards,
        tokenizer_path.read_bytes(),
        options,
        lm=lm,
        batch_size=args.batch_size,
        beam_name=beam_name,
    )
    if args.output:
        output = Path(args.output)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(hypotheses, encoding="utf-8")
        metrics["hypotheses"] = str(output)
    _print_json(metrics)
    return 0


# --- shared helpers -------------------------------------------------------------------------------------
def _existing(path: str, flag: str) -> Path:
    if not Path(path).exists():
        raise UsageError(f"{flag} {path}: no such file or folder")
    return Path(path)


def _shard_paths(inputs: list[str], flag: str) -> list[str]:
    """Shard files in order: files as given, folders expanded to their shard-*.parquet (else *.parquet)."""
    from asr_pipeline.io.shards import list_shards

    paths: list[str] = []
    for given in inputs:
        path = _existing(given, flag)
        if path.is_dir():
            found = list_shards(path) or sorted(path.glob("*.parquet"))
            if not found:
                raise UsageError(f"{flag} {path}: no .parquet feature shards in this folder")
            paths.extend(str(shard) for shard in found)
        else:
            paths.append(str(path))
    return paths


def _print_json(payload: dict) -> None:
    print(json.dumps(payload, indent=2, ensure_ascii=False))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Speech recognition pipeline: tokenizer, features, index, training, decoding."
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_tokenizer_parser(subparsers)
    add_extract_features_parser(subparsers)
    add_index_parser(subparsers)
    add_train_parser(subparsers)
    add_decode_parser(subparsers)
    return parser


# Kedro imports `<package>.cli` for project-specific `kedro` commands and requires a click group named
# `cli` in it; this project adds none (its own command line is `asr-pipeline`, `main` below).
cli = click.Group(name="asr_pipeline", help="asr_pipeline adds no kedro commands; see `asr-pipeline --help`.")


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; returns the exit status (argparse's own errors and --help included)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help or an argparse error (already printed)
        return exit_.code if isinstance(exit_.code, int) else 2
    prefix = f"{PROG} {args.command}: error:"
    try:
        return args.handler(args)
    except UsageError as error:
        print(f"{prefix} {error}", file=sys.stderr)
        return 2
    except LIBRARY_ERRORS as error:
        print(f"{prefix} {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
