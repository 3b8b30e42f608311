"""data.batching: what each budget unit costs an example, the time buckets a batch pads to, and an epoch
plan's padding statistics (the sampler that uses them: tests/data/test_sampler.py)."""

from __future__ import annotations

import numpy as np
import pytest

from asr_pipeline.data.batching import BatchPlanStats, TimeBuckets, example_costs

# --- example costs ------------------------------------------------------------------------------------
FRAMES = np.array([10, 20, 30])
DURATIONS_MS = np.array([115, 215, 315])  # frames at 10 ms plus the 25 ms window's tail, rounded


@pytest.mark.parametrize(
    ("unit", "expected"),
    [
        ("samples", [1, 1, 1]),
        ("frames", [10, 20, 30]),
        ("padded-frames", [10, 20, 30]),  # padded: the batch costs B * the largest of these
        ("padded-attention", [100, 400, 900]),  # T * T
        ("feature-values", [40, 80, 120]),  # T * F, F = 4
        ("duration-ms", [115, 215, 315]),
        ("padded-duration-ms", [115, 215, 315]),
    ],
)
def test_each_unit_costs_an_example_what_its_name_says(unit, expected):
    costs = example_costs(unit, FRAMES, durations_ms=DURATIONS_MS, feature_dim=4)

    assert costs.dtype == np.int64
    assert costs.tolist() == expected


@pytest.mark.parametrize(
    ("unit", "options", "message"),
    [
        ("feature-values", {}, r"unit 'feature-values' needs the feature dimension, got feature_dim=None"),
        ("feature-values", {"feature_dim": 0}, r"needs the feature dimension, got feature_dim=0"),
        ("duration-ms", {}, r"unit 'duration-ms' needs the examples' durations \(durations_ms\)"),
        ("padded-duration-ms", {"durations_ms": np.array([1, 2])}, r"2 durations for 3 examples"),
        ("tokens", {}, r"unknown batch unit 'tokens'; expected one of samples, .*padded-attention"),
    ],
)
def test_a_unit_without_what_it_needs_or_an_unknown_one_is_refused_saying_what_is_missing(
    unit, options, message
):
    with pytest.raises(ValueError, match=message):
        example_costs(unit, FRAMES, **options)


# --- time buckets: a few padded lengths for torch.compile (issue 36) ---------------------------------


def test_a_batch_pads_to_the_smallest_bucket_that_holds_it_and_past_the_last_to_a_multiple():
    buckets = TimeBuckets((64, 128, 256), multiple=16)

    assert [buckets.padded_length(t) for t in (1, 64, 65, 128, 200, 256)] == [64, 64, 128, 128, 256, 256]
    assert buckets.padded_length(257) == 272, "past the last bucket: the next multiple of 16"
    assert buckets.padded_lengths(np.array([1, 65, 257])).tolist() == [64, 128, 272]


def test_a_geometric_ladder_ends_at_the_longest_and_steps_by_the_ratio_in_multiples():
    buckets = TimeBuckets.geometric(1500, count=4, ratio=2.0, multiple=16)

    # 1500 -> 1504 (a multiple of 16); then 1504/2 = 752, 1504/4 = 376 -> 384, 1504/8 = 188 -> 192
    assert buckets.lengths == (192, 384, 752, 1504)


@pytest.mark.parametrize("lengths", [(), (64, 32), (0, 16), (16, 16)])
def test_bucket_lengths_must_be_ascending_frame_counts(lengths):
    with pytest.raises(ValueError, match="time bucket lengths"):
        TimeBuckets(lengths)


def test_a_geometric_ladder_of_one_is_the_longest_rounded_up_and_short_rungs_stop_at_the_multiple():
    assert TimeBuckets.geometric(100, count=1).lengths == (112,)
    # 64 / 2**k for k = 1..5: 32, 16, then 8, 4, 2 round up to the multiple 16 and merge.
    assert TimeBuckets.geometric(64, count=6, ratio=2.0, multiple=16).lengths == (16, 32, 64)


@pytest.mark.parametrize(("count", "ratio", "longest"), [(0, 1.25, 100), (4, 1.0, 100), (4, 1.25, 0)])
def test_a_geometric_ladder_needs_a_count_a_ratio_over_one_and_a_longest_length(count, ratio, longest):
    with pytest.raises(ValueError, match="need count >= 1, ratio > 1 and longest >= 1"):
        TimeBuckets.geometric(longest, count=count, ratio=ratio)


def test_pad_to_buckets_is_a_count_of_geometric_lengths_or_the_lengths_themselves():
    assert TimeBuckets.from_spec(3, longest=1000) == TimeBuckets.geometric(1000, count=3)
    assert TimeBuckets.from_spec([100, 200], longest=1000).lengths == (100, 200)


def test_the_buckets_serialize_as_their_lengths_and_multiple():
    assert TimeBuckets((64, 128), multiple=8).to_list() == [[64, 128], 8]


# --- plan statistics ----------------------------------------------------------------------------------


def test_plan_stats_derive_efficiency_fraction_and_mean_batch_size_from_the_counts():
    # 3 batches holding 12 example slots; 900 real of 1200 padded frames.
    stats = BatchPlanStats(
        batches=3, batches_per_rank=3, examples=12, real_frames=900, padded_frames=1200, oversized_batches=1
    )

    assert stats.padding_efficiency == pytest.approx(0.75)
    assert stats.padding_fraction == pytest.approx(0.25)
    assert stats.mean_batch_size == 4.0
    assert stats.to_dict() == {
        "batches": 3,
        "batches_per_rank": 3,
        "examples": 12,
        "real_frames": 900,
        "padded_frames": 1200,
        "padding_efficiency": pytest.approx(0.75),
        "padding_fraction": pytest.approx(0.25),
        "distinct_lengths": 0,
        "mean_batch_size": 4.0,
        "oversized_batches": 1,
    }


def test_an_empty_plan_reports_no_padding_and_no_batch_size():
    stats = BatchPlanStats(
        batches=0, batches_per_rank=0, examples=0, real_frames=0, padded_frames=0, oversized_batches=0
    )

    assert (stats.padding_efficiency, stats.padding_fraction, stats.mean_batch_size) == (1.0, 0.0, 0.0)
