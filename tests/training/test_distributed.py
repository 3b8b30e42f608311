"""training.distributed: without a process group the collectives give the one-rank answer; the parameter digest
changes with any parameter; the fault-injection hook fires only on its rank and step."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from asr_pipeline.training.distributed import (
    FAIL_RANK_ENV,
    FAIL_STEP_ENV,
    DistributedContext,
    all_reduce_sum,
    gather,
    maybe_inject_fault,
    parameter_digest,
)


def test_a_context_knows_whether_it_is_the_main_rank_and_whether_the_job_is_distributed():
    cpu = torch.device("cpu")

    assert DistributedContext(0, 0, 1, cpu).is_main and not DistributedContext(0, 0, 1, cpu).distributed
    assert not DistributedContext(3, 1, 4, cpu).is_main and DistributedContext(3, 1, 4, cpu).distributed


def test_without_a_process_group_the_collectives_are_the_one_rank_answer():
    counts = torch.tensor([2.0, 5.0])

    assert all_reduce_sum(counts) is counts and counts.tolist() == [2.0, 5.0]
    assert gather({"ids": ["a"]}) == [{"ids": ["a"]}]


def test_the_digest_is_the_same_for_equal_weights_and_changes_with_any_one():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
    copy = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
    copy.load_state_dict(model.state_dict())

    digest = parameter_digest(model)
    assert digest == parameter_digest(copy) and len(digest) == 16
    with torch.no_grad():
        copy[1].bias.add_(1e-6)
    assert parameter_digest(copy) != digest


def test_the_injected_fault_fires_on_its_rank_and_step_only(monkeypatch):
    monkeypatch.delenv(FAIL_RANK_ENV, raising=False)
    maybe_inject_fault(rank=0, step=0)  # unset: never

    monkeypatch.setenv(FAIL_RANK_ENV, "1")
    monkeypatch.setenv(FAIL_STEP_ENV, "3")
    maybe_inject_fault(rank=0, step=3)
    maybe_inject_fault(rank=1, step=2)
    with pytest.raises(RuntimeError, match=f"fault injected by {FAIL_RANK_ENV}=1 on rank 1 at step 3"):
        maybe_inject_fault(rank=1, step=3)
    monkeypatch.delenv(FAIL_STEP_ENV)
    with pytest.raises(RuntimeError, match="at step 0"):  # the step defaults to the first
        maybe_inject_fault(rank=1, step=0)
