from __future__ import annotations

import itertools

import numpy as np
import pytest

from asr_pipeline.data.batching import BATCH_UNITS, PADDED_UNITS, EpochPlan, TimeBuckets, example_costs
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
    batches = list(LengthBucketedBatchSampler(lengths, budget=6000, max_samples=8, sort_buffer_size=64))

    assert all(padded_frames(b, lengths) <= 6000 for b in batches)
    assert all(len(b) <= 8 for b in batches)
    assert sorted(i for b in batches for i in b) == list(range(500)), "one rank: each example exactly once"


def test_an_example_over_the_budget_forms_a_batch_of_its_own():
    lengths = np.array([100, 120, 5000, 110, 90])
    batches = list(LengthBucketedBatchSampler(lengths, budget=1000, sort_buffer_size=8, seed=3))

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
                        lengths, budget=3000, max_samples=8, num_replicas=world, rank=r, seed=7
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
            list(_at_epoch(LengthBucketedBatchSampler(lengths, budget=3000, max_samples=8, seed=7), epoch))
        )
        assert len(per_rank[0]) * world > single_rank_batches - world, "at most world - 1 batches dropped"


@pytest.mark.parametrize("world", [2, 3, 4])
def test_pad_mode_gives_every_rank_the_same_number_of_batches_covering_every_example(world):
    lengths = random_lengths(101, seed=5)
    per_rank = all_ranks(lengths, world, budget=3000, max_samples=8, uneven="pad")

    assert len({len(batches) for batches in per_rank}) == 1
    assert {i for batches in per_rank for b in batches for i in b} == set(range(101))


def test_with_fewer_batches_than_ranks_every_rank_still_gets_one():
    per_rank = all_ranks(np.array([10, 20, 30]), world=4, batch_size=2, uneven="drop")

    assert [len(batches) for batches in per_rank] == [1, 1, 1, 1]


def test_the_plan_is_reproducible_per_seed_and_epoch_and_changes_with_the_epoch():
    lengths = random_lengths(300)
    sampler = LengthBucketedBatchSampler(lengths, budget=5000, sort_buffer_size=50, seed=1)
    twin = LengthBucketedBatchSampler(lengths, budget=5000, sort_buffer_size=50, seed=1)

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
        "budget": 4000,
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
        ("batching", [8, "padded-frames", None, None, 4096, True, True, "drop"]),
    ],
)
def test_resuming_with_other_data_world_or_options_is_refused(key, value):
    sampler = LengthBucketedBatchSampler(random_lengths(100), batch_size=4, num_replicas=2, rank=0)
    state = {**sampler.state_dict(), key: value}

    with pytest.raises(ValueError, match=key):
        sampler.load_state_dict(state)


def test_a_checkpoint_from_before_budget_units_resumes_a_padded_frames_plan():
    lengths = random_lengths(100)
    sampler = LengthBucketedBatchSampler(lengths, budget=4000, max_samples=16, sort_buffer_size=64)
    legacy = {**sampler.state_dict(batches_done=3), "batching": [None, 4000, 16, 64, True, "drop"]}

    sampler.load_state_dict(legacy)

    assert (
        list(sampler)
        == list(LengthBucketedBatchSampler(lengths, budget=4000, max_samples=16, sort_buffer_size=64))[3:]
    )
    descending = LengthBucketedBatchSampler(
        lengths, budget=4000, max_samples=16, sort_buffer_size=64, sort_descending=True
    )
    with pytest.raises(ValueError, match="batching"):
        descending.load_state_dict(legacy)


def test_exactly_one_of_batch_size_and_budget_is_required():
    with pytest.raises(ValueError, match="exactly one"):
        LengthBucketedBatchSampler([1, 2], batch_size=2, budget=10)
    with pytest.raises(ValueError, match="exactly one"):
        LengthBucketedBatchSampler([1, 2])


def _at_epoch(sampler: LengthBucketedBatchSampler, epoch: int) -> LengthBucketedBatchSampler:
    sampler.set_epoch(epoch)
    return sampler


# --- budget units -------------------------------------------------------------------------------------
FRAMES = np.array([10, 20, 30, 40])  # one sort buffer, ascending walk: 10, 20, 30, 40


