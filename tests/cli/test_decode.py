"""``asr-pipeline decode``: the forms of --run-dir it takes, and what it says when given raw audio or records
instead of feature shards. The run dir holds an untrained tiny model: these tests check paths, not accuracy."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from asr_pipeline.cli import main
from asr_pipeline.run_layout import CONFIG_FILE, TOKENIZER_FILE
from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training.checkpoint import build_model_from_config, save_checkpoint
from asr_pipeline.training.config import resolve_config, save_json
from tests.factories import NUM_BINS, char_tokenizer_model, write_corpus_shard


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``run/`` (config, tokenizer, a step-0 checkpoint of the tiny model) and ``shards/`` (4 examples)."""
    root = tmp_path_factory.mktemp("decode")
    model_bytes = char_tokenizer_model()
    tokenizer = CTCTokenizer(model_bytes)
    (root / "shards").mkdir()
    shard = write_corpus_shard(root / "shards" / "shard-00000.parquet", tokenizer, 4, seed=1, prefix="u")
    run_dir = root / "run"
    config = resolve_config(
        {
            "data": {"train_manifests": [str(shard)], "input_dim": NUM_BINS},
            "model": {"variant": "tiny"},
            "run": {"output_dir": str(run_dir), "tokenizer": str(run_dir / TOKENIZER_FILE)},
        }
    )
    model, model_config = build_model_from_config(config, tokenizer.vocab_size)
    save_checkpoint(run_dir, model=model, training_state=None, step=0, epoch=0, model_config=model_config)
    save_json(config, run_dir / CONFIG_FILE)
    (run_dir / TOKENIZER_FILE).write_bytes(model_bytes)
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
