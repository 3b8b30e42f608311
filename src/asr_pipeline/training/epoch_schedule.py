"""Training settings that change with the epoch: ``train.schedule`` and ``train.curriculum``.

``schedule`` is a list of entries, each a range of epochs (counting from 1, as the printed "epoch 3/10")
and the config values in effect there, written as dotted keys::

    schedule:
      - {epochs: "1-5", values: {optim.gradient_clip_norm: 1.0}}   # clip harder for the first five epochs
      - {epochs: "1-2", values: {model.dropout: 0.0}}              # no dropout at first, the model's after
      - {epochs: "2", values: {data.spec_time_masks: 1}}           # SpecAugment ramping up: 0, 1, then 2
      - {epochs: 1, values: {data.spec_time_masks: 0}}
      - {epochs: "4-", values: {data.adaptive_batch_budget: 40000}}  # bigger batches from epoch 4 on

A range is ``N``, ``"A-B"`` or ``"A-"`` (from A to the end); outside every range a key has its config value,
and where ranges overlap the later entry wins. Only keys whose change mid-run is applied are accepted
(``SCHEDULABLE_KEYS``, each with where it takes effect); unknown keys and keys that cannot change mid-run
(model shape, data sources, the seed, ...) are refused before training starts, naming them, and every
epoch's resulting config is checked as a whole then (e.g. a clip value without ``gradient_clip_norm: null``).

``curriculum`` leaves long utterances out of the first epochs: for epochs 1..``epochs`` only utterances up to
``max_duration_sec`` (or the ``shortest_fraction`` of the training set by duration) are batched, in one
ascending pass when ``sort_by_length`` is set (short batches first, no shuffle); later epochs use everything.
The batch plan stays a pure function of (data, seed, epoch), so a resumed run continues it exactly.

Each epoch's values of the scheduled keys are logged as a "schedule" event when it starts.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from asr_pipeline.options import deep_merge, expand_dotted, from_dict, parse_value, setting, to_dict

# Key -> where its per-epoch value takes effect.
SCHEDULABLE_KEYS: dict[str, str] = {
    "optim.gradient_clip_norm": "the optimizer step (training.optimization)",
    "optim.gradient_clip_value": "the optimizer step (training.optimization)",
    "optim.weight_decay": "AdamW's decayed parameter group",
    "model.dropout": "every dropout layer of the model (nn.Dropout p)",
    "data.spec_time_masks": "SpecAugment of the epoch's training examples",
    "data.spec_time_mask_max_frames": "SpecAugment of the epoch's training examples",
    "data.spec_freq_masks": "SpecAugment of the epoch's training examples",
    "data.spec_freq_mask_max_bins": "SpecAugment of the epoch's training examples",
    "data.adaptive_batch_budget": "the epoch's batch plan (data.sampler)",
    "data.adaptive_batch_max_samples": "the epoch's batch plan (data.sampler)",
    "regularization.layer_drop": "the encoder blocks' skip probabilities (training.regularization)",
    "regularization.weight_noise_std": "the weight noise of each training forward (training.regularization)",
}
SPEC_AUGMENT_KEYS = tuple(key for key in SCHEDULABLE_KEYS if key.startswith("data.spec_"))
BATCH_PLAN_KEYS = ("data.adaptive_batch_budget", "data.adaptive_batch_max_samples")


@dataclass(frozen=True, kw_only=True)
class ScheduleEntry:
    """Config values (dotted keys) in effect for a range of epochs counting from 1: ``N``, ``"A-B"``,
    ``"A-"``."""

    epochs: str | int
    values: dict[str, Any]

    def __post_init__(self) -> None:
        epoch_range(self.epochs)  # raises on a malformed range
        if not isinstance(self.values, Mapping) or not self.values:
            raise ValueError(
                f"schedule entry for epochs {self.epochs!r}: values must map dotted config keys to "
                f"values, e.g. {{optim.gradient_clip_norm: 1.0}}, got {self.values!r}"
            )

    def covers(self, epoch: int) -> bool:
        """Whether ``epoch`` (counting from 1) lies in the range."""
        first, last = epoch_range(self.epochs)
        return first <= epoch and (last is None or epoch <= last)


@dataclass(frozen=True, kw_only=True)
class CurriculumConfig:
    """Short utterances first (module docstring); ``epochs: 0`` is off."""

    epochs: int = setting(
        0,
        help="the first N epochs batch only short utterances (--curriculum-max-duration-sec or --curriculum-shortest-fraction)",
        flag="--curriculum-epochs",
    )
    max_duration_sec: float | None = setting(
        None, help="curriculum: short means at most this long", flag="--curriculum-max-duration-sec"
    )
    shortest_fraction: float | None = setting(
        None,
        help="curriculum: short means among this fraction of the shortest training utterances",
        flag="--curriculum-shortest-fraction",
    )
    sort_by_length: bool = setting(
        False,
        help="curriculum epochs run one ascending pass (shortest batches first) instead of a shuffle",
        flag="--curriculum-sort-by-length",
    )

    def __post_init__(self) -> None:
        if self.epochs < 0:
            raise ValueError(f"epochs must be >= 0, got {self.epochs}")
        given = [
            name for name in ("max_duration_sec", "shortest_fraction") if getattr(self, name) is not None
        ]
        if self.epochs and len(given) != 1:
            raise ValueError(
                f"a curriculum of {self.epochs} epochs needs exactly one of max_duration_sec or "
                f"shortest_fraction, got {', '.join(given) or 'neither'}"
            )
        if self.max_duration_sec is not None and not self.max_duration_sec > 0:
            raise ValueError(f"max_duration_sec must be > 0, got {self.max_duration_sec}")
        if self.shortest_fraction is not None and not 0.0 < self.shortest_fraction <= 1.0:
            raise ValueError(f"shortest_fraction must be in (0, 1], got {self.shortest_fraction}")

    def active(self, epoch0: int) -> bool:
        """Whether 0-based ``epoch0`` is a curriculum epoch."""
        return epoch0 < self.epochs


class ScheduledConfig(Protocol):
    """What the schedule reads of a training config (training.config.TrainConfig, which builds
    ``EpochSettings`` of itself: this module does not import it)."""

    schedule: list[ScheduleEntry]
    curriculum: CurriculumConfig
    optim: Any


def parse_schedule(text: str) -> list[dict[str, Any]]:
    """``"1-5:optim.gradient_clip_norm=1.0;3-:model.dropout=0.1"`` -> schedule entries (values read as YAML):
    the command line's form of ``schedule`` (``--schedule``)."""

    entries = []
    for part in (part.strip() for part in text.split(";") if part.strip()):
        epochs, _, assignment = part.partition(":")
        key, equals, value = assignment.partition("=")
        if not (epochs.strip() and key.strip() and equals):
            raise ValueError(
                f"expected EPOCHS:KEY=VALUE entries such as 1-5:optim.gradient_clip_norm=1.0, got {part!r}"
            )
        entries.append({"epochs": epochs.strip(), "values": {key.strip(): parse_value(value)}})
    return entries


