"""A Condition: one named way to degrade audio (clean, speed, noise, reverb, telephone, codec), typed.

The same config drives the evaluation condition splits (every test utterance through one condition) and
training augmentation (``augment.mix``: each utterance through a condition drawn by weight). In YAML a
condition is a flat mapping: ``kind`` plus that kind's options, every other kind's options refused::

    {kind: clean}
    {kind: speed, factor: 1.1}
    {kind: noise, noise: pink, snr_db: [5, 20]}             # white | pink | brown | babble | folder
    {kind: noise, noise: babble, snr_db: 10, babble_speakers: 4}
    {kind: noise, noise: folder, noise_dir: data/musan/noise, snr_db: [0, 15]}
    {kind: reverb, rt60_sec: [0.3, 0.9], direct_to_reverb_db: 0}
    {kind: telephone, mu_law: true}
    {kind: codec, codec: opus, bitrate_kbps: 16}             # mp3 | opus

A range ``[low, high]`` is drawn uniformly per utterance from the utterance's generator; a single number
is a fixed value.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from asr_pipeline.augment._validate import number, one_of, value_range
from asr_pipeline.augment.codec import CODECS, codec_round_trip
from asr_pipeline.augment.noise import NOISE_COLOURS, NoiseFolder, add_noise, babble, coloured_noise
from asr_pipeline.augment.reverb import reverberate, synthetic_rir
from asr_pipeline.augment.speed import MAX_SPEED_FACTOR, speed_perturb
from asr_pipeline.augment.telephone import telephone_band
from asr_pipeline.options import options_from_dict

NOISE_SOURCES = (*NOISE_COLOURS, "babble", "folder")
# Each kind's own options; ``kind`` itself is allowed everywhere.
KIND_OPTIONS: dict[str, tuple[str, ...]] = {
    "clean": (),
    "speed": ("factor",),
    "noise": ("noise", "snr_db", "noise_dir", "babble_speakers"),
    "reverb": ("rt60_sec", "direct_to_reverb_db"),
    "telephone": ("mu_law",),
    "codec": ("codec", "bitrate_kbps"),
}
KINDS = tuple(KIND_OPTIONS)

# Other utterances for babble: a sequence to draw ``babble_speakers`` of them from, or a callable
# ``(count, rng) -> waveforms`` (e.g. one that reads utterances of other speakers on demand).
BabblePool = Sequence[np.ndarray] | Callable[[int, np.random.Generator], Sequence[np.ndarray]]


@dataclass(frozen=True)
class Condition:
    """One degradation; only the fields of ``kind`` matter (``KIND_OPTIONS``). Ranges are (low, high)."""

    kind: str = "clean"
    factor: float = 1.0  # speed: > 1 faster and shorter
    noise: str = "white"  # noise: one of NOISE_SOURCES
    snr_db: tuple[float, float] = (10.0, 20.0)
    noise_dir: str | None = None  # noise: folder; relative paths from where the pipeline runs
    babble_speakers: int = 4  # noise: babble
    rt60_sec: tuple[float, float] = (0.3, 0.8)
    direct_to_reverb_db: float = 0.0
    mu_law: bool = True  # telephone: G.711 8-bit companding
    codec: str = "mp3"
    bitrate_kbps: float = 32.0

    def __post_init__(self) -> None:
        one_of("kind", self.kind, KINDS)
        one_of("noise", self.noise, NOISE_SOURCES)
        one_of("codec", self.codec, CODECS)
        number("factor", self.factor, low=0.0, high=MAX_SPEED_FACTOR)
        object.__setattr__(self, "snr_db", value_range("snr_db", self.snr_db))
        object.__setattr__(self, "rt60_sec", value_range("rt60_sec", self.rt60_sec, low=0.0))
        number("direct_to_reverb_db", self.direct_to_reverb_db)
        number("bitrate_kbps", self.bitrate_kbps, low=0.0)
        if isinstance(self.babble_speakers, bool) or not isinstance(self.babble_speakers, int):
            raise ValueError(f"babble_speakers must be a whole number, got {self.babble_speakers!r}")
        if self.babble_speakers < 1:
            raise ValueError(f"babble_speakers must be at least 1, got {self.babble_speakers}")
        if not isinstance(self.mu_law, bool):
            raise ValueError(f"mu_law must be true or false, got {self.mu_law!r}")
        if self.noise_dir is not None and not isinstance(self.noise_dir, str):
            raise ValueError(f"noise_dir must be a folder path, got {self.noise_dir!r}")
        if (self.noise == "folder") != (self.noise_dir is not None):
            raise ValueError("noise_dir is needed with noise: folder, and only then")

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], where: str) -> Condition:
        """A Condition from a params mapping; errors name ``where`` (its params path) and the key."""
        if not isinstance(raw, Mapping) or "kind" not in raw:
            raise ValueError(
                f"{where}: a condition is a mapping with a `kind` (one of {list(KINDS)}), got {raw!r}"
            )
        kind = raw["kind"]
        if not isinstance(kind, str) or kind not in KIND_OPTIONS:
            raise ValueError(f"{where}: unknown kind {kind!r}; the kinds are {list(KINDS)}")
        allowed = ["kind", *KIND_OPTIONS[kind]]
        for key in raw:
            if key not in allowed:
                raise ValueError(
                    f"{where}: unknown option {key!r} for a {kind} condition; "
                    f"the allowed options are {allowed}"
                )
        if "babble_speakers" in raw and raw.get("noise") != "babble":
            raise ValueError(
                f"{where}: babble_speakers applies to noise: babble only, got noise: {raw.get('noise')!r}"
            )
        try:
            return options_from_dict(cls, raw, where)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{where}: {error}") from None

    def to_dict(self) -> dict[str, Any]:
        """The YAML-shaped mapping ``from_dict`` reads back: ``kind`` and the options it uses (a cache key).

        ``noise_dir`` and ``babble_speakers`` appear only with the noise source that uses them.
        """
        unused = {"folder": ("babble_speakers",), "babble": ("noise_dir",)}.get(
            self.noise, ("noise_dir", "babble_speakers")
        )
        return {
            key: (list(value) if isinstance(value, tuple) else value)
            for key, value in dataclasses.asdict(self).items()
            if (key == "kind" or key in KIND_OPTIONS[self.kind]) and key not in unused
        }


def apply_condition(
    condition: Condition,
    waveform: np.ndarray,
    sample_rate: int,
    rng: np.random.Generator,
    babble_pool: BabblePool | None = None,
) -> np.ndarray:
    """``waveform`` (N,) through ``condition``: float32, (N,) for every kind but speed (≈ N / factor).

    Every random choice comes from ``rng``. ``babble_pool`` supplies the other utterances (at
    ``sample_rate``) for babble noise and is needed only then. Where nothing changes (clean, speed 1.0,
    silent input) the input array itself comes back: copy before writing into the result.
    """
    kind = condition.kind
    if kind == "clean":
        return waveform
    if kind == "speed":
        return speed_perturb(waveform, sample_rate, condition.factor)
    if kind == "noise":
        snr_db = rng.uniform(*condition.snr_db)
        return add_noise(
            waveform, _draw_noise(condition, len(waveform), sample_rate, rng, babble_pool), snr_db
        )
    if kind == "reverb":
        rir = synthetic_rir(sample_rate, rng.uniform(*condition.rt60_sec), rng, condition.direct_to_reverb_db)
        return reverberate(waveform, rir)
    if kind == "telephone":
        return telephone_band(waveform, sample_rate, mu_law=condition.mu_law)
    return codec_round_trip(waveform, sample_rate, condition.codec, condition.bitrate_kbps)


def _draw_noise(
    condition: Condition,
    num_samples: int,
    sample_rate: int,
    rng: np.random.Generator,
    babble_pool: BabblePool | None,
) -> np.ndarray:
    if condition.noise in NOISE_COLOURS:
        return coloured_noise(num_samples, condition.noise, rng)
    if condition.noise == "folder":
        return _noise_folder(condition.noise_dir).draw(num_samples, sample_rate, rng)
    count = condition.babble_speakers
    if babble_pool is None:
        raise ValueError(
            "babble noise needs other utterances: pass babble_pool (a sequence of waveforms, or a callable "
            "(count, rng) -> waveforms) to apply_condition"
        )
    if callable(babble_pool):
        voices = babble_pool(count, rng)
    else:
        if len(babble_pool) < count:
            raise ValueError(
                f"babble_speakers is {count} but the babble pool holds {len(babble_pool)} waveform(s); "
                "give a larger pool or lower babble_speakers"
            )
        voices = [babble_pool[int(index)] for index in rng.choice(len(babble_pool), count, replace=False)]
    return babble(voices, num_samples, rng)


@functools.lru_cache(maxsize=8)
def _noise_folder(path: str) -> NoiseFolder:
    # One listing and one decoded-file cache per folder and process, shared by every utterance.
    return NoiseFolder(path)
