from __future__ import annotations

import itertools

import numpy as np
import pytest

from asr_pipeline.data.sampler import LengthBucketedBatchSampler


def random_lengths(count: int, seed: int = 0) -> np.ndarray:
    """Utterance lengths in frames, spread like speech: 50..1500 frames (0.5..15 s at 10 ms)."""
    return np.random.default_rng(seed).integers(50, 1500, size=count)


def padded_frames(batch: list[int], lengths: np.ndarray) -> int:
    return len(batch) * int(lengths[batch].max())


def all_ranks(lengths, world: int, **options) -> list[list[list[int]]]:
    return [
        list(LengthBucketedBatchSampler(lengths, num_replicas=world, rank=r, **options)) for r in range(world)
    ]


def test_every_batch_keeps_to_the_padded_frames_budget_and_sample_cap():
    lengths = random_lengths(500)
    batches = list(LengthBucketedBatchSampler(lengths, max_frames=6000, max_samples=8, sort_buffer_size=64))

    assert all(padded_frames(b, lengths) <= 6000 for b in batches)
    assert all(len(b) <= 8 for b in batches)
    assert sorted(i for b in batches for i in b) == list(range(500)), "one rank: each example exactly once"


def test_an_example_over_the_budget_forms_a_batch_of_its_own():
    lengths = np.array([100, 120, 5000, 110, 90])
    batches = list(LengthBucketedBatchSampler(lengths, max_frames=1000, sort_buffer_size=8, seed=3))

    assert [2] in batches
    assert sorted(i for b in batches for i in b) == [0, 1, 2, 3, 4]


def test_fixed_batch_size_gives_batches_of_that_size_but_the_last_per_buffer():
    lengths = random_lengths(50)
    batches = list(LengthBucketedBatchSampler(lengths, batch_size=8, sort_buffer_size=25))

    # Two buffers of 25 -> 8 + 8 + 8 + 1 each.
    assert sorted(len(b) for b in batches) == [1, 1] + [8] * 6


def test_length_sorting_wastes_far_less_padding_than_unsorted_batches():
    lengths = random_lengths(2000)

    def efficiency(batches) -> float:
        return lengths.sum() / sum(padded_frames(list(b), lengths) for b in batches)

    order = np.random.default_rng(0).permutation(len(lengths))
    unsorted = efficiency(order[i : i + 16] for i in range(0, len(order), 16))
    bucketed = efficiency(LengthBucketedBatchSampler(lengths, batch_size=16, sort_buffer_size=500))
    # Uniform lengths in 16-long random batches: the longest is ~94% of the range, the mean ~50% -> ~0.55.
    assert unsorted < 0.65
    assert bucketed > 0.95
    assert bucketed > unsorted + 0.3


@pytest.mark.parametrize("world", [2, 3, 4])
@pytest.mark.parametrize("count", [101, 37])
def test_drop_mode_gives_every_rank_disjoint_batches_and_the_same_number_of_them(world, count):
    lengths = random_lengths(count, seed=count)
    for epoch in range(3):
        per_rank = [
            list(
                _at_epoch(
                    LengthBucketedBatchSampler(
                        lengths, max_frames=3000, max_samples=8, num_replicas=world, rank=r, seed=7
                    ),
                    epoch,
                )
            )
            for r in range(world)
        ]
        assert len({len(batches) for batches in per_rank}) == 1, [len(b) for b in per_rank]
        seen = [i for batches in per_rank for b in batches for i in b]
        assert len(seen) == len(set(seen)), "an example on two ranks"
        single_rank_batches = len(
            list(
                _at_epoch(LengthBucketedBatchSampler(lengths, max_frames=3000, max_samples=8, seed=7), epoch)
            )
        )
        assert len(per_rank[0]) * world > single_rank_batches - world, "at most world - 1 batches dropped"


@pytest.mark.parametrize("world", [2, 3, 4])
def test_pad_mode_gives_every_rank_the_same_number_of_batches_covering_every_example(world):
    lengths = random_lengths(101, seed=5)
    per_rank = all_ranks(lengths, world, max_frames=3000, max_samples=8, uneven="pad")

    assert len({len(batches) for batches in per_rank}) == 1
    assert {i for batches in per_rank for b in batches for i in b} == set(range(101))


