"""Tiny factories for data tests: shards of random features with chosen lengths."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from asr_pipeline.io.shards import records_to_table, write_shard

NUM_BINS = 4  # F; small so tests read fast, the shard code never assumes 80


def write_random_shard(
    path: Path, frames: Sequence[int], *, prefix: str = "utt", seed: int = 0, num_bins: int = NUM_BINS
) -> Path:
    """A shard whose example ``i`` has ``frames[i]`` frames, ``i % 5 + 1`` tokens and 10 ms per frame."""
    rng = np.random.default_rng(seed)
    records = [
        {
            "id": f"{prefix}-{i:03d}",
            "features": rng.standard_normal((length, num_bins)).astype(np.float32),
            "tokens": list(range(1, i % 5 + 2)),
            "duration_ms": 10 * length,
            "text": f"text {prefix} {i}",
        }
        for i, length in enumerate(frames)
    ]
    write_shard(records_to_table(records), path)
    return path


@pytest.fixture
def two_shards(tmp_path: Path) -> list[Path]:
    """5 + 3 examples of 7..40 frames."""
    return [
        write_random_shard(tmp_path / "shard-00000.parquet", [10, 20, 30, 40, 7], prefix="a", seed=1),
        write_random_shard(tmp_path / "shard-00001.parquet", [15, 25, 35], prefix="b", seed=2),
    ]
