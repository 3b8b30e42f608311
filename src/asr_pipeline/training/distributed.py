"""Where this process stands in the job, and the few collectives the training loop uses.

Runs under ``torchrun`` (RANK, WORLD_SIZE, LOCAL_RANK in the environment: one process per rank, DDP) or
as a plain single process (WORLD_SIZE unset). The collectives below return the one-rank answer when no
process group is initialised, so the loop has no single-process branches of its own.

Fault injection for tests: ``ASR_PIPELINE_FAIL_RANK=<rank>`` makes that rank raise RuntimeError before
optimizer step ``ASR_PIPELINE_FAIL_STEP`` (default 0, the first step). It exists to test that a failing
rank fails the whole job (and that a resumed run continues exactly); never set it otherwise.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from asr_pipeline.training.config import TrainConfig
from asr_pipeline.training.launch import cpu_threads_per_rank, cuda_device_index

FAIL_RANK_ENV = "ASR_PIPELINE_FAIL_RANK"
FAIL_STEP_ENV = "ASR_PIPELINE_FAIL_STEP"


@dataclass(frozen=True)
class DistributedContext:
    rank: int
    local_rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def setup_distributed(config: TrainConfig) -> DistributedContext:
    """This process's rank and device (``launch.cuda_device_index`` picks the GPU), and the process group."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    # Processes on this node (torchrun sets it); threads and GPUs are shared per node, not per job.
    local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", str(world_size)))
    if config.run.deterministic:  # before CUDA starts: cuBLAS reads its workspace setting once
        from asr_pipeline.training import determinism

        determinism.apply(config.run.seed)
    if config.run.backend == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(
                "run.backend is 'cuda' but CUDA is not available in this process; train with --backend cpu"
            )
        device = torch.device("cuda", cuda_device_index(config.run, local_rank, local_world_size))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(config.run.threads_per_rank or cpu_threads_per_rank(local_world_size))
    if world_size > 1:
        join_process_group(device)
    return DistributedContext(rank, local_rank, world_size, device)


def join_process_group(device: torch.device) -> None:
    """Join torchrun's process group as the rank computing on ``device``: NCCL with that GPU as this process's
    current device (where NCCL's collectives run), gloo on the CPU."""
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")


def teardown_distributed() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def all_reduce_sum(tensor: Tensor) -> Tensor:
    if dist.is_initialized():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def gather(value: Any) -> list[Any]:
    """Every rank's ``value``, in rank order, on every rank."""
    if not dist.is_initialized():
        return [value]
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, value)
    return gathered


def parameter_digest(model: nn.Module) -> str:
    """A short hash of every parameter's bytes: equal digests across ranks prove DDP kept them in sync."""
    digest = hashlib.sha256()
    for name, parameter in sorted(model.named_parameters()):
        digest.update(name.encode())
        digest.update(parameter.detach().float().cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


def maybe_inject_fault(rank: int, step: int) -> None:
    """The test-only fault-injection hook, see the module docstring."""
    fail_rank = os.environ.get(FAIL_RANK_ENV, "")
    if fail_rank and int(fail_rank) == rank and step == int(os.environ.get(FAIL_STEP_ENV, "0")):
        raise RuntimeError(f"fault injected by {FAIL_RANK_ENV}={fail_rank} on rank {rank} at step {step}")


__all__ = [
    "FAIL_RANK_ENV",
    "FAIL_STEP_ENV",
    "DistributedContext",
    "all_reduce_sum",
    "gather",
    "join_process_group",
    "maybe_inject_fault",
    "parameter_digest",
    "setup_distributed",
    "teardown_distributed",
]
