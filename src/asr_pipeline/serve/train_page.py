"""A training page for pretrained-model fine-tuning: fill the form, start, watch the log and curves, stop.

The form holds the seed interface's fields (model, data, full or LoRA, the main settings). Start runs
``asr-pipeline hf-finetune`` (what one ``hf_finetune@<name>`` stage runs) as a subprocess in a session of its
own, its output in ``<runs_dir>/<name>/train.log``; the page polls every two seconds for the log's tail and the
curves (training and validation loss, validation WER with ``--eval-wer``) from the run's ``events.jsonl``. Stop
sends the session SIGTERM, then SIGKILL after ``STOP_GRACE_SEC``. The page runs one job at a time, and a job
does not outlive the server that started it (``atexit``).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

STOP_GRACE_SEC = 10
LOG_FILE = "train.log"
LOG_TAIL_CHARS = 6000


class TrainingJob:
    """One ``asr-pipeline hf-finetune`` subprocess writing into ``output_dir``."""

    def __init__(self, argv: list[str], output_dir: str | Path) -> None:
        self.output_dir = Path(output_dir)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable,
            "-m",
            "asr_pipeline.cli",
            "hf-finetune",
            *argv,
            "--output-dir",
            str(self.output_dir),
        ]
        with (self.output_dir / LOG_FILE).open("wb") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.stopped = False
        atexit.register(self.stop)

    def status(self) -> str:
        code = self.process.poll()
        if code is None:
            return "running"
        return "stopped" if self.stopped else ("finished" if code == 0 else f"failed (exit {code})")

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        text = (self.output_dir / LOG_FILE).read_text(errors="replace")
        return text[-chars:]

    def curves(self) -> list[dict[str, Any]]:
        """``{"step", "curve", "value"}`` rows: train loss, validation loss and (when measured) WER."""
        path = self.output_dir / "run" / "events.jsonl"
        rows = []
        for line in path.read_text().splitlines() if path.is_file() else []:
            event = json.loads(line)
            values = event["values"]
            if event["type"] == "train":
                rows.append({"step": event["step"], "curve": "train loss", "value": values["loss"]})
            elif event["type"] == "validation":
                rows.append({"step": event["step"], "curve": "validation loss", "value": values["val_loss"]})
                if "val_wer" in values:
                    rows.append(
                        {"step": event["step"], "curve": "validation WER %", "value": values["val_wer"]}
                    )
        return rows

    def stop(self) -> None:
        """End the job and everything it started (its session), if it still runs."""
        if self.process.poll() is not None:
            return
        self.stopped = True
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(STOP_GRACE_SEC)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def form_argv(values: dict[str, Any]) -> list[str]:
    """The hf-finetune flags of the form's fields (empty ones left out, so the options' defaults apply)."""
    argv = []
    for flag in (
        "model",
        "train",
        "val",
        "method",
        "learning-rate",
        "epochs",
        "batch-size",
        "lora-rank",
        "max-steps",
    ):
        value = values.get(flag)
        if value not in (None, ""):
            argv += [
                f"--{flag}",
                str(
                    int(value)
                    if isinstance(value, float) and value.is_integer() and flag != "learning-rate"
                    else value
                ),
            ]
    if values.get("evaluate"):
        argv += ["--evaluate", f"eval={values['evaluate']}"]
    if values.get("eval-wer"):
        argv.append("--eval-wer")
    return argv


def build_train_page(runs_dir: str | Path) -> Any:
    """The page (module docstring); jobs write under ``runs_dir/<name>``."""
    import gradio as gr
    import pandas as pd

    runs_dir = Path(runs_dir)
    jobs: dict[str, TrainingJob] = {}

    def start(name: str, *fields: Any) -> str:
        if jobs.get("current") and jobs["current"].status() == "running":
            raise gr.Error("A job is running: stop it first.")
        if not name or "/" in name or name.startswith("."):
            raise gr.Error("Name the run (a folder name under the runs folder).")
        values = dict(zip(FIELDS, fields, strict=True))
        jobs["current"] = TrainingJob(form_argv(values), runs_dir / name)
        return f"started `{runs_dir / name}`"

    def poll() -> tuple[str, str, Any]:
        job = jobs.get("current")
        if job is None:
            return "no job", "", pd.DataFrame(columns=["step", "curve", "value"])
        return job.status(), job.log_tail(), pd.DataFrame(job.curves(), columns=["step", "curve", "value"])

    def stop() -> str:
        if jobs.get("current"):
            jobs["current"].stop()
        return "stopped"

    with gr.Blocks(title="asr_pipeline: fine-tune a pretrained model") as page:
        gr.Markdown("# Fine-tune Whisper or Voxtral\nFull or LoRA; the run goes under " + f"`{runs_dir}`.")
        with gr.Row():
            name = gr.Textbox(label="Run name", elem_id="name")
            model = gr.Textbox(label="Model (folder or hub id)", elem_id="model")
            method = gr.Radio(["lora", "full"], value="lora", label="Method", elem_id="method")
        with gr.Row():
            train = gr.Textbox(label="Training manifest", elem_id="train")
            val = gr.Textbox(label="Validation manifest", elem_id="val")
            evaluate = gr.Textbox(label="Scored before and after (manifest)", elem_id="evaluate")
        with gr.Row():
            lr = gr.Number(value=1e-4, label="Learning rate", elem_id="lr")
            epochs = gr.Number(value=3, precision=0, label="Epochs", elem_id="epochs")
            batch = gr.Number(value=8, precision=0, label="Batch size", elem_id="batch")
            rank = gr.Number(value=16, precision=0, label="LoRA rank", elem_id="rank")
            max_steps = gr.Number(value=None, precision=0, label="Max steps (optional)", elem_id="max_steps")
            eval_wer = gr.Checkbox(value=True, label="WER at each evaluation", elem_id="eval_wer")
        with gr.Row():
            start_button = gr.Button("Start", variant="primary", elem_id="start")
            stop_button = gr.Button("Stop", variant="stop", elem_id="stop")
        status = gr.Markdown(elem_id="status")
        plot = gr.LinePlot(x="step", y="value", color="curve", label="Curves", elem_id="curves")
        log = gr.Textbox(label="Log", lines=16, max_lines=16, autoscroll=True, elem_id="log")
        inputs = [model, train, val, method, lr, epochs, batch, rank, max_steps, evaluate, eval_wer]
        start_button.click(start, inputs=[name, *inputs], outputs=status)
        stop_button.click(stop, outputs=status)
        gr.Timer(2.0).tick(poll, outputs=[status, log, plot])
    return page


FIELDS = ("model", "train", "val", "method", "learning-rate", "epochs", "batch-size", "lora-rank", "max-steps",
          "evaluate", "eval-wer")  # fmt: skip


def serve_train_page(runs_dir: str | Path, *, host: str = "127.0.0.1", port: int = 7860) -> None:
    """Run the training page until interrupted or terminated (never a public share link)."""
    page = build_train_page(runs_dir)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM as Ctrl-C: atexit then stops the job
    page.queue().launch(server_name=host, server_port=port, share=False, show_error=True)


__all__ = ["TrainingJob", "build_train_page", "form_argv", "serve_train_page"]
