"""Start the training worker under torchrun, from Python (the Kedro train node, the CLI, tests).

The job runs in a child process so that Kedro never shares a process (or CUDA context) with training and
the worker never imports Kedro. ``check=True`` semantics: any rank failing fails torchrun, which fails
this call with ``TrainingFailedError``, which fails the node, so DVC records nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from asr_pipeline.training.config import TrainConfig


class TrainingFailedError(RuntimeError):
    """torchrun exited non-zero; the failing rank's traceback is in the console output above."""

    def __init__(self, returncode: int, config_path: str | Path) -> None:
        self.returncode = returncode
        self.config_path = str(config_path)
        super().__init__(
            f"training failed: torchrun exited with code {returncode} for config {config_path}; "
            "the failing rank's traceback is printed above it"
        )


def torchrun_command(
    config_path: str | Path,
    nproc_per_node: int,
    *,
    nnodes: int = 1,
    node_rank: int = 0,
    rdzv_endpoint: str | None = None,
) -> list[str]:
    """The torchrun command line; single node uses ``--standalone`` (a local rendezvous on a free port)."""
    if nproc_per_node < 1:
        raise ValueError(f"nproc_per_node must be >= 1, got {nproc_per_node}")
    command = [sys.executable, "-m", "torch.distributed.run"]
    if nnodes == 1:
        command.append("--standalone")
    else:
        if rdzv_endpoint is None:
            raise ValueError(f"a {nnodes}-node run needs rdzv_endpoint (host:port of the rendezvous node)")
        command += [
            "--nnodes",
            str(nnodes),
            "--node-rank",
            str(node_rank),
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            rdzv_endpoint,
        ]
    command += [
        "--nproc-per-node",
        str(nproc_per_node),
        "-m",
        "asr_pipeline.training.worker",
        "--config",
        str(config_path),
    ]
    return command


def cpu_threads_per_rank(nproc_per_node: int) -> int:
    return max(1, _available_cores() // nproc_per_node)


def _available_cores() -> int:
    # The affinity mask, not os.cpu_count(): a container or `taskset` may allow fewer cores than exist.
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def launch_training(
    config_path: str | Path,
    nproc_per_node: int,
    *,
    nnodes: int = 1,
    node_rank: int = 0,
    rdzv_endpoint: str | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Run the worker on ``nproc_per_node`` ranks of this node; output streams to this console.

    ``env`` adds to (and overrides) this process's environment. ``OMP_NUM_THREADS`` is set to the cores
    per rank unless ``env`` names it, so ranks do not each start one OpenMP thread per core and
    oversubscribe the machine (torchrun's own default is 1, which leaves CPU ranks on one core each).
    """
    command = torchrun_command(
        config_path, nproc_per_node, nnodes=nnodes, node_rank=node_rank, rdzv_endpoint=rdzv_endpoint
    )
    child_env = {**os.environ, "OMP_NUM_THREADS": str(cpu_threads_per_rank(nproc_per_node)), **(env or {})}
    try:
        subprocess.run(command, env=child_env, check=True)
    except subprocess.CalledProcessError as error:
        raise TrainingFailedError(error.returncode, config_path) from None


__all__ = ["TrainingFailedError", "cpu_threads_per_rank", "launch_training", "torchrun_command"]


def run_training(config: TrainConfig, nproc_per_node: int, **launch: Any) -> dict[str, Any]:
    """Save ``config`` into its run dir, train there under torchrun, and return the run's final metrics.

    The one path from a resolved config to a finished run, shared by the Kedro train node and
    ``asr-pipeline train``; ``launch`` takes the multi-node options of ``launch_training``.
    """
    from asr_pipeline.training.config import save_json
    from asr_pipeline.training.run_layout import CONFIG_FILE, METRICS_FILE

    run_dir = Path(config.run.output_dir)
    config_path = run_dir / CONFIG_FILE
    save_json(config, config_path)
    launch_training(config_path, nproc_per_node, **launch)
    return json.loads((run_dir / METRICS_FILE).read_text())
