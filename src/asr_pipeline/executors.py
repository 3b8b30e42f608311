"""Where the embarrassingly parallel data work runs: a local process pool, or a Dask cluster.

Feature extraction (and with it HuBERT's MFCC targets) and HuBERT's unit labelling map independent tasks
(chunks of manifest rows, shards) over workers and consume the results **in task order**, so what they write
is byte-identical whichever executor computed it. Every caller keeps the writing (shards, tables, reports) in
its own process: a worker only ever returns results, so a worker that dies mid-task cannot leave half a
file behind, and a shard is complete or absent (``io.shards.write_shard`` is atomic).

``ExecutorOptions.kind``:

- ``processes`` (default): ``concurrent.futures.ProcessPoolExecutor`` on this machine, ``jobs`` workers
  forked from a forkserver that has imported torch once (``worker_context``).
- ``dask``: a ``distributed`` cluster. With ``address`` (``tcp://scheduler:8786``), the cluster a team runs
  (``dask scheduler`` / ``dask worker``, or ``dask-jobqueue`` on Slurm/PBS: docs/team.md, "Data stages on a Dask
  cluster"); without, a ``LocalCluster`` of ``jobs`` worker processes on 127.0.0.1 (one thread each),
  started for the stage and closed after it. Workers need this package installed (the tasks are its
  functions) and the audio under the same absolute paths (callers send absolute paths).

A worker process that dies mid-task (killed, out of memory, its node lost) is Dask's to handle: the
scheduler reruns the task on another worker, up to ``distributed.scheduler.allowed-failures`` times (3 by
default), after which ``KilledWorker`` fails the stage, naming the task. A task that *raises* is not
retried: the work is deterministic, so the same input would raise again.
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from asr_pipeline.options import options_from_dict

log = logging.getLogger(__name__)

EXECUTOR_KINDS = ("processes", "dask")
T = TypeVar("T")


@dataclass(frozen=True)
class ExecutorOptions:
    """params.yaml ``features.executor`` (module docstring); the outputs never depend on it."""

    kind: str = "processes"
    # dask: the scheduler's address (tcp://host:8786); null starts a LocalCluster of `jobs` workers.
    address: str | None = None
    # dask: seconds to wait for the scheduler (and, for a LocalCluster, its workers) before failing.
    connect_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        where = "params.yaml features.executor"
        if self.kind not in EXECUTOR_KINDS:
            raise ValueError(f"{where}: kind must be one of {', '.join(EXECUTOR_KINDS)}, got {self.kind!r}")
        if self.address is not None and self.kind != "dask":
            raise ValueError(f"{where}: address {self.address!r} is for kind dask, but kind is {self.kind!r}")
        if self.connect_timeout_s <= 0:
            raise ValueError(f"{where}: connect_timeout_s must be > 0, got {self.connect_timeout_s}")

    @classmethod
    def from_dict(cls, values: dict | str | None) -> ExecutorOptions:
        """A mapping, or just the kind's name (``executor: dask``); None: the process pool."""
        if isinstance(values, str):
            values = {"kind": values}
        return options_from_dict(cls, values, "params.yaml features.executor")

    @property
    def describe(self) -> str:
        if self.kind == "processes":
            return "a local process pool"
        return f"the Dask scheduler at {self.address}" if self.address else "a local Dask cluster"


class _Future(Protocol):
    def result(self) -> Any: ...
    def cancel(self) -> Any: ...


