"""The alignment recipe's parts (training.alignment): Viterbi alignments of every training utterance from a
CTC run, frame-wise cross-entropy training on them, and realignment with the frame-wise model."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from asr_pipeline.data.collate import collate_batch
from asr_pipeline.executors import ExecutorOptions
from asr_pipeline.io.shards import iter_examples
from asr_pipeline.training.alignment import (
    AlignedDataset,
    AlignmentReport,
    align_shards,
    load_alignment,
    write_alignment,
)
from asr_pipeline.training.config import resolve_config
from asr_pipeline.training.ctc import framewise_losses, model_losses

from .conftest import run_in_process as run
from .conftest import tiny_config

pytestmark = pytest.mark.usefixtures("single_process")


def collapse(labels, blank: int = 0) -> list[int]:
    merged = [label for i, label in enumerate(labels) if i == 0 or label != labels[i - 1]]
    return [label for label in merged if label != blank]


@pytest.fixture(scope="module")
def ctc_run(corpus, tokenizer_path, tmp_path_factory):
    import os

    saved = {name: os.environ.pop(name, None) for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    threads = torch.get_num_threads()
    run_dir = tmp_path_factory.mktemp("ctc") / "run"
    config = tiny_config(corpus, tokenizer_path, run_dir, dvclive=False)
    config["optim"]["epochs"] = 3
    run(config)
    torch.set_num_threads(threads)
    os.environ.update({k: v for k, v in saved.items() if v is not None})
    return run_dir


def references(corpus) -> dict[str, list[int]]:
    return {row["id"]: list(row["tokens"]) for path in corpus["train"] for row in iter_examples(path)}


def test_every_aligned_utterance_collapses_to_its_reference_and_the_rest_are_counted(
    ctc_run, corpus, tmp_path
):
    output = tmp_path / "alignment.parquet"

    report = align_shards(ctc_run, corpus["train"], output, batch_size=5, progress=False)

    tokens = references(corpus)
    rows = pq.read_table(output).to_pylist()
    assert report.utterances == len(tokens) == report.aligned + report.skipped
    assert len(rows) == report.aligned > 0
    for row in rows:
        assert len(row["labels"]) == row["frames"]
        assert collapse(row["labels"]) == tokens[row["id"]], row["id"]
        assert np.isfinite(row["score"]) and row["score"] <= 0
    skipped_ids = {entry.split(":")[0] for entry in report.first_skipped}
    assert skipped_ids.isdisjoint(row["id"] for row in rows)
    assert report.mean_score_per_frame is not None and report.mean_score_per_frame < 0


def test_two_workers_and_a_dask_cluster_write_the_alignment_file_one_process_writes(
    ctc_run, corpus, tmp_path, dask_address
):
    files = {}
    for name, jobs, executor in [
        ("here", 1, None),
        ("pool", 2, None),
        ("dask", 2, ExecutorOptions(kind="dask", address=dask_address)),
    ]:
        files[name] = tmp_path / f"{name}.parquet"
        report = align_shards(
            ctc_run, corpus["train"], files[name], batch_size=5, progress=False, jobs=jobs, executor=executor
        )
        assert report.utterances == 16

    assert files["pool"].read_bytes() == files["here"].read_bytes()
    assert files["dask"].read_bytes() == files["here"].read_bytes()


def test_frame_wise_training_on_the_alignment_then_realignment(
    ctc_run, corpus, tokenizer_path, tmp_path, monkeypatch
):
    alignment = tmp_path / "align1.parquet"
    report = align_shards(ctc_run, corpus["train"], alignment, progress=False)
    calls = []
    from asr_pipeline.training import ctc

    original = ctc.framewise_losses

    def counting(model, batch, config):
        calls.append(len(batch))
        return original(model, batch, config)

    monkeypatch.setattr(ctc, "framewise_losses", counting)
    config = tiny_config(corpus, tokenizer_path, tmp_path / "ce", dvclive=False)
    config["optim"]["epochs"] = 3
    config["data"]["alignment"] = str(alignment)
    config["run"]["init_from"] = str(ctc_run)  # the recipe may start from the aligning model

    run(config)

    events = [json.loads(line) for line in (tmp_path / "ce" / "events.jsonl").read_text().splitlines()]
    epochs = [e["values"] for e in events if e["type"] == "epoch"]
    assert calls, "the frame-wise loss trained the model"
    assert sum(e["skipped_examples"] for e in epochs) == 3 * report.skipped, "unaligned: counted skips"
    assert epochs[-1]["train_loss"] < epochs[0]["train_loss"]
    realigned = align_shards(tmp_path / "ce", corpus["train"], tmp_path / "align2.parquet", progress=False)
    assert realigned.aligned > 0
    rows = pq.read_table(tmp_path / "align2.parquet").to_pylist()
    tokens = references(corpus)
    assert all(collapse(row["labels"]) == tokens[row["id"]] for row in rows)


def test_the_frame_wise_loss_is_the_cross_entropy_of_the_frames_and_refuses_a_frame_count_mismatch(
    ctc_run, corpus, tmp_path
):
    from asr_pipeline.data.dataset import ShardDataset
    from asr_pipeline.data.length_index import build_length_index
    from asr_pipeline.models.loading import load_run_model

    align_shards(ctc_run, corpus["train"], tmp_path / "a.parquet", progress=False)
    labels = load_alignment(tmp_path / "a.parquet")
    dataset = AlignedDataset(ShardDataset(build_length_index(corpus["train"])), labels, "a.parquet")
    items = [dataset[i] for i in range(len(dataset))]
    aligned = [item for item in items if isinstance(item, dict)][:3]
    batch = collate_batch(aligned)
    model = load_run_model(ctc_run).model
    config = resolve_config(json.loads((ctc_run / "training_config.json").read_text()))

    losses, log_probs, lengths = framewise_losses(model, batch, config)
    for row in range(len(batch)):
        frames = int(lengths[row])
        expected = -log_probs[row, torch.arange(frames), batch.frame_labels[row, :frames]].sum()
        assert float(losses[row].detach()) == pytest.approx(float(expected.detach()), rel=1e-5)
    assert torch.equal(model_losses(model, batch, config).losses, losses)

    batch.frame_labels = batch.frame_labels[:, :-1]  # one frame short
    with pytest.raises(
        ValueError, match=r"the alignment has \d+ frame labels but the model outputs \d+ frames"
    ):
        framewise_losses(model, batch, config)


def test_an_alignment_file_is_written_whole_and_its_skipped_utterances_are_named_in_a_warning(
    tmp_path, caplog
):
    rows = {"id": ["a"], "frames": [3], "labels": [[0, 5, 0]], "score": [None]}
    report = AlignmentReport(utterances=2, aligned=1, skipped=1, first_skipped=["b: 1 frame for 2 tokens"])

    with caplog.at_level("WARNING"):
        assert (
            write_alignment(rows, tmp_path / "out" / "a.parquet", report, "align", "are too short") is report
        )

    assert (
        "align: 1 of 2 utterances are too short and no alignment, e.g. b: 1 frame for 2 tokens" in caplog.text
    )
    assert load_alignment(tmp_path / "out" / "a.parquet")["a"].tolist() == [0, 5, 0]
    assert [path.name for path in (tmp_path / "out").iterdir()] == ["a.parquet"]  # no .tmp left
