"""What every subcommand shares: the help formatter, the two error kinds, path checks and JSON output."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from asr_pipeline.run_layout import DEFAULT_WEIGHTS, WEIGHTS, WEIGHTS_HELP, parse_weights
from asr_pipeline.training.launch import TrainingFailedError

if TYPE_CHECKING:
    from asr_pipeline.text.tokenizer import CTCTokenizer

PROG = "asr-pipeline"
# What the library raises for input it cannot use; shown as one line, exit 1.
LIBRARY_ERRORS = (ValueError, NotImplementedError, OSError, TrainingFailedError)


class HelpFormatter(argparse.HelpFormatter):
    """Appends "(default: X)" to the help of every flag that has a default other than None/False."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False or action.default is argparse.SUPPRESS:
            return action.help
        if "%(default)" in (action.help or ""):  # BooleanOptionalAction (Python < 3.12) adds it itself
            return action.help
        return f"{action.help} (default: %(default)s)"


class UsageError(Exception):
    """A bad flag combination or a missing input path: one line on stderr, exit 2 (as argparse does)."""


def existing_path(path: str, flag: str) -> Path:
    if not Path(path).exists():
        raise UsageError(f"{flag} {path}: no such file or folder")
    return Path(path)


def positive(convert: Callable[[str], float]) -> Callable[[str], float]:
    """An argparse ``type`` taking numbers above 0 only (``positive(int)``, ``positive(float)``): argparse
    names the flag in its one-line error."""

    def parse(text: str) -> float:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {convert.__name__} above 0, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
        return value

    parse.__name__ = f"positive {convert.__name__}"
    return parse


def writable_output(path: str, flag: str, folder: bool) -> Path:
    """``path`` as an output a command can write, checked before any work: its ``folder`` (``path`` itself,
    or its parent for a file), or the nearest folder above it that exists, must be a folder this process can
    create files in. ``path`` must not be an existing file when it names a folder."""
    output = Path(path)
    if folder and output.exists() and not output.is_dir():
        raise UsageError(
            f"{flag} {path} is an existing file, not a folder; give a folder (or a .parquet file)"
        )
    target = output if folder else output.parent
    existing = next(parent for parent in (target, *target.parents) if parent.exists() or parent == Path("."))
    if not existing.is_dir():
        raise UsageError(f"{flag} {path}: {existing} is a file, so no folder can be made there")
    try:
        with tempfile.TemporaryFile(dir=existing):  # also a read-only file system, which access() misses
            pass
    except OSError as error:
        reason = error.strerror or str(error)
        raise UsageError(
            f"{flag} {path}: cannot write in {existing} ({reason}); choose a writable folder"
        ) from None
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(
            f"{flag} {path}: cannot write in {existing} (permission denied); choose a writable folder"
        )
    return output


def shard_paths(inputs: list[str], flag: str, tokenizer: str | Path | None = None) -> list[str]:
    """Shard files in order: files as given, folders expanded to their shard-*.parquet (else *.parquet).

    A raw manifest (JSONL/JSON/TSV/Parquet records, an audio folder: ``data.sources``) is a usage error
    that shows the ``extract-features`` command making shards of it, with ``tokenizer`` in it when given.
    """
    from asr_pipeline.data.sources import resolve_manifests

    for given in inputs:
        existing_path(given, flag)
    try:
        resolved = resolve_manifests(inputs, flag)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if resolved.kind == "raw":
        raw = Path(resolved.paths[0])
        output = raw.with_name(f"{raw.stem}_features")
        raise UsageError(
            f"{flag} {raw} is a raw manifest (records or audio), but this command reads feature shards; make "
            f"them with `{PROG} extract-features --input {raw} --tokenizer {tokenizer or 'TOKENIZER.model'} "
            f"--output {output}` and pass {flag} {output}"
        )
    return resolved.paths


def load_tokenizer(path: Path, flag: str, blank_id: int) -> CTCTokenizer:
    """The SentencePiece model at ``path``; a file that is not one is a usage error naming ``flag``."""
    from asr_pipeline.text.tokenizer import CTCTokenizer

    try:
        return CTCTokenizer.from_file(path, blank_id=blank_id)
    except RuntimeError as error:  # sentencepiece's parse failure: "INTERNAL: ... ParseFromArray ..."
        raise UsageError(
            f"{flag} {path}: not a SentencePiece model ({str(error).strip() or type(error).__name__}); "
            f"give the .model file that `{PROG} tokenizer` or the tokenizer stage wrote"
        ) from None


def print_json(payload: dict) -> None:
    print(json.dumps(payload, indent=2, ensure_ascii=False))


def add_checkpoint_flag(parser: argparse.ArgumentParser) -> None:
    """--checkpoint and --weights: which of a run's checkpoints to load, and which of its weights
    (models.loading.load_run_model)."""
    parser.add_argument(
        "--checkpoint",
        choices=("latest", "best"),
        default="latest",
        help="the run's latest checkpoint, or its best validation score's (checkpoint_best: where early "
        "stopping points; often not the last)",
    )
    parser.add_argument("--weights", type=_weights, default=DEFAULT_WEIGHTS,
                        metavar="|".join(WEIGHTS) + "|averaged:STEP", help=WEIGHTS_HELP)  # fmt: skip


def _weights(text: str) -> str:
    """--weights' value, checked as it is parsed (an argparse error, exit 2)."""
    try:
        parse_weights(text, "--weights")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("--weights: ")) from None
    return text