def ordered_results(
    submit: Callable[[T], _Future],
    tasks: Iterable[T],
    window: int,
    describe: Callable[[T], str] | None = None,
) -> Iterator[tuple[T, Any]]:
    """``(task, result)`` for every task, in task order, with at most ``window`` tasks submitted ahead.

    The window bounds memory however many tasks there are (their results wait here until consumed) while
    keeping every worker busy. Closing the generator early (an error, ``--max-samples``) cancels what is
    still pending. A failed task's exception is raised as it is, with ``describe(task)`` added as a note
    (which rows or shard it was working on).
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    task_iter = iter(tasks)
    pending: deque[tuple[T, _Future]] = deque()

    def submit_next() -> bool:
        for task in task_iter:
            pending.append((task, submit(task)))
            return True
        return False

    try:
        while len(pending) < window and submit_next():
            pass
        while pending:
            task, future = pending.popleft()
            try:
                result = future.result()
            except Exception as error:
                if describe is not None:
                    error.add_note(f"while {describe(task)}")
                raise
            submit_next()
            yield task, result
    finally:
        for _, future in pending:
            future.cancel()


def single_torch_thread_plugin() -> Any:
    """A Dask worker plugin: one torch intra-op thread per worker process (``init_worker`` gives the
    measurement behind it), set on every worker, including ones that join or restart later.
    Built on call (distributed is imported only when a Dask executor is used); cloudpickle sends the
    class to the workers by value."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class SingleTorchThread(WorkerPlugin):
        name = "asr-pipeline-single-torch-thread"

        def setup(self, worker: Any) -> None:
            import torch

            torch.set_num_threads(1)

    return SingleTorchThread()


# --- the local process pool ------------------------------------------------------------------------------
def init_worker() -> None:
    """Every pool worker's start: one torch intra-op thread (the Dask workers get the same by plugin)."""
    import torch

    # torch defaults to one intra-op thread per core, so `jobs` workers would run jobs * cores threads on
    # `cores` cores, and torch's threads spin-wait for each other. Measured on 2 cores, two processes each
    # resampling + fbank-ing 150 clips of ~5 s: 1.2-1.35 s with 1 thread each, 6.5 s with 2 threads each,
    # and 50 s with 2 threads each while a third process was busy. One thread per worker makes jobs = cores
    # use the machine exactly. The thread count does not change the output (the jobs=1 vs jobs=2
    # byte-identity tests check it, and benchmarks/bench_extract.py on 300 utterances).
    torch.set_num_threads(1)


def _warm_up() -> None:
    """An empty task: a process that ran it shows the forkserver is up."""


def worker_context() -> multiprocessing.context.BaseContext:
    """Start method of the worker pool: forkserver, with the extraction module, fbank and the resampler
    (torch, torchaudio) preloaded.

    Not plain fork: forking a process that has started torch's (or a Kedro session's) threads can deadlock
    the child. Not spawn: every spawned worker imports torch itself, 1.2 s of CPU each on this machine, so
    two workers cost 2.4 s of CPU before any audio. The forkserver is a fresh single-threaded interpreter
    that imports torch once (1.2 s, one core); workers are forked from it in milliseconds, and it stays up
    for later pools in the same process. ``__main__`` is preloaded too (multiprocessing's rule applies: a
    script must guard its entry point with ``if __name__ == "__main__"``), so workers do not re-import it.
    """
    context = multiprocessing.get_context("forkserver")
    # fbank and the resampler by name: the extraction module itself imports torch only when it computes.
    context.set_forkserver_preload(
        [
            "__main__",
            "asr_pipeline.features.extract",
            "asr_pipeline.features.fbank",
            "asr_pipeline.io.resample",
        ]
    )
    return context


_server_ready: threading.Event | None = None


def start_worker_server() -> threading.Event:
    """Start the forkserver in the background; the event is set once a worker can be forked at once.

    Starting a process blocks its caller until the forkserver has imported torch, so a background thread
    does it (one empty daemon process) while this process keeps working: the CLI calls this before
    reading manifests, and ``features.extract`` featurizes rows itself until the event is set.
    """
    global _server_ready
    if _server_ready is None:
        _server_ready = threading.Event()

        def probe(ready: threading.Event) -> None:
            try:
                process = worker_context().Process(target=_warm_up, daemon=True)
                process.start()  # returns once the forkserver has preloaded and forked
                process.join()
            finally:  # a server that failed to start then fails the pool loudly, not silently jobs=1
                ready.set()

        threading.Thread(target=probe, args=(_server_ready,), name="forkserver-probe", daemon=True).start()
    return _server_ready


