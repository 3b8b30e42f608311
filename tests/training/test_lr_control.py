"""Newbob learning-rate control: RETURNN as the oracle, then each rule worked by hand.

RETURNN (``returnn.learning_rate_control``, test-only, from the ``dev`` extra) is driven the way its
engine drives it: ``get_learning_rate_for_epoch(e)`` when epoch ``e`` starts, ``set_epoch_error(e, ...)``
after its validation. Its thresholds have the opposite sign of ours (``-0.01`` is our ``0.01``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from typing import Any

import pytest

from asr_pipeline.training.lr_control import Decision, NewbobConfig, NewbobControl

LR = 1e-3


@pytest.fixture(scope="module")
def returnn_lrc():
    return pytest.importorskip("returnn.learning_rate_control")


def score_sequence(seed: int, epochs: int = 40, start: float = 3.0) -> list[float | None]:
    """Validation losses that improve, creep, stall, sit near the 1 % threshold, get worse; a few epochs
    (about 1 in 12) are not validated (None)."""
    rng = random.Random(seed)
    scores: list[float | None] = []
    score = start
    for _ in range(epochs):
        step = rng.choice(["improve", "creep", "stall", "near_threshold", "near_threshold", "worse"])
        if step == "improve":
            score *= rng.uniform(0.85, 0.97)
        elif step == "creep":
            score *= rng.uniform(0.995, 0.9999)
        elif step == "near_threshold":
            score *= 1 - rng.uniform(0.008, 0.012)
        elif step == "worse":
            score *= rng.uniform(1.0, 1.05)
        scores.append(None if rng.random() < 1 / 12 else score)
    return scores


def oracle_scores(config: NewbobConfig, seed: int) -> list[float | None]:
    return score_sequence(seed, start=30.0 if config.score_key == "val_cer" else 3.0)


def returnn_control(lrc, config: NewbobConfig, initial: float = LR):
    """The RETURNN control that ``config`` describes."""
    common: dict[str, Any] = {
        "default_learning_rate": initial,
        "min_learning_rate": config.min_learning_rate,
        "default_learning_rates": config.predefined_rates or None,
        "error_measure_key": config.score_key,
        "relative_error_div_by_old": config.relative_error_divides_by == "old",
        "learning_rate_decay": config.decay,
        "filename": None,
    }
    if config.kind == "relative":
        return lrc.NewbobRelative(relative_error_threshold=-config.threshold, **common)
    if config.kind == "absolute":
        return lrc.NewbobAbs(error_threshold=-config.threshold, **common)
    return lrc.NewbobMultiEpoch(
        num_epochs=config.multi_num_epochs,
        update_interval=config.update_interval,
        relative_error_threshold=-config.threshold,
        relative_error_grow_threshold=-config.threshold,
        **common,
    )


def run_returnn(lrc, config: NewbobConfig, scores: list[float | None]) -> list[float]:
    control = returnn_control(lrc, config)
    rates = []
    for epoch, score in enumerate(scores, start=1):
        rates.append(control.get_learning_rate_for_epoch(epoch))
        if score is not None:
            control.set_epoch_error(epoch, {config.score_key: score})
    return [*rates, control.get_learning_rate_for_epoch(len(scores) + 1)]


def run_ours(
    config: NewbobConfig,
    scores: list[float | None],
    control: NewbobControl | None = None,
    first_epoch: int = 1,
) -> tuple[list[float], list[Decision]]:
    control = control or NewbobControl(config, LR)
    rates, decisions = [], []
    for epoch, score in enumerate(scores, start=first_epoch):
        rates.append(control.learning_rate_for_epoch(epoch))
        if score is not None:
            decisions.append(control.record(epoch, {config.score_key: score, "utterances": 5}))
            # The decision announces the next epoch's rate: the one that epoch then gets.
            assert decisions[-1].new_learning_rate == control.learning_rate_for_epoch(epoch + 1)
    return [*rates, control.learning_rate_for_epoch(first_epoch + len(scores))], decisions


def rates_of(config: NewbobConfig, scores: list[float | None]) -> list[float]:
    return run_ours(config, scores)[0]


# --- RETURNN as the oracle ------------------------------------------------------------------------------

ORACLE_CONFIGS = {
    "relative": NewbobConfig(kind="relative"),
    "relative-divides-by-old": NewbobConfig(kind="relative", relative_error_divides_by="old"),
    "relative-decays-only-when-worse": NewbobConfig(kind="relative", threshold=-0.002, decay=0.7),
    "relative-floor": NewbobConfig(kind="relative", threshold=0.02, min_learning_rate=2e-5),
    "absolute": NewbobConfig(kind="absolute", threshold=0.02),
    "absolute-cer-points": NewbobConfig(kind="absolute", score_key="val_cer", threshold=0.5, decay=0.8),
    "multi-every-epoch": NewbobConfig(kind="multi_epoch", multi_num_epochs=3, multi_update_interval=1),
    "multi-default-interval": NewbobConfig(kind="multi_epoch", multi_num_epochs=3),
    "multi-5-divides-by-old": NewbobConfig(kind="multi_epoch", relative_error_divides_by="old"),
    "warmup-list-and-resets": NewbobConfig(
        learning_rates=[2.5e-4, 5e-4, 7.5e-4, 1e-3], resets={15: 1e-3, 28: 4e-4}, min_learning_rate=1e-5
    ),
    "multi-warmup-list-and-resets": NewbobConfig(
        kind="multi_epoch", multi_num_epochs=2, learning_rates=[5e-4, 1e-3], resets={21: 8e-4}
    ),
}


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("name", list(ORACLE_CONFIGS))
def test_rates_match_returnn_epoch_by_epoch(returnn_lrc, name, seed):
    config = ORACLE_CONFIGS[name]
    scores = oracle_scores(config, seed)

    expected = run_returnn(returnn_lrc, config, scores)
    actual, _ = run_ours(config, scores)

    assert actual == expected  # exactly: both multiply the same floats in the same order
    assert len(actual) == len(scores) + 1


@pytest.mark.parametrize("name", list(ORACLE_CONFIGS))
def test_the_oracle_sequences_both_decay_and_keep_the_rate(name):
    # Otherwise the oracle comparison could pass with a control that never (or always) decays.
    config = ORACLE_CONFIGS[name]
    reasons = {d.reason for seed in range(5) for d in run_ours(config, oracle_scores(config, seed))[1]}
    assert {"decayed", "kept"} <= reasons


def test_the_oracle_tells_the_two_relative_error_definitions_apart(returnn_lrc):
    by_new, by_old = ORACLE_CONFIGS["relative"], ORACLE_CONFIGS["relative-divides-by-old"]
    differ = [
        seed
        for seed in range(5)
        if run_returnn(returnn_lrc, by_new, score_sequence(seed)) != rates_of(by_old, score_sequence(seed))
    ]
    assert differ, "no sequence separates (new - old) / |new| from (new - old) / |old|"


# --- the rules by hand ----------------------------------------------------------------------------------


def test_the_rate_decays_exactly_after_the_epochs_whose_score_stalled():
    config = NewbobConfig(kind="relative", threshold=0.01, decay=0.5)
    #        epoch:  1    2    3    4     5     6    7
    scores = [10.0, 8.0, 8.0, 6.0, 5.95, 4.0, 4.4]
    # Epoch e+1's rate answers e's score against e-1's: 2 improved, 3 stalled, 4 improved, 5 improved by
    # 0.05 / 5.95 = 0.84 % < 1 %, 6 improved, 7 got worse.
    assert rates_of(config, scores) == [LR, LR, LR, LR / 2, LR / 2, LR / 4, LR / 4, LR / 8]


@pytest.mark.parametrize(
    ("kind", "scores", "threshold"),
    [("relative", [5.0, 4.0], 0.25), ("absolute", [2.0, 1.5], 0.5)],  # (4 - 5) / 4 and 1.5 - 2.0: exact
)
def test_an_improvement_of_exactly_the_threshold_keeps_the_rate(returnn_lrc, kind, scores, threshold):
    config = NewbobConfig(kind=kind, threshold=threshold)

    assert rates_of(config, scores) == [LR, LR, LR] == run_returnn(returnn_lrc, config, scores)


def test_the_decision_names_the_scores_that_decided_it():
    control = NewbobControl(NewbobConfig(), LR)
    control.record(1, {"val_loss": 2.0})

    decision = control.record(2, {"val_loss": 2.0, "val_cer": 40.0})

    assert decision == Decision(
        kind="relative",
        epoch=2,
        score_key="val_loss",
        scores={1: 2.0, 2: 2.0},
        change=0.0,
        threshold=0.01,
        old_learning_rate=LR,
        new_learning_rate=LR / 2,
        reason="decayed",
    )
    assert decision.decayed
    assert json.loads(json.dumps(decision.to_event()))["scores"] == {"1": 2.0, "2": 2.0}


def test_the_relative_change_divides_by_the_new_score_unless_told_to_divide_by_the_old():
    # 100 -> 99.005: 0.995 / 99.005 = 1.005 % (kept) but 0.995 / 100 = 0.995 % (decayed).
    scores = [100.0, 99.005]
    assert rates_of(NewbobConfig(), scores)[-1] == LR
    assert rates_of(NewbobConfig(relative_error_divides_by="old"), scores)[-1] == LR / 2


def test_the_absolute_change_is_in_the_scores_unit():
    config = NewbobConfig(kind="absolute", score_key="val_cer", threshold=0.5)
    # CER 20.0 -> 19.6 improves by 0.4 points < 0.5: decayed; 19.6 -> 19.0 by 0.6: kept.
    assert rates_of(config, [20.0, 19.6, 19.0]) == [LR, LR, LR / 2, LR / 2]


def test_a_decay_never_goes_below_min_learning_rate():
    config = NewbobConfig(decay=0.1, min_learning_rate=3e-6)

    rates = rates_of(config, [5.0] * 6)  # a stall every epoch

    assert rates == [LR, LR, LR * 0.1, LR * 0.1 * 0.1, 3e-6, 3e-6, 3e-6]


def test_multi_epoch_averages_the_window_and_decides_only_every_interval():
    config = NewbobConfig(kind="multi_epoch", multi_num_epochs=2, threshold=0.01)
    # Decisions at epochs 3, 5, 7 (e % 2 == 1) from the mean relative change over the (up to) 3 epochs
    # before; record(e) announces epoch e + 1, so every other decision is "between_updates".
    #   epoch 3: (9-10)/9                          = -11.1 %: kept
    #   epoch 5: (9-9)/9, (8.95-9)/8.95     -> mean -0.28 %: decayed
    #   epoch 7: (8.95-8.95)/8.95, (6-8.95)/6 -> mean -24.6 %: kept
    scores = [10.0, 9.0, 9.0, 8.95, 8.95, 6.0]
    rates, decisions = run_ours(config, scores)

    assert rates == [LR, LR, LR, LR, LR / 2, LR / 2, LR / 2]
    assert [d.reason for d in decisions] == [
        "between_updates", "kept", "between_updates", "decayed", "between_updates", "kept",
    ]  # fmt: skip
    assert decisions[3].scores == {2: 9.0, 3: 9.0, 4: 8.95}


def test_predefined_rates_come_first_then_the_control_carries_on_from_the_last():
    config = NewbobConfig(learning_rates=[1e-4, 5e-4, 1e-3])
    # Epoch 4 is the first the control sets: epoch 3 (1e-3) stalled against epoch 2, so it halves.
    rates, decisions = run_ours(config, [6.0, 5.0, 5.0, 4.0, 4.0])

    assert rates == [1e-4, 5e-4, 1e-3, 5e-4, 5e-4, 2.5e-4]
    assert [d.reason for d in decisions[:2]] == ["predefined", "predefined"]


def test_a_reset_jumps_back_at_its_epoch_and_the_control_carries_on_from_there():
    config = NewbobConfig(resets={4: 8e-4})
    # Stalls everywhere: halve, halve, reset at 4, halve the reset rate.
    assert rates_of(config, [5.0] * 5) == [LR, LR, LR / 2, 8e-4, 4e-4, 2e-4]


def test_a_rate_first_asked_after_the_predefined_epochs_carries_on_from_the_last_of_them(returnn_lrc):
    config = NewbobConfig(learning_rates=[1e-4, 5e-4], resets={4: 2e-4})

    ours = [NewbobControl(config, LR).learning_rate_for_epoch(epoch) for epoch in (3, 5)]
    oracle = [returnn_control(returnn_lrc, config).get_learning_rate_for_epoch(epoch) for epoch in (3, 5)]

    assert ours == oracle == [5e-4, 2e-4]


def test_epochs_without_a_validation_keep_the_rate_until_two_scored_epochs_are_adjacent():
    # As RETURNN: the comparison is always between the last two epochs, validated or not.
    assert rates_of(NewbobConfig(), [5.0, 5.0, None, 5.0, 5.0]) == [LR, LR, LR / 2, LR / 2, LR / 2, LR / 4]


def test_a_zero_score_is_compared_rather_than_divided_by():
    # RETURNN raises ZeroDivisionError here; a CER of 0 on a tiny validation set is common.
    config = NewbobConfig(score_key="val_cer")
    rates, decisions = run_ours(config, [3.0, 0.0, 0.0])

    assert rates == [LR, LR, LR, LR / 2]
    assert [d.change for d in decisions[1:]] == [-math.inf, 0.0]


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_score_is_nothing_to_compare(bad):
    rates, decisions = run_ours(NewbobConfig(kind="absolute"), [5.0, bad, 5.0])

    assert rates == [LR] * 4
    assert [d.reason for d in decisions] == ["no_comparison"] * 3


# --- resume ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["relative", "multi-default-interval", "warmup-list-and-resets"])
def test_a_control_restored_mid_schedule_from_json_continues_identically(name):
    config, scores = ORACLE_CONFIGS[name], score_sequence(seed=3)
    uninterrupted = run_ours(config, scores)

    first = NewbobControl(config, LR)
    rates_before, decisions_before = run_ours(config, scores[:17], control=first)
    resumed = NewbobControl(config, LR)
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    assert resumed.state_dict() == first.state_dict()
    rates_after, decisions_after = run_ours(config, scores[17:], control=resumed, first_epoch=18)

    assert [*rates_before[:-1], *rates_after] == uninterrupted[0]
    assert [*decisions_before, *decisions_after] == uninterrupted[1]


def test_a_malformed_state_is_refused():
    with pytest.raises(ValueError, match=r"epochs\[0\]"):
        NewbobControl(NewbobConfig(), LR).load_state_dict({"epochs": [{"epoch": 1}]})
    with pytest.raises(ValueError, match="state_dict"):
        NewbobControl(NewbobConfig(), LR).load_state_dict({"rates": []})


# --- misuse and bad configs -----------------------------------------------------------------------------


def test_record_needs_the_watched_score():
    with pytest.raises(ValueError, match=r"no 'val_cer'.*\['val_loss'\]"):
        NewbobControl(NewbobConfig(score_key="val_cer"), LR).record(1, {"val_loss": 1.0})


def test_each_epoch_is_recorded_once_and_in_order():
    control = NewbobControl(NewbobConfig(), LR)
    control.record(2, {"val_loss": 1.0})
    for epoch in (2, 1):
        with pytest.raises(ValueError, match="in order"):
            control.record(epoch, {"val_loss": 1.0})


def test_recording_after_the_next_rate_was_fixed_is_refused():
    control = NewbobControl(NewbobConfig(), LR)
    control.learning_rate_for_epoch(2)
    with pytest.raises(ValueError, match=r"record\(1, ...\) before learning_rate_for_epoch\(2\)"):
        control.record(1, {"val_loss": 1.0})


@pytest.mark.parametrize("epoch", [0, -1, 1.0, True])
def test_epochs_count_from_one(epoch):
    with pytest.raises(ValueError, match="count from 1"):
        NewbobControl(NewbobConfig(), LR).learning_rate_for_epoch(epoch)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"kind": "newbob_rel"}, "kind"),
        ({"score_key": "train_loss"}, "score_key"),
        ({"threshold": math.nan}, "threshold"),
        ({"threshold": "0.01"}, "threshold"),
        ({"decay": 0.0}, "decay"),
        ({"decay": 1.5}, "decay"),
        ({"min_learning_rate": -1e-5}, "min_learning_rate"),
        ({"multi_num_epochs": 0}, "multi_num_epochs"),
        ({"multi_num_epochs": 2.0}, "multi_num_epochs"),
        ({"multi_update_interval": 0}, "multi_update_interval"),
        ({"relative_error_divides_by": "mean"}, "relative_error_divides_by"),
        ({"learning_rates": [1e-3, 0.0]}, r"learning_rates\[1\] \(epoch 2\)"),
        ({"learning_rates": [1e-6], "min_learning_rate": 1e-5}, r"learning_rates\[0\].*min_learning_rate"),
        ({"resets": {0: 1e-3}}, "resets"),
        ({"resets": {"ten": 1e-3}}, "resets"),
        ({"resets": {3: -1.0}}, r"resets\[3\]"),
        ({"resets": {2: 1e-3}, "learning_rates": [1e-3, 1e-3]}, r"resets\[2\].*learning_rates\[1\]"),
    ],
)
def test_a_bad_config_is_refused_naming_the_field(options, field):
    with pytest.raises(ValueError, match=field):
        NewbobConfig(**options)


def test_an_initial_rate_below_the_floor_is_refused():
    with pytest.raises(ValueError, match=r"initial_learning_rate.*min_learning_rate"):
        NewbobControl(NewbobConfig(min_learning_rate=1e-3), 1e-4)


def test_the_config_survives_a_json_round_trip_with_string_epoch_keys():
    config = NewbobConfig(kind="multi_epoch", learning_rates=[1e-4, 2e-4], resets={10: 1e-3})

    restored = NewbobConfig(**json.loads(json.dumps(dataclasses.asdict(config))))

    assert restored == config
    assert restored.resets == {10: 1e-3}
