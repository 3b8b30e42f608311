"""``optim.lr_control: newbob`` in real runs: each epoch trains at the rate the control decided from the
previous validations (after the warmup ramp), predefined rates and resets win, the decisions are logged as
"lr_control" events, and a run killed mid-epoch and resumed ends like the uninterrupted one."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
import torch

from asr_pipeline.cli import build_parser
from asr_pipeline.cli.train import train_config_from_args
from asr_pipeline.training.checkpoint import load_training_state
from asr_pipeline.training.config import resolve_config, save_json
from asr_pipeline.training.launch import launch_training
from asr_pipeline.training.lr_control import NewbobConfig, NewbobControl
from asr_pipeline.training.optimization import Optimization
from asr_pipeline.training.resume import check_resume_compatible
from asr_pipeline.training.trainer import Trainer
from asr_pipeline.training.worker import FAIL_RANK_ENV, FAIL_STEP_ENV

from .conftest import events, tiny_config
from .conftest import run_in_process as run

pytestmark = pytest.mark.usefixtures("single_process")

WARMUP = 2


def newbob_config(corpus, tokenizer_path, run_dir, epochs: int = 4, **newbob) -> dict:
    config = tiny_config(corpus, tokenizer_path, run_dir)
    config["optim"] |= {"epochs": epochs, "lr_control": "newbob", "newbob": newbob}
    return config


@pytest.fixture
def applied_rates(monkeypatch) -> dict[int, list[float]]:
    """epoch (0-based) -> the rate of each optimizer step taken in it, as the optimizer saw it."""
    seen: dict[int, list[float]] = defaultdict(list)
    original = Trainer.optimizer_step

    def recording_step(self):
        applied = original(self)
        seen[self.epoch].append(self.optimization.optimizer.param_groups[0]["lr"])
        return applied

    monkeypatch.setattr(Trainer, "optimizer_step", recording_step)
    return seen


def test_each_epoch_trains_at_the_rate_the_control_decided_from_the_validations(
    corpus, tokenizer_path, tmp_path, applied_rates
):
    # A threshold no improvement reaches: every comparison is a stall, so the rate halves from epoch 3 on.
    run(newbob_config(corpus, tokenizer_path, tmp_path, threshold=1e6, decay=0.5))

    decisions = [e["values"] for e in events(tmp_path, "lr_control")]
    assert [d["epoch"] for d in decisions] == [1, 2, 3, 4]
    assert [d["reason"] for d in decisions] == ["no_comparison", "decayed", "decayed", "decayed"]
    validations = [e["values"] for e in events(tmp_path, "validation") if e["values"]["trigger"] == "epoch"]
    for decision, later in zip(decisions[1:], validations[1:], strict=True):
        assert decision["scores"][str(decision["epoch"])] == later["val_loss"], "the scores that decided it"
    peak = 1e-3
    expected = [peak, peak, peak / 2, peak / 4]
    for epoch, rate in enumerate(expected):
        steps = applied_rates[epoch]
        ramp = [
            min(1.0, (sum(map(len, (applied_rates[e] for e in range(epoch)))) + i + 1) / WARMUP)
            for i in range(len(steps))
        ]
        assert steps == pytest.approx([rate * r for r in ramp], rel=1e-12), f"epoch {epoch + 1}"
    assert [d["new_learning_rate"] for d in decisions[:3]] == pytest.approx(expected[1:])
    epoch_events = events(tmp_path, "epoch")
    assert [e["values"]["lr"] for e in epoch_events] == pytest.approx(expected)


def test_a_score_that_keeps_improving_enough_keeps_the_rate(corpus, tokenizer_path, tmp_path, applied_rates):
    # A negative threshold: any change below +1e6 counts as improvement enough, so nothing decays.
    run(newbob_config(corpus, tokenizer_path, tmp_path, epochs=3, threshold=-1e6))

    assert [e["values"]["reason"] for e in events(tmp_path, "lr_control")] == [
        "no_comparison",
        "kept",
        "kept",
    ]
    assert applied_rates[2] == pytest.approx([1e-3] * len(applied_rates[2]))


def test_predefined_rates_and_resets_win_over_the_control(corpus, tokenizer_path, tmp_path, applied_rates):
    config = newbob_config(
        corpus,
        tokenizer_path,
        tmp_path,
        epochs=5,
        threshold=1e6,
        learning_rates=[4e-3, 2e-3],
        resets={"4": 3e-3},
    )
    config["optim"]["lr_warmup_steps"] = 0

    run(config)

    # Epochs 1-2 predefined, 3 decays the last rate, 4 is reset, 5 decays the reset.
    firsts = [applied_rates[epoch][0] for epoch in range(5)]
    assert firsts == pytest.approx([4e-3, 2e-3, 1e-3, 3e-3, 1.5e-3])
    reasons = [e["values"]["reason"] for e in events(tmp_path, "lr_control")]
    assert reasons == ["predefined", "decayed", "predefined", "decayed", "decayed"]


def test_a_run_killed_mid_epoch_and_resumed_continues_the_same_rates_and_ends_with_the_same_weights(
    corpus, tokenizer_path, tmp_path, monkeypatch
):
    newbob = {"threshold": 1e6, "decay": 0.5}
    straight = tmp_path / "straight"
    run(newbob_config(corpus, tokenizer_path, straight, **newbob))

    killed = tmp_path / "killed"
    config = newbob_config(corpus, tokenizer_path, killed, **newbob)
    config["run"]["checkpoint_every_steps"] = 1
    steps_per_epoch = events(straight, "epoch")[0]["values"]["steps"]
    kill_at = 2 * steps_per_epoch + 1  # inside epoch 3, after the first decay was decided
    monkeypatch.setenv(FAIL_RANK_ENV, "0")
    monkeypatch.setenv(FAIL_STEP_ENV, str(kill_at))
    with pytest.raises(RuntimeError, match="fault injected"):
        run(config)
    state = load_training_state(killed)
    assert (state["step"], state["sampler"]["epoch"]) == (kill_at, 2)
    assert [entry["epoch"] for entry in state["lr_control"]["epochs"]] == [1, 2, 3]

    monkeypatch.delenv(FAIL_RANK_ENV)
    config["run"]["resume_from"] = str(killed)
    run(config)

    def decided(run_dir):
        return [
            (e["values"]["epoch"], e["values"]["new_learning_rate"]) for e in events(run_dir, "lr_control")
        ]

    assert decided(killed) == decided(straight)
    summary = {name: events(name, "summary")[-1]["values"] for name in (straight, killed)}
    assert summary[killed]["parameter_digests"] == summary[straight]["parameter_digests"]


def test_warmup_ramps_up_to_the_controls_rate_and_the_schedule_ignores_scores(
    corpus, tokenizer_path, tmp_path
):
    model = torch.nn.Linear(2, 2)
    base = tiny_config(corpus, tokenizer_path, tmp_path)
    base["optim"] |= {"lr_warmup_steps": 4, "lr_control": "newbob", "newbob": {"learning_rates": [8e-3]}}
    optimization = Optimization(model, resolve_config(base), torch.device("cpu"), steps_per_epoch=10)
    assert [optimization.learning_rate(step, 0) for step in range(5)] == pytest.approx(
        [2e-3, 4e-3, 6e-3, 8e-3, 8e-3]
    )

    base["optim"] |= {"lr_control": "schedule"}
    schedule = Optimization(model, resolve_config(base), torch.device("cpu"), steps_per_epoch=10)
    assert schedule.record_validation(0, {"val_loss": 1.0}) is None
    assert schedule.state_dict()["lr_control"] is None


def test_newbob_without_validation_is_refused(corpus, tokenizer_path, tmp_path):
    config = newbob_config(corpus, tokenizer_path, tmp_path)
    config["data"]["val_manifests"] = []
    with pytest.raises(ValueError, match=r"lr_control=newbob .* no validation manifests"):
        resolve_config(config)


def test_resuming_with_another_newbob_setting_is_refused_naming_it(corpus, tokenizer_path, tmp_path):
    config = newbob_config(corpus, tokenizer_path, tmp_path, epochs=1, threshold=0.01)
    run(config)
    changed = resolve_config(newbob_config(corpus, tokenizer_path, tmp_path, epochs=2, threshold=0.02))
    same = resolve_config(newbob_config(corpus, tokenizer_path, tmp_path, epochs=2, threshold=0.01))
    model_config = json.loads((tmp_path / "checkpoint_latest.json").read_text())["model_config"]

    check_resume_compatible(same, model_config, tmp_path)  # epochs may change
    with pytest.raises(ValueError, match=r"optim\.newbob\.threshold: 0\.01 -> 0\.02"):
        check_resume_compatible(changed, model_config, tmp_path)


def test_the_train_flags_set_every_newbob_option(corpus, tmp_path):
    args = build_parser().parse_args(
        ["train", "--train-manifest", corpus["train"][0], "--val-manifest", corpus["val"][0],
         "--output-dir", str(tmp_path),
         "--lr-control", "newbob", "--newbob-kind", "multi_epoch", "--newbob-score", "val_cer",
         "--newbob-threshold", "0.02", "--newbob-decay", "0.7", "--newbob-min-lr", "1e-6",
         "--newbob-multi-num-epochs", "3", "--newbob-multi-update-interval", "2",
         "--newbob-relative-divides-by", "old", "--learning-rates", "1e-3,5e-4", "--lr-resets", "5:1e-3,9:2e-4"]
    )  # fmt: skip
    config, _ = train_config_from_args(args)

    assert config.optim.lr_control == "newbob"
    assert config.optim.newbob == NewbobConfig(
        kind="multi_epoch", score_key="val_cer", threshold=0.02, decay=0.7, min_learning_rate=1e-6,
        multi_num_epochs=3, multi_update_interval=2, relative_error_divides_by="old",
        learning_rates=[1e-3, 5e-4], resets={5: 1e-3, 9: 2e-4},
    )  # fmt: skip
    NewbobControl(config.optim.newbob, 1e-3)  # a config the control accepts


@pytest.mark.slow  # a two-rank torchrun job (~25 s here): in `make test-all`; tests/training/test_ddp_training.py keeps DDP in `make test`
@pytest.mark.usefixtures("keep_torch_threads")
def test_two_ranks_follow_rank_0s_validation_to_the_same_rates(corpus, tokenizer_path, tmp_path):
    # Only rank 0 scores the validation set; a rank deciding on its own would train at another rate and
    # its weights would part from rank 0's (the summary's per-rank digests would differ).
    config_path = tmp_path / "training_config.json"
    save_json(
        resolve_config(newbob_config(corpus, tokenizer_path, tmp_path / "run", epochs=3, threshold=1e6)),
        config_path,
    )

    launch_training(config_path, nproc_per_node=2)

    reasons = [e["values"]["reason"] for e in events(tmp_path / "run", "lr_control")]
    assert reasons == ["no_comparison", "decayed", "decayed"]
    digests = events(tmp_path / "run", "summary")[0]["values"]["parameter_digests"]
    assert len(digests) == 2 and digests[0] == digests[1]