@pytest.mark.parametrize(
    ("unit", "budget", "expected"),
    [
        # 1 + 1 + 1 <= 3, the 4th would make 4.
        ("samples", 3, [[0, 1, 2], [3]]),
        # 10 + 20 + 30 = 60 <= 60; 60 + 40 > 60.
        ("frames", 60, [[0, 1, 2], [3]]),
        # 2 * 20 = 40 <= 60, 3 * 30 = 90 > 60; 1 * 30 ok, 2 * 40 = 80 > 60.
        ("padded-frames", 60, [[0, 1], [2], [3]]),
        # T * F with F = 4: 40 + 80 + 120 = 240 <= 240; + 160 > 240.
        ("feature-values", 240, [[0, 1, 2], [3]]),
        # durations 100, 200, 300, 400 ms: 100 + 200 = 300 <= 350; + 300 > 350; 300 alone; 300 + 400 > 350.
        ("duration-ms", 350, [[0, 1], [2], [3]]),
        # 2 * 200 = 400 <= 600, 3 * 300 = 900 > 600; 300, 2 * 400 = 800 > 600.
        ("padded-duration-ms", 600, [[0, 1], [2], [3]]),
    ],
)
def test_each_budget_unit_counts_what_its_name_says(unit, budget, expected):
    sampler = LengthBucketedBatchSampler(
        FRAMES, budget=budget, unit=unit, durations_ms=FRAMES * 10, feature_dim=4, shuffle=False
    )

    assert list(sampler) == expected


def batch_cost(batch: list[int], costs: np.ndarray, unit: str) -> int:
    return len(batch) * int(costs[batch].max()) if unit in PADDED_UNITS else int(costs[batch].sum())


@pytest.mark.parametrize("unit", BATCH_UNITS)
def test_every_batch_of_two_or_more_keeps_the_budget_in_every_unit(unit):
    lengths = random_lengths(400, seed=2)
    durations = lengths * 10 + 15  # frames at 10 ms plus the 25 ms window's tail
    costs = example_costs(unit, lengths, durations, feature_dim=80)
    budget = 8 if unit == "samples" else int(np.median(costs)) * 8  # ~8 typical examples per batch
    sampler = LengthBucketedBatchSampler(
        lengths, budget=budget, unit=unit, durations_ms=durations, feature_dim=80, sort_buffer_size=128
    )

    batches = list(sampler)

    assert sorted(i for b in batches for i in b) == list(range(400))
    assert all(batch_cost(b, costs, unit) <= budget for b in batches if len(b) > 1)
    assert sampler.plan_stats().oversized_batches == sampler.oversized_examples == int((costs > budget).sum())


def test_summed_units_pack_short_examples_that_padded_units_would_not():
    # Four short examples and a long one: 5 * 400 = 2000 padded frames, but only 800 real ones.
    mixed = np.array([100, 100, 100, 100, 400])
    assert list(LengthBucketedBatchSampler(mixed, budget=800, unit="frames", shuffle=False)) == [
        [0, 1, 2, 3, 4]
    ]
    assert list(LengthBucketedBatchSampler(mixed, budget=800, unit="padded-frames", shuffle=False)) == [
        [0, 1, 2, 3],
        [4],
    ]


def test_the_attention_unit_counts_batch_size_times_the_longest_frames_squared():
    # Self-attention at the frame rate holds B * T * T scores: 4 examples of 100 frames cost 40,000, so a
    # 200-frame example (40,000 alone) must go in a batch of one under a 60,000 budget.
    lengths = np.array([100, 100, 100, 200])
    assert example_costs("padded-attention", lengths).tolist() == [10_000, 10_000, 10_000, 40_000]
    sampler = LengthBucketedBatchSampler(lengths, budget=60_000, unit="padded-attention", shuffle=False)
    assert list(sampler) == [[0, 1, 2], [3]]


def test_examples_over_the_budget_form_batches_of_one_and_are_counted():
    lengths = np.array([100, 120, 5000, 110, 90, 7000])
    sampler = LengthBucketedBatchSampler(lengths, budget=1000, sort_buffer_size=8, seed=3)

    batches = list(sampler)

    assert [2] in batches and [5] in batches
    assert sampler.oversized_examples == 2
    stats = sampler.plan_stats()
    assert stats.oversized_batches == 2
    assert stats.examples == 6 and stats.batches == len(batches)
    assert LengthBucketedBatchSampler(lengths, batch_size=2).oversized_examples == 0


