"""The alignment recipe's Kedro pipelines: iteration 1 aligns with the train stage's run and trains frame-wise
on it, iteration 2 realigns with iteration 1's model; a recipe may instead start from the linear alignment,
with no aligning run; the train stage hands every params.yaml train section (schedule, regularization, ...)
to the training config."""

from __future__ import annotations

import json

import polars as pl
import pyarrow.parquet as pq
import pytest

from asr_pipeline.data.length_index import build_length_index
from asr_pipeline.io.datasets import DirectoryDataset
from asr_pipeline.pipelines.alignment_align import create_pipeline as create_align_pipeline
from asr_pipeline.pipelines.alignment_align.nodes import align_iteration
from asr_pipeline.pipelines.alignment_train import create_pipeline as create_train_pipeline
from asr_pipeline.pipelines.train import create_pipeline as train_pipeline
from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training.alignment_iterations import LINEAR_ALIGNER, alignment_iteration
from asr_pipeline.training.linear_alignment import linear_labels
from tests.conftest import PROJECT_ROOT
from tests.factories import NUM_BINS, char_tokenizer_model, write_corpus_shard
from tests.pipelines.conftest import run_stage

TRAIN_PARAMS = {
    "launch": {"nproc_per_node": 1},
    "data": {"input_dim": NUM_BINS, "adaptive_batch_budget": 480, "adaptive_batch_max_samples": 8},
    "model": {"architecture": "squeezeformer", "variant": "tiny"},
    "optim": {"epochs": 2, "learning_rate": 1e-3, "lr_warmup_steps": 2},
    "run": {"seed": 0, "log_every": 2, "dvclive": False},
    "schedule": [{"epochs": 2, "values": {"optim.gradient_clip_norm": 1.0}}],
}


@pytest.fixture(scope="module")
def stage_inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("alignment")
    model = char_tokenizer_model()
    tokenizer = CTCTokenizer(model)
    shards = {
        split: [str(write_corpus_shard(root / f"{split}.parquet", tokenizer, count, seed, split))]
        for split, count, seed in (("train", 10, 1), ("dev", 4, 2))
    }
    inputs = {
        "train.feature_shards": shards["train"],
        "dev.feature_shards": shards["dev"],
        "length_index": pl.from_arrow(build_length_index(shards["train"] + shards["dev"])),
        "tokenizer_model": model,
    }
    run_stage(
        train_pipeline(),
        inputs,
        datasets={"training_run_dir": DirectoryDataset(str(root / "train_run"))},
        params={"train": TRAIN_PARAMS},
    )
    return root, inputs


def alignment_params(root, current: str) -> dict:
    return {
        "batch_size": 4,
        "current": current,
        "iterations": {
            "iter1": {"align_with": str(root / "train_run"), "train": {"optim": {"epochs": 1}}},
            "iter2": {
                "align_with": str(root / "alignment" / "iter1" / "run"),
                "train": {"optim": {"epochs": 1}},
            },
        },
    }


def test_the_train_stage_passes_every_train_section_to_the_run(stage_inputs):
    root, _ = stage_inputs
    config = json.loads((root / "train_run" / "training_config.json").read_text())
    assert config["schedule"] == TRAIN_PARAMS["schedule"]
    events = [json.loads(line) for line in (root / "train_run" / "events.jsonl").read_text().splitlines()]
    clips = [e["values"]["optim.gradient_clip_norm"] for e in events if e["type"] == "schedule"]
    assert clips == [5.0, 1.0]


