"""``asr-pipeline decode``: the forms of --run-dir it takes, and what it says when given raw audio or records
instead of feature shards. The run dir holds an untrained tiny model: these tests check paths, not accuracy."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from asr_pipeline.cli import main
from asr_pipeline.decoding.lexicon import build_lexicon
from asr_pipeline.run_layout import AVERAGE_FILE, CHECKPOINT_DIR, TOKENIZER_FILE, WEIGHTS_FILE
from asr_pipeline.text.tokenizer import CTCTokenizer
from tests.conftest import PROJECT_ROOT
from tests.factories import add_weight_averages, untrained_run


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``run/`` (config, tokenizer, a step-0 checkpoint of the tiny model) and ``shards/`` (4 examples)."""
    root = tmp_path_factory.mktemp("decode")
    untrained_run(root)
    return root


def decode(*parts: object) -> dict:
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main(["decode", *map(str, parts), "--decoder", "lexicon_free", "--beam-width", "2"]) == 0, (
            parts
        )
    return json.loads(stdout.getvalue())


def test_the_run_dir_its_checkpoint_latest_folder_and_its_pointer_decode_alike(workdir):
    run_dir, shards = workdir / "run", workdir / "shards"

    results = [
        decode("--run-dir", path, "--input", shards)
        for path in (run_dir, run_dir / "checkpoint_latest", run_dir / "checkpoint_latest.json")
    ]

    assert results[0]["utterances"] == 4
    assert results[1] == results[0] and results[2] == results[0]


def test_a_raw_manifest_is_refused_with_the_extract_features_command_that_makes_shards(
    workdir, tmp_path, capsys
):
    manifest = tmp_path / "dev.jsonl"
    manifest.write_text(json.dumps({"audio_path": "a.wav", "text": "a"}) + "\n", encoding="utf-8")
    run_dir = workdir / "run"

    status = main(["decode", "--run-dir", str(run_dir), "--input", str(manifest)])
    err = capsys.readouterr().err

    assert status == 2
    assert err == (
        f"asr-pipeline decode: error: --input {manifest} is a raw manifest (records or audio), but this command "
        f"reads feature shards; make them with `asr-pipeline extract-features --input {manifest} --tokenizer "
        f"{run_dir / TOKENIZER_FILE} --output {tmp_path / 'dev_features'}` and pass --input "
        f"{tmp_path / 'dev_features'}\n"
    )
    assert "Parquet magic bytes" not in err


def decode_with_defaults(run_dir: Path, shards: Path) -> tuple[int, dict | None, str]:
    """``decode --run-dir --input`` with no decoder, lexicon or LM flag (a beam of 2 keeps it quick)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["decode", "--run-dir", str(run_dir), "--input", str(shards), "--beam-width", "2"])
    return status, json.loads(out.getvalue()) if status == 0 else None, err.getvalue()


def test_a_run_without_a_lexicon_decodes_lexicon_free_with_a_one_line_note(workdir):
    status, metrics, err = decode_with_defaults(workdir / "run", workdir / "shards")

    assert status == 0, err
    assert metrics["decoding"]["decoder"] == "lexicon_free"
    assert "note: the run has no lexicon (--lexicon): decoding lexicon_free without an LM" in err


def test_a_stage_run_finds_its_projects_lexicon_and_decodes_with_it_by_default(workdir, tmp_path):
    project = (
        tmp_path / "project"
    )  # the train stage's layout: conf/base, data/03_tokenizer, data/07_train/run
    shutil.copytree(PROJECT_ROOT / "conf" / "base", project / "conf" / "base")
    run_dir = project / "data" / "07_train" / "run"
    shutil.copytree(workdir / "run", run_dir)
    tokenizer_dir = project / "data" / "03_tokenizer"
    tokenizer_dir.mkdir(parents=True)
    shutil.copy(run_dir / TOKENIZER_FILE, tokenizer_dir / "tokenizer.model")
    tokenizer = CTCTokenizer((run_dir / TOKENIZER_FILE).read_bytes())
    (tokenizer_dir / "lexicon.txt").write_text(build_lexicon(["a b ab ba"], tokenizer)[0], encoding="utf-8")

    status, metrics, err = decode_with_defaults(run_dir, workdir / "shards")

    assert status == 0, err
    assert metrics["decoding"]["decoder"] == "lexicon" and "note:" not in err


def test_a_tokenizer_that_is_not_a_sentencepiece_model_is_one_line_naming_the_flag(workdir, tmp_path, capsys):
    (tmp_path / "some.wav").write_bytes(b"RIFF not a model")

    status = main(["decode", "--run-dir", str(workdir / "run"), "--input", str(workdir / "shards"),
                   "--tokenizer", str(tmp_path / "some.wav"), "--decoder", "greedy"])  # fmt: skip
    [line] = capsys.readouterr().err.strip().splitlines()

    assert status == 2
    assert line.startswith(
        f"asr-pipeline decode: error: --tokenizer {tmp_path / 'some.wav'}: not a SentencePiece model"
    )


def test_weights_averaged_decodes_the_average_kept_beside_the_checkpoint(workdir, tmp_path, capsys):
    run_dir, shards = tmp_path / "run", workdir / "shards"
    shutil.copytree(workdir / "run", run_dir)
    add_weight_averages(run_dir)
    # An average far from the raw weights (seeded noise of std 1; norm statistics kept), so that the two decode
    # differently even where the tiny model's raw weights decode every utterance to nothing.
    raw = load_file(run_dir / CHECKPOINT_DIR / WEIGHTS_FILE)
    generator = torch.Generator().manual_seed(0)
    average = {
        name: value + torch.randn(value.shape, generator=generator)
        if value.is_floating_point() and "running" not in name
        else value
        for name, value in raw.items()
    }
    save_file({name: value.double() if value.is_floating_point() else value for name, value in average.items()},
              run_dir / CHECKPOINT_DIR / AVERAGE_FILE)  # fmt: skip
    as_raw = tmp_path / "as_raw"  # the same run with the average as its raw weights
    shutil.copytree(run_dir, as_raw)
    save_file(average, as_raw / CHECKPOINT_DIR / WEIGHTS_FILE)

    def hypotheses(*parts: object) -> list[str]:
        decode(*parts, "--input", shards, "--output", tmp_path / "hyp.jsonl")
        return (tmp_path / "hyp.jsonl").read_text().splitlines()

    averaged = hypotheses("--run-dir", run_dir, "--weights", "averaged")

    assert averaged == hypotheses("--run-dir", as_raw)
    assert averaged != hypotheses("--run-dir", run_dir), "the raw weights decode otherwise"
    capsys.readouterr()
    status = main(["decode", "--run-dir", str(run_dir), "--input", str(shards), "--decoder", "greedy",
                   "--weights", "ema"])  # fmt: skip
    [line] = capsys.readouterr().err.strip().splitlines()
    assert (
        status == 1
        and f"--weights ema: {run_dir / CHECKPOINT_DIR / 'ema.safetensors'} does not exist" in line
    )
