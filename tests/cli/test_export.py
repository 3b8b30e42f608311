"""``asr-pipeline export``: the command prints what it wrote, and refuses with one line (exit 1) to write over
the run it exports (the export itself: tests/publish/test_export.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from asr_pipeline.cli import main
from asr_pipeline.run_layout import AVERAGE_FILE, WEIGHTS_FILE
from tests.factories import add_weight_averages, untrained_run


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return untrained_run(tmp_path / "source")


def test_the_export_command_prints_what_it_wrote(run_dir, tmp_path, capsys):
    status = main(["export", "--run-dir", str(run_dir), "--output", str(tmp_path / "m"), "--name", "Tiny"])

    assert status == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["architecture"] == "squeezeformer" and printed["parameters"] > 0
    assert (tmp_path / "m" / "README.md").read_text().split("---\n")[2].startswith("\n# Tiny\n")


def test_the_export_command_exits_1_with_one_line_instead_of_deleting_the_run(run_dir, capsys):
    before = files_of(run_dir)

    status = main(["export", "--run-dir", str(run_dir), "--output", str(run_dir), "--overwrite"])
    err = capsys.readouterr().err

    assert status == 1 and err.count("\n") == 1 and f"--output {run_dir} is the run dir" in err
    assert files_of(run_dir) == before


def test_export_weights_averaged_writes_the_average_as_the_folders_weights_and_says_so(run_dir, tmp_path):
    average = add_weight_averages(run_dir)[AVERAGE_FILE]

    status = main(
        ["export", "--run-dir", str(run_dir), "--output", str(tmp_path / "m"), "--weights", "averaged"]
    )

    assert status == 0
    exported = load_file(tmp_path / "m" / WEIGHTS_FILE)
    assert exported.keys() == average.keys() and all(torch.equal(exported[k], average[k]) for k in average)
    assert exported["output.weight"].dtype == torch.float32, (
        "the float64 running average in the model's dtype"
    )
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["checkpoint"]["weights"] == "averaged"


def test_export_of_an_average_the_run_did_not_keep_is_one_line_naming_the_file_and_the_flag(
    run_dir, tmp_path, capsys
):
    status = main(["export", "--run-dir", str(run_dir), "--output", str(tmp_path / "m"), "--weights", "ema"])
    err = capsys.readouterr().err

    assert status == 1 and err.count("\n") == 1
    assert "--weights ema: " in err and "ema.safetensors does not exist" in err and "set --weights raw" in err
    assert not (tmp_path / "m").exists()
