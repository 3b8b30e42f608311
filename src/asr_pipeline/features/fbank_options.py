"""The fbank options (params.yaml ``features.fbank``), torch-free: the frontend registry
(``features.frontends``), the extraction options and the command line read them without importing the
computation (``features.fbank``)."""

from __future__ import annotations

from dataclasses import dataclass

from asr_pipeline.options import options_from_dict


@dataclass(frozen=True)
class FbankOptions:
    num_mel_bins: int = 80
    sample_rate: int = 16000
    frame_length_ms: float = 25.0
    frame_shift_ms: float = 10.0
    dither: float = 0.0  # only 0 is supported: it keeps shards byte-identical across runs

    def __post_init__(self) -> None:
        if self.dither != 0.0:
            raise ValueError(
                f"params.yaml features.fbank: dither must be 0.0 (got {self.dither}); random dither would "
                "make every extraction differ, so DVC could never reuse a shard. Add noise with "
                "waveform augmentation in training instead"
            )

    @classmethod
    def from_dict(cls, values: dict | None) -> FbankOptions:
        return options_from_dict(cls, values, "params.yaml features.fbank")

    @property
    def frame_length(self) -> int:
        """Samples per frame (400 at 16 kHz, 25 ms)."""
        return int(self.sample_rate * self.frame_length_ms / 1000)

    @property
    def frame_shift(self) -> int:
        """Samples between frame starts (160 at 16 kHz, 10 ms)."""
        return int(self.sample_rate * self.frame_shift_ms / 1000)

    @property
    def fft_size(self) -> int:
        """The frame zero-padded to the next power of two (512 for 400 samples), as Kaldi does."""
        return 1 << (self.frame_length - 1).bit_length()
