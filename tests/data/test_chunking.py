"""Chunked training's boundaries (data.chunking): where chunks start and end, and which frames and frame
labels each chunk of a batch holds, for a front end of 4 input frames per output frame (ceil(T / 4))
and one that trims (Zipformer's (T - 7) // 2, then ceil(. / 2))."""

from __future__ import annotations

import pytest
import torch

from asr_pipeline.data.chunking import chunk_batch, chunk_spans, frames_per_output
from asr_pipeline.data.collate import FRAME_LABEL_PAD, Batch
from asr_pipeline.modules.subsampling import DepthwiseSeparableConvSubsampling
from asr_pipeline.modules.zipformer_subsampling import downsampled_lengths, embed_output_lengths

QUARTER = DepthwiseSeparableConvSubsampling.output_lengths  # ceil(T / 4)


def zipformer_lengths(lengths):
    return downsampled_lengths(embed_output_lengths(lengths), 2)


def batch_of(lengths: list[int], output_lengths=QUARTER, bins: int = 2) -> Batch:
    """Utterances whose frame t holds the value t in every bin, and whose label j is 100 * row + j."""
    longest = max(lengths)
    features = torch.zeros(len(lengths), longest, bins)  # (B, T, F)
    label_counts = output_lengths(torch.tensor(lengths)).tolist()
    labels = torch.full((len(lengths), max(label_counts)), FRAME_LABEL_PAD)  # (B, T')
    for row, (length, count) in enumerate(zip(lengths, label_counts, strict=True)):
        features[row, :length] = torch.arange(length, dtype=torch.float32)[:, None]
        labels[row, :count] = 100 * row + torch.arange(count)
    return Batch(
        features=features,
        feature_lengths=torch.tensor(lengths),
        targets=torch.ones(len(lengths), 3, dtype=torch.int64),
        target_lengths=torch.full((len(lengths),), 3),
        ids=[f"u{row}" for row in range(len(lengths))],
        texts=["abc"] * len(lengths),
        duration_ms=torch.tensor([10 * length for length in lengths]),
        frame_labels=labels,
    )


def test_overlapping_chunks_start_every_step_and_stop_at_the_first_that_reaches_the_end():
    assert chunk_spans(100, 50, 25) == [(0, 50), (25, 75), (50, 100)], "no chunk inside the one before"
    assert chunk_spans(110, 50, 25) == [(0, 50), (25, 75), (50, 100), (75, 110)], "a partial last chunk"


def test_adjacent_chunks_tile_the_utterance_with_a_partial_last_one():
    assert chunk_spans(100, 40, 40) == [(0, 40), (40, 80), (80, 100)]
    assert chunk_spans(80, 40, 40) == [(0, 40), (40, 80)], "an exact multiple has no partial chunk"


def test_an_utterance_no_longer_than_a_chunk_is_one_chunk_itself():
    assert chunk_spans(30, 50, 25) == [(0, 30)]
    assert chunk_spans(50, 50, 25) == [(0, 50)]


def test_the_frames_per_output_frame_of_a_front_end():
    assert frames_per_output(QUARTER) == 4
    assert frames_per_output(zipformer_lengths) == 4


def test_each_chunk_holds_its_frames_and_the_labels_of_its_output_frames():
    # u0: 40 frames, 10 labels; chunks of 24 every 16: [0, 24) [16, 40) -> labels 0-5 and 4-9.
    # u1: 18 frames, 5 labels: shorter than a chunk, one chunk of 18 frames and 5 labels.
    chunked = chunk_batch(batch_of([40, 18]), size=24, step=16, output_lengths=QUARTER)

    chunks = chunked.chunks
    assert chunked.utterance.tolist() == [0, 0, 1]
    assert chunks.ids == ["u0@0", "u0@16", "u1@0"]
    assert chunks.feature_lengths.tolist() == [24, 24, 18]
    assert chunks.features.shape == (3, 24, 2)
    assert chunks.features[1, :, 0].tolist() == list(range(16, 40))
    assert chunks.features[2, :18, 0].tolist() == list(range(18))
    assert chunks.features[2, 18:].abs().sum() == 0, "zero past the chunk's length"
    assert chunks.frame_labels.tolist() == [
        [0, 1, 2, 3, 4, 5],
        [4, 5, 6, 7, 8, 9],
        [100, 101, 102, 103, 104, FRAME_LABEL_PAD],
    ]
    assert chunks.duration_ms.tolist() == [240, 240, 180], "each chunk's share of its audio"


def test_adjacent_chunks_labels_put_together_are_the_utterances_labels():
    batch = batch_of([103, 64, 9])
    chunked = chunk_batch(batch, size=32, step=32, output_lengths=QUARTER)

    for row in range(len(batch)):
        pieces = chunked.chunks.frame_labels[chunked.utterance == row]
        joined = pieces[pieces != FRAME_LABEL_PAD].tolist()
        assert joined == batch.frame_labels[row][batch.frame_labels[row] != FRAME_LABEL_PAD].tolist()
    assert chunked.chunks.feature_lengths.tolist() == [32, 32, 32, 7, 32, 32, 9], "partial last chunks"


def test_a_last_chunk_too_short_for_an_output_frame_is_dropped():
    # Zipformer's front end trims 7 frames per sequence: 71 frames -> 16 labels; chunks of 32 every 32:
    # [0, 32) and [32, 64) give 6 output frames each, [64, 71) none, so it has no labels and is dropped.
    batch = batch_of([71], output_lengths=zipformer_lengths)
    chunked = chunk_batch(batch, size=32, step=32, output_lengths=zipformer_lengths)

    assert chunked.chunks.ids == ["u0@0", "u0@32"]
    assert chunked.chunks.frame_labels.tolist() == [
        list(range(6)),
        list(range(8, 14)),  # from out(71) - out(71 - 32) = 16 - 8
    ]


def test_a_step_between_output_frames_is_refused_naming_the_frame_rate():
    with pytest.raises(
        ValueError, match=r"chunk_step_frames=10 is not a multiple of the model's 4 input frames"
    ):
        chunk_batch(batch_of([40]), size=24, step=10, output_lengths=QUARTER)


def test_labels_of_another_frame_rate_are_refused_naming_the_utterance():
    batch = batch_of([40, 20])
    batch.frame_labels[1, 4] = FRAME_LABEL_PAD  # u1: 4 labels for 20 frames, 5 expected

    with pytest.raises(
        ValueError, match=r"utterance u1: the alignment has 4 frame labels but the model outputs 5"
    ):
        chunk_batch(batch, size=24, step=16, output_lengths=QUARTER)
