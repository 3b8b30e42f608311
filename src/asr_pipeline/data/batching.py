"""What a batch costs and how its time axis is padded: the budget units of the length-bucketed sampler
(``data.sampler``), the time buckets for ``torch.compile``, an epoch's plan statistics and the per-epoch plan
a schedule hands the sampler.

Budget units (names and semantics of the reference trainer's ``--adaptive-batch-unit``)::

    samples             number of examples in the batch
    frames              sum of the examples' frames T            (real work, padding not counted)
    padded-frames       batch size * longest T                  (what the padded (B, T, F) tensor holds)
    feature-values      sum of T * F                             (F: the feature dimension)
    duration-ms         sum of the examples' audio durations
    padded-duration-ms  batch size * longest duration
    padded-attention    batch size * longest T squared          (what a full-length self-attention's (B, T, T)
                                                                 scores hold, per head: models without subsampling)

Padded units bound the memory of the padded batch tensor; summed units bound the real audio per batch
and let a batch of short examples pack more of them. ``padded-frames`` is the default.

Static shapes for ``torch.compile`` (issue 36): with ``time_buckets`` (``TimeBuckets``) every batch's
time axis is padded up to one of a few lengths (the collate pads to ``TimeBuckets.padded_length``), so a compiled
model sees a handful of T instead of one per batch, each compiled once. The padding that costs is
counted: ``plan_stats`` reports the padded frames with the buckets applied (``padding_fraction``) and how
many distinct padded lengths the epoch has (``distinct_lengths``); with the ``padded-frames`` unit the
budget counts the bucketed length too, so a batch never holds more padded frames than the budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from asr_pipeline.data.batch_units import BATCH_UNITS, BatchUnit

Uneven = Literal["drop", "pad"]
# Units whose batch cost is batch size * the largest example's amount (the padded tensor), not a sum.
PADDED_UNITS = ("padded-frames", "padded-duration-ms", "padded-attention")


def example_costs(
    unit: str,
    frames: np.ndarray,
    durations_ms: np.ndarray | None = None,
    feature_dim: int | None = None,
) -> np.ndarray:
    """Each example's amount in ``unit`` (int64, one per example); see the module docstring."""
    frames = np.asarray(frames, dtype=np.int64)
    if unit == "samples":
        return np.ones_like(frames)
    if unit in ("frames", "padded-frames"):
        return frames
    if unit == "padded-attention":
        return frames * frames
    if unit == "feature-values":
        if feature_dim is None or feature_dim < 1:
            raise ValueError(
                f"unit 'feature-values' needs the feature dimension, got feature_dim={feature_dim}"
            )
        return frames * feature_dim
    if unit in ("duration-ms", "padded-duration-ms"):
        if durations_ms is None:
            raise ValueError(f"unit {unit!r} needs the examples' durations (durations_ms)")
        durations = np.asarray(durations_ms, dtype=np.int64)
        if durations.shape != frames.shape:
            raise ValueError(f"{len(durations)} durations for {len(frames)} examples")
        return durations
    raise ValueError(f"unknown batch unit {unit!r}; expected one of {', '.join(BATCH_UNITS)}")


