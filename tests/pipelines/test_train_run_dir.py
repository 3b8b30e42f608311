"""The train stage's run dir, prepared as ``asr-pipeline train`` prepares one (training.run_dir): a rerun of
the stage (``kedro run --pipelines=train`` twice; ``dvc repro`` deletes the folder itself) starts over, and
a run dir another training is writing is refused, naming its pid, before anything in it is touched. torchrun
is replaced by a stand-in that writes what a run writes; the real job runs in
test_train_and_evaluate_pipelines."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from asr_pipeline.data.length_index import build_length_index
from asr_pipeline.io.datasets import DirectoryDataset
from asr_pipeline.pipelines.train import create_pipeline as train_pipeline
from asr_pipeline.text.tokenizer import CTCTokenizer
from tests.factories import NUM_BINS, char_tokenizer_model, write_corpus_shard
from tests.pipelines.conftest import run_stage
from tests.processes import lock_held_elsewhere

PARAMS = {
    "launch": {"nproc_per_node": 1},
    "data": {"input_dim": NUM_BINS},
    "model": {"architecture": "squeezeformer", "variant": "tiny"},
    "optim": {"epochs": 1},
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("stage")
    model = char_tokenizer_model()
    shards = {
        split: [str(write_corpus_shard(root / f"{split}.parquet", CTCTokenizer(model), 4, seed, split))]
        for split, seed in (("train", 1), ("dev", 2))
    }
    return {
        "train.feature_shards": shards["train"],
        "dev.feature_shards": shards["dev"],
        "length_index": pl.from_arrow(build_length_index(shards["train"] + shards["dev"])),
        "tokenizer_model": model,
    }


@pytest.fixture
def fake_torchrun(monkeypatch) -> list[list[str]]:
    """torchrun's stand-in: records the run dir's files at its start, then writes a latest checkpoint."""
    from asr_pipeline.training import launch

    started: list[list[str]] = []

    def fake_launch(config_path, nproc, **options):
        run_dir = Path(config_path).parent
        started.append(sorted(path.name for path in run_dir.iterdir()))
        (run_dir / "checkpoint_latest.json").write_text('{"step": 1}')
        (run_dir / "events.jsonl").write_text('{"type": "summary"}\n')
        (run_dir / "metrics.json").write_text('{"steps": 1}')

    monkeypatch.setattr(launch, "launch_training", fake_launch)
    return started


def run_train_stage(inputs: dict, run_dir: Path) -> None:
    run_stage(
        train_pipeline(),
        inputs,
        datasets={"training_run_dir": DirectoryDataset(str(run_dir))},
        params={"train": PARAMS},
    )


def test_a_rerun_of_the_stage_starts_over_without_the_previous_runs_checkpoints(
    inputs, tmp_path, fake_torchrun
):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    run_train_stage(inputs, run_dir)
    (run_dir / "checkpoint_best.json").write_text('{"step": 1}')  # as a validating run leaves it

    run_train_stage(inputs, run_dir)

    fresh = [".run.lock", "length_index.parquet", "tokenizer.model", "training_config.json"]
    assert fake_torchrun == [fresh, fresh], (
        "the second run starts in a folder holding none of the first's files"
    )
    assert not (run_dir / "checkpoint_best.json").exists()


def test_a_run_dir_another_training_writes_is_refused_and_left_alone(inputs, tmp_path, fake_torchrun):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "checkpoint_latest.json").write_text('{"step": 7}')
    with (
        lock_held_elsewhere(run_dir) as holder,
        pytest.raises(OSError, match=f"in use by another training \\(pid {holder.pid} holds"),
    ):
        run_train_stage(inputs, run_dir)

    assert fake_torchrun == []
    assert (run_dir / "checkpoint_latest.json").read_text() == '{"step": 7}', (
        "the other run's files are intact"
    )
    assert sorted(path.name for path in run_dir.iterdir()) == [".run.lock", "checkpoint_latest.json"]
