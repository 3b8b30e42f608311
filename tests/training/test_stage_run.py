"""training.stage_run: a stage's training run resolves params.yaml ``train`` into one config whose data and
run paths are the stage's, and launches it with the run's tokenizer and length index written into the run
dir (the launch itself: tests/pipelines/test_train_run_dir.py)."""

from __future__ import annotations

import io

import polars as pl
import pytest

from asr_pipeline.run_layout import INDEX_FILE, TOKENIZER_FILE
from asr_pipeline.training import stage_run
from asr_pipeline.training.stage_run import train_in_run_dir


@pytest.fixture
def launched(monkeypatch) -> list[tuple]:
    """What run_training was called with, instead of a torchrun job."""
    calls = []

    def record(config, **options):
        calls.append((config, options))
        return {"steps": 0}

    monkeypatch.setattr(stage_run, "run_training", record)
    return calls


def test_the_stages_shards_and_run_dir_replace_the_params_paths(tmp_path, launched):
    params = {
        "launch": {"nproc_per_node": 2},
        "data": {"train_manifests": ["ignored.parquet"], "adaptive_batch_budget": 1234},
        "model": {"architecture": "squeezeformer", "variant": "tiny"},
        "optim": {"epochs": 2},
        "run": {"seed": 7, "tokenizer": "ignored.model"},
    }
    index = pl.DataFrame({"fingerprint": ["a"], "frames": [10]})
    final = train_in_run_dir(["t0.parquet", "t1.parquet"], ["v.parquet"], index, b"spm", tmp_path, params)
    assert final == {"steps": 0}
    [(config, options)] = launched
    assert config.data.train_manifests == ["t0.parquet", "t1.parquet"] and config.data.val_manifests == [
        "v.parquet"
    ]
    assert config.data.adaptive_batch_budget == 1234
    assert str(config.data.length_index) == str(tmp_path / INDEX_FILE)
    assert str(config.run.tokenizer) == str(tmp_path / TOKENIZER_FILE)
    assert str(config.run.output_dir) == str(tmp_path) and config.run.seed == 7
    assert (config.model.variant, config.optim.epochs) == ("tiny", 2)
    assert options["overwrite"] is True and options["nproc_per_node"] == 2
    assert options["run_files"][TOKENIZER_FILE] == b"spm"
    assert pl.read_parquet(io.BytesIO(options["run_files"][INDEX_FILE])).equals(index)


def test_an_unknown_train_section_is_refused_naming_it(tmp_path, launched):
    with pytest.raises(ValueError, match="optimiser"):
        train_in_run_dir(["t.parquet"], [], pl.DataFrame(), b"", tmp_path, {"optimiser": {"epochs": 1}})
    assert not launched
