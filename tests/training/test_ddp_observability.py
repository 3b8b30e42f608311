"""A 2-process torchrun job checking what only a real multi-rank run can: counters summed over ranks,
step validations scoring every validation utterance once, and only rank 0 writing the curves."""

from __future__ import annotations

import csv
import json

import pytest

from asr_pipeline.io.shards import records_to_table, write_shard
from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training.config import resolve_config, save_json
from asr_pipeline.training.dvclive_logger import DVCLIVE_DIR
from asr_pipeline.training.launch import launch_training
from asr_pipeline.training.worker import FAIL_RANK_ENV
from tests.factories import NUM_BINS

from .conftest import tiny_config

pytestmark = pytest.mark.slow

FRAMES, UTTERANCES = 40, 16  # 40 frames -> 10 output frames after 4x subsampling


@pytest.fixture(scope="module")
def ddp_run(corpus, tokenizer_path, tmp_path_factory):
    """Two ranks, two epochs over 16 utterances that are all infeasible (16 target tokens, 10 output
    frames), in batches of 4: 2 batches per rank per epoch, none dropped."""
    import numpy as np

    tokenizer = CTCTokenizer.from_file(tokenizer_path)
    rng = np.random.default_rng(5)
    records = [
        {
            "id": f"inf-{i:03d}",
            "features": rng.standard_normal((FRAMES, NUM_BINS)),
            "tokens": tokenizer.encode("abcde abcde abc"),
            "duration_ms": 10 * FRAMES,
            "text": "abcde abcde abc",
        }
        for i in range(UTTERANCES)
    ]
    root = tmp_path_factory.mktemp("ddp_observability")
    shard = root / "infeasible-00000.parquet"
    write_shard(records_to_table(records), shard)
    assert len(records[0]["tokens"]) > FRAMES // 4
    run_dir = root / "run"
    config = tiny_config({**corpus, "train": [str(shard)]}, tokenizer_path, run_dir, log_every=1)
    config["data"]["adaptive_batch_max_samples"] = 4
    config["validation"] = {"every_steps": 1, "log_samples": 5}
    save_json(resolve_config(config), root / "training_config.json")
    launch_training(root / "training_config.json", nproc_per_node=2, env={FAIL_RANK_ENV: ""})
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return run_dir, events


def test_counters_are_summed_over_ranks(ddp_run):
    _, events = ddp_run
    summary = next(e for e in events if e["type"] == "summary")["values"]

    assert summary["world_size"] == 2 and summary["steps"] == 4
    # Every trained utterance is infeasible; rank 0 alone saw only half of them.
    assert summary["infeasible_targets"] == 2 * UTTERANCES
    assert [e["values"]["infeasible_targets"] for e in events if e["type"] == "train"] == [8, 16, 24, 32]


def test_step_validations_score_every_validation_utterance_once_with_samples_from_both_ranks(ddp_run):
    _, events = ddp_run
    validations = [e for e in events if e["type"] == "validation"]

    assert [e["step"] for e in validations] == [1, 2, 3, 4]
    assert all(e["values"]["trigger"] == "step" for e in validations), "epoch ends reuse the step's scores"
    for event in validations:
        assert event["values"]["utterances"] == 5
        assert [s["id"] for s in event["values"]["samples"]] == [f"va-{i:03d}" for i in range(5)]


def test_only_rank_0_writes_the_dvclive_curves(ddp_run):
    run_dir, events = ddp_run
    cer = run_dir / DVCLIVE_DIR / "plots" / "metrics" / "val" / "cer.tsv"

    with cer.open() as handle:
        rows = [(int(r["step"]), float(r["cer"])) for r in csv.DictReader(handle, delimiter="\t")]
    assert rows == [(e["step"], e["values"]["val_cer"]) for e in events if e["type"] == "validation"]