def epoch_range(epochs: str | int) -> tuple[int, int | None]:
    """``3`` -> (3, 3); ``"1-5"`` -> (1, 5); ``"4-"`` -> (4, None). Epochs count from 1."""
    text = str(epochs).strip()
    first_text, dash, last_text = text.partition("-")
    try:
        first = int(first_text)
        last = None if dash and not last_text.strip() else int(last_text if dash else first_text)
    except ValueError:
        raise ValueError(
            f"schedule epochs {epochs!r} is not a range: write N, 'A-B' or 'A-' (epochs count from 1)"
        ) from None
    if isinstance(epochs, bool) or first < 1 or (last is not None and last < first):
        raise ValueError(
            f"schedule epochs {epochs!r}: ranges start at epoch 1 or later and end after they start"
        )
    return first, last


def check_schedule(entries: list[ScheduleEntry], known: set[str]) -> None:
    """Refuse unknown keys and keys that cannot change mid-run, naming every one."""
    unknown, fixed = [], []
    for entry in entries:
        for key in entry.values:
            if key in SCHEDULABLE_KEYS:
                continue
            (fixed if key in known else unknown).append(f"{key} (epochs {entry.epochs})")
    problems = []
    if unknown:
        problems.append(f"unknown config key(s) {', '.join(unknown)}")
    if fixed:
        problems.append(f"key(s) that cannot change mid-run {', '.join(fixed)}")
    if problems:
        raise ValueError(
            f"schedule: {'; '.join(problems)}. A schedule may set: {', '.join(SCHEDULABLE_KEYS)}"
        )


def scheduled_keys(config: ScheduledConfig) -> list[str]:
    """The keys any schedule entry sets, in first-mention order."""
    return list(dict.fromkeys(key for entry in config.schedule for key in entry.values))


def overrides_for_epoch(config: ScheduledConfig, epoch0: int) -> dict[str, Any]:
    """The dotted-key values the schedule sets in 0-based ``epoch0`` (later entries win)."""
    values: dict[str, Any] = {}
    for entry in config.schedule:
        if entry.covers(epoch0 + 1):
            values.update(entry.values)
    return values