def test_with_fewer_batches_than_ranks_every_rank_still_gets_one():
    per_rank = all_ranks(np.array([10, 20, 30]), world=4, batch_size=2, uneven="drop")

    assert [len(batches) for batches in per_rank] == [1, 1, 1, 1]


def test_the_plan_is_reproducible_per_seed_and_epoch_and_changes_with_the_epoch():
    lengths = random_lengths(300)
    sampler = LengthBucketedBatchSampler(lengths, max_frames=5000, sort_buffer_size=50, seed=1)
    twin = LengthBucketedBatchSampler(lengths, max_frames=5000, sort_buffer_size=50, seed=1)

    epoch0 = list(sampler)
    assert epoch0 == list(twin)
    sampler.set_epoch(1)
    assert list(sampler) != epoch0


def test_without_shuffle_batches_follow_buffer_order_sorted_by_length():
    lengths = np.array([5, 3, 9, 1, 7, 2])
    batches = list(LengthBucketedBatchSampler(lengths, batch_size=2, sort_buffer_size=3, shuffle=False))

    assert batches == [[1, 0], [2], [3, 5], [4]]


@pytest.mark.parametrize("done", [0, 1, 4, 9])
def test_resuming_from_state_dict_yields_exactly_the_remaining_batches(done):
    lengths = random_lengths(200)
    options = {
        "max_frames": 4000,
        "max_samples": 16,
        "sort_buffer_size": 64,
        "seed": 11,
        "num_replicas": 2,
        "rank": 1,
    }
    sampler = LengthBucketedBatchSampler(lengths, **options)
    sampler.set_epoch(2)
    full = list(sampler)
    assert len(full) > 9

    interrupted = LengthBucketedBatchSampler(lengths, **options)
    interrupted.set_epoch(2)
    state = interrupted.state_dict() if done == 0 else None
    for _ in itertools.islice(iter(interrupted), done):
        pass
    state = interrupted.state_dict() if state is None else state

    resumed = LengthBucketedBatchSampler(lengths, **options)
    resumed.load_state_dict(state)
    resumed.set_epoch(2)  # what a training loop does at the top of every epoch
    assert len(resumed) == len(full) - done
    assert list(resumed) == full[done:]
    assert list(resumed) == full, "the skip applies to one iteration only"


def test_a_training_loop_can_state_how_many_batches_it_consumed():
    lengths = random_lengths(100)
    sampler = LengthBucketedBatchSampler(lengths, batch_size=4)
    prefetched = iter(sampler)
    for _ in range(6):  # a DataLoader ran ahead of the loop
        next(prefetched)

    state = sampler.state_dict(batches_done=2)
    resumed = LengthBucketedBatchSampler(lengths, batch_size=4)
    resumed.load_state_dict(state)

    assert list(resumed) == list(LengthBucketedBatchSampler(lengths, batch_size=4))[2:]


def test_setting_another_epoch_drops_a_pending_resume_position():
    lengths = random_lengths(100)
    sampler = LengthBucketedBatchSampler(lengths, batch_size=4)
    sampler.load_state_dict({**sampler.state_dict(), "epoch": 0, "batches_done": 5})
    sampler.set_epoch(1)

    assert sampler.batches_to_skip == 0
    assert len(list(sampler)) == 25


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num_replicas", 4),
        ("num_examples", 99),
        ("seed", 5),
        ("batching", [8, None, None, 4096, True, "drop"]),
    ],
)
def test_resuming_with_other_data_world_or_options_is_refused(key, value):
    sampler = LengthBucketedBatchSampler(random_lengths(100), batch_size=4, num_replicas=2, rank=0)
    state = {**sampler.state_dict(), key: value}

    with pytest.raises(ValueError, match=key):
        sampler.load_state_dict(state)


def test_exactly_one_of_batch_size_and_budget_is_required():
    with pytest.raises(ValueError, match="exactly one"):
        LengthBucketedBatchSampler([1, 2], batch_size=2, max_frames=10)
    with pytest.raises(ValueError, match="exactly one"):
        LengthBucketedBatchSampler([1, 2])


def _at_epoch(sampler: LengthBucketedBatchSampler, epoch: int) -> LengthBucketedBatchSampler:
    sampler.set_epoch(epoch)
    return sampler
