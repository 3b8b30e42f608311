"""The names of the sampler's batch budget units, torch-free: the one list the sampler (``data.batching``,
which says what each unit counts) and the training config's ``adaptive_batch_unit`` both type with."""

from __future__ import annotations

from typing import Literal, get_args

BatchUnit = Literal[
    "samples",
    "frames",
    "padded-frames",
    "feature-values",
    "duration-ms",
    "padded-duration-ms",
    "padded-attention",
]
BATCH_UNITS: tuple[str, ...] = get_args(BatchUnit)
