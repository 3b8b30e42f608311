"""``train.schedule`` and ``train.curriculum`` (training.epoch_schedule): ranges, refusals, each epoch's
effective values, and the per-epoch batch plans the sampler draws from them."""

from __future__ import annotations

import numpy as np
import pytest

from asr_pipeline.cli import build_parser
from asr_pipeline.cli.train import train_config_from_args
from asr_pipeline.data.sampler import LengthBucketedBatchSampler
from asr_pipeline.training.config import resolve_config
from asr_pipeline.training.epoch_schedule import (
    CurriculumConfig,
    EpochBatchPlans,
    EpochSettings,
    SpecAugmentByEpoch,
    curriculum_keep,
    epoch_range,
)

BASE = {"data": {"train_manifests": ["train.parquet"]}, "optim": {"epochs": 6}}


def config_with(schedule=(), **sections):
    return resolve_config(BASE, {"schedule": list(schedule), **sections})


@pytest.mark.parametrize(
    ("text", "expected"),
    [(3, (3, 3)), ("3", (3, 3)), ("1-5", (1, 5)), ("4-", (4, None)), (" 2 - 2 ", (2, 2))],
)
def test_epoch_ranges(text, expected):
    assert epoch_range(text) == expected


@pytest.mark.parametrize("text", ["0", "5-3", "-3", "a-b", "", "1-2-3", True])
def test_malformed_epoch_ranges_are_refused(text):
    with pytest.raises(ValueError, match="schedule epochs"):
        epoch_range(text)


def test_each_epoch_gets_its_ranges_values_and_later_entries_win():
    config = config_with(
        [
            {"epochs": "1-3", "values": {"optim.gradient_clip_norm": 1.0, "data.spec_time_masks": 0}},
            {"epochs": 2, "values": {"data.spec_time_masks": 1}},
            {"epochs": "5-", "values": {"optim.weight_decay": 0.0}},
        ]
    )
    settings = EpochSettings(config)

    values = [settings.values(epoch0) for epoch0 in range(6)]

    assert [v["optim.gradient_clip_norm"] for v in values] == [1.0, 1.0, 1.0, 5.0, 5.0, 5.0]
    assert [v["data.spec_time_masks"] for v in values] == [0, 1, 0, 2, 2, 2]  # 2: the config's own
    assert [v["optim.weight_decay"] for v in values] == [5e-4] * 4 + [0.0, 0.0]
    assert settings.at(10) is settings.at(5), "past the last epoch: the last epoch's settings"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"optim.nope": 1}, r"unknown config key\(s\) optim.nope \(epochs 2-\)"),
        ({"model.d_model": 64}, r"cannot change mid-run model.d_model"),
        ({"data.train_manifests": ["x"]}, r"cannot change mid-run data.train_manifests"),
        ({"run.seed": 3}, r"cannot change mid-run run.seed"),
        # Valid alone, refused as a whole: clipping by value needs the norm clip off in the same epochs.
        ({"optim.gradient_clip_value": 1.0}, r"epoch 2's settings are refused: .*gradient_clip_value"),
        ({"data.spec_time_masks": -1}, r"epoch 2's settings are refused: .*spec_time_masks"),
    ],
)
def test_a_schedule_is_refused_before_training_naming_the_problem(values, message):
    with pytest.raises(ValueError, match=message):
        config_with([{"epochs": "2-", "values": values}])


def test_a_value_clip_with_the_norm_clip_off_in_the_same_epochs_is_accepted():
    config = config_with(
        [{"epochs": "2-3", "values": {"optim.gradient_clip_value": 1.0, "optim.gradient_clip_norm": None}}]
    )
    assert EpochSettings(config).at(1).optim.gradient_clip_value == 1.0


def test_spec_augment_follows_the_schedule_by_epoch():
    config = config_with([{"epochs": 1, "values": {"data.spec_time_masks": 0, "data.spec_freq_masks": 0}}])
    by_epoch = SpecAugmentByEpoch(EpochSettings(config))
    assert (by_epoch(0).time_masks, by_epoch(0).freq_masks) == (0, 0)
    assert (by_epoch(1).time_masks, by_epoch(1).freq_masks) == (2, 2)


