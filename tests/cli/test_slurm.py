"""``asr-pipeline train ... --slurm-script``: the script's per-node command is the typed train command (less the
flags the script sets), it resolves to the same training config, and sbatch-ed it really trains on two nodes."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from asr_pipeline.cli import build_parser, main, train_config_from_args
from asr_pipeline.cli.slurm import node_train_args
from tests.factories import NUM_BINS


def train_flags(shard: Path, tokenizer: Path, run_dir: Path) -> list[str]:
    return [
        "--train-manifest", str(shard), "--tokenizer", str(tokenizer), "--output-dir", str(run_dir),
        "--variant", "tiny", "--input-dim", str(NUM_BINS), "--epochs", "1", "--batch-size", "4",
    ]  # fmt: skip


def node_argv(script: str, node: int) -> list[str]:
    """The argv node ``node`` executes: the srun line's command, expanded by bash as the node's shell would,
    with ``printf`` in place of ``exec``."""
    srun = next(line for line in script.splitlines() if line.startswith("srun "))
    command = shlex.split(srun)[-1]
    assert command.startswith("exec ")
    env = {**os.environ, "SLURM_NODEID": str(node), "head_node": "gpu-a", "SLURM_JOB_ID": "4242"}
    printed = subprocess.run(
        ["bash", "-c", "printf '%s\\0' " + command.removeprefix("exec ")],
        env=env, capture_output=True, check=True,
    ).stdout  # fmt: skip
    return printed.decode().split("\0")[:-1]


def test_each_node_runs_the_typed_train_command_and_resolves_the_same_config(
    shard, tokenizer, tmp_path, capsys
):
    flags = train_flags(shard, tokenizer, tmp_path / "run")
    script_path = tmp_path / "job.sbatch"

    status = main(
        ["train", *flags, "--nnodes", "2", "--nproc-per-node", "2", "--slurm-script", str(script_path),
         "--slurm-partition", "cpu", "--slurm-option", "mem=8G"]
    )  # fmt: skip

    assert status == 0
    assert json.loads(capsys.readouterr().out)["slurm_script"] == str(script_path)
    assert not (tmp_path / "run").exists(), "rendering trains nothing and writes no run dir"
    script = script_path.read_text()
    assert (
        "#SBATCH --nodes=2" in script and "#SBATCH --partition=cpu" in script and "#SBATCH --mem=8G" in script
    )
    assert "gpus-per-node" not in script  # CPU ranks
    typed = train_config_from_args(build_parser().parse_args(["train", *flags]))[0]
    for node in (0, 1):
        argv = node_argv(script, node)
        assert argv[:4] == [sys.executable, "-m", "asr_pipeline.cli", "train"]
        assert argv[4 : 4 + len(flags)] == flags
        args = build_parser().parse_args(argv[3:])
        assert (args.nnodes, args.node_rank, args.nproc_per_node) == (2, node, 2)
        assert (args.rdzv_endpoint, args.rdzv_id, args.rdzv_backend) == ("gpu-a:29500", "4242", "c10d")
        assert args.slurm_script is None, "a node trains; it does not render again"
        assert train_config_from_args(args)[0] == typed


def test_a_script_path_already_taken_is_refused_and_kept(shard, tokenizer, tmp_path, capsys):
    taken = tmp_path / "job.sbatch"
    taken.write_text("mine")

    status = main(["train", *train_flags(shard, tokenizer, tmp_path / "run"), "--slurm-script", str(taken)])

    assert status == 2
    assert "already there" in capsys.readouterr().err
    assert taken.read_text() == "mine"


def test_the_flags_the_script_sets_are_dropped_in_every_spelling():
    parser = build_parser()._subparsers._group_actions[0].choices["train"]
    argv = ["--epochs", "3", "--nnod", "4", "--node-rank=1", "--rdzv-endpoint", "h:1", "--slurm-script", "x",
            "--slurm-option", "a=b", "--nproc-per-node", "8", "--output-dir", "r"]  # fmt: skip

    assert node_train_args(argv, parser) == ["--epochs", "3", "--output-dir", "r"]


@pytest.mark.slow  # two torchrun launches rendezvousing: ~1 min
def test_the_script_trains_on_two_nodes_when_srun_starts_its_tasks(shard, tokenizer, tmp_path):
    """srun and scontrol stand-ins start both node tasks at once on this machine (the first node: localhost)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in {
        "scontrol": "#!/bin/bash\necho localhost\necho localhost\n",
        # --kill-on-bad-exit: a failed task ends the others (a node left alone waits for its peer)
        "srun": '#!/bin/bash\nwhile [[ "$1" == --* ]]; do shift; done\npids=()\n'
        'for node in 0 1; do SLURM_NODEID=$node "$@" & pids+=($!); done\nstatus=0\n'
        'for _ in "${pids[@]}"; do wait -n || { status=1; kill "${pids[@]}" 2>/dev/null; }; done\nexit $status\n',
    }.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755 | stat.S_IXUSR)
    run_dir = tmp_path / "run"
    script = tmp_path / "job.sbatch"
    assert (
        main(
            ["train", *train_flags(shard, tokenizer, run_dir), "--nnodes", "2", "--slurm-script", str(script)]
        )
        == 0
    )
    port = 29500 + os.getpid() % 1000  # another test's rendezvous may hold the default port
    script.write_text(script.read_text().replace(":29500", f":{port}"))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": f"test-{os.getpid()}",
           "SLURM_JOB_NODELIST": "localhost", "OMP_NUM_THREADS": "1"}  # fmt: skip

    subprocess.run(["bash", str(script)], env=env, check=True, timeout=240)

    summary = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [event["values"]["world_size"] for event in summary if event["type"] == "summary"] == [2]