def map_ordered(
    fn: Callable[..., Any],
    tasks: Iterable[T],
    *args: Any,
    jobs: int = 1,
    executor: ExecutorOptions | None = None,
    ahead_per_worker: int = 2,
    describe: Callable[[T], str] | None = None,
) -> Iterator[tuple[T, Any]]:
    """``(task, fn(task, *args))`` for every task, in task order, wherever ``executor`` says: with the
    process pool, in this process when ``jobs`` is 1, else in ``jobs`` forked workers; with Dask, on its
    cluster (``dask_client``). Every task computes with one torch thread, here too, so the results are the
    same bytes wherever they ran (and ``jobs`` workers use ``jobs`` cores, no more). ``ahead_per_worker`` tasks per worker are submitted
    ahead of the consumer (``ordered_results``); ``fn`` and ``args`` must pickle for any but the first."""
    executor = executor or ExecutorOptions()
    if executor.kind == "dask":
        with dask_client(executor, jobs) as client:
            window = ahead_per_worker * max(1, sum(client.nthreads().values()))
            results = ordered_results(dask_submitter(client, fn, *args), tasks, window, describe)
            try:
                yield from results
            finally:
                results.close()
    elif jobs <= 1:
        import torch

        threads = torch.get_num_threads()
        for task in tasks:
            torch.set_num_threads(1)  # as in a worker: the results are the same bytes wherever they ran
            try:
                result = fn(task, *args)
            finally:
                torch.set_num_threads(threads)  # the caller's setting holds between tasks
            yield task, result
    else:
        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=worker_context(), initializer=init_worker)
        results = ordered_results(
            lambda task: pool.submit(fn, task, *args), tasks, ahead_per_worker * jobs, describe
        )
        try:
            yield from results
        finally:  # an early stop (an error, --max-samples) cancels the rest instead of finishing it
            results.close()
            pool.shutdown(wait=True, cancel_futures=True)


# --- Dask -----------------------------------------------------------------------------------------------
@contextmanager
def dask_client(options: ExecutorOptions, jobs: int) -> Iterator[Any]:
    """A ``distributed.Client`` for ``options`` (module docstring), closed on exit with any cluster it
    started. ``jobs``: the LocalCluster's worker processes when no address is given."""
    from distributed import Client, LocalCluster

    cluster = None
    if options.address is None:
        cluster = LocalCluster(
            n_workers=jobs,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
            silence_logs=logging.WARNING,
        )
        address = cluster.scheduler_address
    else:
        address = options.address
    try:
        try:
            client = Client(address, timeout=options.connect_timeout_s)
        except OSError as error:
            raise RuntimeError(
                f"params.yaml features.executor: cannot reach the Dask scheduler at {address} within "
                f"{options.connect_timeout_s:g} s ({error}); start it (`dask scheduler`) or fix the address"
            ) from error
        try:
            client.register_plugin(single_torch_thread_plugin())
            if cluster is not None:
                client.wait_for_workers(jobs, timeout=options.connect_timeout_s)
            log.info("data work on %s (%s)", options.describe, address)
            yield client
        finally:
            client.close()
    finally:
        if cluster is not None:
            cluster.close()


def dask_submitter(client: Any, fn: Callable[..., Any], *args: Any) -> Callable[[Any], _Future]:
    """``task -> client.submit(fn, task, *args)``; ``pure=False``: two equal tasks are still two tasks
    (Dask would otherwise key them by their arguments' hash and run one)."""
    return lambda task: client.submit(fn, task, *args, pure=False)


__all__ = [
    "EXECUTOR_KINDS",
    "ExecutorOptions",
    "dask_client",
    "dask_submitter",
    "init_worker",
    "map_ordered",
    "ordered_results",
    "single_torch_thread_plugin",
    "start_worker_server",
    "worker_context",
]
