"""training.live: rank 0's progress view turns events into its table's values and log lines; a disabled one
(other ranks) draws nothing (the whole run's live view: test_observability.py)."""

from __future__ import annotations

from rich.console import Console

from asr_pipeline.training.events import EventLog
from asr_pipeline.training.live import TrainingProgress
from asr_pipeline.tui import LiveView


def test_the_progress_view_turns_events_into_rows_and_log_lines():
    view = LiveView("train", console=Console(record=True, force_terminal=False, width=140))
    progress = TrainingProgress(epochs=3, enabled=True, tui=True, view=view)
    progress.start_epoch(1, steps=10, steps_done=4)
    progress.advance(15)
    train = {"loss": 1.25, "lr": 2e-4, "grad_norm": 3.5, "audio_seconds_per_sec": 120.0, "utterances": 8}
    progress.on_event("train", 15, 1, train)
    validation = {"val_cer": 12.5, "val_wer": 30.0, "val_loss": 0.9, "decoding": "beam", "best": True,
                  "samples": [{"id": "u1", "reference": "a b", "hypothesis": "a c"}]}  # fmt: skip
    progress.on_event("validation", 15, 1, validation)
    progress.close()

    assert view.values == {
        "epoch": "2/3",
        "epoch_step": "5/10",
        "step": 15,
        "loss": 1.25,
        "audio_sec_per_sec": 120.0,
        "lr": 2e-4,
        "grad_norm": 3.5,
        "skipped_steps": 0,
        "non_finite_losses": 0,
        "val_cer": 12.5,
        "val_wer": 30.0,
        "val_loss": 0.9,
    }
    assert list(view.events) == [
        "[step 15, epoch 2] loss 1.2500, lr 0.0002, grad norm 3.5, 120.0 audio s/s",
        "[step 15, epoch 2] validation (beam): CER 12.50%, WER 30.00%, loss 0.9000, best so far",
        "  u1: 'a c' (reference 'a b')",
    ]
    assert "12.5" in view.console.export_text()


def test_a_disabled_progress_and_event_log_draw_and_call_nothing(tmp_path):
    calls = []

    class Listener:
        def on_event(self, *event):
            calls.append(event)

    progress = TrainingProgress(epochs=1, enabled=False, tui=True)
    log = EventLog(tmp_path / "events.jsonl", enabled=False, append=False, listeners=[Listener(), progress])
    progress.start_epoch(0, 5)
    log.write("train", 1, 0, {"loss": 1.0})
    progress.close()

    assert progress.view is None and calls == [] and not (tmp_path / "events.jsonl").exists()


def test_without_the_tui_only_mid_epoch_validations_are_printed(capsys):
    progress = TrainingProgress(epochs=2, enabled=True, tui=False)
    assert progress.view is None
    progress.start_epoch(0, steps=4)
    progress.advance(1)
    progress.on_event(
        "train", 1, 0, {"loss": 2.0, "lr": 1e-3, "grad_norm": 1.0, "audio_seconds_per_sec": 9.0}
    )
    scores = {"val_cer": 40.0, "val_wer": 80.0, "val_loss": 1.5}
    progress.on_event("validation", 1, 0, {**scores, "trigger": "step"})
    progress.on_event("validation", 4, 0, {**scores, "trigger": "epoch"})  # the loop's epoch line shows it
    progress.close()
    printed = capsys.readouterr().out.splitlines()
    assert printed == ["[step 1, epoch 1] validation (greedy): CER 40.00%, WER 80.00%, loss 1.5000"]


def test_a_hubert_validation_shows_its_unit_accuracy_instead_of_error_rates():
    view = LiveView("train", console=Console(record=True, force_terminal=False, width=140))
    progress = TrainingProgress(epochs=1, enabled=True, tui=True, view=view)
    progress.on_event("validation", 7, 0, {"val_loss": 2.5, "val_accuracy": 31.25})
    progress.close()
    assert view.values == {"val_loss": 2.5, "val_accuracy": 31.25}
    assert list(view.events) == ["[step 7, epoch 1] validation (greedy): unit accuracy 31.25%, loss 2.5000"]
