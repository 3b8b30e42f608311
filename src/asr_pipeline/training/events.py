"""``events.jsonl``: the run's event log, and the one place its schema is written down.

Rank 0 writes one JSON object per line to the run dir; the other ranks write nothing. A resumed run
appends to the log it resumes from. Every event is::

    {"type": "init"|"pretrained"|"init_from"|"dry_run"|"data"|"train"|"validation"|"lr_control"|"epoch"|"checkpoint"
             |"schedule"|"grow"|"deterministic"|"kernels"|"compile"|"summary"
             |"abort",
     "step": int, "epoch": int, "time": unix seconds, "values": {...}}

``step`` is the number of optimizer steps taken so far (skipped ones included); ``epoch`` counts from 0.
``values`` by type, in the order a run writes them:

``init``, once, first, only when ``model.init`` is set (and ``run.resume_from`` is not): ``schemes`` (kind ->
scheme, as configured) and ``modules`` (kind -> modules initialised; ``models.initialization``).
``pretrained``, once, first after it, only when ``model.load_pretrained_weights`` is set (and ``run.resume_from`` is
not): the architecture's import report (W2V-BERT: ``models.w2v_bert_hf.load_hf_weights``), e.g. ``path``,
``loaded``, ``skipped`` ({name: reason}), ``left_at_init``.
``init_from``, once, first, only when ``run.init_from`` is set (and ``run.resume_from`` is not)
    ``path`` (the .safetensors read), ``loaded`` (tensors copied), ``skipped`` ({name: "saved shape ->
    model shape" or "not in the model"}), ``not_in_source`` (model tensors left as initialised).
``dry_run``, once, only when ``run.dry_run`` is set; nothing follows it (no summary)
    ``loss`` (per target token over every rank's first batch), ``tokens``, ``utterances``.
``deterministic``, once per start, only with ``run.deterministic``: the settings in force
    (``training.determinism.settings``).
``kernels``, once per start, before ``data``: ``choice`` (``run.kernels``) and the ops whose Triton kernel it
    runs on this device (``asr_kernels.kernel_ops``): ``eager`` and ``compiled`` (inside a torch.compile
    graph); under ``auto`` a call the kernel does not cover (a dtype it leaves out) still takes the reference.
``data``, once per start (a resumed run writes another), before training; rank 0's view
    ``train``: ``kind`` ("shards" or "raw"), ``selection`` (``data.dataset.SelectionReport``),
    ``skipped``, ``skipped_by_reason``, ``first_skipped`` (raw manifest records left out while indexing);
    ``val``: ``kind``, ``examples`` and the same skip fields, or None; ``batching``: ``batch_size`` or
    ``unit``/``budget``/``max_samples``, ``sort_buffer_size``, ``sort_by_length_desc``,
    ``oversized_examples`` (over the budget alone: each is a batch of one), ``time_buckets`` (the lengths
    ``data.pad_to_buckets`` pads to, or None) and ``epoch0``
    (``data.batching.BatchPlanStats`` of epoch 0 over all ranks: batches, padding_efficiency, ...);
    ``loader``: ``num_workers``, ``prefetch_factor``, ``persistent_workers``, ``pin_memory``.
``schedule``, at the start of every epoch, only when ``train.schedule`` sets keys
    each scheduled key (dotted, e.g. ``optim.gradient_clip_norm``) with its value in this epoch.
``grow``, only with ``train.grow``: for depth growth at the start of the first epoch and of every growth
epoch, for widening at the start of every widening epoch (before that epoch's depth event, if any)
    depth: ``depth`` (encoder blocks in use from now on), ``blocks`` (the full depth), ``joined`` (indices of
    the blocks initialised afresh now; none at the start); widening: ``width`` (the fraction of the full
    width from now on) and ``changed`` (the model-config fields it changed, {field: [old, new]}).
``compile``, only with ``run.compile`` (``training.hooks.CompileHook``): after the first optimizer step of
each start (``phase`` "first_step") and after every epoch (``phase`` "epoch", with ``saved_bytes``: the
compile cache's ``artifacts.bin`` rank 0 wrote, 0 when nothing new compiled)
    ``mode``, ``backend``, ``shapes`` ("buckets" with ``data.pad_to_buckets``, else "auto"), ``cache_dir``,
    ``cache_loaded`` (a cache's artifacts were loaded before the first compile), ``first_step_sec`` (from the
    Trainer's start to the end of the first step: model build, compile, the step), and since the start
    (``training.compile.CompileCounts``): ``compiles``, ``recompiles``, ``graphs``, ``graph_breaks``,
    ``cache_hits``, ``cache_misses``, ``compile_sec``.
``train``, every ``run.log_every`` steps, over the steps since the previous ``train`` event and summed
over ranks
    ``loss`` (per target token), ``lr`` and ``grad_norm`` (of the last step; the norm before clipping),
    ``audio_seconds_per_sec`` (throughput: seconds of training audio per wall-clock second, all ranks),
    ``loader_wait_fraction`` (rank 0's share of the window's wall time, validation included, spent waiting
    for the loader's next batch: near 0 when loading is hidden behind the steps), ``utterances``, and the
    counters.
``checkpoint``, every ``run.checkpoint_every_steps`` steps when that is set
    ``path`` (the ``checkpoint_latest`` directory).
``validation``, every ``validation.every_steps`` steps when that is set, and after every epoch (unless
that epoch's last step was just validated), when there are validation manifests
    ``val_loss`` (per target token), ``val_cer`` and ``val_wer`` (percent), ``utterances``, ``words``,
    ``chars``, ``decoding`` ("greedy" or "beam"), ``duration_sec``, ``trigger`` ("step" or "epoch"),
    ``best`` (the lowest val CER so far: ``checkpoint_best`` holds these weights; for a model without text
    output, HuBERT pretraining, the lowest ``val_loss``, which is then per predicted frame, beside
    ``val_accuracy`` on masked frames in percent and ``masked_frames`` instead of the text scores), and with
    ``validation.log_samples`` = N ``samples``: N ``{"id", "reference", "hypothesis"}`` (plus ``n_best``:
    ``[{"text", "score"}]`` when ``validation.n_best > 1``), the first N utterances by id. With
    ``validation.score_averages``, each weight average's scores too, suffixed with its ``--weights`` name:
    ``val_cer_averaged``, ``val_wer_averaged``, ``val_loss_averaged``, ``duration_sec_averaged`` (one more
    pass) and the same with ``_ema``; ``best`` stays the raw weights' decision.
``lr_control``, after every epoch's closing validation, only under ``optim.lr_control: newbob``
    ``training.lr_control.Decision.to_event``: ``kind``, ``epoch`` and ``next_epoch`` (counting from 1),
    ``score_key``, ``scores`` (epoch -> the scores compared), ``change``, ``threshold``,
    ``old_learning_rate``, ``new_learning_rate`` (the next epoch's, before any warmup ramp), ``reason``
    ("decayed", "kept", "no_comparison", "between_updates" or "predefined").
``epoch``, after every epoch
    ``train_loss`` (per target token, summed over ranks), ``batches`` (per rank), ``skipped_examples``
    (summed over ranks: examples whose audio failed to decode during the epoch, see ``data.collate``;
    after a mid-epoch resume, of the resumed part only), ``steps``, ``audio_hours`` (summed over ranks),
    ``duration_sec``, ``lr`` (the rate of the epoch's last step), and the counters.
``checkpoint``, after every epoch
    ``path``, ``train_loss``, ``val_cer``, ``val_wer`` (None without validation), and ``best_path`` (the
    ``checkpoint_best`` directory) only when this epoch's val CER was the best so far and it was written.
``summary``, once, at the end (``epoch`` is the last one)
    ``train_loss``, ``val_cer``, ``val_wer``, ``steps``, ``epochs``, ``train_audio_hours`` (the same as
    ``metrics.json``), the counters, ``world_size``, ``parameter_digests`` (one per rank: equal when
    DDP kept the ranks in sync), ``train_selection`` (``data.dataset.SelectionReport``: the training
    examples available, kept, and dropped by cause), ``wall_sec``.
``abort``, last, when the run stops because of ``run.max_non_finite_losses``
    ``reason`` (the message the run fails with) and the counters.

The counters run over the whole run (a resumed run continues them) and are summed over ranks:
``skipped_steps`` (non-finite gradient norm; every rank skips the same steps, so counted once),
``non_finite_losses`` (micro-batches with a NaN/inf loss) and ``infeasible_targets`` (utterances with
fewer output frames than target tokens), see ``training.loop``.

Listeners (``EventListener``) see every event rank 0 writes: the live progress view
(``training.live``) and the DVCLive logger (``training.dvclive_logger``) are fed this way, so the
terminal, the plots and the log never disagree.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

EVENTS_FILE = "events.jsonl"


class EventListener(Protocol):
    """Something that reacts to each event rank 0 writes (a progress view, a metrics logger)."""

    def on_event(self, kind: str, step: int, epoch: int, values: dict[str, Any]) -> None: ...


class EventLog:
    """Appends events to ``events.jsonl`` on rank 0; a no-op elsewhere. Flushed per line, so a crashed
    run's log ends at its last event. ``listeners`` are called after each line is written."""

    def __init__(
        self, path: Path, enabled: bool, append: bool, listeners: Sequence[EventListener] = ()
    ) -> None:
        self._file = path.open("a" if append else "w") if enabled else None
        self.listeners = list(listeners) if enabled else []

    def write(self, kind: str, step: int, epoch: int, values: dict[str, Any]) -> None:
        if self._file is not None:
            event = {"type": kind, "step": step, "epoch": epoch, "time": time.time(), "values": values}
            self._file.write(json.dumps(event) + "\n")
            self._file.flush()
        for listener in self.listeners:
            listener.on_event(kind, step, epoch, values)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_events(run_dir: str | Path, kind: str | None = None) -> list[dict[str, Any]]:
    """A run's ``events.jsonl`` entries in order, of one ``kind`` when given."""
    lines = (Path(run_dir) / EVENTS_FILE).read_text().splitlines()
    return [event for event in map(json.loads, lines) if kind is None or event["type"] == kind]


__all__ = ["EVENTS_FILE", "EventListener", "EventLog", "read_events"]
