"""How a long recording is cut into windows before a model sees it (``decoding.transcribe``): ``fixed`` cuts
every ``window_sec``; ``silence`` cuts at the quietest 20 ms of the last ``search_sec`` before each limit, so a
cut falls between words where it can. Torch-free: ``asr-pipeline transcribe --help`` reads these fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from asr_pipeline.options import options_from_dict, setting

SILENCE_FRAME_SEC = 0.02  # the energy frame the silence split compares


@dataclass(frozen=True)
class WindowOptions:
    """How a long recording is cut before the model sees it (module docstring)."""

    window_sec: float = setting(
        20.0,
        help="longest piece of audio the model sees at once; longer files are cut",
        flag="--window-sec",
        unit="s",
    )
    split: Literal["fixed", "silence"] = setting(
        "silence",
        help="where long files are cut: at the quietest 20 ms of the 3 s before each limit, or every --window-sec",
        flag="--split",
    )
    search_sec: float = setting(
        3.0,
        help="silence: how far before each limit the quietest point is looked for (at most half a window)",
    )

    def __post_init__(self) -> None:
        if self.window_sec <= 0:
            raise ValueError(f"window_sec must be > 0, got {self.window_sec}")
        if self.split not in ("fixed", "silence"):
            raise ValueError(f"split must be fixed or silence, got {self.split!r}")
        if self.search_sec < 0:
            raise ValueError(f"search_sec must be >= 0, got {self.search_sec}")

    @classmethod
    def from_dict(cls, values: dict | None) -> WindowOptions:
        return options_from_dict(cls, values, "transcribe windows")


def split_windows(waveform: np.ndarray, sample_rate: int, options: WindowOptions) -> list[tuple[int, int]]:
    """``[start, stop)`` sample ranges covering ``waveform`` (N,) in order, each at most ``window_sec`` long."""
    total, limit = len(waveform), max(1, round(options.window_sec * sample_rate))
    frame = max(1, round(SILENCE_FRAME_SEC * sample_rate))
    search = min(round(options.search_sec * sample_rate), limit // 2) if options.split == "silence" else 0
    windows, start = [], 0
    while start < total:
        stop = min(start + limit, total)
        if stop < total and search >= frame:
            # the quietest frame of the last `search` samples before the limit; cut at its middle
            region = waveform[stop - search : stop]
            frames = len(region) // frame
            energy = (region[: frames * frame].reshape(frames, frame).astype(np.float64) ** 2).sum(axis=1)
            stop = stop - search + int(np.argmin(energy)) * frame + frame // 2
        windows.append((start, stop))
        start = stop
    return windows