class EpochSettings:
    """Each epoch's effective config of one run: ``config`` with the schedule applied (checked as a whole
    for every epoch up to ``optim.epochs`` when built, so a bad combination fails before training)."""

    def __init__(self, config: ScheduledConfig) -> None:
        self.config = config
        self.keys = scheduled_keys(config)
        base = {**to_dict(config), "schedule": []}
        self._configs: dict[tuple, ScheduledConfig] = {}
        self._by_epoch: list[ScheduledConfig] = []
        for epoch0 in range(config.optim.epochs):
            overrides = overrides_for_epoch(config, epoch0)
            signature = tuple(sorted((key, repr(value)) for key, value in overrides.items()))
            if signature not in self._configs:
                try:
                    # The config's own class rebuilds it (options.from_dict): no import of training.config.
                    merged = deep_merge(base, expand_dotted(overrides))
                    self._configs[signature] = from_dict(type(config), merged) if overrides else config
                except ValueError as error:
                    raise ValueError(
                        f"schedule: epoch {epoch0 + 1}'s settings are refused: {error}"
                    ) from None
            self._by_epoch.append(self._configs[signature])

    def at(self, epoch0: int) -> ScheduledConfig:
        """The effective config of 0-based ``epoch0`` (past ``optim.epochs``, the last epoch's)."""
        return self._by_epoch[min(epoch0, len(self._by_epoch) - 1)]

    def values(self, epoch0: int) -> dict[str, Any]:
        """The scheduled keys' values in ``epoch0`` (what the "schedule" event logs)."""
        effective = dataclasses.asdict(self.at(epoch0))
        result = {}
        for key in self.keys:
            section, name = key.split(".")
            result[key] = effective[section][name]
        return result

    def schedules(self, *keys: str) -> bool:
        """Whether the schedule sets any of ``keys``."""
        return any(key in self.keys for key in keys)


class SpecAugmentByEpoch:
    """The SpecAugment of each 0-based epoch under a schedule; picklable, so persistent DataLoader workers
    hold it and take the epoch from each index (``EpochTaggedBatchSampler``)."""

    def __init__(self, settings: EpochSettings) -> None:
        from asr_pipeline.features.augment import SpecAugment

        self.by_epoch = [
            SpecAugment(
                data.spec_time_masks,
                data.spec_time_mask_max_frames,
                data.spec_freq_masks,
                data.spec_freq_mask_max_bins,
            )
            for data in (settings.at(epoch0).data for epoch0 in range(settings.config.optim.epochs))
        ]

    def __call__(self, epoch0: int) -> Any:
        return self.by_epoch[min(epoch0, len(self.by_epoch) - 1)]


class EpochBatchPlans:
    """The sampler's per-epoch plan (``data.batching.EpochPlan``) under a schedule of batch keys and/or a
    curriculum: a pure function of the epoch."""

    def __init__(self, settings: EpochSettings, durations_ms: Any) -> None:
        config = settings.config
        self.settings, self.curriculum = settings, config.curriculum
        self.keep = curriculum_keep(durations_ms, config.curriculum) if config.curriculum.epochs else None
        self.schedules_batches = settings.schedules(*BATCH_PLAN_KEYS)

    @property
    def active(self) -> bool:
        return self.keep is not None or self.schedules_batches

    def __call__(self, epoch0: int) -> Any:
        from asr_pipeline.data.batching import EpochPlan

        data = self.settings.at(epoch0).data
        batches = (
            {"budget": data.adaptive_batch_budget, "max_samples": data.adaptive_batch_max_samples}
            if self.schedules_batches
            else {}
        )
        if self.curriculum.active(epoch0):
            return EpochPlan(keep=self.keep, ascending=self.curriculum.sort_by_length, **batches)
        return EpochPlan(**batches)


def steps_reference_epoch(curriculum: CurriculumConfig, epochs: int) -> int:
    """The 0-based epoch whose batch plan sets a step schedule's epoch length: the first after the
    curriculum's short epochs (which batch fewer utterances), or the last of a run that never leaves them."""
    return min(curriculum.epochs, epochs - 1)


def curriculum_keep(durations_ms: Any, curriculum: CurriculumConfig) -> Any:
    """The boolean mask (numpy) of the training examples a curriculum epoch batches."""
    import numpy as np

    durations = np.asarray(durations_ms, dtype=np.int64)
    if curriculum.max_duration_sec is not None:
        keep = durations <= round(curriculum.max_duration_sec * 1000)
    else:
        assert curriculum.shortest_fraction is not None
        count = max(1, math.ceil(curriculum.shortest_fraction * len(durations)))
        order = np.argsort(durations, kind="stable")
        keep = np.zeros(len(durations), dtype=bool)
        keep[order[:count]] = True
    if not keep.any():
        raise ValueError(
            f"curriculum: no training utterance is at most {curriculum.max_duration_sec} s long (the "
            f"shortest is {durations.min() / 1000:.2f} s); raise curriculum.max_duration_sec"
        )
    return keep


__all__ = [
    "BATCH_PLAN_KEYS",
    "SCHEDULABLE_KEYS",
    "SPEC_AUGMENT_KEYS",
    "CurriculumConfig",
    "EpochBatchPlans",
    "EpochSettings",
    "ScheduleEntry",
    "SpecAugmentByEpoch",
    "check_schedule",
    "curriculum_keep",
    "epoch_range",
    "overrides_for_epoch",
    "scheduled_keys",
    "steps_reference_epoch",
]