@pytest.mark.slow  # two aligning runs and two torchrun trainings (~1 min here): in `make test-all`
def test_two_iterations_align_train_and_realign(stage_inputs):
    root, inputs = stage_inputs
    alignment_dir = DirectoryDataset(str(root / "alignment"))
    for iteration in ("iter1", "iter2"):
        params = {"train": TRAIN_PARAMS, "alignment": alignment_params(root, iteration)}
        run_stage(create_align_pipeline(), inputs, datasets={"alignment_dir": alignment_dir}, params=params)
        run_stage(create_train_pipeline(), inputs, datasets={"alignment_dir": alignment_dir}, params=params)

        folder = root / "alignment" / iteration
        report = json.loads((folder / "alignment" / "report.json").read_text())
        assert report["iteration"] == iteration and report["aligned"] + report["skipped"] == 10
        assert pq.read_table(folder / "alignment" / "alignment.parquet").num_rows == report["aligned"]
        config = json.loads((folder / "run" / "training_config.json").read_text())
        assert config["data"]["alignment"] == str(folder / "alignment" / "alignment.parquet")
        assert config["optim"]["epochs"] == 1, "the iteration's own train overrides"
        assert (folder / "run" / "checkpoint_latest.json").is_file()


@pytest.mark.slow  # two torchrun trainings (~2 min on a shared 2-core box): in `make test-all`
def test_a_recipe_starts_from_the_linear_alignment_then_realigns_with_its_model(stage_inputs, tmp_path):
    _, inputs = stage_inputs
    alignment_dir = DirectoryDataset(str(tmp_path))
    iterations = {
        "linear": {"align_with": str(PROJECT_ROOT / LINEAR_ALIGNER), "train": {"optim": {"epochs": 2}}},
        "realigned": {"align_with": str(tmp_path / "linear" / "run"), "train": {"optim": {"epochs": 1}}},
    }
    for iteration in iterations:
        params = {"train": TRAIN_PARAMS, "alignment": {"current": iteration, "iterations": iterations}}
        run_stage(create_align_pipeline(), inputs, datasets={"alignment_dir": alignment_dir}, params=params)
        run_stage(create_train_pipeline(), inputs, datasets={"alignment_dir": alignment_dir}, params=params)

    linear = tmp_path / "linear"
    report = json.loads((linear / "alignment" / "report.json").read_text())
    assert report["aligned"] == 10 and report["skipped"] == 0 and report["mean_score_per_frame"] is None
    shard = pq.read_table(inputs["train.feature_shards"][0], columns=["id", "rows", "tokens"]).to_pylist()
    rows = {row["id"]: row for row in pq.read_table(linear / "alignment" / "alignment.parquet").to_pylist()}
    for example in shard:  # the tiny squeezeformer's frames: ceil(T / 4)
        frames = -(-example["rows"] // 4)
        assert rows[example["id"]]["labels"] == linear_labels(example["tokens"], frames, 0).tolist()
    assert (linear / "run" / "checkpoint_latest.json").is_file(), "trained frame-wise on it"
    realigned = json.loads((tmp_path / "realigned" / "alignment" / "report.json").read_text())
    assert realigned["aligned"] + realigned["skipped"] == 10 and realigned["mean_score_per_frame"] < 0
    assert (tmp_path / "realigned" / "run" / "checkpoint_latest.json").is_file()


def test_an_iteration_must_be_named_and_known():
    with pytest.raises(ValueError, match=r"alignment\.current is not set"):
        alignment_iteration({"iterations": {"iter1": {}}})
    with pytest.raises(
        ValueError, match=r"alignment\.current=.iter3. is not one of alignment\.iterations: iter1"
    ):
        alignment_iteration({"current": "iter3", "iterations": {"iter1": {}}})


def test_a_linear_aligned_iteration_may_not_change_the_model_whose_frames_make_its_alignment(tmp_path):
    iterations = {
        "boot": {"align_with": str(PROJECT_ROOT / LINEAR_ALIGNER), "train": {"model": {"variant": "s"}}}
    }
    with pytest.raises(
        ValueError, match=r"alignment\.iterations\.boot: a linear-aligned iteration trains train"
    ):
        align_iteration([], tmp_path, TRAIN_PARAMS, {"current": "boot", "iterations": iterations})
    assert not (tmp_path / "boot").exists(), "refused before touching the output"
