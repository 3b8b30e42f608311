"""``events.jsonl``: the run's event log, and the one place its schema is written down.

Rank 0 writes one JSON object per line to the run dir; the other ranks write nothing. A resumed run
appends to the log it resumes from. Every event is::

    {"type": "init_from"|"dry_run"|"train"|"validation"|"epoch"|"checkpoint"|"summary", "step": int,
     "epoch": int, "time": unix seconds, "values": {...}}

``step`` is the number of optimizer steps taken so far (skipped ones included); ``epoch`` counts from 0.
``values`` by type, in the order a run writes them:

``init_from``, once, first, only when ``run.init_from`` is set (and ``run.resume_from`` is not)
    ``path`` (the .safetensors read), ``loaded`` (tensors copied), ``skipped`` ({name: "saved shape ->
    model shape" or "not in the model"}), ``not_in_source`` (model tensors left as initialised).
``dry_run``, once, only when ``run.dry_run`` is set; nothing follows it (no summary)
    ``loss`` (per target token over every rank's first batch), ``tokens``, ``utterances``.
``train``, every ``run.log_every`` steps, over the steps since the previous ``train`` event and summed
over ranks
    ``loss`` (per target token), ``lr`` and ``grad_norm`` (of the last step; the norm before clipping),
    ``audio_seconds_per_sec``, ``utterances``, and the counters.
``checkpoint``, every ``run.checkpoint_every_steps`` steps when that is set
    ``path`` (the ``checkpoint_latest`` directory).
``validation``, after every epoch when there are validation manifests
    ``val_loss`` (per target token), ``val_cer`` and ``val_wer`` (percent), ``utterances``, ``words``,
    ``chars``.
``epoch``, after every epoch
    ``train_loss`` (per target token, summed over ranks), ``batches`` (per rank), ``steps``,
    ``audio_hours`` (summed over ranks), ``duration_sec``, and the counters.
``checkpoint``, after every epoch
    ``path``, ``train_loss``, ``val_cer``, ``val_wer`` (None without validation), and ``best_path`` (the
    ``checkpoint_best`` directory) only when this epoch's val CER was the best so far and it was written.
``summary``, once, at the end (``epoch`` is the last one)
    ``train_loss``, ``val_cer``, ``val_wer``, ``steps``, ``epochs``, ``train_audio_hours`` (the same as
    ``metrics.json``), the counters, ``world_size``, ``parameter_digests`` (one per rank: equal when
    DDP kept the ranks in sync), ``train_selection`` (``data.dataset.SelectionReport``: the training
    examples available, kept, and dropped by cause), ``wall_sec``.

The counters run over the whole run (a resumed run continues them) and are rank 0's: ``skipped_steps``
(non-finite gradient norm; the same on every rank), ``non_finite_losses`` and ``infeasible_targets``
(fewer output frames than target tokens), see ``training.loop``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

EVENTS_FILE = "events.jsonl"


class EventLog:
    """Appends events to ``events.jsonl`` on rank 0; a no-op elsewhere. Flushed per line, so a crashed
    run's log ends at its last event."""

    def __init__(self, path: Path, enabled: bool, append: bool) -> None:
        self._file = path.open("a" if append else "w") if enabled else None

    def write(self, kind: str, step: int, epoch: int, values: dict[str, Any]) -> None:
        if self._file is not None:
            event = {"type": kind, "step": step, "epoch": epoch, "time": time.time(), "values": values}
            self._file.write(json.dumps(event) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


__all__ = ["EVENTS_FILE", "EventLog"]