def test_plan_stats_measure_padding_as_real_over_padded_frames():
    lengths = np.array([10, 20, 30, 40])
    sampler = LengthBucketedBatchSampler(lengths, batch_size=2, shuffle=False)

    stats = sampler.plan_stats()

    # Batches [10, 20] and [30, 40]: real 100 frames, padded 2 * 20 + 2 * 40 = 120.
    assert (stats.real_frames, stats.padded_frames) == (100, 120)
    assert stats.padding_efficiency == pytest.approx(100 / 120)
    assert stats.mean_batch_size == 2.0


def test_an_unknown_unit_or_a_missing_amount_is_refused_with_what_is_needed():
    with pytest.raises(ValueError, match="unknown batch unit 'tokens'"):
        LengthBucketedBatchSampler([1, 2], budget=10, unit="tokens")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="durations"):
        LengthBucketedBatchSampler([1, 2], budget=10, unit="duration-ms")
    with pytest.raises(ValueError, match="feature dimension"):
        LengthBucketedBatchSampler([1, 2], budget=10, unit="feature-values")


# --- sort descending ----------------------------------------------------------------------------------
def test_sort_descending_walks_each_buffer_longest_first_and_keeps_that_order():
    lengths = random_lengths(300, seed=4)
    sampler = LengthBucketedBatchSampler(
        lengths, budget=6000, sort_buffer_size=100, sort_descending=True, seed=1
    )

    batches = list(sampler)
    longest = [int(lengths[b].max()) for b in batches]

    # Three buffers of 100 examples; within each, batch maxima never increase.
    buffer_starts = [i for i in range(len(batches)) if i == 0 or longest[i] > longest[i - 1]]
    assert len(buffer_starts) <= 3
    first_buffer = batches[: buffer_starts[1]] if len(buffer_starts) > 1 else batches
    members = [i for b in first_buffer for i in b]
    assert longest[0] == lengths[members].max(), "the first batch holds the longest example of its buffer"
    assert sorted(i for b in batches for i in b) == list(range(300))


def test_with_one_buffer_sort_descending_puts_the_largest_batch_first_every_epoch():
    lengths = random_lengths(200, seed=6)
    sampler = LengthBucketedBatchSampler(lengths, budget=5000, sort_buffer_size=4096, sort_descending=True)

    for epoch in range(2):
        sampler.set_epoch(epoch)
        first = next(iter(sampler))
        assert lengths[first].max() == lengths.max()


def test_sort_descending_still_draws_other_buffers_every_epoch():
    lengths = random_lengths(300, seed=4)
    sampler = LengthBucketedBatchSampler(lengths, budget=6000, sort_buffer_size=50, sort_descending=True)

    epoch0 = list(sampler)
    sampler.set_epoch(1)

    assert list(sampler) != epoch0


# --- DDP and resume in every unit ---------------------------------------------------------------------
@pytest.mark.parametrize("unit", BATCH_UNITS)
@pytest.mark.parametrize("descending", [False, True])
def test_every_unit_gives_ranks_disjoint_batches_of_equal_count(unit, descending):
    lengths = random_lengths(101, seed=9)
    durations = lengths * 10
    budget = {"samples": 6, "feature-values": 3000 * 80}.get(unit, 3000 * (10 if "duration" in unit else 1))
    options = {
        "budget": budget,
        "unit": unit,
        "durations_ms": durations,
        "feature_dim": 80,
        "sort_descending": descending,
        "seed": 2,
    }
    per_rank = all_ranks(lengths, 3, **options)

    assert len({len(batches) for batches in per_rank}) == 1
    seen = [i for batches in per_rank for b in batches for i in b]
    assert len(seen) == len(set(seen)), "an example on two ranks"


@pytest.mark.parametrize("unit", BATCH_UNITS)
def test_every_unit_resumes_mid_epoch_with_exactly_the_remaining_batches(unit):
    lengths = random_lengths(200, seed=3)
    options = {
        "budget": {"samples": 8, "feature-values": 4000 * 80}.get(
            unit, 4000 * (10 if "duration" in unit else 1)
        ),
        "unit": unit,
        "durations_ms": lengths * 10,
        "feature_dim": 80,
        "sort_buffer_size": 64,
        "seed": 5,
        "num_replicas": 2,
        "rank": 0,
    }
    sampler = LengthBucketedBatchSampler(lengths, **options)
    sampler.set_epoch(1)
    full = list(sampler)

    resumed = LengthBucketedBatchSampler(lengths, **options)
    resumed.load_state_dict({**sampler.state_dict(batches_done=3), "epoch": 1})
    resumed.set_epoch(1)

    assert list(resumed) == full[3:]


