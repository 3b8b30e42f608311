"""One rank of a fine-tune under torchrun: ``python -m asr_pipeline.hf_finetune.worker --config JOB``.

``launch_finetune`` writes the job (the options and the folders) and starts ``options.nproc_per_node`` ranks
through the engine's launch path (``training.launch.launch_training``: torchrun, ranks that die with their
launcher, the first failing rank's traceback in the error), each running this module; they join a process
group (gloo on the CPU, NCCL on GPUs) and train one ``FinetuneRun`` together (its docstring: DDP).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from asr_pipeline.hf_finetune.options import HFFinetuneOptions, hf_finetune_options
from asr_pipeline.options import to_dict

JOB_FILE = "launch.json"  # beside the run dir: <name>/launch.json


def launch_finetune(
    options: HFFinetuneOptions, train_dir: Path, val_dir: Path | None, run_dir: Path, *, live: bool = False
) -> dict[str, Any]:
    """Train ``run_dir``'s fine-tune on ``options.nproc_per_node`` ranks; its ``train_results.json``. A failing
    rank fails the call (``training.launch.TrainingFailedError``)."""
    from asr_pipeline.hf_finetune.trainer import TRAIN_RESULTS
    from asr_pipeline.io.atomic import write_json_atomic
    from asr_pipeline.training.launch import launch_training

    job = Path(run_dir).parent / JOB_FILE
    write_json_atomic(job, {"options": to_dict(options), "train": str(train_dir), "run_dir": str(run_dir),
                            "val": None if val_dir is None else str(val_dir), "live": live})  # fmt: skip
    launch_training(job, options.nproc_per_node, module=__name__)
    return json.loads((Path(run_dir) / TRAIN_RESULTS).read_text())


def main(argv: list[str] | None = None) -> None:
    from torch.distributed.elastic.multiprocessing.errors import record

    from asr_pipeline.hf_finetune.trainer import FinetuneRun, pick_device
    from asr_pipeline.training.distributed import join_process_group, teardown_distributed
    from asr_pipeline.training.lifeline import follow_launcher

    @record  # writes this rank's traceback to the error file torchrun reports
    def run() -> None:
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument(
            "--config", required=True, help=f"the job file ({JOB_FILE}) launch_finetune wrote"
        )
        args = parser.parse_args(argv)
        follow_launcher()  # die with torchrun and with the launcher
        job = json.loads(Path(args.config).read_text())
        options = hf_finetune_options(job["options"], args.config)
        device = pick_device(options.device, int(os.environ.get("LOCAL_RANK", "0")))
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            join_process_group(device)
        try:
            val = Path(job["val"]) if job["val"] else None
            FinetuneRun(options, Path(job["train"]), val, Path(job["run_dir"]), live=job["live"]).run()
        finally:
            teardown_distributed()

    run()


__all__ = ["JOB_FILE", "launch_finetune", "main"]


if __name__ == "__main__":
    main()
