"""torchaudio's windowed-sinc resampler, applied as a few small matrix products instead of one wide conv1d.

``torchaudio.functional.resample`` reduces the rates by their gcd (22.05 -> 16 kHz: 441 -> 320) and
convolves with a (320, 1, 459) kernel at stride 441: output phase j of each block of 320 outputs is a
459-tap filter. But each phase's filter is only ~17 taps wide (6 zero crossings either side); torchaudio
clamps the other ~440 taps to the window's edge, where they are ~3e-24. Here those are dropped, the 320
phases are cut into groups of ``PHASES_PER_GROUP`` neighbours whose taps span ~43 inputs, and each group
is one (blocks, 43) @ (43, 20) product on a strided view of the padded waveform: 10x fewer multiply-adds.
Rate pairs with fewer phases than a group (48 -> 16 kHz reduces to 3 -> 1) put several blocks in a row.

Agreement with ``torchaudio.functional.resample`` on float32 input (issue 11). The kernel is the one it
builds for float32 input (in float32), so only the float32 summation order differs: max |ours - torchaudio|
<= 2.2e-7 x peak measured on seeded noise at amplitudes 1 and 1e-4 (44.1, 22.05, 48, 32, 11.025, 8 -> 16
kHz, 16 -> 8 and 16 -> 14.545 kHz), and 0 (the same sums in the same order) for most inputs. That is the
floor: torchaudio's own float32 sums are up to 3e-7 x peak from exact sums of its kernel, and summing in
float64 here came no closer. Fbank of 44.1 and 22.05 kHz tones equals torchaudio's here (the same sums),
near-empty bins above the 7.92 kHz cutoff included (0.43 and 1.55 apart before). Where sums differ, a band
with no signal holds only rounding noise: above 4 kHz of 8 kHz audio upsampled, fbank differs by up to
0.013 there, and w2v-bert's per-bin normalization makes that ~1: no float32 resampler avoids this.

Before issue 11 the kernel was ``transforms.Resample``'s, built in float64 from float32 phase offsets
j / new: 5.4e-6 x peak from ``functional.resample`` at 44.1 kHz, 1.4e-5 at 22.05, 1.2e-4 at 16 -> 14.545.
Neither is the exact windowed sinc: torchaudio float32 is 9.3e-6 (44.1k), 2.3e-5 (22.05k), 2.3e-4
(14.545k) x peak from torchaudio float64, mostly its float32 offsets j / new scaled by the cutoff; a
float64-built kernel summed in float32 is within 4e-7. We follow torchaudio, the reference that features
are compared against. Dropping the edge taps moves an output by < 2e-20 x the input's peak.
tests/io/test_resample.py checks the bounds.

Measured on 300 espeak-ng clips (1645 s at 22.05 kHz), one thread: torchaudio 0.674 s on first sight of
each input length (oneDNN builds a conv primitive per shape: every utterance of a real corpus), 0.204 s on
a second pass over the same lengths, 0.300 s with oneDNN off; this resampler 0.080 s either way.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

# 10, 20, 40 phases per group measured 0.142, 0.080, 0.080 s (above); 320: 0.247 s. One thread, 300
# noise clips of 1-10 s, one block per row vs 20 blocks: 48 -> 16 kHz 0.35 vs 0.13 s CPU, 8 -> 16 kHz
# 0.21 vs 0.035 s, 16 -> 8 kHz 0.13 vs 0.047 s (torchaudio: 0.37, 0.15, 0.17 s).
PHASES_PER_GROUP = 20
# Taps outside the window are clamped to its edge, cos(pi / 2)^2 sinc(6 pi) <= 5e-24 in float32; taps
# inside are >= 1e-16 (measured over the tested rate pairs), so this bound tells them apart.
EDGE_TAP_BOUND = 1e-20


class PolyphaseResampler:
    """``resampler(waveform)``: (N,) float32 at ``orig_rate`` -> (ceil(N * new / orig),) at ``new_rate``.

    Equal rates return ``waveform`` itself, as ``torchaudio.functional.resample`` does.
    """

    def __init__(self, orig_rate: int, new_rate: int) -> None:
        self.groups: list[tuple[int, Tensor]] = []  # (first nonzero tap, (span, phases) weights)
        if orig_rate == new_rate:
            return
        # Private, but it is the kernel functional.resample uses, so agreement is by construction; the tests
        # compare with functional.resample itself, so a change in torchaudio shows there.
        from torchaudio.functional.functional import _get_sinc_resample_kernel

        gcd = math.gcd(orig_rate, new_rate)
        orig, new = orig_rate // gcd, new_rate // gcd
        kernel, self.width = _get_sinc_resample_kernel(orig_rate, new_rate, gcd, dtype=torch.float32)
        kernel = kernel[:, 0, :]  # (new, taps): phase j's filter over one block's window
        kernel = kernel.masked_fill(kernel.abs() < EDGE_TAP_BOUND, 0.0)
        # A row of blocks_per_row blocks: block b's phases are phase j's filter shifted b * orig inputs.
        blocks_per_row = -(-PHASES_PER_GROUP // new)
        self.orig, self.new = blocks_per_row * orig, blocks_per_row * new  # input, output samples per row
        self.taps = kernel.shape[1] + self.orig - orig  # one row's window
        rows = kernel.new_zeros(self.new, self.taps)  # (phases, taps)
        for block in range(blocks_per_row):
            rows[block * new : (block + 1) * new, block * orig : block * orig + kernel.shape[1]] = kernel
        for start in range(0, self.new, PHASES_PER_GROUP):
            group = rows[start : start + PHASES_PER_GROUP]  # (G, taps)
            nonzero = group.ne(0).any(dim=0).nonzero()
            low, high = int(nonzero.min()), int(nonzero.max()) + 1
            self.groups.append((low, group[:, low:high].T.contiguous()))  # (span, G)

    def __call__(self, waveform: Tensor) -> Tensor:
        if not self.groups:  # equal rates, as torchaudio
            return waveform
        length = waveform.shape[0]
        # torchaudio's padding, the right end to a whole row: its extra outputs are cut below.
        padded = torch.nn.functional.pad(waveform, (self.width, self.width + self.orig))
        num_rows = (padded.shape[0] - self.taps) // self.orig + 1
        outputs = []
        for low, weights in self.groups:
            inputs = padded[low:].as_strided((num_rows, weights.shape[0]), (self.orig, 1))  # (R, span)
            outputs.append(inputs @ weights)  # (R, G)
        resampled = torch.cat(outputs, dim=1).reshape(-1)  # (R * new,): row r's outputs are r*new + j
        # ceil(length * new / orig) in integers; torchaudio computes it through a float32 tensor, which
        # can round one sample up (139877.0001 -> 139878): we keep the exact count.
        return resampled[: -(-length * self.new // self.orig)]
