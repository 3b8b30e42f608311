"""``asr-pipeline train ... --slurm-script job.sbatch``: write the Slurm batch script of this training instead of
running it (``training.slurm``). The script's per-node command is the train command as typed, less the flags
that the script sets per node (``--nnodes``, ``--node-rank``, ``--rdzv-*``, ``--nproc-per-node``) and these.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from asr_pipeline.cli.common import UsageError, print_json

# The train flags (by dest) that stay out of the per-node command: the script's own, and the launch flags
# the script sets from the allocation.
_DROPPED_DESTS = {
    "slurm_script",
    "slurm_partition",
    "slurm_time",
    "slurm_option",
    "nnodes",
    "node_rank",
    "rdzv_endpoint",
    "rdzv_id",
    "rdzv_backend",
    "nproc_per_node",
}


def add_slurm_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--slurm-script",
        metavar="PATH",
        help="write a Slurm batch script that runs this training on --nnodes machines (one launcher per "
        "node, --nproc-per-node ranks each, c10d rendezvous on the allocation's first node) instead of "
        "training; submit it with sbatch. A file already there is refused",
    )
    parser.add_argument("--slurm-partition", metavar="NAME", help="the script's #SBATCH --partition")
    parser.add_argument("--slurm-time", metavar="LIMIT", help="the script's #SBATCH --time (e.g. 2-00:00:00)")
    parser.add_argument(
        "--slurm-option",
        action="append",
        metavar="NAME=VALUE",
        help="any other #SBATCH option by its long name (account=speech, mem=200G, qos=high); repeat for several",
    )


def node_train_args(train_argv: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """``train_argv`` (what followed ``train`` on the command line) without the flags the script sets or
    consumes; ``--flag value``, ``--flag=value`` and argparse's unambiguous abbreviations are recognized."""
    by_name = {name: action for action in parser._actions for name in action.option_strings}
    kept: list[str] = []
    tokens = iter(train_argv)
    for token in tokens:
        name, has_value, _ = token.partition("=")
        action = by_name.get(name)
        if action is None and name.startswith("--"):
            matches = {by_name[full] for full in by_name if full.startswith(name)}
            action = matches.pop() if len(matches) == 1 else None
        if action is None or action.dest not in _DROPPED_DESTS:
            kept.append(token)
            continue
        if not has_value and action.nargs != 0:
            next(tokens, None)  # its value
    return kept


def write_slurm_script(args: argparse.Namespace, config: Any, nproc_per_node: int) -> int:
    """Render and write the script (``--slurm-script``); prints a JSON summary. ``config``: the resolved
    TrainConfig, whose backend decides GPUs per node."""
    from asr_pipeline.training.slurm import SlurmJob, render_slurm_script

    path = Path(args.slurm_script)
    if path.exists():
        raise UsageError(f"--slurm-script {path}: a file is already there; remove it or choose another path")
    if not path.parent.is_dir():
        raise UsageError(f"--slurm-script {path}: no folder {path.parent}")
    options: dict[str, str] = {}
    for item in args.slurm_option or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--slurm-option {item!r}: expected NAME=VALUE, e.g. mem=200G")
        options[name] = value
    try:
        job = SlurmJob(
            nnodes=args.nnodes,
            nproc_per_node=nproc_per_node,
            gpus_per_node=nproc_per_node if config.run.backend == "cuda" else 0,
            partition=args.slurm_partition,
            time=args.slurm_time,
            log=str(path.resolve().parent / "slurm-%j.out"),  # Slurm opens it before the run dir exists
            sbatch=options,
        )
        argv = args.argv  # the whole command line (cli.main), global flags first
        script = render_slurm_script(node_train_args(argv[argv.index("train") + 1 :], args.train_parser), job)
    except ValueError as error:
        raise UsageError(str(error)) from None
    path.write_text(script)
    path.chmod(0o755)
    print_json({"slurm_script": str(path), "nnodes": job.nnodes, "nproc_per_node": job.nproc_per_node})
    return 0


__all__ = ["add_slurm_flags", "node_train_args", "write_slurm_script"]
