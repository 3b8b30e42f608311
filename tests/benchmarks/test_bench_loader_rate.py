"""benchmarks/bench_loader_rate.py (issue 36): its arms read the same epoch, and count the shards decoded."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from .conftest import imported_script


@pytest.fixture
def bench(monkeypatch):
    yield from imported_script(monkeypatch, "bench_loader_rate")


def test_every_arm_reads_the_same_epoch_and_workers_of_their_own_shards_decode_each_once(bench, tmp_path):
    # 4 shards of 64 utterances, windows of 2 shards: each window makes several batches of at most 80.
    corpus = Path(bench.ensure_corpus(tmp_path, 4, 64, 80, 0)[0]).parent

    arms = {
        name: bench.run_arm(corpus, *bench.parse_arm(name), epochs=1)
        for name in ("batched:0", "per-item:0", "batched:2", "batched:2:shared")
    }

    assert len({(round(arm["audio_sec"], 3), arm["batches"]) for arm in arms.values()}) == 1, (
        "one epoch, whatever the arm"
    )
    assert arms["batched:0"]["opens"] == arms["per-item:0"]["opens"] == arms["batched:2"]["opens"] == 4
    assert arms["batched:2:shared"]["opens"] > 4, "two workers given batches of every shard both decode them"


def test_a_malformed_arm_is_an_argparse_error_naming_the_form(bench):
    assert bench.parse_arm("per-item:3:shared") == ("per-item", 3, True)
    for text in ("batched", "batched:x", "streamed:2", "batched:2:private"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"READ:WORKERS\[:shared\]"):
            bench.parse_arm(text)
