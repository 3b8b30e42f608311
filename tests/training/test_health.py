"""training.health: a rank's non-finite losses, infeasible targets and skipped steps are pending on the device
until ``sync`` reads them and folds them into the run's counters; past ``max_non_finite_losses`` the run aborts
with an event naming the first failing batches. Single process here (no process group): ``sync``'s
collectives are the identity."""

from __future__ import annotations

import json

import pytest
import torch

from asr_pipeline.training.distributed import DistributedContext
from asr_pipeline.training.events import EventLog
from asr_pipeline.training.health import MAX_NON_FINITE_EXAMPLES, NonFiniteLossError, RunHealth

ONE_RANK = DistributedContext(rank=0, local_rank=0, world_size=1, device=torch.device("cpu"))


def health(tmp_path, limit):
    return RunHealth(ONE_RANK, EventLog(tmp_path / "events.jsonl", enabled=True, append=False), limit)


def note(run: RunHealth, non_finite: bool, infeasible: int, ids: list[str]) -> None:
    """A micro-batch's verdicts as the training step gives them: 0-d tensors, unread."""
    run.note_batch(torch.tensor(non_finite), torch.tensor(infeasible), ids)


def test_counts_wait_for_sync(tmp_path):
    run = health(tmp_path, limit=None)
    note(run, non_finite=True, infeasible=2, ids=["a"])
    note(run, non_finite=False, infeasible=1, ids=["b"])
    run.note_step(applied=torch.tensor(False))
    run.note_step(applied=torch.tensor(True))

    assert run.state_dict() == {"skipped_steps": 0, "non_finite_losses": 0, "infeasible_targets": 0}
    run.sync(step=10, epoch=0)
    assert run.state_dict() == {"skipped_steps": 1, "non_finite_losses": 1, "infeasible_targets": 3}
    assert run.non_finite_batches == [["a"]]
    run.sync(step=11, epoch=0)  # nothing pending: nothing added twice
    assert run.state_dict() == {"skipped_steps": 1, "non_finite_losses": 1, "infeasible_targets": 3}


def test_no_limit_never_aborts(tmp_path):
    run = health(tmp_path, limit=None)
    for index in range(50):
        note(run, non_finite=True, infeasible=0, ids=[str(index)])
    run.sync(step=50, epoch=1)

    assert run.state_dict()["non_finite_losses"] == 50


def test_passing_the_limit_aborts_with_an_event_naming_the_first_batches_and_the_fix(tmp_path):
    run = health(tmp_path, limit=2)
    note(run, non_finite=False, infeasible=0, ids=["fine"])
    for index in range(2):
        note(run, non_finite=True, infeasible=0, ids=[f"utt{index}"])
    run.sync(step=5, epoch=0)  # 2 is the limit, not past it
    for index in range(2, 6):
        note(run, non_finite=index % 2 == 0, infeasible=0, ids=[f"utt{index}"])
        note(run, non_finite=True, infeasible=0, ids=[f"more{index}"])

    with pytest.raises(
        NonFiniteLossError, match=r"8 batches had a non-finite .* in the first 9 optimizer steps"
    ):
        run.sync(step=9, epoch=1)
    (event,) = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert event["type"] == "abort" and (event["step"], event["epoch"]) == (9, 1)
    # the first MAX_NON_FINITE_EXAMPLES, read at two syncs; the finite ones (fine, utt3) are not named
    assert event["values"]["batches"] == [["utt0"], ["utt1"], ["utt2"]]
    assert MAX_NON_FINITE_EXAMPLES == 3
    assert event["values"]["non_finite_losses"] == 8
    assert not run.unread, "no batch's flag is kept once the names are known"
    assert "--max-non-finite-losses" in event["values"]["reason"]


def test_counters_resume_from_a_saved_state_missing_keys_counting_zero(tmp_path):
    run = health(tmp_path, limit=None)
    run.load_state_dict({"skipped_steps": 4, "non_finite_losses": 2.0})

    assert run.state_dict() == {"skipped_steps": 4, "non_finite_losses": 2, "infeasible_targets": 0}