@dataclass(frozen=True)
class TimeBuckets:
    """The padded lengths T (frames) a batch's time axis is rounded up to, so that a compiled model sees a
    few shapes (each compiled once) rather than one per batch.

    ``lengths``: the bucket lengths, ascending. A batch longer than the last one is rounded up to a
    multiple of ``multiple`` (a new shape each time: make the last bucket the data's longest utterance).
    Multiples of 16 by default: Zipformer's stacks downsample T' = (T - 7) // 2 by up to 8 and upsample
    back, and the compiled graph holds guards on T' modulo 2, 4 and 8 (``bench_compile_training.py``).
    """

    lengths: tuple[int, ...]
    multiple: int = 16

    def __post_init__(self) -> None:
        object.__setattr__(self, "lengths", tuple(int(n) for n in self.lengths))
        if not self.lengths or any(n < 1 for n in self.lengths):
            raise ValueError(f"time bucket lengths must be frame counts >= 1, got {self.lengths}")
        if list(self.lengths) != sorted(set(self.lengths)):
            raise ValueError(f"time bucket lengths must be strictly ascending, got {self.lengths}")
        if self.multiple < 1:
            raise ValueError(f"multiple must be >= 1, got {self.multiple}")

    @classmethod
    def geometric(cls, longest: int, count: int = 8, ratio: float = 1.25, multiple: int = 16) -> TimeBuckets:
        """``count`` lengths ending at ``longest`` (rounded up to ``multiple``), each ``ratio`` times the
        previous one, rounded up to ``multiple``. A batch whose longest utterance is T then pads at most
        to ratio * T (+ multiple): with 1.25, under 20 % of a bucket's frames are padding it adds."""
        if count < 1 or ratio <= 1.0 or longest < 1:
            raise ValueError(f"need count >= 1, ratio > 1 and longest >= 1; got {count}, {ratio}, {longest}")
        top = -(-longest // multiple) * multiple
        lengths = {top}
        for step in range(1, count):
            lengths.add(max(multiple, -(-int(top / ratio**step) // multiple) * multiple))
        return cls(tuple(sorted(lengths)), multiple)

    @classmethod
    def from_spec(cls, spec: int | Sequence[int], longest: int) -> TimeBuckets:
        """``train.data.pad_to_buckets``: a count (``geometric`` lengths up to ``longest``, the data's
        longest example) or the lengths themselves."""
        if isinstance(spec, int):
            return cls.geometric(longest, count=spec)
        return cls(tuple(spec))

    def padded_length(self, frames: int) -> int:
        """The bucket a batch whose longest utterance has ``frames`` frames is padded to."""
        index = int(np.searchsorted(np.asarray(self.lengths), frames, side="left"))
        if index < len(self.lengths):
            return self.lengths[index]
        return -(-frames // self.multiple) * self.multiple

    def padded_lengths(self, frames: np.ndarray) -> np.ndarray:
        """``padded_length`` of every entry of ``frames``."""
        frames = np.asarray(frames, dtype=np.int64)
        lengths = np.asarray(self.lengths, dtype=np.int64)
        index = np.searchsorted(lengths, frames, side="left")
        beyond = -(-frames // self.multiple) * self.multiple
        return np.where(index < len(lengths), lengths[np.minimum(index, len(lengths) - 1)], beyond)

    def to_list(self) -> list:
        return [list(self.lengths), self.multiple]


@dataclass(frozen=True)
class BatchPlanStats:
    """One epoch's plan over all ranks (after evening out), in frames T.

    ``padding_efficiency`` = real frames / padded frames (1.0: no padding); ``padding_fraction`` its
    complement, the share of computed frames that are padding. With time buckets the padded frames are the
    bucketed ones. ``distinct_lengths``: how many different padded T the plan's batches have (what a
    compiled model compiles for). ``oversized_batches``: batches of one example whose cost alone exceeds
    the budget (0 for fixed batch sizes).
    """

    batches: int
    batches_per_rank: int
    examples: int  # example slots, repeats from "pad" included
    real_frames: int
    padded_frames: int
    oversized_batches: int
    distinct_lengths: int = 0

    @property
    def padding_efficiency(self) -> float:
        return self.real_frames / self.padded_frames if self.padded_frames else 1.0

    @property
    def padding_fraction(self) -> float:
        return 1.0 - self.padding_efficiency

    @property
    def mean_batch_size(self) -> float:
        return self.examples / self.batches if self.batches else 0.0

    def to_dict(self) -> dict[str, float | int]:
        return {
            "batches": self.batches,
            "batches_per_rank": self.batches_per_rank,
            "examples": self.examples,
            "real_frames": self.real_frames,
            "padded_frames": self.padded_frames,
            "padding_efficiency": self.padding_efficiency,
            "padding_fraction": self.padding_fraction,
            "distinct_lengths": self.distinct_lengths,
            "mean_batch_size": self.mean_batch_size,
            "oversized_batches": self.oversized_batches,
        }


@dataclass(frozen=True)
class EpochPlan:
    """What one epoch's plan changes from the sampler's own options (training control, see
    ``training.epoch_schedule``); None keeps the sampler's value.

    ``keep``: a boolean mask over the examples; only those are batched this epoch (a curriculum's short
    utterances). ``ascending``: one pass over the kept examples sorted by length, shortest batch first, in
    place of the shuffled, buffer-sorted plan.
    """

    budget: int | None = None
    max_samples: int | None = None
    keep: np.ndarray | None = None
    ascending: bool = False


__all__ = [
    "BATCH_UNITS",
    "PADDED_UNITS",
    "BatchPlanStats",
    "BatchUnit",
    "EpochPlan",
    "TimeBuckets",
    "Uneven",
    "example_costs",
]
