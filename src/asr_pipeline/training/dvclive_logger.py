"""Training curves for ``dvc plots show`` / ``dvc exp show``: rank 0's events, logged with DVCLive.

Layout, under the run dir (the train stage's DVC out)::

    dvclive/
      metrics.json                       the latest value of every metric, and "step"
      plots/metrics/train/loss.tsv       step<TAB>loss, one row per "train" event
      plots/metrics/train/lr.tsv         ... grad_norm.tsv, audio_seconds_per_sec.tsv
      plots/metrics/val/cer.tsv          one row per "validation" event; also wer.tsv, loss.tsv
      params.yaml                        a fine-tuning run's "finetune" event (method, base model, trainable
                                         parameters, LoRA settings) and its "early_stop" decision

Every row is keyed by the optimizer step, so train and validation curves share their x axis. The
project's ``dvc.yaml`` declares these files under ``plots:``; DVCLive is told to write no ``dvc.yaml`` of
its own (``dvcyaml=None``), which would fight the project's, and to save no experiment
(``save_dvc_exp=False``): ``dvc exp run`` / ``dvc repro`` own experiments, and the run dir is already a
stage output. Parameters come from ``params.yaml`` and the final metrics from ``data/metrics/train.json``,
which the train stage already declares, so ``dvc exp show`` compares runs without DVCLive's copies.

Training never changes a repository it was not asked to touch. DVCLive opens the DVC project it runs in,
and in a Git repository without DVC it would run ``dvc init`` there and stage the new files with git
(``dvclive.dvc.get_dvc_repo``): ``asr-pipeline train`` started inside someone else's checkout would
initialise DVC in it. So DVC integration is on only inside a DVC project (a ``.dvc`` folder in the working
directory or above it, where DVC itself looks: ``dvc_project_root``); anywhere else DVCLive writes the same
files but never looks for a repository (``_live_without_repo``).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from asr_pipeline.run_layout import WEIGHTS

DVCLIVE_DIR = "dvclive"
TRAIN_METRICS = (
    "loss",
    "perplexity",
    "lr",
    "grad_norm",
    "audio_seconds_per_sec",
)  # "train" event values -> train/<name>
VAL_METRICS = {
    "val_loss": "loss",
    "val_perplexity": "perplexity",  # hf_finetune's autoregressive models
    "val_cer": "cer",
    "val_wer": "wer",
    "val_accuracy": "accuracy",
}  # -> val/<name>
# Events logged as DVCLive params (dvclive/params.yaml): fine-tuning's method, base model, trainable parameters
# and LoRA settings (training.finetune), and the early-stopping decision (training.early_stopping).
FINETUNE_EVENTS = {"finetune": "finetune", "early_stop": "early_stop"}


class DVCLiveLogger:
    """An ``events.EventListener`` that writes "train" and "validation" events with DVCLive.

    ``resume``: continue the curves of a run resumed in place (DVCLive keeps the rows it has); otherwise
    the directory is started afresh.
    """

    def __init__(self, run_dir: str | Path, resume: bool = False) -> None:
        from dvclive import Live  # imports dvc: only rank 0 of a run pays for it

        self.directory = Path(run_dir) / DVCLIVE_DIR
        self.dvc_integration = dvc_project_root() is not None
        live_class = Live if self.dvc_integration else _live_without_repo()
        self.live = live_class(
            dir=str(self.directory), resume=resume, report=None, save_dvc_exp=False, dvcyaml=None
        )

    def on_event(self, kind: str, step: int, epoch: int, values: dict[str, Any]) -> None:
        if kind in FINETUNE_EVENTS:  # what a fine-tuning run is: dvclive/params.yaml, beside the curves
            self.live.log_params({FINETUNE_EVENTS[kind]: _plain(values)})
            if kind == "finetune":
                for name in ("trainable_params", "total_params"):
                    self.live.log_metric(f"finetune/{name}", values[name], plot=False)
            self.live.make_summary()
            return
        if kind == "train":
            logged = {f"train/{name}": values[name] for name in TRAIN_METRICS if name in values}
        elif kind == "validation":  # with validation.score_averages also val/cer_averaged, val/loss_ema, ...
            logged = {
                f"val/{short}{suffix}": values[f"{name}{suffix}"]
                for suffix in ("", *(f"_{weights}" for weights in WEIGHTS))
                for name, short in VAL_METRICS.items()
                if f"{name}{suffix}" in values
            }
        else:
            return
        self.live.step = step
        for name, value in logged.items():
            if value is not None:
                # DVCLive writes NaN/inf as text, which would turn the plot's y axis into categories:
                # such a value goes to metrics.json only.
                self.live.log_metric(name, float(value), plot=math.isfinite(value))
        self.live.log_metric("epoch", epoch, plot=False)
        self.live.make_summary()  # metrics.json after every event: a crashed run keeps its curves' state

    def close(self) -> None:
        # DVCLive never closes the DVC repository it opened (``Live._dvc_repo``, dvclive 3.49): its state
        # databases and Git pack files would stay open for the life of the process (12 to 26 descriptors a
        # run in a process that trains many times).
        try:
            self.live.end()
        finally:
            repo = getattr(self.live, "_dvc_repo", None)
            if repo is not None:
                repo.close()


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    # YAML-safe: infinities (an early stop's unset best score) as strings, tuples as lists.
    def plain(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)
        if isinstance(value, dict):
            return {key: plain(inner) for key, inner in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(inner) for inner in value]
        return value

    return plain(values)


def dvc_project_root(start: str | Path | None = None) -> Path | None:
    """The DVC project ``start`` (default: the working directory) lies in: the nearest folder at or above
    it holding ``.dvc/``, searched as ``dvc.repo.Repo.find_root`` does (up to the filesystem's mount
    point); None outside any DVC project."""
    folder = Path(start or os.getcwd()).resolve()
    while True:
        if (folder / ".dvc").is_dir():
            return folder
        if folder.parent == folder or os.path.ismount(folder):
            return None
        folder = folder.parent


def _live_without_repo() -> type:
    """``dvclive.Live`` that never opens, initialises or stages anything in a repository.

    DVCLive has no option for this: ``Live._init_dvc`` is where it finds the repository, running
    ``dvc init`` in a Git one without DVC. Skipping it leaves what this logger uses (metrics, TSV plots,
    the summary) unchanged; tests/training/test_dvclive_logger.py checks a foreign Git repository stays
    untouched, so a DVCLive release that moves this hook fails there, not in a user's checkout.
    """
    from dvclive import Live

    class LiveWithoutRepo(Live):
        def _init_dvc(self) -> None:
            self._dvc_repo = None

    return LiveWithoutRepo


__all__ = ["DVCLIVE_DIR", "DVCLiveLogger", "dvc_project_root"]
