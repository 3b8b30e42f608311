"""What rank 0 shows on the terminal while it trains.

By default a tqdm bar over each epoch's optimizer steps, with the last logged loss and learning rate
beside it (drawn only on a terminal: under ``dvc repro`` or in CI the plain per-epoch lines of
``training.loop`` are the log). With ``run.tui`` (``--tui``) a ``tui.LiveView`` instead: a table of epoch,
step, loss, throughput, learning rate, gradient norm and the latest validation scores, above the newest
events as log lines. The view is an ``events.EventListener``, so it shows exactly what ``events.jsonl``
records; only ``advance`` (one optimizer step) comes from the loop directly, because steps between two
"train" events are not events. Other ranks get a disabled ``TrainingProgress`` and draw nothing.
"""

from __future__ import annotations

import sys
from typing import Any

from tqdm import tqdm

from asr_pipeline.tui import LiveView


class TrainingProgress:
    """Rank 0's progress display; every method is a no-op when ``enabled`` is False.

    ``view``: the LiveView to draw into with ``tui`` (default: a new one on stderr); tests pass one with
    a recording console.
    """

    def __init__(self, *, epochs: int, enabled: bool, tui: bool, view: LiveView | None = None) -> None:
        self.epochs, self.enabled = epochs, enabled
        self.view = (view or LiveView("asr-pipeline train")) if enabled and tui else None
        self._bar: tqdm | None = None
        self._epoch_steps = 0
        self._epoch_steps_done = 0
        if self.view is not None:
            self.view.__enter__()

    def start_epoch(self, epoch: int, steps: int, steps_done: int = 0) -> None:
        """A new epoch of ``steps`` optimizer steps, ``steps_done`` of them already taken (a resume)."""
        self._epoch_steps, self._epoch_steps_done = steps, steps_done
        if self.view is not None:
            self.view.update(epoch=f"{epoch + 1}/{self.epochs}", epoch_step=f"{steps_done}/{steps}")
        elif self.enabled:
            self._close_bar()
            self._bar = tqdm(
                total=steps,
                initial=steps_done,
                desc=f"epoch {epoch + 1}/{self.epochs}",
                unit="step",
                disable=not sys.stderr.isatty(),
                leave=False,
            )

    def advance(self, step: int) -> None:
        """One optimizer step taken; ``step`` counts them over the whole run."""
        self._epoch_steps_done += 1
        if self.view is not None:
            self.view.update(step=step, epoch_step=f"{self._epoch_steps_done}/{self._epoch_steps}")
        elif self._bar is not None:
            self._bar.update(1)

    def on_event(self, kind: str, step: int, epoch: int, values: dict[str, Any]) -> None:
        """``events.EventListener``: fold the event's values into the display."""
        if not self.enabled:
            return
        if self.view is not None:
            self.view.update(**_shown_values(kind, values))
            for line in _event_lines(kind, step, epoch, values):
                self.view.log(line)
        elif kind == "train" and self._bar is not None:
            self._bar.set_postfix(loss=f"{values['loss']:.3f}", lr=f"{values['lr']:.2e}")
        elif kind == "validation" and values.get("trigger") == "step":
            # Epoch-end scores are in the loop's per-epoch line; mid-epoch ones would otherwise go unseen.
            tqdm.write(_event_lines(kind, step, epoch, values)[0], file=sys.stdout)

    def close(self) -> None:
        self._close_bar()
        if self.view is not None:
            self.view.__exit__(None, None, None)
            self.view = None

    def _close_bar(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def _shown_values(kind: str, values: dict[str, Any]) -> dict[str, Any]:
    """The table rows an event updates (names as LiveView shows them, "_" read as spaces)."""
    if kind == "train":
        return {
            "loss": values["loss"],
            "audio_sec_per_sec": values["audio_seconds_per_sec"],
            "lr": values["lr"],
            "grad_norm": values["grad_norm"],
            "skipped_steps": values.get("skipped_steps", 0),
            "non_finite_losses": values.get("non_finite_losses", 0),
        }
    if kind == "validation":
        shown = ("val_cer", "val_wer", "val_loss", "val_accuracy")  # HuBERT: loss and unit accuracy only
        return {name: values[name] for name in shown if name in values}
    if kind == "epoch":
        return {"train_loss": values["train_loss"]}
    return {}


def _event_lines(kind: str, step: int, epoch: int, values: dict[str, Any]) -> list[str]:
    where = f"[step {step}, epoch {epoch + 1}]"
    if kind == "train":
        return [
            f"{where} loss {values['loss']:.4f}, lr {values['lr']:.3g}, grad norm {values['grad_norm']:.3g}, "
            f"{values['audio_seconds_per_sec']:.1f} audio s/s"
        ]
    if kind == "validation":
        best = ", best so far" if values.get("best") else ""
        if "val_accuracy" in values:  # masked prediction of units (HuBERT): no text
            scores = f"unit accuracy {values['val_accuracy']:.2f}%"
        else:
            scores = f"CER {values['val_cer']:.2f}%, WER {values['val_wer']:.2f}%"
        lines = [
            f"{where} validation ({values.get('decoding', 'greedy')}): {scores}, "
            f"loss {values['val_loss']:.4f}{best}"
        ]
        lines += [
            f"  {s['id']}: {s['hypothesis']!r} (reference {s['reference']!r})"
            for s in values.get("samples", [])
        ]
        return lines
    if kind == "epoch":
        return [f"{where} epoch done: train loss {values['train_loss']:.4f} ({values['duration_sec']:.1f}s)"]
    if kind == "checkpoint":
        return [f"{where} checkpoint {values['path']}" + (" (best)" if "best_path" in values else "")]
    if kind == "abort":
        return [f"{where} ABORT: {values['reason']}"]
    return [f"{where} {kind}"]


__all__ = ["TrainingProgress"]
