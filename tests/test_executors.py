"""asr_pipeline.executors: results in task order within a bounded window, cancelled when the consumer stops,
failures naming their task, executor options checked, and a real Dask cluster reached or named when not."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import Future

import pytest

from asr_pipeline.executors import ExecutorOptions, dask_client, dask_submitter, ordered_results


class ManualFutures:
    """A submit function whose futures stay pending until the test finishes them, in any order; once
    ``finish_when`` tasks are submitted, it finishes them in ``order`` (all before the first is awaited)."""

    def __init__(self, finish_when: int, order: list[int]) -> None:
        self.futures: dict[int, Future] = {}
        self.finish_when, self.order = finish_when, order

    def submit(self, task: int) -> Future:
        self.futures[task] = Future()
        if len(self.futures) == self.finish_when:
            for done in self.order:
                self.futures[done].set_result(done * 10)
        return self.futures[task]


def test_results_come_in_task_order_whatever_order_the_tasks_finish_in():
    manual = ManualFutures(finish_when=5, order=[4, 2, 3, 0, 1])

    pairs = list(ordered_results(manual.submit, range(5), window=5))

    assert pairs == [(0, 0), (1, 10), (2, 20), (3, 30), (4, 40)]


def test_no_more_than_the_window_is_submitted_ahead_of_the_consumer():
    submitted: list[int] = []

    def submit(task: int) -> Future:
        submitted.append(task)
        future: Future = Future()
        future.set_result(task)
        return future

    results = ordered_results(submit, range(100), window=3)
    assert next(results) == (0, 0)
    assert submitted == [0, 1, 2, 3], "three ahead, then one more for the one consumed"
    assert next(results) == (1, 1) and submitted == [0, 1, 2, 3, 4]


def test_closing_early_cancels_what_is_still_pending():
    manual = ManualFutures(finish_when=4, order=[0])  # task 0 done, 1-3 still running
    results = ordered_results(manual.submit, range(10), window=4)

    assert next(results) == (0, 0)
    results.close()

    assert sorted(manual.futures) == [0, 1, 2, 3, 4], "one more submitted for the one consumed"
    assert all(manual.futures[task].cancelled() for task in (1, 2, 3, 4))


def test_a_failed_task_raises_its_own_error_with_the_task_named_in_a_note():
    def submit(task: int) -> Future:
        future: Future = Future()
        if task == 2:
            future.set_exception(MemoryError("worker out of memory"))
        else:
            future.set_result(task)
        return future

    results = ordered_results(submit, range(4), window=2, describe=lambda task: f"task number {task}")

    with pytest.raises(MemoryError, match="worker out of memory") as error:
        list(results)
    assert error.value.__notes__ == ["while task number 2"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"kind": "slurm"}, r"kind must be one of processes, dask, got 'slurm'"),
        ({"address": "tcp://h:8786"}, r"address 'tcp://h:8786' is for kind dask, but kind is 'processes'"),
        ({"kind": "dask", "connect_timeout_s": 0}, r"connect_timeout_s must be > 0"),
        ({"kind": "dask", "adress": "tcp://h:8786"}, r"unknown option\(s\) \['adress'\]"),
    ],
)
def test_bad_executor_options_are_refused_naming_the_params_key(values, message):
    with pytest.raises(ValueError, match=r"params\.yaml features\.executor: " + message):
        ExecutorOptions.from_dict(values)


def test_the_executor_may_be_given_by_its_kind_alone():
    assert ExecutorOptions.from_dict("dask") == ExecutorOptions(kind="dask")
    assert ExecutorOptions.from_dict(None) == ExecutorOptions()


def test_a_dask_cluster_runs_the_tasks_in_worker_processes_and_returns_them_in_order(dask_address):
    options = ExecutorOptions(kind="dask", address=dask_address)
    with dask_client(options, jobs=2) as client:
        results = ordered_results(dask_submitter(client, _pid_and_square), range(12), window=4)
        pairs = list(results)

    assert [task for task, _ in pairs] == list(range(12))
    assert [square for _, (_, square) in pairs] == [task * task for task in range(12)]
    assert os.getpid() not in {pid for _, (pid, _) in pairs}, "the work ran in the workers, not here"


def test_an_unreachable_scheduler_is_an_error_naming_the_address():
    options = ExecutorOptions(kind="dask", address="tcp://127.0.0.1:9", connect_timeout_s=2)
    unreachable = r"cannot reach the Dask scheduler at tcp://127\.0\.0\.1:9 within 2 s"
    with pytest.raises(RuntimeError, match=unreachable), dask_client(options, jobs=1):
        pass


def _pid_and_square(task: int) -> tuple[int, int]:
    return os.getpid(), task * task


def test_pool_workers_are_forked_with_torch_imported_and_the_caller_never_imports_it():
    # The forkserver imports torch once for every worker (executors.worker_context); the stage's own process
    # stays torch-free (tests/test_pipeline_registry.py). A fresh interpreter: the forkserver starts here.
    code = (
        "import sys\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "from asr_pipeline.executors import worker_context\n"
        "with ProcessPoolExecutor(1, mp_context=worker_context()) as pool:\n"
        "    loaded = pool.submit(eval, \"'torch' in __import__('sys').modules\").result()\n"  # before any task's import
        "print('caller', 'torch' in sys.modules, 'worker', loaded)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert result.stdout.split() == ["caller", "False", "worker", "True"]
