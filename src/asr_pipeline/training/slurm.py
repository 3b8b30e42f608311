"""A Slurm batch script for a multi-node training, rendered from the same ``asr-pipeline train`` command.

The script runs one task per node (``srun --ntasks-per-node 1``); each task is the very command a user would
type on that node by hand: ``asr-pipeline train <the same flags> --nnodes N --node-rank <its SLURM_NODEID>
--rdzv-endpoint <first node>:<port> --rdzv-id <SLURM_JOB_ID> --rdzv-backend c10d``. So everything the launcher
does on one machine happens on each node of the job too: the checks before torchrun starts, node 0 preparing
the run dir, rank 0 holding its lock, the ranks dying with their launcher (``training.lifeline``), torchrun
started with ``launch.torchrun_command``. Nothing here trains; ``sbatch`` the file.

Why a rendered script beside the Dask/jobqueue route (``executors``): the data stages map independent shards
over whatever workers a cluster grants, but a DDP job needs all its nodes at once, started together and
rendezvousing: that is what a Slurm allocation gives, and how the reference HuBERT recipes launch on clusters.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# The launch flags the script sets per node; given among the train flags they would contradict it.
SCRIPT_SET_FLAGS = ("--nnodes", "--node-rank", "--rdzv-endpoint", "--rdzv-id", "--rdzv-backend")
DEFAULT_PORT = 29500
# The first node of the allocation: the c10d rendezvous host. `sed -n 1p` reads the whole list: `head -n 1`
# would exit early and scontrol's SIGPIPE fail the script under pipefail (exit 141, seen in a test).
_HEAD_NODE = 'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)'
_SBATCH_NAME = re.compile(r"^[a-z][a-z-]*$")


@dataclass(frozen=True)
class SlurmJob:
    """What the allocation asks for. ``gpus_per_node`` 0: CPU ranks (``nproc_per_node`` of them a node,
    ``cpus_per_task`` cores for all of them together); else one rank per GPU. ``sbatch`` holds any other
    ``#SBATCH`` option by its long name without dashes (``{"mem": "200G", "qos": "high"}``)."""

    nnodes: int
    nproc_per_node: int
    gpus_per_node: int = 0
    job_name: str = "asr-pipeline-train"
    partition: str | None = None
    time: str | None = None  # Slurm's formats: "2-00:00:00", "12:00:00"
    account: str | None = None
    cpus_per_task: int | None = None
    port: int = DEFAULT_PORT
    log: str = "slurm-%j.out"  # %j: the job id
    sbatch: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.nnodes < 1:
            raise ValueError(f"a Slurm job needs nnodes >= 1, got {self.nnodes}")
        if self.nproc_per_node < 1:
            raise ValueError(f"a Slurm job needs nproc_per_node >= 1, got {self.nproc_per_node}")
        if self.gpus_per_node and self.gpus_per_node != self.nproc_per_node:
            raise ValueError(
                f"gpus_per_node={self.gpus_per_node} but nproc_per_node={self.nproc_per_node}: each rank "
                "trains on one GPU of its node; give them equal"
            )
        if not 0 < self.port < 65536:
            raise ValueError(f"the rendezvous port must lie in 1..65535, got {self.port}")
        bad = [name for name in self.sbatch if not _SBATCH_NAME.match(name)]
        if bad:
            raise ValueError(f"#SBATCH option names are long names without dashes (mem, qos), got {bad}")

    def directives(self) -> list[str]:
        options: dict[str, object] = {
            "job-name": self.job_name,
            "nodes": self.nnodes,
            "ntasks-per-node": 1,  # one launcher per node; it starts the node's ranks under torchrun
            "output": self.log,
        }
        if self.gpus_per_node:
            options["gpus-per-node"] = self.gpus_per_node
        for name in ("partition", "time", "account"):
            if getattr(self, name) is not None:
                options[name] = getattr(self, name)
        if self.cpus_per_task is not None:
            options["cpus-per-task"] = self.cpus_per_task
        options.update(self.sbatch)
        return [f"#SBATCH --{name}={value}" for name, value in options.items()]


def node_command(train_args: Sequence[str], job: SlurmJob, python: str = sys.executable) -> str:
    """The shell text each node runs: the ``train`` command with the job's launch flags, Slurm's variables
    left for the node's own shell to expand (``$SLURM_NODEID`` differs per node)."""
    given = sorted({arg.split("=", 1)[0] for arg in train_args} & set(SCRIPT_SET_FLAGS))
    if given:
        raise ValueError(
            f"{', '.join(given)}: the Slurm script sets these per node (from the allocation); leave them out"
        )
    fixed = [python, "-m", "asr_pipeline.cli", "train", *train_args]
    fixed += [
        "--nnodes",
        str(job.nnodes),
        "--nproc-per-node",
        str(job.nproc_per_node),
        "--rdzv-backend",
        "c10d",
    ]
    per_node = (
        f'--node-rank "$SLURM_NODEID" --rdzv-endpoint "$head_node:{job.port}" --rdzv-id "$SLURM_JOB_ID"'
    )
    return f"{shlex.join(fixed)} {per_node}"


def render_slurm_script(train_args: Sequence[str], job: SlurmJob, python: str = sys.executable) -> str:
    """The batch script (module docstring) for ``asr-pipeline train <train_args>`` on ``job``'s nodes."""
    lines = [
        "#!/bin/bash",
        *job.directives(),
        "# Rendered by `asr-pipeline train ... --slurm-script`: one launcher per node, each the same train",
        "# command with its own --node-rank; rendezvous (c10d) on the allocation's first node.",
        "set -euo pipefail",
        _HEAD_NODE,
        "export head_node",
        # Single quotes: the node's own shell expands $SLURM_NODEID, not the batch shell.
        f"srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c {shlex.quote('exec ' + node_command(train_args, job, python))}",
        "",
    ]
    return "\n".join(lines)


__all__ = ["DEFAULT_PORT", "SCRIPT_SET_FLAGS", "SlurmJob", "node_command", "render_slurm_script"]
