"""The Slurm batch script: run by bash with stand-ins for srun and scontrol (no cluster here), each node's
command is the same train command with that node's launch flags, and it builds the launcher's torchrun."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from asr_pipeline.cli import build_parser
from asr_pipeline.training.launch import torchrun_command
from asr_pipeline.training.slurm import SlurmJob, node_command, render_slurm_script

TRAIN_ARGS = [
    "--train-manifest", "data/train dir/shard-0.parquet",  # a space: quoting must survive two shells
    "--output-dir", "runs/it's-mine",  # and a single quote
    "--backend", "cuda",
    "--epochs", "3",
]  # fmt: skip


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def cluster(tmp_path):
    """A bin folder where `scontrol show hostnames` names two nodes and `srun` runs its command once per
    node with SLURM_NODEID set, and a stand-in python that records its argv per node."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    executable(
        bin_dir / "scontrol",  # a long node list: a script reading only its first line SIGPIPEs scontrol
        '#!/bin/bash\n[ "$1 $2" = "show hostnames" ] && printf "gpu-a\\ngpu-b\\n" && seq -f "gpu-%g" 200000\n',
    )
    executable(
        bin_dir / "srun",
        '#!/bin/bash\nwhile [[ "$1" == --* ]]; do shift; done\n'
        'for node in $(seq 0 $((SLURM_NNODES - 1))); do SLURM_NODEID=$node "$@" || exit 1; done\n',
    )
    record = tmp_path / "argv"
    python = executable(
        bin_dir / "python-recorder",
        f"#!{os.sys.executable}\nimport json, os, sys\n"
        f'open("{record}-" + os.environ["SLURM_NODEID"], "w").write(json.dumps(sys.argv[1:]))\n',
    )
    return bin_dir, python, record


def run_script(script: str, bin_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "job.sbatch"
    path.write_text(script)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_NODELIST": "gpu-[a-b]"}
    env |= {"SLURM_NNODES": "2", "SLURM_JOB_ID": "4242"}
    subprocess.run(["bash", str(path)], env=env, check=True, cwd=tmp_path)


def test_each_node_runs_the_same_train_command_with_its_own_rank_and_the_launchers_torchrun(
    cluster, tmp_path
):
    bin_dir, python, record = cluster
    job = SlurmJob(nnodes=2, nproc_per_node=4, gpus_per_node=4, port=29411)

    run_script(render_slurm_script(TRAIN_ARGS, job, python=str(python)), bin_dir, tmp_path)

    for node in (0, 1):
        argv = json.loads(Path(f"{record}-{node}").read_text())
        assert argv[:3] == ["-m", "asr_pipeline.cli", "train"]
        assert argv[3 : 3 + len(TRAIN_ARGS)] == TRAIN_ARGS, "the user's flags reach every node unchanged"
        args = build_parser().parse_args(argv[2:])
        launch = dict(
            nnodes=args.nnodes,
            node_rank=args.node_rank,
            rdzv_endpoint=args.rdzv_endpoint,
            rdzv_id=args.rdzv_id,
            rdzv_backend=args.rdzv_backend,
        )
        assert launch == dict(
            nnodes=2, node_rank=node, rdzv_endpoint="gpu-a:29411", rdzv_id="4242", rdzv_backend="c10d"
        )
        # What cli.train.run hands to run_training, as torchrun_command turns it into torchrun's argv:
        assert torchrun_command("config.json", args.nproc_per_node, **launch) == torchrun_command(
            "config.json",
            4,
            nnodes=2,
            node_rank=node,
            rdzv_endpoint="gpu-a:29411",
            rdzv_id="4242",
            rdzv_backend="c10d",
        )


def test_the_directives_ask_for_one_launcher_per_node_and_the_gpus_and_options_given():
    job = SlurmJob(
        nnodes=3,
        nproc_per_node=8,
        gpus_per_node=8,
        partition="gpu",
        time="2-00:00:00",
        sbatch={"qos": "high"},
    )

    script = render_slurm_script(TRAIN_ARGS, job, python="python3")

    directives = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    assert directives == [
        "#SBATCH --job-name=asr-pipeline-train",
        "#SBATCH --nodes=3",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --output=slurm-%j.out",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --partition=gpu",
        "#SBATCH --time=2-00:00:00",
        "#SBATCH --qos=high",
    ]
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


@pytest.mark.parametrize("flag", ["--node-rank", "--nnodes", "--rdzv-endpoint=h:1", "--rdzv-id"])
def test_launch_flags_the_script_sets_per_node_are_refused_among_the_train_flags(flag):
    with pytest.raises(ValueError, match=flag.split("=")[0] + ".*leave them out"):
        node_command([*TRAIN_ARGS, flag, "1"], SlurmJob(nnodes=2, nproc_per_node=1))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(nnodes=0, nproc_per_node=1), "nnodes >= 1"),
        (dict(nnodes=2, nproc_per_node=4, gpus_per_node=2), "gpus_per_node=2 but nproc_per_node=4"),
        (dict(nnodes=2, nproc_per_node=1, port=70000), "port"),
        (dict(nnodes=2, nproc_per_node=1, sbatch={"--mem": "1G"}), "without dashes"),
    ],
)
def test_a_job_slurm_could_not_run_as_meant_is_refused_naming_the_option(options, message):
    with pytest.raises(ValueError, match=message):
        SlurmJob(**options)