# --- shard windows ---------------------------------------------------------------------------------------
def shard_codes(count: int, shard_size: int) -> np.ndarray:
    """The shard of every example, examples in shard order as a length index lists them."""
    return np.arange(count) // shard_size


def windowed(lengths, groups, window: int, **options) -> LengthBucketedBatchSampler:
    options = {"budget": 6000, "max_samples": 16, **options}
    return LengthBucketedBatchSampler(lengths, groups=groups, group_window=window, **options)


def test_with_shard_windows_every_example_comes_once_and_batches_stay_within_a_window_of_shards():
    lengths, groups = random_lengths(2000, seed=3), shard_codes(2000, 100)  # 20 shards
    batches = list(windowed(lengths, groups, window=4))

    assert sorted(itertools.chain.from_iterable(batches)) == list(range(2000))
    shards_so_far: list[set[int]] = []
    for batch in batches:  # consecutive batches draw on one window of 4 shards, then the next window
        shards = {int(groups[i]) for i in batch}
        if shards_so_far and len(shards_so_far[-1] | shards) <= 4:
            shards_so_far[-1] |= shards
        else:
            shards_so_far.append(shards)
    assert len(shards_so_far) == 5, "20 shards in windows of 4"
    assert set().union(*shards_so_far) == set(range(20))


def shard_opens(batches: list[list[int]], groups: np.ndarray, open_limit: int) -> int:
    """Shard reads of an epoch through an LRU of ``open_limit`` open shards (ShardDataset's)."""
    open_shards: list[int] = []  # least recently used first
    opens = 0
    for shard in (int(groups[i]) for batch in batches for i in batch):
        if shard in open_shards:
            open_shards.remove(shard)
        else:
            opens += 1
        open_shards.append(shard)
        del open_shards[: max(0, len(open_shards) - open_limit)]
    return opens


def test_reading_a_windowed_epoch_through_window_plus_one_open_shards_opens_each_shard_once():
    lengths, groups = random_lengths(3000, seed=4), shard_codes(3000, 100)  # 30 shards

    assert shard_opens(list(windowed(lengths, groups, window=4)), groups, open_limit=5) == 30
    # A global shuffle through the same 5 open shards reopens shards over and over.
    assert shard_opens(list(windowed(lengths, None, window=4)), groups, open_limit=5) > 20 * 30


def test_shard_windows_are_reshuffled_every_epoch_and_reproducible():
    lengths, groups = random_lengths(1000, seed=5), shard_codes(1000, 50)
    sampler = windowed(lengths, groups, window=3, seed=7)

    epoch0, epoch1 = sampler.epoch_batches(0), sampler.epoch_batches(1)
    assert epoch0 != epoch1
    assert windowed(lengths, groups, window=3, seed=7).epoch_batches(1) == epoch1


def test_a_windowed_plan_resumes_and_refuses_another_window():
    lengths, groups = random_lengths(1000, seed=6), shard_codes(1000, 50)
    sampler = windowed(lengths, groups, window=3)
    full = list(sampler)
    resumed = windowed(lengths, groups, window=3)
    resumed.load_state_dict(sampler.state_dict(batches_done=5))

    assert list(resumed) == full[5:]
    with pytest.raises(ValueError, match="batching"):
        windowed(lengths, groups, window=4).load_state_dict(sampler.state_dict(batches_done=5))
    with pytest.raises(ValueError, match="batching"):  # a global-shuffle checkpoint: another plan
        windowed(lengths, None, window=3).load_state_dict(sampler.state_dict(batches_done=5))


def test_shard_windows_keep_ranks_disjoint_and_even():
    lengths, groups = random_lengths(1500, seed=8), shard_codes(1500, 100)
    ranks = [list(windowed(lengths, groups, window=2, num_replicas=3, rank=r)) for r in range(3)]

    assert len({len(batches) for batches in ranks}) == 1
    seen = [i for batches in ranks for batch in batches for i in batch]
    assert len(seen) == len(set(seen))


