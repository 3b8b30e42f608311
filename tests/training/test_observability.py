"""What a run shows while it trains: the "train" events' values, the live view (``--tui``), the
DVCLive curves, and the validation/observability flags of ``asr-pipeline train``."""

from __future__ import annotations

import csv
import json
import math
from types import SimpleNamespace
from typing import ClassVar

import pytest
from rich.console import Console

from asr_pipeline.cli import build_parser
from asr_pipeline.cli.train import train_config_from_args
from asr_pipeline.decoding.options import DecodingOptions
from asr_pipeline.training import live
from asr_pipeline.training import trainer as trainer_module
from asr_pipeline.training.config import ValidationConfig, resolve_config
from asr_pipeline.training.dvclive_logger import DVCLIVE_DIR, DVCLiveLogger
from asr_pipeline.training.trainer import Trainer
from asr_pipeline.tui import LiveView

from .conftest import events, tiny_config
from .conftest import run_in_process as run


def tsv(path) -> list[tuple[int, float]]:
    with path.open() as handle:
        return [(int(row["step"]), float(row[path.stem])) for row in csv.DictReader(handle, delimiter="\t")]


# --- events.jsonl ---------------------------------------------------------------------------------------
@pytest.mark.usefixtures("single_process")
def test_train_events_carry_step_epoch_loss_lr_grad_norm_and_throughput(
    corpus, tokenizer_path, tmp_path, monkeypatch
):
    applied: list[tuple[float, float]] = []  # (lr the optimizer stepped with, grad norm) per step
    original_step = Trainer.optimizer_step

    def recording_step(self):
        applied_step = original_step(self)
        optimization = self.optimization
        applied.append((optimization.optimizer.param_groups[0]["lr"], float(optimization.grad_norm)))
        return applied_step

    monkeypatch.setattr(Trainer, "optimizer_step", recording_step)
    config = tiny_config(corpus, tokenizer_path, tmp_path, log_every=1)
    run(config)

    train = events(tmp_path, "train")
    steps = events(tmp_path, "summary")[0]["step"]
    assert [e["step"] for e in train] == list(range(1, steps + 1)), "log_every=1: one per optimizer step"
    assert [e["epoch"] for e in train] == sorted(e["epoch"] for e in train) and train[-1]["epoch"] == 1
    # Each event's lr and grad norm are those of the step it follows, whatever the schedule.
    assert [(e["values"]["lr"], e["values"]["grad_norm"]) for e in train] == applied
    assert len({lr for lr, _ in applied}) > 2, "warmup and decay: the lr changes"
    for event in train:
        values = event["values"]
        assert math.isfinite(values["loss"]) and values["loss"] > 0
        assert math.isfinite(values["grad_norm"]) and values["grad_norm"] > 0
        assert values["audio_seconds_per_sec"] > 0
        assert 0 <= values["loader_wait_fraction"] < 1
    assert sum(e["values"]["utterances"] for e in train) == 16 * 2, "every utterance of 2 epochs once"


