"""The torchrun entry point: ``python -m asr_pipeline.training.worker --config training_config.json``.

Runs under ``torchrun`` (RANK, WORLD_SIZE, LOCAL_RANK in the environment: one process per rank, DDP) or
as a plain single process (WORLD_SIZE unset). Never imports Kedro, so the same training runs from the
Kedro node (``training.launch``), the CLI, torchrun by hand, or a cluster scheduler.

The work is done elsewhere in ``training``, read in this order:

- ``lifeline``: a rank dies with torchrun and with the launcher that started it (``launch_training``)
- ``run_dir``: rank 0 holds the run dir's lock for the whole run (or runs under its launcher's)
- ``distributed``: the rank context from torchrun's environment, collectives, the fault-injection hook
- ``events``: ``events.jsonl`` and its schema
- ``loaders``: each rank's training and validation DataLoaders
- ``ctc``: the forward pass and CTC losses shared by training and validation
- ``validation``: greedy or beam-search (+ KenLM) decoding and error rates, scored on rank 0
- ``live``: rank 0's progress display (tqdm bar, or the ``run.tui`` live table)
- ``dvclive_logger``: the training curves for ``dvc plots show``
- ``loop``: the ``Trainer`` and ``train`` (loss normalisation, clipping, non-finite losses, validation
  every N steps, checkpoints)
- ``checkpoint``: the run dir's checkpoint files

Their public names are re-exported here, where callers and tests have always imported them from.
"""

from __future__ import annotations

import argparse
import os

from torch.distributed.elastic.multiprocessing.errors import record

from asr_pipeline.errors import install_excepthook
from asr_pipeline.training.config import load_json
from asr_pipeline.training.distributed import (
    FAIL_RANK_ENV,
    FAIL_STEP_ENV,
    DistributedContext,
    parameter_digest,
    setup_distributed,
    teardown_distributed,
)
from asr_pipeline.training.events import EVENTS_FILE, EventLog
from asr_pipeline.training.lifeline import follow_launcher
from asr_pipeline.training.loaders import DataBundle, build_data
from asr_pipeline.training.loop import METRICS_FILE, train
from asr_pipeline.training.run_dir import LOCK_HOLDER_ENV, rank_zero_lock
from asr_pipeline.training.trainer import Trainer
from asr_pipeline.training.validation import validate


@record  # under torchrun, writes this rank's traceback to the error file torchrun reports
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="training_config.json (training.config.save_json)")
    args = parser.parse_args(argv)
    follow_launcher()  # started by launch_training: die with torchrun and with the launcher
    config = load_json(args.config)
    ctx = setup_distributed(config)
    try:
        if ctx.is_main:  # one writer per run dir: rank 0 holds its lock, or the launcher does for it
            holder = os.environ.get(LOCK_HOLDER_ENV)
            with rank_zero_lock(config.run.output_dir, held_by=int(holder) if holder else None):
                train(config, ctx)
        else:
            train(config, ctx)
    finally:
        teardown_distributed()


__all__ = [
    "EVENTS_FILE",
    "FAIL_RANK_ENV",
    "FAIL_STEP_ENV",
    "METRICS_FILE",
    "DataBundle",
    "DistributedContext",
    "EventLog",
    "Trainer",
    "build_data",
    "main",
    "parameter_digest",
    "setup_distributed",
    "train",
    "validate",
]


if __name__ == "__main__":
    # Our own input and config errors (nothing left to train on, ...) print as one line here too; the error
    # file torchrun reads for the launcher's message still holds the traceback (errors.install_excepthook).
    install_excepthook(f"[rank {os.environ.get('RANK', '0')}] error")
    main()