def test_an_ascending_epoch_with_shard_windows_sorts_each_window_and_reads_each_shard_once():

    lengths, groups = random_lengths(1200, seed=9), shard_codes(1200, 100)  # 12 shards
    sampler = windowed(lengths, groups, window=4, epoch_plan=lambda epoch: EpochPlan(ascending=True))
    batches = list(sampler)

    assert sorted(itertools.chain.from_iterable(batches)) == list(range(1200))
    assert shard_opens(batches, groups, open_limit=5) == 12
    first_window = [i for batch in batches for i in batch if groups[i] < 4]
    assert [int(lengths[i]) for i in first_window] == sorted(int(lengths[i]) for i in first_window)


def reader_shards(lengths, groups, world: int, workers: int, **options) -> dict[tuple[int, int], set[int]]:
    """The shards each (rank, worker) reads over an epoch: a rank's batch m goes to worker m % workers."""
    touched: dict[tuple[int, int], set[int]] = {}
    for rank in range(world):
        sampler = windowed(lengths, groups, num_replicas=world, rank=rank, loader_workers=workers, **options)
        for m, batch in enumerate(sampler):
            touched.setdefault((rank, m % max(workers, 1)), set()).update(int(groups[i]) for i in batch)
    return touched


@pytest.mark.parametrize(("world", "workers"), [(1, 4), (2, 2), (4, 2)])
def test_each_reader_of_a_windowed_epoch_reads_shards_of_its_own(world, workers):
    # 16 shards of 16 equal examples, batches of 4: every reader (rank, worker) plans 4 shards into 16 batches.
    lengths, groups = np.full(256, 500), shard_codes(256, 16)
    touched = reader_shards(lengths, groups, world, workers, window=2, batch_size=4, budget=None)

    assert len(touched) == world * max(workers, 1)
    assert sum(len(shards) for shards in touched.values()) == 16, "every shard read by one process"
    assert set().union(*touched.values()) == set(range(16))


def test_unequal_readers_still_give_every_example_once_and_only_their_tails_to_any_worker():
    lengths, groups = (
        random_lengths(3000, seed=10),
        shard_codes(3000, 100),
    )  # 30 shards: 8, 8, 7, 7 per reader
    batches = list(windowed(lengths, groups, window=2, loader_workers=4))

    assert sorted(itertools.chain.from_iterable(batches)) == list(range(3000))
    # Until the first reader runs out (past 9/10 of the epoch here), worker m % 4 reads only its shards.
    by_worker: dict[int, set[int]] = {}
    for m, batch in enumerate(batches[: int(0.9 * len(batches))]):
        by_worker.setdefault(m % 4, set()).update(int(groups[i]) for i in batch)
    assert sum(len(shards) for shards in by_worker.values()) == len(set().union(*by_worker.values()))
    # The whole epoch: a reader that ran out takes batches from the end of the longest one, so a few shards
    # are read by two workers; every worker reading every shard would be 120.
    touched = reader_shards(lengths, groups, 1, 4, window=2)
    assert sum(len(shards) for shards in touched.values()) <= 36


def test_one_reader_per_rank_plans_as_without_workers():
    lengths, groups = random_lengths(1000, seed=11), shard_codes(1000, 50)

    assert windowed(lengths, groups, window=3, loader_workers=1).epoch_batches(2) == windowed(
        lengths, groups, window=3
    ).epoch_batches(2)


@pytest.mark.parametrize("workers", [0, 1])
def test_ranks_without_workers_share_windows_and_keep_the_one_rank_plan(workers):
    lengths, groups = random_lengths(2000, seed=13), shard_codes(2000, 100)
    whole = windowed(lengths, groups, window=4).epoch_batches(1)
    whole = whole[: len(whole) - len(whole) % 2]  # "drop" evens the plan out for 2 ranks

    for rank in range(2):
        sampler = windowed(lengths, groups, window=4, num_replicas=2, rank=rank, loader_workers=workers)
        assert sampler.epoch_batches(1) == whole[rank::2]


