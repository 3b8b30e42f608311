"""``python -m asr_pipeline.cli`` is the console script: it runs a subcommand and exits with its status."""

from __future__ import annotations

import runpy
import sys

import pytest


def run_module(monkeypatch, *arguments: str) -> int:
    monkeypatch.setattr(sys, "argv", ["python -m asr_pipeline.cli", *arguments])
    with pytest.raises(SystemExit) as exited:
        runpy.run_module("asr_pipeline.cli", run_name="__main__")
    return exited.value.code


def test_a_subcommand_runs_and_its_status_is_the_exit_code(monkeypatch, tmp_path, capsys):
    missing = tmp_path / "missing"
    assert run_module(monkeypatch, "index", "--input", str(missing), "--output", "i.parquet") == 2
    assert (
        capsys.readouterr().err == f"asr-pipeline index: error: --input {missing}: no such file or folder\n"
    )


def test_help_lists_the_subcommands(monkeypatch, capsys):
    assert run_module(monkeypatch, "--help") == 0
    printed = capsys.readouterr().out
    assert all(
        command in printed for command in ("tokenizer", "extract-features", "train", "decode", "index")
    )
