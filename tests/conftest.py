"""Shared tiny factories: audio, a trained SentencePiece model, feature shards."""

from __future__ import annotations

import io
import os
import wave
from pathlib import Path

import numpy as np
import pytest

from tests.publish.hub_server import hub  # noqa: F401  (a fixture: the stand-in Hugging Face Hub)

os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
# Triton kernels run on the CPU through the interpreter; it must be chosen before triton is imported. Not in
# the CUDA re-run of the kernel parity files (tests/kernels/test_cuda_rerun.py): that one tests compiled kernels.
if os.environ.get("ASR_KERNELS_TEST_DEVICE", "cpu") == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")
# Under pytest-xdist (`make test` runs `-n 2` on a 2-core machine) each worker keeps torch, and the processes it
# starts, to one intra-op thread: two workers of N threads each on N cores run slower than one.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)

PROJECT_ROOT = Path(__file__).resolve().parents[1]

# Files whose tests together run far longer than any other (test_dvc_pipeline: a whole `dvc repro` of the DAG
# and what its clones do, ~8 min here), collected first: under `make test`'s `--dist loadfile` the worker that
# draws one runs it while the other works through the rest, instead of finishing it alone at the end.
LONGEST_FIRST = ("tests/test_dvc_pipeline.py",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(
        key=lambda item: item.nodeid.split("::")[0] not in LONGEST_FIRST
    )  # stable: the rest keep order


TINY_SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "a small cat sat on the warm mat",
    "seven green birds sing in the morning",
    "she reads a long book every night",
    "we walk to the river after lunch",
    "they painted the old house blue",
    "my brother plays the piano very well",
    "the train leaves the station at noon",
] * 4


def make_wav(seconds: float = 0.5, sample_rate: int = 22050, channels: int = 1, freq: float = 440.0) -> bytes:
    """A sine tone as 16-bit PCM WAV bytes."""
    t = np.arange(int(seconds * sample_rate)) / sample_rate
    tone = (0.3 * np.sin(2 * np.pi * freq * t) * 32767).astype(np.int16)
    frames = np.repeat(tone[:, None], channels, axis=1)
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as handle:
        handle.setnchannels(channels)
        handle.setsampwidth(2)
        handle.setframerate(sample_rate)
        handle.writeframes(frames.tobytes())
    return buffer.getvalue()


@pytest.fixture(scope="session")
def spm_model() -> bytes:
    """A real SentencePiece model trained on a tiny corpus."""
    from asr_pipeline.text.sentencepiece_training import SentencePieceOptions, train_sentencepiece

    return train_sentencepiece(TINY_SENTENCES, SentencePieceOptions(vocab_size=40))


def local_dask_cluster(workers: int = 2):
    """A real Dask cluster: a scheduler in this process and ``workers`` worker processes (one thread each)
    on 127.0.0.1, dashboard on a free port."""
    from distributed import LocalCluster

    return LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    )


@pytest.fixture(scope="session")
def dask_address():
    """The session's Dask cluster (two workers), as ``features.executor: {kind: dask, address: ...}`` names one."""
    with local_dask_cluster(2) as cluster:
        yield cluster.scheduler_address