def test_curriculum_keeps_the_short_or_the_shortest_fraction():
    durations = np.array([900, 300, 1200, 600, 300])
    by_duration = curriculum_keep(durations, CurriculumConfig(epochs=1, max_duration_sec=0.6))
    assert by_duration.tolist() == [False, True, False, True, True]
    by_fraction = curriculum_keep(durations, CurriculumConfig(epochs=1, shortest_fraction=0.4))
    assert by_fraction.tolist() == [False, True, False, False, True]
    with pytest.raises(ValueError, match=r"no training utterance is at most 0\.1 s"):
        curriculum_keep(durations, CurriculumConfig(epochs=1, max_duration_sec=0.1))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"epochs": 2}, "exactly one of max_duration_sec or shortest_fraction, got neither"),
        ({"epochs": 2, "max_duration_sec": 1.0, "shortest_fraction": 0.5}, "exactly one"),
        ({"epochs": 1, "shortest_fraction": 1.5}, r"shortest_fraction must be in \(0, 1\]"),
        ({"epochs": -1}, "epochs must be >= 0"),
    ],
)
def test_a_malformed_curriculum_is_refused(options, message):
    with pytest.raises(ValueError, match=message):
        CurriculumConfig(**options)


def test_the_batch_plan_of_curriculum_epochs_holds_only_short_utterances_then_everything():
    rng = np.random.default_rng(0)
    frames = rng.integers(50, 500, size=200)
    config = config_with(curriculum={"epochs": 2, "max_duration_sec": 2.0, "sort_by_length": True})
    plans = EpochBatchPlans(EpochSettings(config), frames * 10)
    sampler = LengthBucketedBatchSampler(frames, budget=2000, shuffle=True, seed=1, epoch_plan=plans)

    for epoch in (0, 1):
        batches = sampler.epoch_batches(epoch)
        seen = [i for batch in batches for i in batch]
        assert sorted(seen) == sorted(np.flatnonzero(frames <= 200).tolist()), (
            f"epoch {epoch + 1}: the short ones"
        )
        assert [frames[i] for i in seen] == sorted(frames[i] for i in seen), "one ascending pass"
    later = [i for batch in sampler.epoch_batches(2) for i in batch]
    assert sorted(later) == list(range(200))
    assert [frames[i] for i in later] != sorted(frames[i] for i in later), "shuffled again after it"


def test_a_scheduled_budget_changes_that_epochs_batches_only():
    frames = np.full(64, 100)
    config = config_with(
        [{"epochs": 2, "values": {"data.adaptive_batch_budget": 1600}}],
        data={"adaptive_batch_budget": 800, "adaptive_batch_max_samples": 64},
    )
    plans = EpochBatchPlans(EpochSettings(config), frames * 10)
    sampler = LengthBucketedBatchSampler(frames, budget=800, max_samples=64, seed=1, epoch_plan=plans)

    sizes = [{len(b) for b in sampler.epoch_batches(epoch)} for epoch in range(3)]

    assert sizes == [{8}, {16}, {8}]
    assert sampler.plan_stats(1).oversized_batches == 0


def test_the_schedule_and_curriculum_flags_set_their_sections(corpus, tmp_path):
    args = build_parser().parse_args(
        ["train", "--train-manifest", corpus["train"][0], "--output-dir", str(tmp_path), "--epochs", "6",
         "--schedule", "1-5:optim.gradient_clip_norm=1.0; 3-:model.dropout=0.1;2:data.spec_time_masks=0",
         "--curriculum-epochs", "2", "--curriculum-max-duration-sec", "4.5", "--curriculum-sort-by-length"]
    )  # fmt: skip
    config, _ = train_config_from_args(args)

    assert [(entry.epochs, entry.values) for entry in config.schedule] == [
        ("1-5", {"optim.gradient_clip_norm": 1.0}),
        ("3-", {"model.dropout": 0.1}),
        ("2", {"data.spec_time_masks": 0}),
    ]
    assert config.curriculum == CurriculumConfig(epochs=2, max_duration_sec=4.5, sort_by_length=True)


def test_a_malformed_schedule_flag_is_a_usage_error(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--schedule", "1-5 optim.gradient_clip_norm"])
    assert "expected EPOCHS:KEY=VALUE entries" in capsys.readouterr().err
