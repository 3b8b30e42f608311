"""Length-bucketed batch sampler that knows about DDP and resumes mid-epoch.

One epoch's plan, a pure function of (lengths, options, seed, epoch, num_replicas):

1. Shuffle all example indices (or keep index order when ``shuffle=False``). With shard windows
   (``groups`` and ``group_window``: the shard of every example, and how many shards are mixed at once),
   shuffle the shards instead, take them ``group_window`` at a time, and shuffle the examples of each
   window: steps 2-4 then run window by window, so a window's batches all come from its shards and an
   epoch reads each shard once, with ``group_window`` shards in memory (WebDataset's and lhotse's shard
   shuffle plus a shuffle buffer; ``benchmarks/bench_librispeech_scale.py`` measured a global shuffle
   holding every shard of a 280k-utterance corpus open by the end of an epoch).
2. Cut them into buffers of ``sort_buffer_size`` and sort each buffer by length (frames T), shortest
   first, or longest first with ``sort_descending``. A bounded buffer keeps randomness across epochs (a
   global sort would produce the same batches every epoch) while still putting similar lengths together,
   which is what saves padding.
3. Walk each sorted buffer, closing a batch when the next example would break the budget (a unit of ``data.batching``) or the
   ``max_samples`` cap; or cut fixed ``batch_size`` batches. An example over the budget on its own still
   forms a batch of one: dropping it would lose data silently, and the caller filters over-long audio
   explicitly upstream (``max_audio_duration_sec``). Such examples are counted (``oversized_examples``,
   ``BatchPlanStats.oversized_batches``) so a budget that is too small for the data shows in the report.
4. Shuffle the batches (within each shard window), so the model does not see lengths in buffer order. With ``sort_descending`` the
   batches are NOT shuffled: buffer after buffer (each a random draw of examples), longest batch first.
   That is the point of sorting descending: the largest batches of a buffer come first, so a batch that
   does not fit in memory fails at the start of the buffer -- with one buffer over the whole set, at the
   first step -- rather than hours in; and consecutive batches (one per rank, see 6) have similar sizes.
5. Even out for DDP: every rank must run the same number of steps, or the ranks that run out stop
   calling all-reduce and the others hang. ``uneven="drop"`` drops the last ``len % num_replicas``
   batches (every example at most once per epoch; which ones are dropped changes each epoch);
   ``uneven="pad"`` repeats batches from the start instead (every example at least once; duplicates are
   the caller's to remove, e.g. by id in validation). With fewer batches than ranks, "drop" pads too.
6. Rank ``r`` takes batches ``r, r + R, r + 2R, ...`` (disjoint across ranks before padding).
7. Readers (with shard windows, shuffled): a DataLoader with L worker processes hands a rank's batch ``m``
   to worker ``m % L`` (in order, round robin, from worker 0 every epoch), and a process decodes every
   shard its batches draw from. With R ranks of ``loader_workers`` L >= 2 there are S = R * L readers
   (fewer with fewer shards: still a multiple of R). The epoch's shuffled shards are dealt out among
   them, each in turn to the reader with the fewest frames so far; each reader's batches are planned over its own shards, window by window (steps
   1-4); and the readers' batches are interleaved: batch ``k * S + j`` is reader ``j``'s ``k``-th, which
   step 6 gives to rank ``j % R`` and that rank's DataLoader to worker ``j // R``. Every shard is then
   decoded by one process an epoch, not by every worker of every rank (``benchmarks/bench_loader_rate.py``
   counts them). A reader that runs out before the others takes its turns from the end of the longest
   remaining list, so only its worker reads another reader's shards, near the epoch's end. Ranks without
   workers (L 0 or 1) keep one reader, the plan of steps 1-4 whatever R: their windows are shared, each
   rank decoding every shard of a window, and a run's batches stay those of runs before readers (the
   demo's digits). An ascending epoch (``EpochPlan.ascending``, a curriculum's) is planned for one reader
   whatever the count. Resuming within an epoch needs the same readers.

Budget units, the time buckets for ``torch.compile`` and the plan statistics live in ``data.batching``.

Resuming: ``state_dict()`` holds the epoch and the number of batches this rank has finished; after
``load_state_dict`` the next iteration rebuilds the same plan and starts after those batches, so nothing
is replayed and no data is read to skip them (the sampler only yields indices).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch.distributed as dist
from torch.utils.data import Sampler

from asr_pipeline.data.batching import (
    BATCH_UNITS,
    PADDED_UNITS,
    BatchPlanStats,
    BatchUnit,
    EpochPlan,
    TimeBuckets,
    Uneven,
    example_costs,
)


class LengthBucketedBatchSampler(Sampler[list[int]]):
    """Yields lists of dataset indices, one list per batch, for this rank.

    Args:
        lengths: length of every example in frames T, indexed like the dataset; the sort key.
        batch_size: fixed number of examples per batch; or else
        budget: the most a batch may cost in ``unit`` (``data.batching``), e.g. padded frames.
        unit: what ``budget`` counts; one of ``BATCH_UNITS``.
        max_samples: cap on examples per batch in budget mode (None: only the budget limits).
        durations_ms: audio duration of every example; needed by the duration units.
        feature_dim: feature bins F; needed by ``feature-values``.
        sort_buffer_size: examples sorted together; batches never span two buffers, so make it many
            batches long.
        sort_descending: sort each buffer longest first and keep that batch order (module docstring, 4).
        shuffle: shuffle examples and batches every epoch (off for validation: a fixed, sorted order).
        seed: with the epoch, the only source of randomness; every rank must pass the same seed.
        num_replicas, rank: the DDP world; default to the initialised process group, else (1, 0).
        uneven: how to give every rank the same number of batches, see the module docstring.
        groups: the shard (any int id) of every example; with ``group_window``, batches are planned a
            window of that many shards at a time (module docstring, 1). Ignored without ``shuffle`` (index
            order reads shards in order already); an ``EpochPlan`` that sorts the epoch ascending sorts
            each window of shards, the windows in index order.
        loader_workers: the DataLoader worker processes of each rank that read these batches (0: the
            rank's own process); with shard windows, each gets the batches of shards of its own (module
            docstring, 7). Changes the plan: a run resumes within an epoch only with the same count.
        time_buckets: pad each batch's T up to one of these lengths (``data.batching``); the collate pads
            to ``time_buckets.padded_length``; the sampler counts the padding and, in the
            ``padded-frames`` unit, budgets for it.
    """

    def __init__(
        self,
        lengths: Sequence[int] | np.ndarray,
        *,
        batch_size: int | None = None,
        budget: int | None = None,
        unit: BatchUnit = "padded-frames",
        max_samples: int | None = None,
        durations_ms: Sequence[int] | np.ndarray | None = None,
        feature_dim: int | None = None,
        sort_buffer_size: int = 4096,
        sort_descending: bool = False,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int | None = None,
        rank: int | None = None,
        uneven: Uneven = "drop",
        epoch_plan: Callable[[int], EpochPlan | None] | None = None,
        groups: Sequence[int] | np.ndarray | None = None,
        group_window: int | None = None,
        time_buckets: TimeBuckets | None = None,
        loader_workers: int = 0,
    ) -> None:
        if (batch_size is None) == (budget is None):
            raise ValueError(f"give exactly one of batch_size (fixed batches) or budget (in {unit})")
        for name, value in [("batch_size", batch_size), ("budget", budget), ("max_samples", max_samples)]:
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if sort_buffer_size < 1:
            raise ValueError(f"sort_buffer_size must be >= 1, got {sort_buffer_size}")
        if group_window is not None and group_window < 1:
            raise ValueError(f"group_window must be >= 1 or None, got {group_window}")
        if loader_workers < 0:
            raise ValueError(f"loader_workers must be >= 0, got {loader_workers}")
        if groups is not None and len(groups) != len(lengths):
            raise ValueError(f"{len(groups)} groups for {len(lengths)} examples")
        if uneven not in ("drop", "pad"):
            raise ValueError(f"uneven must be 'drop' or 'pad', got {uneven!r}")
        if num_replicas is None:
            num_replicas = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
        if rank is None:
            rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} is outside the world of {num_replicas} replicas")
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.batch_size = batch_size
        self.budget = budget
        self.unit = unit
        # Costs are computed (and the unit checked) even for fixed batches, so a bad unit fails early.
        self.costs = example_costs(unit, self.lengths, durations_ms, feature_dim)
        self.time_buckets = time_buckets
        if time_buckets is not None and unit == "padded-frames":
            # A batch's padded tensor holds B * its bucket's T frames: budget for that.
            self.costs = time_buckets.padded_lengths(self.costs)
        self.max_samples = max_samples
        self.sort_buffer_size = sort_buffer_size
        self.sort_descending = sort_descending
        self.shuffle = shuffle
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.uneven = uneven
        # Training control: the epoch -> EpochPlan of a schedule or curriculum (a pure function of the
        # epoch, so plans stay reproducible and resumable); None: every epoch uses the options above.
        self.epoch_plan = epoch_plan
        # Shard windows: the members of each group, in index order (None: one global shuffle).
        self.group_window = group_window if groups is not None else None
        self._group_members: list[np.ndarray] | None = None
        if self.group_window is not None:
            codes = np.asarray(groups, dtype=np.int64)
            by_group = np.argsort(codes, kind="stable")
            bounds = np.flatnonzero(np.diff(codes[by_group])) + 1
            self._group_members = np.split(by_group, bounds)
            self._group_frames = np.array([int(self.lengths[m].sum()) for m in self._group_members])
        self.loader_workers = loader_workers
        self.epoch = 0
        self._skip = 0  # batches of ``epoch`` already done before a resume
        self._yielded = 0  # batches of the current iteration handed out so far (skipped ones included)
        self._plan_cache: tuple[int, list[list[int]]] | None = None

    @property
    def oversized_examples(self) -> int:
        """Examples whose cost alone exceeds the budget; each forms a batch of one every epoch."""
        return 0 if self.budget is None else int((self.costs > self.budget).sum())

    # --- the plan ---------------------------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """Select the epoch to plan; a pending resume position survives only for its own epoch."""
        if epoch != self.epoch:
            self._skip = 0
        self.epoch = epoch

    def epoch_batches(self, epoch: int | None = None) -> list[list[int]]:
        """This rank's full batch list for ``epoch`` (default: the current one), resume ignored."""
        epoch = self.epoch if epoch is None else epoch
        if self._plan_cache is None or self._plan_cache[0] != epoch:
            self._plan_cache = (epoch, self._plan_all_ranks(epoch)[self.rank :: self.num_replicas])
        return self._plan_cache[1]

    def plan_stats(self, epoch: int | None = None) -> BatchPlanStats:
        """Padding and batch counts of ``epoch``'s plan over all ranks (default: the current epoch)."""
        epoch = self.epoch if epoch is None else epoch
        batches = self._plan_all_ranks(epoch)
        real = sum(int(self.lengths[b].sum()) for b in batches)
        longest = [int(self.lengths[b].max()) for b in batches]
        if self.time_buckets is not None:
            longest = [self.time_buckets.padded_length(t) for t in longest]
        padded = sum(len(b) * t for b, t in zip(batches, longest, strict=True))
        oversized = 0
        budget = self._plan_of(epoch).budget or self.budget
        if budget is not None:
            oversized = sum(1 for b in batches if len(b) == 1 and self.costs[b[0]] > budget)
        return BatchPlanStats(
            batches=len(batches),
            batches_per_rank=len(batches) // self.num_replicas,
            examples=sum(len(b) for b in batches),
            real_frames=real,
            padded_frames=padded,
            oversized_batches=oversized,
            distinct_lengths=len(set(longest)),
        )

    def _plan_all_ranks(self, epoch: int) -> list[list[int]]:
        rng = np.random.default_rng([self.seed, epoch])
        plan = self._plan_of(epoch)
        budget = self.budget if plan.budget is None else plan.budget
        max_samples = self.max_samples if plan.max_samples is None else plan.max_samples
        count = len(self.lengths)
        order = rng.permutation(count) if self.shuffle else np.arange(count)
        if plan.keep is not None:
            order = order[plan.keep[order]]
        if plan.ascending:  # one pass, shortest first: no buffers, no batch shuffle
            if self._group_members is not None:  # shortest first within each window of shards, in order
                batches = []
                for window in self._shard_windows(np.arange(len(self._group_members))):
                    kept = window if plan.keep is None else window[plan.keep[window]]
                    ordered = kept[np.argsort(self.lengths[kept], kind="stable")]
                    batches.extend(self._batch_sorted(ordered, budget, max_samples))
                return self._even_out(batches)
            ordered = order[np.argsort(self.lengths[order], kind="stable")]
            return self._even_out(self._batch_sorted(ordered, budget, max_samples))
        if self._group_members is not None and self.shuffle:
            by_reader = []  # module docstring, 7
            for reader_shards in self._deal(rng.permutation(len(self._group_members))):
                batches = []
                for window in self._shard_windows(reader_shards):
                    window_order = window[rng.permutation(len(window))]
                    if plan.keep is not None:
                        window_order = window_order[plan.keep[window_order]]
                    batches.extend(self._buffered_batches(window_order, budget, max_samples, rng))
                by_reader.append(batches)
            return self._even_out(_interleave(by_reader))
        return self._even_out(self._buffered_batches(order, budget, max_samples, rng))

    @property
    def readers(self) -> int:
        """The processes that read an epoch's batches, all ranks together (module docstring, 7): one per
        worker of every rank of a shuffled, windowed plan, fewer when there are too few shards to give each
        one; one (the plan of steps 1-4) for any other plan, for ranks without workers of their own, or
        with fewer shards than ranks."""
        if self._group_members is None or not self.shuffle:
            return 1
        shards, workers = len(self._group_members), self.loader_workers
        if workers <= 1 or shards < self.num_replicas:
            return 1
        # A multiple of the ranks, so that batch k * S + j still goes to rank j % R; per rank, a divisor of
        # the workers, so that each reader's batches go to the same few workers.
        most = shards // self.num_replicas
        return self.num_replicas * max(d for d in range(1, min(workers, most) + 1) if workers % d == 0)

    def _deal(self, shards: np.ndarray) -> list[np.ndarray]:
        """The epoch's shuffled ``shards`` dealt out to the readers (module docstring, 7): each in turn to
        the reader with the fewest frames so far, so their batches run out at about the same time."""
        frames = np.zeros(self.readers, dtype=np.int64)
        dealt: list[list[int]] = [[] for _ in range(self.readers)]
        for shard in shards.tolist():
            reader = int(np.argmin(frames))
            dealt[reader].append(shard)
            frames[reader] += self._group_frames[shard]
        return [np.asarray(reader_shards, dtype=np.int64) for reader_shards in dealt]

    def _shard_windows(self, shards: np.ndarray) -> Iterator[np.ndarray]:
        """The examples of ``group_window`` of ``shards`` at a time (module docstring, 1)."""
        assert self._group_members is not None and self.group_window is not None
        for start in range(0, len(shards), self.group_window):
            yield np.concatenate([self._group_members[g] for g in shards[start : start + self.group_window]])

    def _buffered_batches(
        self, order: np.ndarray, budget: int | None, max_samples: int | None, rng: np.random.Generator
    ) -> list[list[int]]:
        """Steps 2-4 of the module docstring over ``order``."""
        batches: list[list[int]] = []
        for start in range(0, len(order), self.sort_buffer_size):
            buffer = order[start : start + self.sort_buffer_size]
            keys = -self.lengths[buffer] if self.sort_descending else self.lengths[buffer]
            batches.extend(self._batch_sorted(buffer[np.argsort(keys, kind="stable")], budget, max_samples))
        if self.shuffle and not self.sort_descending:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return batches

    def _plan_of(self, epoch: int) -> EpochPlan:
        return (self.epoch_plan(epoch) if self.epoch_plan is not None else None) or EpochPlan()

    def _batch_sorted(
        self, indices: np.ndarray, budget: int | None, max_samples: int | None
    ) -> list[list[int]]:
        if self.batch_size is not None:
            return [
                indices[i : i + self.batch_size].tolist() for i in range(0, len(indices), self.batch_size)
            ]
        assert budget is not None
        padded = self.unit in PADDED_UNITS
        max_samples = max_samples or len(indices)
        batches: list[list[int]] = []
        current: list[int] = []
        largest = total = 0  # largest and summed cost of ``current``
        for index in indices.tolist():
            cost = int(self.costs[index])
            # The cost with the newcomer; max() because the sort key (frames) need not order the cost
            # (duration units), and so that either sort direction works.
            with_newcomer = (len(current) + 1) * max(largest, cost) if padded else total + cost
            fits = with_newcomer <= budget and len(current) < max_samples
            if current and not fits:
                batches.append(current)
                current, largest, total = [], 0, 0
            current.append(index)
            largest, total = max(largest, cost), total + cost
        if current:
            batches.append(current)
        return batches

    def _even_out(self, batches: list[list[int]]) -> list[list[int]]:
        remainder = len(batches) % self.num_replicas
        if remainder == 0 or not batches:
            return batches
        if self.uneven == "drop" and len(batches) >= self.num_replicas:
            return batches[: len(batches) - remainder]
        missing = self.num_replicas - remainder
        return batches + [batches[i % len(batches)] for i in range(missing)]

    # --- iteration ---------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[list[int]]:
        plan = self.epoch_batches()
        skip, self._skip = self._skip, 0
        self._yielded = skip
        for batch in plan[skip:]:
            self._yielded += 1
            yield batch

    def __len__(self) -> int:
        """Batches the next iteration yields: this rank's epoch plan minus batches done before a resume."""
        return len(self.epoch_batches()) - self._skip

    @property
    def batches_to_skip(self) -> int:
        """Batches of the current epoch that the next iteration skips (done before a resume)."""
        return self._skip

    # --- resume ------------------------------------------------------------------------------------
    def state_dict(self, batches_done: int | None = None) -> dict:
        """Position to resume from.

        A DataLoader pulls indices ahead of the training loop (prefetching, workers), so the sampler's
        own count of handed-out batches overstates progress; a training loop passes the number of
        batches it has actually stepped on as ``batches_done``.
        """
        return {
            "epoch": self.epoch,
            "batches_done": self._yielded if batches_done is None else batches_done,
            "seed": self.seed,
            "num_examples": len(self.lengths),
            "num_replicas": self.num_replicas,
            "batching": self._batching(),
            "readers": self.readers,
        }

    def _batching(self) -> list:
        # Everything besides seed/epoch/world that shapes the plan; a resume with other values would
        # skip the wrong batches.
        batching = [
            self.batch_size,
            self.unit,
            self.budget,
            self.max_samples,
            self.sort_buffer_size,
            self.sort_descending,
            self.shuffle,
            self.uneven,
        ]
        if self.group_window is not None:  # appended, so plans without windows match older checkpoints
            batching += ["shard_window", self.group_window]
        if self.time_buckets is not None:  # bucketed budgets cut other batches
            batching += ["time_buckets", self.time_buckets.to_list()]
        return batching

    def _legacy_batching(self) -> list | None:
        # Checkpoints written before budget units existed: [batch_size, max_frames, max_samples,
        # sort_buffer_size, shuffle, uneven], which is this sampler's plan when the unit is padded frames
        # and buffers sort ascending.
        if self.unit != "padded-frames" or self.sort_descending or self.group_window is not None:
            return None
        return [
            self.batch_size,
            self.budget,
            self.max_samples,
            self.sort_buffer_size,
            self.shuffle,
            self.uneven,
        ]

    def load_state_dict(self, state: dict) -> None:
        batching_matches = state["batching"] in (self._batching(), self._legacy_batching())
        for key, saved, mine, same in [
            ("seed", state["seed"], self.seed, None),
            ("num_examples", state["num_examples"], len(self.lengths), None),
            ("num_replicas", state["num_replicas"], self.num_replicas, None),
            ("batching", state["batching"], self._batching(), batching_matches),
        ]:
            if not (saved == mine if same is None else same):
                raise ValueError(
                    f"cannot resume the sampler: the checkpoint has {key}={saved} but this run has "
                    f"{key}={mine}; resume with the same data, seed, batching options and number of ranks"
                )
        # The readers shape the plan of a windowed epoch: resuming within one needs the same count
        # (a checkpoint without it was planned for one); an epoch not yet begun is planned anew.
        saved_readers, readers = state.get("readers", 1), self.readers
        if int(state["batches_done"]) > 0 and saved_readers != readers:
            raise ValueError(
                f"cannot resume the sampler mid-epoch: the checkpoint's epoch was planned for {saved_readers} "
                f"reader(s) (ranks x DataLoader workers, each reading shards of its own) but this run has "
                f"{readers}; resume with the --num-workers and ranks it ran with, or from a checkpoint at "
                "an epoch's end"
            )
        self.epoch = int(state["epoch"])
        self._skip = int(state["batches_done"])
        self._yielded = self._skip
        self._plan_cache = None


def _interleave(lists: list[list[list[int]]]) -> list[list[int]]:
    """The readers' batches in turn, one of each list per round; a list that has run out takes its turn
    from the end of the longest one, so every other list's batches keep their places in the rounds."""
    queues = [deque(batches) for batches in lists]
    interleaved: list[list[int]] = []
    left = sum(len(queue) for queue in queues)
    while left:
        for queue in queues:
            if not left:
                break
            interleaved.append(queue.popleft() if queue else max(queues, key=len).pop())
            left -= 1
    return interleaved


__all__ = [
    "BATCH_UNITS",
    "PADDED_UNITS",
    "BatchPlanStats",
    "BatchUnit",
    "EpochPlan",
    "LengthBucketedBatchSampler",
    "TimeBuckets",
    "example_costs",
]
