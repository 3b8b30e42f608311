"""Length-bucketed batch sampler that knows about DDP and resumes mid-epoch.

One epoch's plan, a pure function of (lengths, options, seed, epoch, num_replicas):

1. Shuffle all example indices (or keep index order when ``shuffle=False``).
2. Cut them into buffers of ``sort_buffer_size`` and sort each buffer by length. A bounded buffer keeps
   randomness across epochs (a global sort would produce the same batches every epoch) while still
   putting similar lengths together, which is what saves padding.
3. Walk each sorted buffer, closing a batch when the next example would break the budget:
   ``(batch size + 1) * longest <= max_frames`` and ``batch size + 1 <= max_samples``; or fixed
   ``batch_size`` batches. An example longer than ``max_frames`` on its own still forms a batch of one:
   dropping it would lose data silently, and the caller filters over-long audio explicitly upstream.
4. Shuffle the batches, so the model does not see lengths in buffer order.
5. Even out for DDP: every rank must run the same number of steps, or the ranks that run out stop
   calling all-reduce and the others hang. ``uneven="drop"`` drops the last ``len % num_replicas``
   batches (every example at most once per epoch; which ones are dropped changes each epoch);
   ``uneven="pad"`` repeats batches from the start instead (every example at least once; duplicates are
   the caller's to remove, e.g. by id in validation). With fewer batches than ranks, "drop" pads too.
6. Rank ``r`` takes batches ``r, r + R, r + 2R, ...`` (disjoint across ranks before padding).

Resuming: ``state_dict()`` holds the epoch and the number of batches this rank has finished; after
``load_state_dict`` the next iteration rebuilds the same plan and starts after those batches, so nothing
is replayed and no data is read to skip them (the sampler only yields indices).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Literal

import numpy as np
import torch.distributed as dist
from torch.utils.data import Sampler

Uneven = Literal["drop", "pad"]


class LengthBucketedBatchSampler(Sampler[list[int]]):
    """Yields lists of dataset indices, one list per batch, for this rank.

    Args:
        lengths: length of every example (frames T), indexed like the dataset.
        batch_size: fixed number of examples per batch; or else
        max_frames: padded-frames budget, ``len(batch) * max(lengths in batch) <= max_frames``.
        max_samples: cap on examples per batch in budget mode (None: only the budget limits).
        sort_buffer_size: examples sorted together; batches never span two buffers, so make it many
            batches long.
        shuffle: shuffle examples and batches every epoch (off for validation: a fixed, sorted order).
        seed: with the epoch, the only source of randomness; every rank must pass the same seed.
        num_replicas, rank: the DDP world; default to the initialised process group, else (1, 0).
        uneven: how to give every rank the same number of batches, see the module docstring.
    """

    def __init__(
        self,
        lengths: Sequence[int] | np.ndarray,
        *,
        batch_size: int | None = None,
        max_frames: int | None = None,
        max_samples: int | None = None,
        sort_buffer_size: int = 4096,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int | None = None,
        rank: int | None = None,
        uneven: Uneven = "drop",
    ) -> None:
        if (batch_size is None) == (max_frames is None):
            raise ValueError(
                "give exactly one of batch_size (fixed batches) or max_frames (padded-frames budget)"
            )
        for name, value in [
            ("batch_size", batch_size),
            ("max_frames", max_frames),
            ("max_samples", max_samples),
        ]:
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if sort_buffer_size < 1:
            raise ValueError(f"sort_buffer_size must be >= 1, got {sort_buffer_size}")
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
        self.max_frames = max_frames
        self.max_samples = max_samples
        self.sort_buffer_size = sort_buffer_size
        self.shuffle = shuffle
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.uneven = uneven
        self.epoch = 0
        self._skip = 0  # batches of ``epoch`` already done before a resume
        self._yielded = 0  # batches of the current iteration handed out so far (skipped ones included)
        self._plan_cache: tuple[int, list[list[int]]] | None = None

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
            self._plan_cache = (epoch, self._plan(epoch))
        return self._plan_cache[1]

    def _plan(self, epoch: int) -> list[list[int]]:
        rng = np.random.default_rng([self.seed, epoch])
        count = len(self.lengths)
        order = rng.permutation(count) if self.shuffle else np.arange(count)
        batches: list[list[int]] = []
        for start in range(0, count, self.sort_buffer_size):
            buffer = order[start : start + self.sort_buffer_size]
            buffer = buffer[np.argsort(self.lengths[buffer], kind="stable")]
            batches.extend(self._batch_sorted(buffer))
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        batches = self._even_out(batches)
        return batches[self.rank :: self.num_replicas]

    def _batch_sorted(self, indices: np.ndarray) -> list[list[int]]:
        if self.batch_size is not None:
            return [
                indices[i : i + self.batch_size].tolist() for i in range(0, len(indices), self.batch_size)
            ]
        assert self.max_frames is not None
        max_samples = self.max_samples or len(indices)
        batches, current, longest = [], [], 0
        for index in indices.tolist():
            length = int(self.lengths[index])
            # Ascending lengths: the newcomer is the new longest, so the padded size is (n + 1) * length.
            fits = (len(current) + 1) * max(longest, length) <= self.max_frames and len(current) < max_samples
            if current and not fits:
                batches.append(current)
                current, longest = [], 0
            current.append(index)
            longest = max(longest, length)
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
        }

    def _batching(self) -> list:
        # Everything besides seed/epoch/world that shapes the plan; a resume with other values would
        # skip the wrong batches.
        return [
            self.batch_size,
            self.max_frames,
            self.max_samples,
            self.sort_buffer_size,
            self.shuffle,
            self.uneven,
        ]

    def load_state_dict(self, state: dict) -> None:
        for key, mine in [
            ("seed", self.seed),
            ("num_examples", len(self.lengths)),
            ("num_replicas", self.num_replicas),
            ("batching", self._batching()),
        ]:
            if state[key] != mine:
                raise ValueError(
                    f"cannot resume the sampler: the checkpoint has {key}={state[key]} but this run has "
                    f"{key}={mine}; resume with the same data, seed, batching options and number of ranks"
                )
        self.epoch = int(state["epoch"])
        self._skip = int(state["batches_done"])
        self._yielded = self._skip


__all__ = ["LengthBucketedBatchSampler"]
