"""The web demo's settings (``asr-pipeline serve`` flags): one field each, its default and help here.

Kept apart from ``serve.app`` so that the CLI builds its parser without importing Gradio or torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Literal

from asr_pipeline.run_layout import DEFAULT_WEIGHTS


@dataclass(frozen=True)
class ServeOptions:
    max_upload_mb: float = field(default=20.0, metadata={"help": "larger uploads are refused (MB on disk)"})
    max_duration_sec: float = field(default=120.0, metadata={"help": "longer recordings are refused"})
    # 256 MB of float32: 120 s of 48 kHz audio in 11 channels, or 11 min of 48 kHz stereo. The issue's
    # 683 KB upload (8 channels at 655,350 Hz for 119 s) would be 2.5 GB: refused from its header.
    max_decoded_mb: float = field(
        default=256.0,
        metadata={
            "help": "audio whose decoded samples (channels x rate x duration, float32) would take more memory "
            "is refused from its header, before decoding"
        },
    )
    # An upload is deleted as soon as it is transcribed or refused; this bounds the ones never transcribed.
    upload_max_age_sec: int = field(
        default=600,
        metadata={"help": "uploads not transcribed are deleted after this long (checked every minute)"},
    )
    beam_width: int = 16
    checkpoint: Literal["latest", "best"] = "latest"
    weights: str = DEFAULT_WEIGHTS  # which weights of the checkpoint (run_layout.WEIGHTS)

    def __post_init__(self) -> None:
        for limit in LIMITS:
            if not getattr(self, limit.name) > 0:
                raise ValueError(
                    f"--{limit.name.replace('_', '-')} must be > 0, got {getattr(self, limit.name)}"
                )


# The limits: the fields with a help text, each an `asr-pipeline serve` flag of its default's type, above 0.
LIMITS = tuple(option for option in fields(ServeOptions) if "help" in option.metadata)
