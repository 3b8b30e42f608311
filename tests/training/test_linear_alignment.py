"""The linear-alignment bootstrap (training.linear_alignment): each utterance's tokens, a blank between each
repeated pair, spread evenly over the frames of the model to be trained; too few frames is a counted skip
naming the utterance."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from asr_pipeline.io.shards import iter_examples
from asr_pipeline.training.linear_alignment import (
    linear_align_shards,
    linear_labels,
    model_output_lengths,
    path_labels,
)

from .conftest import tiny_config


def collapse(labels, blank: int = 0) -> list[int]:
    merged = [label for i, label in enumerate(labels) if i == 0 or label != labels[i - 1]]
    return [label for label in merged if label != blank]


def test_a_repeated_token_gets_a_blank_before_its_repeat():
    assert path_labels([5, 6, 6, 6, 7], blank=0) == [5, 6, 0, 6, 0, 6, 7]
    assert path_labels([], blank=0) == []


@pytest.mark.parametrize(
    ("tokens", "frames", "expected"),
    [
        ([5, 6, 7], 3, [5, 6, 7]),  # one frame each
        ([5, 6], 6, [5, 5, 5, 6, 6, 6]),  # T a multiple of n: equal runs
        ([5, 6, 7], 7, [5, 5, 6, 6, 7, 7, 7]),  # label j on [floor(7j/3), floor(7(j+1)/3)): 0-2, 2-4, 4-7
        ([5, 5], 5, [5, 0, 0, 5, 5]),  # labels 5 _ 5 on [0,1) [1,3) [3,5)
        ([4], 4, [4, 4, 4, 4]),
    ],
)
def test_the_labels_spread_evenly_over_the_frames(tokens, frames, expected):
    labels = linear_labels(tokens, frames, blank=0)

    assert labels.dtype == np.int64 and labels.tolist() == expected


def test_the_linear_labels_always_collapse_to_the_tokens():
    rng = np.random.default_rng(0)
    for _ in range(200):
        tokens = rng.integers(1, 4, size=int(rng.integers(1, 12))).tolist()  # few ids: many repeats
        frames = len(path_labels(tokens, 0)) + int(rng.integers(0, 40))
        assert collapse(linear_labels(tokens, frames, blank=0).tolist()) == tokens


@pytest.mark.parametrize(
    ("tokens", "frames", "message"),
    [
        ([5, 6, 7], 2, r"^2 frames < 3 needed for 3 tokens$"),
        ([5, 5], 2, r"^2 frames < 3 needed for 2 tokens$"),  # the blank between the repeats needs a frame
        ([], 4, r"^4 frames < 1 needed for 0 tokens \(an empty transcript has nothing to align\)$"),
    ],
)
def test_fewer_frames_than_labels_is_a_one_line_error(tokens, frames, message):
    with pytest.raises(ValueError, match=message):
        linear_labels(tokens, frames, blank=0)


def test_the_frame_count_is_the_trained_models_output_frames(corpus, tokenizer_path, tmp_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["model"]["blank_id"] = 0

    output_lengths, blank = model_output_lengths(config)

    assert output_lengths(torch.tensor([60, 61, 120])).tolist() == [15, 16, 30], "ceil(T / 4)"
    assert blank == 0


def test_every_utterance_is_aligned_or_skipped_counted_and_named(corpus, tmp_path):
    output = tmp_path / "alignment.parquet"

    # 20 input frames per output frame: 3-6 frames for utterances of up to ~25 labels, so many are too short
    report = linear_align_shards(corpus["train"], output, lambda lengths: lengths // 20, blank=0)

    examples = {row["id"]: row for path in corpus["train"] for row in iter_examples(path)}
    rows = pq.read_table(output).to_pylist()
    assert report.utterances == 16 == report.aligned + report.skipped
    assert report.aligned == len(rows) > 0 and report.skipped > 0
    for row in rows:
        example = examples[row["id"]]
        assert row["frames"] == example["rows"] // 20 == len(row["labels"])
        assert row["labels"] == linear_labels(example["tokens"], row["frames"], 0).tolist()
        assert row["score"] is None, "no model scored the path"
    first = report.first_skipped[0]
    utterance = first.split(":")[0]
    assert utterance not in {row["id"] for row in rows}
    tokens = examples[utterance]["tokens"]
    assert first == (
        f"{utterance}: {examples[utterance]['rows'] // 20} frames < {len(path_labels(tokens, 0))} needed for "
        f"{len(tokens)} tokens"
    )
