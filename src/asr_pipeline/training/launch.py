"""Start the training worker under torchrun, from Python (the Kedro train node, the CLI, tests).

The job runs in a child process so that Kedro never shares a process (or CUDA context) with training and
the worker never imports Kedro. ``check=True`` semantics: any rank failing fails torchrun, which fails
this call with ``TrainingFailedError``, which fails the node, so DVC records nothing.

What runs where: ``nproc_per_node`` processes on this machine (default: one per ``run.device_indices``
entry, else 1; ``cuda_device_index`` maps local ranks to GPUs), checked by ``check_devices`` before
torchrun starts, so a CUDA run on a machine without CUDA fails at once with the fix named. Several
machines: each runs the same launch with its own ``node_rank`` (``torchrun_command``). Nothing here
imports torch at module level: the CLI imports this module and ``--help`` must stay fast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from asr_pipeline.training.config import RunConfig, TrainConfig


class TrainingFailedError(RuntimeError):
    """torchrun exited non-zero. ``root_cause``: the first failing rank's exception and the last lines of
    its traceback (from torchrun's per-rank error files), when a rank recorded one; the whole traceback is
    in the console output above."""

    def __init__(self, returncode: int, config_path: str | Path, root_cause: str | None = None) -> None:
        self.returncode = returncode
        self.config_path = str(config_path)
        self.root_cause = root_cause
        where = (
            "the failing rank's traceback is printed above it"
            if root_cause is None
            else f"the first failure, {root_cause}"
        )
        super().__init__(
            f"training failed: torchrun exited with code {returncode} for config {config_path}; {where}"
        )


# The traceback lines of the failing rank that TrainingFailedError repeats (the innermost frames).
ROOT_CAUSE_TRACEBACK_LINES = 12


def first_rank_failure(log_dir: str | Path) -> str | None:
    """The earliest rank failure that torchrun's workers recorded under ``log_dir`` (its ``--log-dir``):
    ``local rank N: <exception>`` and the innermost traceback lines; None when no rank wrote an error file
    (killed by a signal, or failed before the worker's ``@record`` main ran).

    Earliest by the error file's modification time in nanoseconds: the recorded timestamp has whole seconds,
    and a rank that fails first usually takes the others down within the same second (their "Connection
    closed by peer" is the consequence, not the cause)."""
    failures = []
    for path in Path(log_dir).glob("*/attempt_*/*/error.json"):
        try:
            written = path.stat().st_mtime_ns
            message = json.loads(path.read_text())["message"]
            failures.append((written, int(path.parent.name), message["message"], message["extraInfo"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a half-written or foreign file: the console output still has the traceback
    if not failures:
        return None
    _, local_rank, summary, extra = min(failures, key=lambda failure: failure[:2])
    frames = str(extra.get("py_callstack", "")).rstrip().splitlines()
    tail = "\n".join(frames[-ROOT_CAUSE_TRACEBACK_LINES:])
    return f"local rank {local_rank}: {summary}\n{tail}"


# The engine's worker; hf_finetune.worker is the other module launched this way.
WORKER_MODULE = "asr_pipeline.training.worker"
RDZV_BACKENDS = ("c10d", "static")
DEFAULT_RDZV_ID = "asr-pipeline"
# The keys of params.yaml's train.launch (and the matching `asr-pipeline train` flags).
LAUNCH_KEYS = ("nproc_per_node", "nnodes", "node_rank", "rdzv_endpoint", "rdzv_id", "rdzv_backend")


def torchrun_command(
    config_path: str | Path,
    nproc_per_node: int,
    *,
    nnodes: int = 1,
    node_rank: int = 0,
    rdzv_endpoint: str | None = None,
    rdzv_id: str = DEFAULT_RDZV_ID,
    rdzv_backend: str = "c10d",
    log_dir: str | Path | None = None,
    module: str = WORKER_MODULE,
) -> list[str]:
    """The torchrun command line for this node: ``module`` (a worker taking ``--config``) on every rank.

    ``log_dir``: torchrun's ``--log-dir``, where each rank's ``error.json`` lands when it fails
    (``first_rank_failure`` reads them); None leaves torchrun's own temporary directory.

    One node: ``--standalone`` (a local rendezvous on a free port; the rendezvous options are unused).
    Several: every node runs this command with its own ``node_rank`` and the same ``rdzv_endpoint``
    (host:port on node 0) and ``rdzv_id``. ``c10d`` lets torchrun assign ranks as nodes arrive;
    ``static`` fixes this node's ranks by ``node_rank`` (the endpoint acts as the master address).
    Jobs sharing an endpoint must use different ``rdzv_id``s.
    """
    if nproc_per_node < 1:
        raise ValueError(f"nproc_per_node must be >= 1, got {nproc_per_node}")
    if nnodes < 1:
        raise ValueError(f"nnodes must be >= 1, got {nnodes}")
    command = [sys.executable, "-m", "torch.distributed.run"]
    if nnodes == 1:
        command.append("--standalone")
    else:
        if rdzv_endpoint is None:
            raise ValueError(
                f"a {nnodes}-node run needs rdzv_endpoint (host:port of the rendezvous node, the same "
                "on every node): set train.launch.rdzv_endpoint or --rdzv-endpoint"
            )
        if not 0 <= node_rank < nnodes:
            raise ValueError(f"node_rank must lie in [0, {nnodes}) for nnodes={nnodes}, got {node_rank}")
        if rdzv_backend not in RDZV_BACKENDS:
            raise ValueError(f"rdzv_backend must be one of {list(RDZV_BACKENDS)}, got {rdzv_backend!r}")
        command += [
            "--nnodes",
            str(nnodes),
            "--node-rank",
            str(node_rank),
            "--rdzv-backend",
            rdzv_backend,
            "--rdzv-endpoint",
            rdzv_endpoint,
            "--rdzv-id",
            rdzv_id,
        ]
    if log_dir is not None:
        command += ["--log-dir", str(log_dir)]
    command += [
        "--nproc-per-node",
        str(nproc_per_node),
        "-m",
        module,
        "--config",
        str(config_path),
    ]
    return command


def launch_options(params: Mapping[str, Any]) -> dict[str, Any]:
    """``train.launch`` params as keyword arguments of ``run_training``; unknown keys are refused.

    An absent (or null) ``nproc_per_node`` stays None: one process per ``run.device_indices`` entry, or 1.
    """
    unknown = sorted(set(params) - set(LAUNCH_KEYS))
    if unknown:
        raise ValueError(
            f"unknown train.launch key(s) {', '.join(unknown)}; train.launch accepts: {', '.join(LAUNCH_KEYS)}"
        )
    options: dict[str, Any] = {key: value for key, value in params.items() if value is not None}
    for key in ("nproc_per_node", "nnodes", "node_rank"):
        if key in options:
            options[key] = int(options[key])
    return options


def resolve_nproc_per_node(config: TrainConfig, nproc_per_node: int | None) -> int:
    """Processes on this node: as given, else one per ``run.device_indices`` entry, else 1.

    With ``device_indices`` each process owns one listed GPU, so an explicit count must match the list.
    """
    indices = config.run.device_indices
    if nproc_per_node is not None and nproc_per_node < 1:
        raise ValueError(f"nproc_per_node must be >= 1, got {nproc_per_node}")
    if not indices:
        return nproc_per_node or 1
    if nproc_per_node is not None and nproc_per_node != len(indices):
        raise ValueError(
            f"nproc_per_node={nproc_per_node} but device_indices={indices} lists {len(indices)} GPU(s): "
            "each process trains on one listed GPU; drop --nproc-per-node or list one GPU per process"
        )
    return len(indices)


def cuda_device_index(run: RunConfig, local_rank: int, local_world_size: int) -> int:
    """The CUDA device of local rank ``local_rank`` among ``local_world_size`` processes on its node.

    ``run.device_indices`` given: its ``local_rank``-th entry. Else one process: ``run.device_index``;
    several: ``cuda:<local rank>``, and then ``device_index`` must be left at 0 (it names one GPU).
    """
    if run.device_indices:
        if len(run.device_indices) != local_world_size:
            raise ValueError(
                f"device_indices={run.device_indices} lists {len(run.device_indices)} GPU(s) but "
                f"{local_world_size} process(es) run on this node; start one process per listed GPU "
                f"(--nproc-per-node {len(run.device_indices)})"
            )
        return run.device_indices[local_rank]
    if local_world_size == 1:
        return run.device_index
    if run.device_index != 0:
        raise ValueError(
            f"device_index={run.device_index} picks one GPU, but {local_world_size} processes run on this "
            "node; list one GPU per process with device_indices (--device-indices 0,1)"
        )
    return local_rank


def check_devices(config: TrainConfig, nproc_per_node: int, cuda_device_count: int | None = None) -> None:
    """Refuse a CUDA run this machine cannot start, before torchrun spawns anything.

    ``cuda_device_count`` defaults to ``torch.cuda.device_count()`` (after CUDA_VISIBLE_DEVICES).
    """
    run = config.run
    if run.backend != "cuda":
        return
    if cuda_device_count is None:
        import torch  # here, not at the top: the CLI imports this module and --help must stay fast

        cuda_device_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if cuda_device_count == 0:
        raise ValueError(
            "backend 'cuda' (--backend cuda) but no CUDA device is usable here (no GPU, no driver, a CPU "
            "build of torch, or CUDA_VISIBLE_DEVICES empty); train with --backend cpu or fix the CUDA setup"
        )
    wanted = [cuda_device_index(run, rank, nproc_per_node) for rank in range(nproc_per_node)]
    missing = [index for index in wanted if index >= cuda_device_count]
    if missing:
        raise ValueError(
            f"the run would use CUDA device(s) {wanted} but only {cuda_device_count} are visible "
            f"(indices 0..{cuda_device_count - 1}, after CUDA_VISIBLE_DEVICES); lower --device-index / "
            "--device-indices / --nproc-per-node"
        )


def check_config(config: TrainConfig) -> None:
    """Refuse a config the workers could only fail on after torchrun started (each rank with its own
    traceback): no vocabulary size, a model config its architecture refuses (sizes and options together,
    e.g. W2V-BERT's flex attention on narrow heads), or a resume/init source without a checkpoint. Raises
    ValueError or FileNotFoundError, one line naming the option and the flag to pass."""
    from asr_pipeline.models.loading import resolve_model_config
    from asr_pipeline.run_layout import require_checkpoint
    from asr_pipeline.training.config import check_vocab_source

    check_vocab_source(config)
    # The model's config as the workers resolve it, and at grow.start_width the architecture's narrower one.
    # A tokenizer's vocabulary is read in the workers (its file may be copied into the run dir after this):
    # until then, the smallest vocabulary that holds the blank (the one check that reads the size).
    vocab_size = config.model.vocab_size or max(2, config.model.blank_id + 1)
    for width in {1.0, config.grow.start_width or 1.0}:
        resolve_model_config(
            config.model, input_dim=config.data.input_dim, vocab_size=vocab_size, width=width
        )
    run = config.run
    if config.data.alignment is not None:
        from asr_pipeline.models.registry import get_spec

        if get_spec(config.model.architecture).output not in ("ctc", "hubert"):
            raise ValueError(
                f"data.alignment trains frame-wise on frame labels, but {config.model.architecture} has no "
                "frame outputs: use a CTC-output architecture (squeezeformer, zipformer, w2v-bert, hubert) "
                "or hubert-pretrain (the labels are its units)"
            )
    for key in ("alignment", "val_alignment"):
        path = getattr(config.data, key)
        if path is not None and not Path(path).is_file():
            raise FileNotFoundError(
                f"data.{key} {path!r}: no such file (run the stage that writes it: align, or HuBERT's units)"
            )
    if run.resume_from is not None:
        require_checkpoint(run.resume_from, "run.resume_from (--resume-from)")
    elif run.init_from is not None:  # ignored when resuming
        if Path(run.init_from).suffix == ".safetensors":
            if not Path(run.init_from).is_file():
                raise FileNotFoundError(f"run.init_from (--init-from) {run.init_from!r}: no such file")
        else:
            require_checkpoint(run.init_from, "run.init_from (--init-from)")
    check_feature_width(config)


def check_feature_width(config: TrainConfig) -> None:
    """The first training and validation shard hold ``data.input_dim``-wide features, the width the model
    is built for; else a ValueError naming the shard, both widths, the architecture's frontend and what to
    rerun. Raw manifests are featurized by the architecture's own frontend and checked when loaded."""
    from asr_pipeline.data.sources import resolve_manifests
    from asr_pipeline.io.shards import read_metadata
    from asr_pipeline.models.registry import frontend_of

    data, architecture = config.data, config.model.architecture
    for manifests, what in ((data.train_manifests, "training"), (data.val_manifests, "validation")):
        if not manifests:
            continue
        resolved = resolve_manifests(manifests, f"{what} manifest")
        if resolved.kind != "shards":
            continue
        first = resolved.paths[0]
        widths = sorted(set(read_metadata(first).column("cols").to_pylist()))
        if widths and widths != [data.input_dim]:
            raise ValueError(
                f"{what} shard {first} holds {'/'.join(map(str, widths))}-dim features, but the "
                f"{architecture} model is built for data.input_dim={data.input_dim} "
                f"({frontend_of(architecture)} frontend): extract the features for {architecture} "
                f"(params.yaml features.architecture, or asr-pipeline extract-features --architecture "
                f"{architecture}) or set data.input_dim (--input-dim) to the shards' width"
            )


def cpu_threads_per_rank(nproc_per_node: int) -> int:
    return max(1, _available_cores() // nproc_per_node)


def _available_cores() -> int:
    # The affinity mask, not os.cpu_count(): a container or `taskset` may allow fewer cores than exist.
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def launch_training(
    config_path: str | Path,
    nproc_per_node: int,
    *,
    env: Mapping[str, str] | None = None,
    **rendezvous: Any,
) -> None:
    """Run the worker on ``nproc_per_node`` ranks of this node; output streams to this console.

    ``rendezvous``: the multi-node options of ``torchrun_command`` (and its ``module``: the engine's worker
    unless another is named, e.g. ``hf_finetune.worker``). ``env`` adds to (and overrides)
    this process's environment. ``OMP_NUM_THREADS`` is set to the cores per rank unless ``env`` names it,
    so ranks do not each start one OpenMP thread per core and oversubscribe the machine (torchrun's own
    default is 1, which leaves CPU ranks on one core each).

    torchrun and its ranks die with this process, however it dies (``training.lifeline``): torchrun is
    started through ``lifeline``'s parent-death guard, and the ranks learn this pid (``LAUNCHER_PID_ENV``).
    """
    from asr_pipeline.training.lifeline import LAUNCHER_PID_ENV

    child_env = {
        **os.environ,
        "OMP_NUM_THREADS": str(cpu_threads_per_rank(nproc_per_node)),
        **(env or {}),
        LAUNCHER_PID_ENV: str(os.getpid()),
    }
    with tempfile.TemporaryDirectory(prefix="asr-pipeline-torchrun-") as log_dir:
        command = torchrun_command(config_path, nproc_per_node, log_dir=log_dir, **rendezvous)
        guarded = [sys.executable, "-m", "asr_pipeline.training.lifeline", "--parent", str(os.getpid()), "--"]
        try:
            subprocess.run([*guarded, *command], env=child_env, check=True)
        except subprocess.CalledProcessError as error:
            raise TrainingFailedError(error.returncode, config_path, first_rank_failure(log_dir)) from None


__all__ = [
    "DEFAULT_RDZV_ID",
    "LAUNCH_KEYS",
    "RDZV_BACKENDS",
    "WORKER_MODULE",
    "TrainingFailedError",
    "check_config",
    "check_devices",
    "check_feature_width",
    "cpu_threads_per_rank",
    "cuda_device_index",
    "first_rank_failure",
    "launch_options",
    "launch_training",
    "resolve_nproc_per_node",
    "run_training",
    "torchrun_command",
]


def run_training(
    config: TrainConfig,
    nproc_per_node: int | None = None,
    *,
    overwrite: bool = False,
    run_files: Mapping[str, bytes] | None = None,
    **launch: Any,
) -> dict[str, Any]:
    """Save ``config`` into its run dir, train there under torchrun, and return the run's final metrics.

    The one path from a resolved config to a finished run, shared by the Kedro train node and
    ``asr-pipeline train``. ``nproc_per_node`` None: one process per ``run.device_indices`` entry, else 1.
    ``launch`` takes the rendezvous options of ``torchrun_command``. The device and config checks run
    first (``check_devices``, ``check_config``), so a run on CUDA where there is none, without a vocabulary
    size or resuming from no checkpoint fails here, naming the fix, and writes nothing.

    The run dir (``training.run_dir``): locked for the whole run, so a second run or resume there is
    refused with this process's pid; then prepared by ``prepare_run_dir`` (a folder holding another run is
    refused unless resumed in place or ``overwrite``, which deletes that run's files first; ``run_files``,
    name -> bytes, are written into it, e.g. the tokenizer). Several nodes: node 0 prepares and rank 0
    locks (the ranks of one node cannot know which node holds global rank 0 before the rendezvous).
    """
    from asr_pipeline.run_layout import CONFIG_FILE, METRICS_FILE
    from asr_pipeline.training.config import save_json
    from asr_pipeline.training.determinism import environment
    from asr_pipeline.training.run_dir import LOCK_HOLDER_ENV, locked_run_dir, prepare_run_dir

    nproc = resolve_nproc_per_node(config, nproc_per_node)
    check_devices(config, nproc)
    check_config(config)
    torchrun_command("-", nproc, **launch)  # the rendezvous options' checks, before anything is written
    run_dir = Path(config.run.output_dir)
    config_path = run_dir / CONFIG_FILE
    env = environment(config.run.deterministic)
    if launch.get("nnodes", 1) > 1:
        if launch.get("node_rank", 0) == 0:
            prepare_run_dir(config, overwrite=overwrite, files=run_files)
            save_json(config, config_path)
            launch_training(config_path, nproc, env=env, **launch)
        else:  # the other nodes keep out of the run dir: node 0 may not have prepared it yet
            with tempfile.TemporaryDirectory(prefix="asr-pipeline-node-") as node_dir:
                save_json(config, Path(node_dir) / CONFIG_FILE)
                launch_training(Path(node_dir) / CONFIG_FILE, nproc, env=env, **launch)
    else:
        with locked_run_dir(run_dir):
            prepare_run_dir(config, overwrite=overwrite, files=run_files)
            save_json(config, config_path)
            launch_training(config_path, nproc, env={**env, LOCK_HOLDER_ENV: str(os.getpid())}, **launch)
    return json.loads((run_dir / METRICS_FILE).read_text())