def test_a_resume_within_an_epoch_needs_its_readers_and_one_at_an_epochs_start_does_not():
    lengths, groups = random_lengths(1000, seed=11), shard_codes(1000, 50)
    sampler = windowed(lengths, groups, window=3, loader_workers=4)
    full = list(sampler)
    resumed = windowed(lengths, groups, window=3, loader_workers=4)
    resumed.load_state_dict(sampler.state_dict(batches_done=5))

    assert list(resumed) == full[5:]
    with pytest.raises(
        ValueError, match=r"planned for 4 reader\(s\) .* this run has 2; resume with the --num-workers"
    ):
        windowed(lengths, groups, window=3, loader_workers=2).load_state_dict(
            sampler.state_dict(batches_done=5)
        )
    # An epoch not yet begun is planned anew for this run's readers.
    other = windowed(lengths, groups, window=3, loader_workers=2)
    other.load_state_dict(sampler.state_dict(batches_done=0))
    assert list(other) == windowed(lengths, groups, window=3, loader_workers=2).epoch_batches(0)
    # A checkpoint from before readers (no "readers" entry) was planned for one.
    before = {key: value for key, value in sampler.state_dict(batches_done=5).items() if key != "readers"}
    windowed(lengths, groups, window=3, loader_workers=1).load_state_dict(before)
    with pytest.raises(ValueError, match=r"planned for 1 reader\(s\)"):
        windowed(lengths, groups, window=3, loader_workers=4).load_state_dict(before)
    with pytest.raises(ValueError, match="loader_workers must be >= 0, got -1"):
        windowed(lengths, groups, window=3, loader_workers=-1)


@pytest.mark.parametrize(
    ("shards", "world", "workers", "readers"), [(6, 1, 8, 4), (5, 2, 4, 4), (3, 4, 2, 1)]
)
def test_with_fewer_shards_than_workers_the_readers_are_fewer_and_every_example_comes_once(
    shards, world, workers, readers
):
    lengths, groups = random_lengths(shards * 40, seed=12), shard_codes(shards * 40, 40)
    samplers = [
        windowed(lengths, groups, window=2, num_replicas=world, rank=r, loader_workers=workers, uneven="pad")
        for r in range(world)
    ]

    assert samplers[0].readers == readers, "a multiple of the ranks and a divisor of the workers, when it can"
    seen = sorted({i for sampler in samplers for batch in sampler for i in batch})
    assert seen == list(range(shards * 40))


# --- the plan with time buckets (tests/data/test_batching.py: the buckets themselves) ----------------


def test_with_buckets_the_plan_reports_the_bucketed_padding_and_its_few_lengths():
    lengths = random_lengths(600)
    buckets = TimeBuckets.geometric(1500, count=6, ratio=1.4)
    plain = LengthBucketedBatchSampler(lengths, budget=12000, sort_buffer_size=200)
    bucketed = LengthBucketedBatchSampler(lengths, budget=12000, sort_buffer_size=200, time_buckets=buckets)

    plain_stats, bucketed_stats = plain.plan_stats(), bucketed.plan_stats()

    assert bucketed_stats.distinct_lengths <= len(buckets.lengths) < plain_stats.distinct_lengths
    assert bucketed_stats.padding_fraction > plain_stats.padding_fraction, "bucketing costs padded frames"
    batches = bucketed.epoch_batches()
    expected = sum(len(b) * buckets.padded_length(int(lengths[b].max())) for b in batches)
    assert bucketed_stats.padded_frames == expected
    assert bucketed_stats.to_dict()["padding_fraction"] == pytest.approx(
        1 - bucketed_stats.real_frames / expected
    )


def test_the_padded_frames_budget_counts_the_bucketed_length():
    lengths = random_lengths(400)
    buckets = TimeBuckets.geometric(1500, count=5, ratio=1.5)
    sampler = LengthBucketedBatchSampler(lengths, budget=8000, sort_buffer_size=100, time_buckets=buckets)

    for batch in sampler:
        if len(batch) > 1:
            assert len(batch) * buckets.padded_length(int(lengths[batch].max())) <= 8000


def test_a_bucketed_plan_refuses_to_resume_without_its_buckets():
    lengths = random_lengths(100)
    bucketed = LengthBucketedBatchSampler(lengths, budget=6000, time_buckets=TimeBuckets((512, 1024, 1504)))
    state = bucketed.state_dict(batches_done=2)

    with pytest.raises(ValueError, match="batching"):
        LengthBucketedBatchSampler(lengths, budget=6000).load_state_dict(state)