def test_the_time_waited_for_each_batch_is_added_up_for_the_train_event(monkeypatch):
    clock = iter([0.0, 1.5, 2.0, 2.25, 3.0])  # asked, got the first; asked, got the second; asked: no more
    monkeypatch.setattr(trainer_module, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    trainer = SimpleNamespace(window_loader_wait=0.0)

    batches = list(Trainer._waited_for(trainer, ["first", "second"]))

    assert batches == ["first", "second"]
    assert trainer.window_loader_wait == 1.5 + 0.25, "the wait at the end of the epoch is not a batch's"


# --- the live view --------------------------------------------------------------------------------------
class RecordingView(LiveView):
    """A LiveView on a recording, non-terminal console: it prints its final table once, at exit."""

    made: ClassVar[list[RecordingView]] = []

    def __init__(self, title: str) -> None:
        super().__init__(title, console=Console(record=True, force_terminal=False, width=140))
        RecordingView.made.append(self)


@pytest.mark.usefixtures("single_process")
def test_the_tui_shows_the_latest_loss_throughput_lr_grad_norm_and_validation(
    corpus, tokenizer_path, tmp_path, monkeypatch
):
    RecordingView.made.clear()
    monkeypatch.setattr(live, "LiveView", RecordingView)
    config = tiny_config(corpus, tokenizer_path, tmp_path, tui=True)
    config["validation"] = {"every_steps": 3, "log_samples": 1}
    run(config)

    [view] = RecordingView.made
    last_train = events(tmp_path, "train")[-1]["values"]
    last_validation = events(tmp_path, "validation")[-1]["values"]
    steps = events(tmp_path, "summary")[0]["step"]
    assert view.values["epoch"] == "2/2" and view.values["step"] == steps
    assert view.values["epoch_step"].split("/")[0] == view.values["epoch_step"].split("/")[1]
    assert view.values["loss"] == last_train["loss"] and view.values["lr"] == last_train["lr"]
    assert view.values["grad_norm"] == last_train["grad_norm"]
    assert view.values["audio_sec_per_sec"] == last_train["audio_seconds_per_sec"]
    assert (view.values["val_cer"], view.values["val_wer"]) == (
        last_validation["val_cer"],
        last_validation["val_wer"],
    )
    printed = view.console.export_text()
    assert "val cer" in printed and "audio sec per sec" in printed and "grad norm" in printed
    assert "checkpoint" in printed, "events appear as log lines"


@pytest.mark.usefixtures("single_process")
@pytest.mark.parametrize("log_every", [3, 1000])
def test_the_last_step_of_a_run_is_always_logged_so_short_runs_have_curves(
    corpus, tokenizer_path, tmp_path, log_every
):
    run(tiny_config(corpus, tokenizer_path, tmp_path, log_every=log_every))

    last = events(tmp_path, "summary")[0]["step"]
    assert last % 3 != 0 and last < 1000, "the tiny run's step count makes both cases meaningful"
    logged = [e["step"] for e in events(tmp_path, "train")]
    assert logged == [*range(log_every, last, log_every), last]
    loss_curve = tmp_path / DVCLIVE_DIR / "plots" / "metrics" / "train" / "loss.tsv"
    assert [step for step, _ in tsv(loss_curve)] == logged, "what `dvc plots show` reads"


# --- DVCLive --------------------------------------------------------------------------------------------
def test_the_dvclive_logger_writes_one_row_per_event_keyed_by_step(tmp_path):
    logger = DVCLiveLogger(tmp_path)
    logger.on_event(
        "train", 10, 0, {"loss": 2.5, "lr": 1e-3, "grad_norm": 4.0, "audio_seconds_per_sec": 90.0}
    )
    logger.on_event("train", 20, 0, {"loss": math.nan, "lr": 2e-3, "grad_norm": math.inf,
                                     "audio_seconds_per_sec": 95.0})  # fmt: skip
    logger.on_event("validation", 20, 0, {"val_cer": 40.0, "val_wer": 80.0, "val_loss": 1.5})
    logger.on_event("checkpoint", 20, 0, {"path": "x"})  # not a curve
    logger.close()

    plots = tmp_path / DVCLIVE_DIR / "plots" / "metrics"
    assert tsv(plots / "train" / "loss.tsv") == [(10, 2.5)], "a NaN loss is no point of the curve"
    assert tsv(plots / "train" / "lr.tsv") == [(10, 1e-3), (20, 2e-3)]
    assert tsv(plots / "train" / "grad_norm.tsv") == [(10, 4.0)]
    assert tsv(plots / "val" / "cer.tsv") == [(20, 40.0)]
    assert tsv(plots / "val" / "wer.tsv") == [(20, 80.0)]
    summary = json.loads((tmp_path / DVCLIVE_DIR / "metrics.json").read_text())
    assert summary["val"]["cer"] == 40.0 and summary["step"] == 20
    assert not (tmp_path / DVCLIVE_DIR / "dvc.yaml").exists(), "the project's dvc.yaml declares the plots"


def test_a_resumed_dvclive_logger_continues_the_curves_and_a_fresh_one_restarts_them(tmp_path):
    first = DVCLiveLogger(tmp_path)
    first.on_event("validation", 5, 0, {"val_cer": 50.0, "val_wer": 90.0, "val_loss": 2.0})
    first.close()
    resumed = DVCLiveLogger(tmp_path, resume=True)
    resumed.on_event("validation", 10, 1, {"val_cer": 45.0, "val_wer": 85.0, "val_loss": 1.8})
    resumed.close()
    cer = tmp_path / DVCLIVE_DIR / "plots" / "metrics" / "val" / "cer.tsv"
    assert tsv(cer) == [(5, 50.0), (10, 45.0)]

    DVCLiveLogger(tmp_path).close()
    assert not cer.exists()


@pytest.mark.usefixtures("single_process")
def test_a_run_writes_its_train_and_validation_events_as_dvclive_curves(corpus, tokenizer_path, tmp_path):
    run(tiny_config(corpus, tokenizer_path, tmp_path))

    plots = tmp_path / DVCLIVE_DIR / "plots" / "metrics"
    train, validation = events(tmp_path, "train"), events(tmp_path, "validation")
    assert tsv(plots / "train" / "loss.tsv") == [(e["step"], e["values"]["loss"]) for e in train]
    assert tsv(plots / "train" / "audio_seconds_per_sec.tsv") == [
        (e["step"], e["values"]["audio_seconds_per_sec"]) for e in train
    ]
    assert tsv(plots / "val" / "cer.tsv") == [(e["step"], e["values"]["val_cer"]) for e in validation]
    assert len(validation) == 2


# --- flags ----------------------------------------------------------------------------------------------
def test_validation_and_observability_flags_land_in_their_config_keys(corpus, tmp_path):
    args = build_parser().parse_args(
        ["train", "--train-manifest", corpus["train"][0], "--epochs", "1", "--lr-warmup-steps", "0",
         "--output-dir", str(tmp_path), "--validate-every-steps", "50", "--val-decoder", "prefix_beam", "--val-beam-width", "8",
         "--val-n-best", "3", "--val-lm-path", "lm.binary", "--val-lm-weight", "0.3",
         "--val-lm-word-bonus", "1.5", "--val-lm-no-bos", "--val-lm-no-eos", "--val-log-samples", "4",
         "--tui", "--max-non-finite-losses", "7"]
    )  # fmt: skip
    config, _ = train_config_from_args(args)

    assert config.validation == ValidationConfig(
        every_steps=50,
        decoding=DecodingOptions(
            decoder="prefix_beam",
            beam_width=8,
            n_best=3,
            lm_weight=0.3,
            word_score=1.5,
            lm_no_bos=True,
            lm_no_eos=True,
        ),
        lm_path="lm.binary",
        log_samples=4,
    )
    assert config.run.tui is True and config.run.max_non_finite_losses == 7


def test_validation_defaults_are_greedy_with_the_reference_lm_weight_and_abort_after_100():
    config = resolve_config(
        {"data": {"train_manifests": ["a"]}, "optim": {"epochs": 1, "lr_warmup_steps": 0},
         "run": {"output_dir": "r"}}
    )  # fmt: skip

    assert config.validation == ValidationConfig()
    assert not config.validation.uses_beam_search and config.validation.decoding.decoder == "greedy"
    assert config.run.max_non_finite_losses == 100 and config.run.tui is False


@pytest.mark.parametrize(
    ("validation", "message"),
    [
        ({"decoding": {"beam_width": 2, "n_best": 3}}, r"\.decoding: n_best must lie in \[1, beam_width=2\]"),
        ({"lm_path": "lm.binary"}, r": lm_path is set but the greedy decoder fuses no LM"),
        ({"every_steps": 0}, r": every_steps must be > 0"),
        ({"log_samples": -1}, r": log_samples must be >= 0"),
    ],
)
def test_inconsistent_validation_settings_are_refused_by_name(validation, message):
    base = {"data": {"train_manifests": ["a"]}, "optim": {"epochs": 1, "lr_warmup_steps": 0},
            "run": {"output_dir": "r"}}  # fmt: skip

    with pytest.raises(ValueError, match=rf"validation{message}"):
        resolve_config({**base, "validation": validation})
