"""Reverberation with a synthetic room impulse response: a direct path, early reflections, a decaying tail.

The tail is Polack's (1988) statistical model of late reverberation, also the diffuse tail of Lehmann &
Johansson, 2010, "Diffuse reverberation model for efficient image-source simulation of room impulse
responses": Gaussian noise under an exponential envelope whose energy falls 60 dB in RT60, i.e.
amplitude ``10^(-3 t / RT60)``. A few sparse impulses over the first 50 ms stand in for the early
reflections an image-method simulation (Allen & Berkley, 1979; Habets' "RIR generator") would place.
Kaldi's and ESPnet's reverberation recipes convolve with image-method RIRs (Ko et al., 2017, "A study on
data augmentation of reverberant speech for robust speech recognition"); this is the cheap stand-in that
needs no room geometry and no RIR download.

Left out on purpose: frequency-dependent decay (real walls absorb highs faster) and a propagation delay.
The direct path sits at t = 0 so reverberant speech stays aligned with the clean utterance.
"""

from __future__ import annotations

import math

import numpy as np

EARLY_REFLECTIONS_SEC = 0.05  # where the sparse early reflections fall (after the direct path)
NUM_EARLY_REFLECTIONS = 8
# An early reflection stands this many times above the tail's standard deviation at its time (~18 dB),
# which is what makes it a distinct echo rather than one more tail sample.
EARLY_REFLECTION_GAIN = 8.0
# The RIR lasts this many RT60s: the tail ends 72 dB down, so cutting it off moves the energy decay
# curve's -60 dB point by < 1% (a cut at exactly RT60 would move it 5% early).
TAIL_RT60S = 1.2


def synthetic_rir(
    sample_rate: int, rt60_sec: float, rng: np.random.Generator, direct_to_reverb_db: float = 0.0
) -> np.ndarray:
    """A (ceil(1.2 · rt60_sec · sample_rate),) float32 impulse response at unit energy (sum of squares 1).

    ``direct_to_reverb_db`` is 10·log10 of the direct path's energy (sample 0) over everything after it;
    0 dB puts the talker at the room's critical distance from the microphone; lower is farther away.
    """
    if not (math.isfinite(rt60_sec) and rt60_sec > 0):
        raise ValueError(f"rt60_sec must be a positive number of seconds, got {rt60_sec!r}")
    if not math.isfinite(direct_to_reverb_db):
        raise ValueError(f"direct_to_reverb_db must be a finite number, got {direct_to_reverb_db!r}")
    length = max(2, math.ceil(TAIL_RT60S * rt60_sec * sample_rate))
    envelope = 10.0 ** (-3.0 * np.arange(length) / (rt60_sec * sample_rate))  # amplitude, -60 dB at RT60
    reverb = rng.standard_normal(length) * envelope
    last_early = min(length - 1, max(1, round(EARLY_REFLECTIONS_SEC * sample_rate)))
    arrivals = rng.integers(1, last_early + 1, size=NUM_EARLY_REFLECTIONS)
    signs = rng.choice([-1.0, 1.0], size=NUM_EARLY_REFLECTIONS)
    reverb[arrivals] += (
        signs * EARLY_REFLECTION_GAIN * envelope[arrivals] * rng.uniform(0.5, 1.0, size=NUM_EARLY_REFLECTIONS)
    )
    reverb[0] = 0.0  # sample 0 is the direct path alone
    reverb_energy = float(np.sum(reverb**2))
    rir = reverb * math.sqrt(10.0 ** (-direct_to_reverb_db / 10.0) / reverb_energy)  # direct path at 1
    rir[0] = 1.0
    return (rir / np.sqrt(np.sum(rir**2))).astype(np.float32)


def reverberate(waveform: np.ndarray, rir: np.ndarray) -> np.ndarray:
    """``waveform`` (N,) convolved with ``rir`` (L,), cut to (N,) float32 and brought back to the input's RMS.

    The level is restored because a unit-energy RIR changes it by the signal's spectrum, not by anything
    a listener would call louder. Where the restored level would put a sample past 1.0 (or past the
    input's own peak, if that is higher), the whole output is scaled down to that peak, so nothing clips
    later.
    """
    if waveform.ndim != 1 or rir.ndim != 1 or rir.size == 0:
        raise ValueError(
            f"reverberate expects a (N,) waveform and a non-empty (L,) RIR, got shapes {waveform.shape} "
            f"and {rir.shape}"
        )
    input_rms = math.sqrt(float(np.mean(np.square(waveform, dtype=np.float64)))) if waveform.size else 0.0
    if input_rms == 0.0:
        return waveform
    # FFT convolution at a power-of-two size: O((N + L) log(N + L)) where direct convolution of a 30 s
    # utterance with a 1 s RIR would be 7.7e9 multiply-adds; a power of two keeps the FFT off slow
    # prime-factor paths.
    size = 1 << (len(waveform) + len(rir) - 2).bit_length()
    spectrum = np.fft.rfft(waveform, size) * np.fft.rfft(rir, size)
    wet = np.fft.irfft(spectrum, size)[: len(waveform)]  # the tail past the input's end is dropped
    wet_rms = math.sqrt(float(np.mean(wet**2)))
    if wet_rms == 0.0:
        return wet.astype(np.float32)
    wet *= input_rms / wet_rms
    limit = max(1.0, float(np.max(np.abs(waveform))))
    peak = float(np.max(np.abs(wet)))
    if peak > limit:
        wet *= limit / peak
    return wet.astype(np.float32)
