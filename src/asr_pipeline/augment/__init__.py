"""Waveform augmentation: speed, additive noise, reverberation, telephone band, lossy codecs.

Every transform takes a mono float32 (N,) waveform and its sample rate and draws its randomness from a
``numpy.random.Generator`` given by the caller. ``Condition`` names one of them with its parameters,
``apply_condition`` applies it, ``AugmentationMix`` picks one per utterance by weight, reproducibly.
"""

from asr_pipeline.augment.codec import CODECS, CodecError, codec_round_trip
from asr_pipeline.augment.conditions import (
    KIND_OPTIONS,
    KINDS,
    NOISE_SOURCES,
    BabblePool,
    Condition,
    apply_condition,
)
from asr_pipeline.augment.mix import AugmentationMix, MixEntry
from asr_pipeline.augment.noise import NOISE_COLOURS, NoiseFolder, add_noise, babble, coloured_noise
from asr_pipeline.augment.reverb import reverberate, synthetic_rir
from asr_pipeline.augment.speed import speed_perturb
from asr_pipeline.augment.telephone import telephone_band

__all__ = [
    "CODECS",
    "KINDS",
    "KIND_OPTIONS",
    "NOISE_COLOURS",
    "NOISE_SOURCES",
    "AugmentationMix",
    "BabblePool",
    "CodecError",
    "Condition",
    "MixEntry",
    "NoiseFolder",
    "add_noise",
    "apply_condition",
    "babble",
    "codec_round_trip",
    "coloured_noise",
    "reverberate",
    "speed_perturb",
    "synthetic_rir",
    "telephone_band",
]
