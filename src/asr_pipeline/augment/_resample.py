"""One cached resampler per rate pair for the augmentations (speed, telephone), numpy in, numpy out."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from asr_pipeline.io.resample import PolyphaseResampler


def resample(waveform: np.ndarray, orig_rate: int, new_rate: int) -> np.ndarray:
    """(N,) float32 at ``orig_rate`` -> (ceil(N * new_rate / orig_rate),) float32 at ``new_rate``."""
    if orig_rate == new_rate:
        return waveform
    import torch

    samples = torch.from_numpy(np.ascontiguousarray(waveform, dtype=np.float32))
    return _resampler(orig_rate, new_rate)(samples).numpy()


@functools.lru_cache(maxsize=16)
def _resampler(orig_rate: int, new_rate: int) -> PolyphaseResampler:
    # Built once per rate pair: the kernel costs far more than applying it (io/resample.py). Imported here:
    # the augmentations' options are read (params.yaml, the command line) without torch.
    from asr_pipeline.io.resample import PolyphaseResampler

    return PolyphaseResampler(orig_rate, new_rate)
