"""AugmentationMix: which condition each training utterance goes through, by weight, reproducibly.

The choice and the transform's randomness depend on (seed, utterance id) alone, through a stable hash
(BLAKE2b; Python's ``hash`` of a str changes from process to process): a cached variant can be rebuilt
bit for bit in any worker, in any order, after any restart, without storing a random state. In YAML::

    augmentation:
      seed: 13
      conditions:
        - {name: clean, weight: 0.4, kind: clean}
        - {name: speed_0.9, weight: 0.1, kind: speed, factor: 0.9}
        - {name: speed_1.1, weight: 0.1, kind: speed, factor: 1.1}
        - {name: noisy, weight: 0.2, kind: noise, noise: pink, snr_db: [5, 20]}
        - {name: reverberant, weight: 0.1, kind: reverb, rt60_sec: [0.3, 0.9]}
        - {name: phone, weight: 0.1, kind: telephone}

Each entry is a condition (``augment.conditions``) plus its ``name`` and ``weight``; weights are relative
(they need not sum to 1).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from asr_pipeline.augment._validate import number
from asr_pipeline.augment.conditions import BabblePool, Condition, apply_condition

_CHOICE_STREAM, _TRANSFORM_STREAM = 0, 1  # two independent generators per utterance


@dataclass(frozen=True)
class MixEntry:
    name: str
    weight: float
    condition: Condition


@dataclass(frozen=True)
class AugmentationMix:
    """Weighted conditions and the seed that, with an utterance id, fixes every random choice."""

    entries: tuple[MixEntry, ...]
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.entries:
            raise ValueError("an augmentation mix needs at least one condition")
        names = [entry.name for entry in self.entries]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"condition names must be unique, repeated: {repeated}")
        for entry in self.entries:
            number(f"condition {entry.name!r}: weight", entry.weight, low=0.0)

    def choose(self, utterance_id: str) -> tuple[str, Condition]:
        """The (name, condition) ``utterance_id`` goes through: drawn by weight, fixed by (seed, id)."""
        weights = np.array([entry.weight for entry in self.entries], dtype=np.float64)
        draw = self._rng(utterance_id, _CHOICE_STREAM).random() * weights.sum()
        index = min(int(np.searchsorted(np.cumsum(weights), draw, side="right")), len(self.entries) - 1)
        return self.entries[index].name, self.entries[index].condition

    def rng_for(self, utterance_id: str) -> np.random.Generator:
        """A fresh generator for the transform's own randomness (SNR, noise, RIR), fixed by (seed, id)."""
        return self._rng(utterance_id, _TRANSFORM_STREAM)

    def augment(
        self,
        utterance_id: str,
        waveform: np.ndarray,
        sample_rate: int,
        babble_pool: BabblePool | None = None,
    ) -> tuple[str, np.ndarray]:
        """``choose`` then ``apply_condition`` with ``rng_for``: (condition name, (N',) float32)."""
        name, condition = self.choose(utterance_id)
        return name, apply_condition(
            condition, waveform, sample_rate, self.rng_for(utterance_id), babble_pool
        )

    def _rng(self, utterance_id: str, stream: int) -> np.random.Generator:
        digest = hashlib.blake2b(f"{self.seed}/{utterance_id}".encode(), digest_size=16).digest()
        return np.random.default_rng([int.from_bytes(digest, "little"), stream])

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], where: str) -> AugmentationMix:
        """The mix from its params mapping (module docstring); errors name ``where`` and the entry."""
        if not isinstance(raw, Mapping):
            raise ValueError(f"{where}: expected a mapping with `seed` and `conditions`, got {raw!r}")
        unknown = sorted(set(raw) - {"seed", "conditions"})
        if unknown:
            raise ValueError(
                f"{where}: unknown option(s) {unknown}; the known options are ['seed', 'conditions']"
            )
        seed = raw.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"{where}.seed: must be a whole number, got {seed!r}")
        conditions = raw.get("conditions")
        if not isinstance(conditions, Sequence) or isinstance(conditions, str) or not conditions:
            raise ValueError(
                f"{where}.conditions: must be a non-empty list of {{name, weight, kind, ...}} entries, "
                f"got {conditions!r}"
            )
        entries = tuple(_entry(item, f"{where}.conditions[{index}]") for index, item in enumerate(conditions))
        try:
            return cls(entries, seed)
        except ValueError as error:
            raise ValueError(f"{where}.conditions: {error}") from None


def _entry(raw: object, where: str) -> MixEntry:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a mapping {{name, weight, kind, ...}}, got {raw!r}")
    name, weight = raw.get("name"), raw.get("weight")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: needs a `name` (a non-empty string), got {name!r}")
    where = f"{where} ({name})"
    try:
        weight = number("weight", weight, low=0.0)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    condition = {key: value for key, value in raw.items() if key not in ("name", "weight")}
    return MixEntry(name, weight, Condition.from_dict(condition, where))
