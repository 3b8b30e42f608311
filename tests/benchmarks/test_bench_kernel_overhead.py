"""benchmarks/bench_kernel_overhead.py: each op's CPU time per call, launches stubbed, through its custom op and
through its kernel op, side by side."""

from __future__ import annotations

import pytest

from asr_kernels import OPS

from .conftest import imported_script


@pytest.fixture
def bench(monkeypatch):
    yield from imported_script(monkeypatch, "bench_kernel_overhead")


def test_every_op_is_timed_on_every_arm_and_the_zipformer_step_is_costed(bench, capsys):
    table = bench.main(["--calls", "5", "--repeats", "1"])

    out = capsys.readouterr().out
    assert {row.split()[0] for row in table} == set(OPS)
    assert all(set(medians) == {"reference", "custom op", "kernel op"} for medians in table.values())
    assert all(value > 0 for medians in table.values() for value in medians.values())
    # ops with a gradient are timed forward+backward too; the masks have none
    assert "glu fwd+bwd" in table and "sequence_mask fwd+bwd" not in table
    assert "Zipformer-M, one training forward: " in out and "ms less CPU a step" in out


def test_the_cases_are_made_on_the_device_asked_for(bench, monkeypatch, capsys):
    devices = []
    monkeypatch.setattr(bench, "collect_bench_cases", lambda *args: devices.append(args[-1]) or [])
    monkeypatch.setattr(bench, "zipformer_m_calls", dict)

    bench.main(["--device", "cuda", "--calls", "1", "--repeats", "1"])
    assert devices == ["cuda"]
    assert "wall time" in capsys.readouterr().out  # real launches, not stubbed ones
