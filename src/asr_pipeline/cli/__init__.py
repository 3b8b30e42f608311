"""``asr-pipeline``: the command line, a thin layer over the library functions the Kedro nodes call.

Subcommands mirror the reference Rust trainer (``tokenizer``, ``extract-features``, ``train``, same flag
names and defaults) plus ``index``, ``hf-finetune``, ``decode``, ``transcribe``, ``export``, ``publish``, ``serve`` and ``kernel-bench``; each in its own module. Each
reads its paths from flags, calls what the stage's node calls, and prints a JSON summary on stdout (progress
goes to stderr); ``kernel-bench`` prints its table there instead, and writes the JSON to ``--json``.

Exit status: 0 done; 2 a usage error (an unknown flag, a bad combination, an input path that does not
exist), printed as one line; 1 the library rejected the input (bad records in ``--strict`` mode, a
failed training run, ...), printed as ``asr-pipeline <command>: error: <message>`` on one line without a
traceback; ``--debug`` (or ``ASR_PIPELINE_DEBUG=1``) prints the traceback and the whole message too.
Heavy libraries (torch, kedro) are imported inside the commands, so ``--help`` answers at once.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

import click

from asr_pipeline.cli import (
    decode,
    export,
    extract_features,
    hf_finetune,
    index,
    kernel_bench,
    publish,
    serve,
    tokenizer,
    train,
    transcribe,
)
from asr_pipeline.cli.common import LIBRARY_ERRORS, PROG, UsageError
from asr_pipeline.cli.train import train_config_from_args
from asr_pipeline.errors import DEBUG_ENV, debugging

__all__ = ["build_parser", "cli", "main", "train_config_from_args"]

# In the order `asr-pipeline --help` lists them.
COMMANDS = (
    tokenizer,
    extract_features,
    index,
    train,
    hf_finetune,
    decode,
    transcribe,
    export,
    publish,
    serve,
    kernel_bench,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Speech recognition pipeline: tokenizer, features, index, training, decoding."
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help=f"show the traceback behind an error, not just its one line (or set {DEBUG_ENV}=1)",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(subparsers)
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
    args.argv = list(sys.argv[1:] if argv is None else argv)  # train --slurm-script repeats it per node
    if args.debug:
        os.environ[DEBUG_ENV] = "1"  # the torchrun workers and Kedro hooks see it too
    prefix = f"{PROG} {args.command}: error:"
    try:
        return args.handler(args)
    except UsageError as error:
        _print_error(prefix, error)
        return 2
    except LIBRARY_ERRORS as error:
        _print_error(prefix, error)
        return 1


def _print_error(prefix: str, error: BaseException) -> None:
    """One line (a training failure's rank traceback dropped); with --debug the traceback, then all of it."""
    message = str(error)
    if debugging():
        traceback.print_exc()
    else:
        message = message.split("\n", 1)[0]
    print(f"{prefix} {message}", file=sys.stderr)
