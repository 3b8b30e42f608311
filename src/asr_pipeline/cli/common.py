"""What every subcommand shares: the help formatter, the two error kinds, path checks and JSON output."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

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


def existing_path(path: str, flag: str) -> Path:
    if not Path(path).exists():
        raise UsageError(f"{flag} {path}: no such file or folder")
    return Path(path)


def shard_paths(inputs: list[str], flag: str) -> list[str]:
    """Shard files in order: files as given, folders expanded to their shard-*.parquet (else *.parquet)."""
    from asr_pipeline.io.shards import list_shards

    paths: list[str] = []
    for given in inputs:
        path = existing_path(given, flag)
        if path.is_dir():
            found = list_shards(path) or sorted(path.glob("*.parquet"))
            if not found:
                raise UsageError(f"{flag} {path}: no .parquet feature shards in this folder")
            paths.extend(str(shard) for shard in found)
        else:
            paths.append(str(path))
    return paths


def print_json(payload: dict) -> None:
    print(json.dumps(payload, indent=2, ensure_ascii=False))
